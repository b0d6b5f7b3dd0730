/* h_ack: POST /api/v1/ack, /api/v1/ack/batch (SPEC 6) and lease extend (SPEC 7). */
#ifndef QUEEN_H_ACK_H
#define QUEEN_H_ACK_H

#include "errors.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct req;
struct strbuf;
struct wk;

/* One acknowledgement: the request fields (borrowed from its JSON, status normalised to
 * completed|failed|retry|dlq), then the verdict. */
struct ack_item {
	const char *txn, *pid, *status, *group, *lease, *error;
	const char *fail;	/* set when the item fails before reaching SQL */
	/* verdict */
	int success, released, dlq, noop;
	char *err;		/* malloc'd, the owner frees it */
};

/* Parses item i of the JSON array named list ("acknowledgments") by the rules of SPEC 6 into
 * *it; group is the consumer group of an item that names none (may be NULL). A wrong-typed
 * field is a 400 recorded on r ("<list>[i]: <what>") and returned; an item that can only fail
 * (unknown status, missing transactionId or partitionId, malformed ids) is QE_OK with it->fail
 * saying why. Pure, MHD thread. The transaction route parses its acks with it too. */
enum qe h_ack_parse_item(struct req *r, const char *list, size_t i, json_t *o, const char *group,
			 struct ack_item *it);
/* Appends the item's group, partition, transactionId, status, lease and error as the next
 * elements of the six array literals of queen_ack being built in sb[0..5]. */
void h_ack_item_elems(struct strbuf *sb, const struct ack_item *it);

/* What a committed ack row says of the group's cursor on partition pid: the index learns it,
 * and when the lease was released (a nack, an ack that leaves more) the pops parked on the
 * partition's queue are added to wakes. The transaction route notes its acks with it too. */
struct lp_wakes;
void h_ack_note_cursor(struct lp_wakes *wakes, const char *pid, const char *group,
		       int64_t committed, int released);

enum qe h_ack_prepare(struct req *r);
enum qe h_ack_run(struct req *r, struct wk *w);
enum qe h_extend_prepare(struct req *r);
enum qe h_extend_run(struct req *r, struct wk *w);

#endif
