/* h_dlq: GET /api/v1/dlq with filters and paging, newest first. */
#include "h_dlq.h"
#include "h_util.h"
#include "http.h"
#include "jsonio.h"

#include <stdio.h>

enum qe
h_dlq_list(struct req *r, struct wk *w)
{
	const char *q = req_query(r, "queue"), *g = req_query(r, "consumerGroup");
	int64_t limit = 100, offset = 0;
	char lim[24], off[24];
	const char *params[4] = { q && *q ? q : NULL, g && *g ? g : NULL, lim, off };

	if (req_query(r, "limit") && jio_parse_int(req_query(r, "limit"), 1, 1000, &limit) < 0)
		return req_fail(r, QE_BAD_REQUEST, "limit must be an integer in [1, 1000]");
	if (req_query(r, "offset") &&
	    jio_parse_int(req_query(r, "offset"), 0, INT32_MAX, &offset) < 0)
		return req_fail(r, QE_BAD_REQUEST, "offset must be a non-negative integer");
	snprintf(lim, sizeof(lim), "%lld", (long long)limit);
	snprintf(off, sizeof(off), "%lld", (long long)offset);
	return h_reply_sql_json(r, w, SQL_DLQ_LIST, params, "not found");
}
