/* h_util: shared handler plumbing. */
#include "h_util.h"
#include "conf.h"
#include "dbpool.h"
#include "http.h"
#include "jsonio.h"
#include "router.h"
#include "workers.h"

#include <stdio.h>
#include <string.h>

enum qe
h_items_limit(struct req *r, size_t n)
{
	if (n <= (size_t)qconf.max_push_items)
		return QE_OK;
	req_err_field(r, "limit", json_integer(qconf.max_push_items));
	return req_fail(r, QE_TOO_LARGE, "too many items");
}

enum qe
h_paging(struct req *r, int64_t def_limit, struct h_paging *out)
{
	const char *l = req_query_set(r, "limit"), *o = req_query_set(r, "offset");
	int64_t limit = def_limit, offset = 0;

	if (l && jio_parse_int(l, 1, 1000, &limit) < 0)
		return req_fail(r, QE_BAD_REQUEST, "limit must be an integer in [1, 1000]");
	if (o && jio_parse_int(o, 0, INT32_MAX - 1001, &offset) < 0)
		return req_fail(r, QE_BAD_REQUEST, "offset must be a non-negative integer");
	snprintf(out->limit, sizeof(out->limit), "%lld", (long long)limit);
	snprintf(out->offset, sizeof(out->offset), "%lld", (long long)offset);
	return QE_OK;
}

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

enum qe
h_sql_view(struct req *r, struct wk *w)
{
	return h_reply_sql_json(r, w, r->route->view, NULL, "not found");
}
