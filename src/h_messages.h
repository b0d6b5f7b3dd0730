/* h_messages: the message browser (SPEC 12): list retained messages with their status, show
 * one with its payload and per-group state, delete its dead-letter rows. Read-mostly; each
 * handler is one call of a schema/functions/dlq_messages.sql function on a worker thread. */
#ifndef QUEEN_H_MESSAGES_H
#define QUEEN_H_MESSAGES_H

#include "errors.h"

struct req;
struct wk;

/* GET /api/v1/messages?queue=&partition=&status=&from=&to=&limit=200&offset=0; status is
 * dead_letter | completed | processing | pending; from/to ISO-8601 (to inclusive to the
 * millisecond); limit 1..1000. Newest first. 400 on a bad parameter. */
enum qe h_messages_list(struct req *r, struct wk *w);
/* GET /api/v1/messages/:partitionId/:transactionId; 404 {"error":"Message not found"}. */
enum qe h_message_get(struct req *r, struct wk *w);
/* DELETE /api/v1/messages/:partitionId/:transactionId: deletes the message's dead-letter
 * rows (the log is immutable) and answers how many; 404 when the address names nothing. */
enum qe h_message_delete(struct req *r, struct wk *w);

#endif
