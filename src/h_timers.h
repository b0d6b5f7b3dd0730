/* h_timers: the timer routes (SPEC 14) and the validator of timer operations that the
 * transaction route reuses for its "timers" array. Firing due timers is timers.c's job. */
#ifndef QUEEN_H_TIMERS_H
#define QUEEN_H_TIMERS_H

#include "errors.h"

#include <jansson.h>

struct req;
struct wk;

/* Limits of SPEC 14 (and the ones this broker adds: name lengths, list page size). */
#define TIMERS_MAX_OPS 256
#define TIMERS_MAX_PAYLOAD (1024 * 1024)		/* bytes of compact JSON text */
#define TIMERS_MAX_DELAY_MS (90LL * 86400 * 1000)	/* the horizon: 90 days */
#define TIMERS_MAX_NAME 512				/* timerKey bytes */
#define TIMERS_MAX_TXN 65535
#define TIMERS_LIST_DEFAULT 100
#define TIMERS_LIST_MAX 1000

/* Validates an array of timer operations (schedule and cancel) and builds the array that
 * queen_timers_apply(p_ops jsonb) takes, one element per operation, in input order:
 *
 *   {"op":"schedule","queue":Q,"timerKey":K,"partition":P,"delayMs":N,"txn":T,
 *    "messageId":M,"payload":"<JSON text>"}
 *   {"op":"cancel","queue":Q,"timerKey":K}
 *
 * partition defaults to "Default"; messageId is a fresh UUIDv7 (the id the delivered message
 * will carry); txn defaults to messageId; payload is the compact JSON text of the payload
 * (null when absent), already decoded when the schedule carried "payloadZstd":false (payload
 * then being base64 of the JSON text). Pass json_dumps(*normalized) as the parameter.
 * Inside a larger transaction, apply the timers before pushing: the sweeper locks timer rows
 * and then partition rows, and the same order keeps the two from deadlocking.
 *
 * A NULL ops is refused like any other non-array: the caller decides what absent means.
 *
 * Errors (the request's error is set with req_fail, plus the machine fields "code" and, for
 * one operation, "index"): QE_BAD_BODY with code "timers_bad_request" for anything malformed
 * (not an array, more than TIMERS_MAX_OPS, unknown op, missing or mistyped field, control
 * characters or over-long names, payloadZstd:true, bad base64); QE_FORBIDDEN with code
 * "timers_horizon" for delayMs beyond TIMERS_MAX_DELAY_MS; QE_TOO_LARGE with code
 * "timers_payload_too_large" and "limit" for a payload over TIMERS_MAX_PAYLOAD.
 *
 * On QE_OK *normalized is a new reference owned by the caller; on error it is NULL. ops is
 * borrowed. Pure: no I/O, callable from the HTTP thread (prepare step). */
enum qe h_timers_validate_ops(struct req *r, json_t *ops, json_t **normalized);

/* POST /api/v1/timers {"operations":[...]} (a bare array is accepted too) -> 200
 * {"results":[...]}, one result per operation (see queen_timers_apply). */
enum qe h_timers_prepare(struct req *r);
enum qe h_timers_apply(struct req *r, struct wk *w);
/* GET /api/v1/timers/:queue?after=&limit= -> pending timers in timerKey order, without
 * payloads: {"queue","timers":[...],"truncated","nextAfter"}. limit 1..1000, default 100. */
enum qe h_timers_list_prepare(struct req *r);
enum qe h_timers_list(struct req *r, struct wk *w);
/* GET /api/v1/timers/:queue/<timerKey, slashes allowed> -> the pending timer with its payload;
 * 404 when there is none. */
enum qe h_timers_get(struct req *r, struct wk *w);
/* DELETE /api/v1/timers/:queue/<timerKey> -> 200 {"ok":true,"status":"cancelled"|"absent",
 * "queue","timerKey"} (a verdict, never a 404). */
enum qe h_timers_cancel(struct req *r, struct wk *w);

#endif
