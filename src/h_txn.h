/* h_txn: POST /api/v1/transaction (SPEC 8, 21): pushes, acks, kv ops and timers that commit
 * together or not at all.
 *
 * Body: {"operations":[{"type":"push","items":[...]} | {"type":"push", <one item's fields>} |
 * {"type":"ack","transactionId","partitionId","status","consumerGroup","leaseId","error"}],
 * "kv":[...], "timers":[...], "requiredLeases":["<lease id>",...]}.
 *
 * Answers (always 200 once the body is valid, 503 only when PostgreSQL is unreachable):
 *   {"transactionId":"<uuidv7>","success":true,"results":[...]}: one result per push item and
 *   per ack in operations order (push items flattened), then the kv results, then the timer
 *   results; "index" is the position in results.
 *   {"transactionId","success":false,"error","reason","results":[]}: reason duplicate |
 *   ack_rejected | kv_precondition | db_error, with fields naming the culprit (failedIndex,
 *   messageId, ackError, lease, or the kv failure fields of SPEC 13).
 * 400 for a body that is not an object, no operations (and no kv or timers), an operation
 * of unknown type, and whatever /push, /ack, /kv or /timers would refuse in an item. */
#ifndef QUEEN_H_TXN_H
#define QUEEN_H_TXN_H

#include "errors.h"

#include <stddef.h>

struct req;
struct wk;

/* MHD thread: validates the whole bundle and builds the job. Never blocks. */
enum qe h_txn_prepare(struct req *r);
/* Worker thread: one call of queen_txn (one round trip, one PostgreSQL transaction), then,
 * only when it committed, updates the partition index and wakes parked pops. */
enum qe h_txn_run(struct req *r, struct wk *w);
/* Worker thread: the same for n waiting requests in one call (group commit); when that call
 * does not commit, each bundle is run alone. One code per request in rcs (QE_OK once the
 * answer is set, QE_DB when PostgreSQL is unreachable). */
void h_txn_run_many(struct req **rs, size_t n, struct wk *w, enum qe *rcs);

#endif
