/* h_messages: the message browser. Statuses are computed by SQL from cursors, leases and
 * dead-letter rows at the time of the request (nothing per message is stored for
 * consumption); this file only validates parameters. */
#include "h_messages.h"
#include "h_util.h"
#include "http.h"
#include "jsonio.h"
#include "qassert.h"
#include "uuid.h"

#include <stdio.h>
#include <string.h>

#define NOT_FOUND "Message not found"

/* An ISO-8601 query parameter into buf (normalised), or NULL when absent; -1 when bad. */
static int
query_time(struct req *r, const char *key, char *buf, size_t len, const char **out,
	   int64_t *ms)
{
	const char *v = req_query_set(r, key);

	*out = NULL;
	if (!v)
		return 0;
	if (jio_parse_iso(v, ms) < 0)
		return -1;
	jio_format_iso(*ms, buf, len);
	*out = buf;
	return 0;
}

enum qe
h_messages_list(struct req *r, struct wk *w)
{
	static const char *const statuses[] = { "dead_letter", "completed", "processing",
						"pending" };
	const char *status = req_query_set(r, "status"), *from, *to;
	char from_buf[32], to_buf[32];
	int64_t from_ms = 0, to_ms = 0;
	struct h_paging pg;
	enum qe e;
	int known = 0;

	for (size_t i = 0; status && i < ARRAY_LEN(statuses); i++)
		known |= strcmp(status, statuses[i]) == 0;
	if (status && !known)
		return req_fail(r, QE_BAD_REQUEST,
				"status must be dead_letter, completed, processing or pending");
	if (query_time(r, "from", from_buf, sizeof(from_buf), &from, &from_ms) < 0)
		return req_fail(r, QE_BAD_REQUEST, "from must be an ISO-8601 timestamp");
	if (query_time(r, "to", to_buf, sizeof(to_buf), &to, &to_ms) < 0)
		return req_fail(r, QE_BAD_REQUEST, "to must be an ISO-8601 timestamp");
	if (from && to && from_ms > to_ms)
		return req_fail(r, QE_BAD_REQUEST, "from must not be after to");
	if ((e = h_paging(r, 200, &pg)) != QE_OK)
		return e;

	const char *params[7] = { req_query_set(r, "queue"), req_query_set(r, "partition"),
				  status, from, to, pg.limit, pg.offset };

	return h_reply_sql_json(r, w, SQL_MESSAGES_LIST, params, "not found");
}

enum qe
h_message_get(struct req *r, struct wk *w)
{
	const char *params[2] = { req_param(r, 0), req_param(r, 1) };

	if (!uuid_valid(params[0]))
		return req_fail(r, QE_NO_RESOURCE, NOT_FOUND);
	return h_reply_sql_json(r, w, SQL_MESSAGE_GET, params, NOT_FOUND);
}

enum qe
h_message_delete(struct req *r, struct wk *w)
{
	const char *params[2] = { req_param(r, 0), req_param(r, 1) };

	if (!uuid_valid(params[0]))
		return req_fail(r, QE_NO_RESOURCE, NOT_FOUND);
	return h_reply_sql_json(r, w, SQL_MESSAGE_DELETE, params, NOT_FOUND);
}
