/* h_dlq: dead letters (SPEC 11): listing, purge and replay. All handlers run on a worker
 * thread, one call of a schema function each. */
#ifndef QUEEN_H_DLQ_H
#define QUEEN_H_DLQ_H

#include "errors.h"

struct req;
struct wk;

/* GET /api/v1/dlq?queue=&consumerGroup=&limit=100&offset=0, newest first. */
enum qe h_dlq_list(struct req *r, struct wk *w);
/* DELETE /api/v1/dlq?queue=<name>[&consumerGroup=] -> {"success":true,"deleted":N};
 * 400 without a queue. */
enum qe h_dlq_purge(struct req *r, struct wk *w);
/* Replay routes, MHD thread: validates the optional redirect body {"queue","partition"}. */
enum qe h_dlq_replay_prepare(struct req *r);
/* POST /api/v1/dlq/:id/replay: pushes the row's message again with transactionId
 * dlq:<row id> and deletes the row, in one transaction. result "moved" | "duplicate" (the
 * row is kept); an unknown row is 404 with result "gone". A stored push wakes parked pops. */
enum qe h_dlq_replay_run(struct req *r, struct wk *w);
/* POST /api/v1/messages/:partitionId/:transactionId/retry: the same for the newest row at
 * that address; 404 when there is none. */
enum qe h_message_retry_run(struct req *r, struct wk *w);

#endif
