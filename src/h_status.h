/* h_status: the read-only operator views (SPEC 16): GET /api/v1/resources/queues, /overview,
 * /namespaces, /tasks, GET /api/v1/status and /api/v1/status/queues.
 *
 * Each is one call of a SQL function of schema/functions/status.sql returning the JSON
 * answer; counts are offset arithmetic on partition and cursor rows, never a scan of
 * messages. /api/v1/status adds what only the broker knows (its counters, retention rounds).
 * Worker thread; errors go through req_fail (503 when the database does not answer, 400 for a
 * bad query parameter). */
#ifndef QUEEN_H_STATUS_H
#define QUEEN_H_STATUS_H

#include "errors.h"

struct req;
struct wk;

/* GET /api/v1/resources/queues, /overview, /namespaces and /tasks are served straight from
 * their SQL functions by h_sql_view (h_util.h) through the route table; shapes in
 * queen-api(7). */
/* {status,version,uptimeSeconds,time,broker:{…},retention:{…},database:{…}}; answers 200
 * with "status":"degraded" and database {"connected":false} when PostgreSQL is down. */
enum qe h_status(struct req *r, struct wk *w);
/* ?namespace=&task=&limit=100&offset=0 -> {"queues":[…],"pagination":{limit,offset},
 * "total":N,"timestamp"}. */
enum qe h_status_queues(struct req *r, struct wk *w);

#endif
