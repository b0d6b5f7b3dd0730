/* h_util: the one piece every read-only resource handler shares: run a catalogued statement
 * that returns a single json value and answer it as is (404 with a message when NULL). */
#ifndef QUEEN_H_UTIL_H
#define QUEEN_H_UTIL_H

#include "errors.h"
#include "sqlstmt.h"

#include <stddef.h>
#include <stdint.h>

struct req;
struct wk;

/* limit and offset of a listing route, as statement parameters: limit in [1, 1000]
 * (default def_limit), offset >= 0 (default 0). A bad value is a 400 naming it. */
struct h_paging {
	char limit[24];
	char offset[24];
};

/* The item count of one request (push items, transaction slots, batch acks) against
 * QUEEN_MAX_PUSH_ITEMS: QE_OK, or 413 {"error":"too many items","limit":N} (SPEC 22), so
 * that the work one request puts on a worker and its connection stays bounded. */
enum qe h_items_limit(struct req *r, size_t n);

enum qe h_paging(struct req *r, int64_t def_limit, struct h_paging *out);

/* The run step of a route with a .view: answers the json of that statement. */
enum qe h_sql_view(struct req *r, struct wk *w);

enum qe h_reply_sql_json(struct req *r, struct wk *w, enum sql_id id, const char *const *params,
			 const char *not_found);

#endif
