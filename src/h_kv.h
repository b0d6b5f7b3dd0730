/* h_kv: key/value state (SPEC 13 and the KV lines of SPEC 21).
 *
 * Routes: POST /api/v1/kv (an array of ops, or {"operations":[...]}) and the sugar
 * GET/PUT/DELETE /api/v1/kv/:ns/ *key. Every op is validated in the HTTP thread, so a bad
 * call changes nothing; the worker then makes one call of queen_kv() (schema/functions/kv.sql),
 * which applies the ops in order and undoes them all when a `required` op loses its
 * precondition. Also owns the pruning of expired keys (a maintenance task).
 *
 * Errors of this module render as {"error":"<code>","reason":"<what>","detail":"<text>"}
 * (plus "index" naming the op, "limit" on a 413):
 *   kv_bad_request      400  reason bad_body | bad_op | unknown_op | missing_field |
 *                            bad_field | ttl | not_allowed
 *   kv_limit_exceeded   400  reason too_many_ops | too_many_keys | key_too_long | ns_too_long
 *   kv_value_too_large  413  reason value_too_large */
#ifndef QUEEN_H_KV_H
#define QUEEN_H_KV_H

#include "errors.h"

#include <jansson.h>
#include <stdint.h>

#define KV_MAX_VALUE_BYTES 65536	/* compact JSON text of one value */
#define KV_MAX_KEY_BYTES 512		/* a key, and a namespace */
#define KV_MAX_OPS 256			/* ops in one call */
#define KV_MAX_KEYS 1024		/* keys named in one call, getMany's included */

struct req;
struct wk;
struct dbconn;

/* Validates the JSON array ops with the rules of SPEC 13 (types, ttlSeconds xor forever:true,
 * limits). With standalone 0 (the kv array of a transaction) getPrefix is refused. Returns
 * QE_OK, or the error (already recorded on r with req_fail and its machine fields) to return
 * from a prepare step. Borrows ops. MHD thread; never blocks. */
enum qe h_kv_validate_ops(struct req *r, json_t *ops, int standalone);

/* POST /api/v1/kv: prepare (MHD thread) and run (worker). */
enum qe h_kv_prepare(struct req *r);
enum qe h_kv_run(struct req *r, struct wk *w);

/* GET, PUT, DELETE /api/v1/kv/:ns/ *key: one get, put or delete op. The answer is that op's
 * result element (with an ETag header holding the version when the key was found or
 * written), or the whole {"ok":false,...} answer when a required precondition was lost. */
enum qe h_kv_key_prepare(struct req *r);
enum qe h_kv_key_run(struct req *r, struct wk *w);

/* Maintenance task: deletes expired keys in bounded batches (at most a few thousand rows a
 * round), never waiting on a key a writer holds. Maintenance thread, its own connection. */
void kv_prune(struct dbconn *db);
/* Interval of kv_prune, ms. */
int64_t kv_prune_interval_ms(void);

#endif
