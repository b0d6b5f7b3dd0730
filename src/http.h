/* http: the libmicrohttpd daemon and the life of one request.
 *
 * An access handler only: it matches the route, collects the body under the size limit (413),
 * parses JSON, runs the route's prepare step (validation, 400) and hands the request to the
 * worker pool, suspending the connection. The worker (or the long-poll machinery) sets the
 * response and calls http_finish, which resumes the connection. Every error body is rendered
 * here, from the table in errors.c. A request and everything hanging off it is freed in the
 * completion callback.
 *
 * Thread context: http_* setup functions run in main; req_* accessors may be called from the
 * thread that currently owns the request (an MHD thread before submission, then one worker). */
#ifndef QUEEN_HTTP_H
#define QUEEN_HTTP_H

#include "auth.h"
#include "errors.h"
#include "strbuf.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct route;

#define REQ_MAX_PARAMS 4
#define REQ_MAX_HEADERS 4

struct req {
	struct MHD_Connection *conn;
	const struct route *route;
	char method[8];
	char *path;
	char *params[REQ_MAX_PARAMS];	/* decoded path parameters, in pattern order */
	int nparams;
	char **qkeys;			/* query string, copied out of MHD */
	char **qvals;
	int nquery;
	struct strbuf body;
	size_t body_held;		/* of it, counted in flight (QUEEN_MAX_INFLIGHT_BYTES) */
	size_t body_declared;		/* its Content-Length, 0 when none was sent */
	size_t discarded;		/* body bytes dropped after a refusal */
	size_t pace_bytes;		/* of a large body, read since its last step (pace.h) */
	uint64_t pace_from_us;		/* when that step began */
	uint64_t pace_mark;		/* and pace_mark() then */
	int bad_input;			/* a query value was refused (err_msg says which) */
	int deferred;			/* body not parsed yet: a worker does it first */
	json_t *json;			/* parsed body, or NULL when the request had none */
	struct auth_id auth;		/* the sender: grants, token sub */

	void *job;			/* the handler's typed job, freed with job_free */
	void (*job_free)(void *job);
	size_t weight;			/* push items, for group commit sizing */

	/* Response, set by the handler. */
	int status;
	char *resp;
	size_t resp_len;
	const char *content_type;
	char *hdr_names[REQ_MAX_HEADERS];
	char *hdr_vals[REQ_MAX_HEADERS];
	int nhdr;
	/* Error rendering: message override and extra machine fields. */
	char *err_msg;
	json_t *err_extra;

	int state;
	uint64_t start_us;
	uint64_t id;
	int64_t deadline_ms;		/* long-poll deadline (monotonic ms), 0 = none */
	struct req *next;		/* job queue / waiter list link */
	void *waiter;			/* long-poll bookkeeping owned by pindex */
};

/* Starts the daemon on qconf.host:qconf.port. Returns 0, or -1 with the reason logged. */
int http_start(void);
/* Stops accepting new connections (SIGTERM, first step). */
void http_quiesce(void);
/* Stops the daemon; every request must have been finished before. */
void http_stop(void);

/* The body is complete: parses it as the route declares (JSON or raw) and runs the route's
 * prepare step. QE_OK, or the error to answer (a 4xx: nothing here reaches the database).
 * The HTTP thread for small bodies, a worker for large ones (http_prepare_deferred). */
enum qe req_prepare(struct req *r);
/* Parses the body as JSON into r->json, as for a BODY_JSON route (an empty body is an error):
 * for a BODY_RAW route whose prepare falls back to the tree. QE_OK or the 400 recorded. */
enum qe req_json_body(struct req *r);

/* Bodies larger than this are parsed by a worker, not by the HTTP thread. */
#define HTTP_PARSE_INLINE_BYTES (256 * 1024)

/* Worker thread: parses the body of a deferred request and runs its route's prepare step
 * (what the HTTP thread does for small bodies). QE_OK, or the error to answer. */
enum qe http_prepare_deferred(struct req *r);

/* Hands a finished request back to its connection: renders the error when e != QE_OK,
 * then resumes the suspended connection. Called exactly once per submission. */
void http_finish(struct req *r, enum qe e);

/* A request as the access handler sees it when its headers arrive (conn may be NULL outside
 * libmicrohttpd: the fuzz targets), and its release with everything hanging off it. */
struct req *req_new(struct MHD_Connection *conn, const char *method, const char *url);
void req_free(struct req *r);
/* What the access handler checks once the route matched: the path parameters (plens: their
 * decoded lengths, from route_match), then each query parameter as libmicrohttpd splits it
 * (raw, decoded here); a refused one sets r->bad_input and the 400's message. */
enum qe req_check_params(struct req *r, const size_t *plens);
void req_add_query(struct req *r, const char *key, const char *value);

/* Query string value, or NULL. */
const char *req_query(const struct req *r, const char *key);
/* Query string value, or NULL when absent or empty (an empty filter means no filter). */
const char *req_query_set(const struct req *r, const char *key);
/* The socket of the request's connection, or -1 (long-polls watch it for the peer leaving). */
int req_socket(const struct req *r);
/* Path parameter i (0-based), never NULL for a matched route. */
const char *req_param(const struct req *r, int i);

/* Response setters. The body is JSON unless a content type is set. */
void req_reply(struct req *r, int status, char *body, size_t len);	/* takes body (malloc) */
void req_reply_sb(struct req *r, int status, struct strbuf *sb);	/* empties sb */
void req_reply_json(struct req *r, int status, json_t *j);		/* steals j */
void req_reply_text(struct req *r, int status, const char *s);		/* copies s */
void req_header(struct req *r, const char *name, const char *value);
/* Records the message of an error and returns e, so handlers write
 * `return req_fail(r, QE_BAD_BODY, "items must be an array");`. */
enum qe req_fail(struct req *r, enum qe e, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Adds a machine field to the error body (steals v). */
void req_err_field(struct req *r, const char *key, json_t *v);

/* The id of the latest request begun: a request begun since an earlier reading made it move. */
uint64_t http_last_id(void);

uint64_t now_us(void);		/* monotonic */
int64_t now_ms(void);		/* monotonic */
int64_t wall_ms(void);		/* unix time */

#endif
