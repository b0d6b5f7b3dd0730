/* h_push: POST /api/v1/push (SPEC 4), with group commit of concurrent requests. */
#ifndef QUEEN_H_PUSH_H
#define QUEEN_H_PUSH_H

#include "errors.h"
#include "router.h"
#include "strbuf.h"
#include "uuid.h"

#include <jansson.h>
#include <stddef.h>

struct req;
struct wk;
struct dbconn;

/* One push item: the validated request fields, then what the store answered. */
struct push_item {
	const char *queue;		/* borrowed from the request's JSON */
	const char *partition;
	const char *txn;		/* NULL: the message id is the transactionId */
	const char *trace;
	char *payload;			/* compact JSON text, malloc'd: the owner frees it */
	const char *sub;		/* producerSub: the token's sub, borrowed; NULL = none */
	char id[UUID_STR_LEN];
	/* verdict */
	const char *status;		/* queued, duplicate, buffered or failed */
	char message_id[UUID_STR_LEN];
	const char *error;		/* static text, with status failed */
};

/* Validates item i of the JSON array named list ("items") by the rules of SPEC 4 (queue
 * required, no control characters, transactionId 1 to 65535 bytes, payload or its alias data)
 * and fills *out: strings are borrowed from it, out->payload is allocated. On error records
 * the 400 on r ("<list>[i]: <what>") and returns it; out->payload is then NULL. Pure, MHD
 * thread. The transaction route parses its push items with it too. */
enum qe h_push_parse_item(struct req *r, const char *list, size_t i, json_t *it,
			  struct push_item *out);

/* The parameter arrays of queen_push in binary wire format (strbuf.h), in its order:
 * partition ids (NULL where the index does not know the partition), queues, partitions,
 * message ids, transactionIds, traceIds, payloads, producerSubs. h_push_params_begin writes
 * the headers of arrays of n items whose payloads total payload_bytes (reserved at once);
 * h_push_params_add then appends each item (its id set) in order. The push and transaction
 * routes both build theirs so. */
#define PUSH_PARAMS 8
void h_push_params_begin(struct strbuf *const sb[PUSH_PARAMS], size_t n, size_t payload_bytes);
void h_push_params_add(struct strbuf *const sb[PUSH_PARAMS], const struct push_item *it);

/* Stores n items (ids set) in one call of queen_push, one transaction, and sets each item's
 * status and message_id; learns the partitions in the index and wakes the pops parked on
 * their queues. maybe_stored (spool replays of items that may be stored already): an item
 * whose transactionId's key is already held by its own message id answers "duplicate"
 * (queen_spool_push), so a replayed item with a transactionId is never stored twice; items
 * without one carry no key (the spool looks them up by message id wherever a replay may
 * repeat a commit, spool.h). Returns the error of db_exec untouched; db_ok(db) then tells an
 * unreachable database from a refused statement. Any thread with a connection of its own
 * that is online in the index. */
enum qe h_push_store(struct dbconn *db, struct push_item *const *items, size_t n,
		     int maybe_stored);
/* A spool replay: stores n items (as h_push_store with maybe_stored: 0 when none of them can
 * have been stored before, which spares the probe of each dedup key), split by partition
 * over the lanes (lanes.h; db is the caller's own, the first lane) so that each partition
 * keeps its order and the lanes' connections commit at once. QE_OK when every shard was
 * stored; otherwise *refused says whether the database answered and refused a shard, as opposed to
 * being unreachable (some shards may have committed all the same: the caller looks the
 * batch up by message id before it replays it again). The lanes' caller thread only (the
 * maintenance thread). */
enum qe h_push_replay(struct dbconn *db, struct push_item *const *items, size_t n,
		      int maybe_stored, int *refused);

enum qe h_push_prepare(struct req *r);
enum qe h_push_run(struct req *r, struct wk *w);
void h_push_run_many(struct req **rs, size_t n, struct wk *w, enum qe *rcs);

#endif
