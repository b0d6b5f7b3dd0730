/* h_util: the one piece every read-only resource handler shares: run a catalogued statement
 * that returns a single json value and answer it as is (404 with a message when NULL). */
#ifndef QUEEN_H_UTIL_H
#define QUEEN_H_UTIL_H

#include "errors.h"
#include "sqlstmt.h"

struct req;
struct wk;

enum qe h_reply_sql_json(struct req *r, struct wk *w, enum sql_id id, const char *const *params,
			 const char *not_found);

#endif
