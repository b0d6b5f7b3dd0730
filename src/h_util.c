/* h_util: shared handler plumbing. */
#include "h_util.h"
#include "dbpool.h"
#include "http.h"
#include "workers.h"

#include <string.h>

enum qe
h_reply_sql_json(struct req *r, struct wk *w, enum sql_id id, const char *const *params,
		 const char *not_found)
{
	char *json;
	enum qe e = db_exec_json(w->db, id, params, &json);

	if (e != QE_OK)
		return req_fail(r, e, "database unavailable");
	if (!json)
		return req_fail(r, QE_NO_RESOURCE, "%s", not_found);
	req_reply(r, 200, json, strlen(json));
	return QE_OK;
}
