/* h_push: POST /api/v1/push (SPEC 4), with group commit of concurrent requests. */
#ifndef QUEEN_H_PUSH_H
#define QUEEN_H_PUSH_H

#include "errors.h"
#include "router.h"
#include "uuid.h"

#include <jansson.h>

struct req;
struct wk;

/* One push item: the validated request fields, then what the store answered. */
struct push_item {
	const char *queue;		/* borrowed from the request's JSON */
	const char *partition;
	const char *txn;		/* NULL: the message id is the transactionId */
	const char *trace;
	char *payload;			/* compact JSON text, malloc'd: the owner frees it */
	char id[UUID_STR_LEN];
	/* verdict */
	const char *status;
	char message_id[UUID_STR_LEN];
};

/* Validates item i of the JSON array named list ("items") by the rules of SPEC 4 (queue
 * required, no control characters, transactionId 1 to 65535 bytes, payload or its alias data)
 * and fills *out: strings are borrowed from it, out->payload is allocated. On error records
 * the 400 on r ("<list>[i]: <what>") and returns it; out->payload is then NULL. Pure, MHD
 * thread. The transaction route parses its push items with it too. */
enum qe h_push_parse_item(struct req *r, const char *list, size_t i, json_t *it,
			  struct push_item *out);

enum qe h_push_prepare(struct req *r);
enum qe h_push_run(struct req *r, struct wk *w);
void h_push_run_many(struct req **rs, size_t n, struct wk *w, enum qe *rcs);

#endif
