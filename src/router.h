/* router: the one table of routes (method, pattern, handler steps, body) and its matcher.
 *
 * Patterns are literal segments, ":name" (one segment) and a final "*name" (the rest of the
 * path, slashes included). Handlers are plain functions of the h_*.c modules. */
#ifndef QUEEN_ROUTER_H
#define QUEEN_ROUTER_H

#include "auth.h"
#include "errors.h"
#include "sqlstmt.h"

#include <stddef.h>

struct req;
struct wk;

/* BODY_RAW: the body is collected (size limit applies) but not parsed: prepare reads
 * r->body itself (the push route scans it without building a tree). */
enum route_body { BODY_NONE, BODY_JSON, BODY_JSON_OPTIONAL, BODY_RAW };

struct route {
	const char *method;
	const char *pattern;
	/* Who may call it (SPEC 17): the least role level a token needs. Paths in
	 * JWT_SKIP_PATHS are public whatever their level. */
	enum auth_level level;
	enum route_body body;
	/* MHD thread, optional: validate the parsed request and build req->job. Never blocks. */
	enum qe (*prepare)(struct req *r);
	/* Worker thread: do the work with the worker's database connection. Returns QE_OK after
	 * setting the response, QE_PARKED when the request now waits in a long-poll, or an
	 * error to render. */
	enum qe (*run)(struct req *r, struct wk *w);
	/* Worker thread, optional: serve several queued requests of this route at once (group
	 * commit). Writes one code per request into rcs, with the meaning of run's. */
	void (*run_many)(struct req **rs, size_t n, struct wk *w, enum qe *rcs);
	/* Parameterless read views (run = h_sql_view): the catalogued statement whose single
	 * json value is the answer. */
	enum sql_id view;
	/* A consumer's request (pop, ack): while the spool drains, the workers run one of
	 * them at a time (workers.c). */
	int consumer;
};

enum route_match_result { ROUTE_FOUND, ROUTE_NO_PATH, ROUTE_NO_METHOD };

/* Matches method and the raw (still percent-encoded) path. On ROUTE_FOUND sets *out and
 * fills params (malloc'd, decoded once, the caller frees them) and their decoded lengths
 * (a %00 makes a NUL inside). On ROUTE_NO_METHOD fills allow with the methods the path
 * takes. */
enum route_match_result route_match(const char *method, const char *path,
				    const struct route **out, char **params, size_t *plens,
				    int *nparams, char *allow, size_t allowlen);
/* The one percent-decoder of the broker (path parameters, query keys and values): %XX is a
 * byte, anything else is itself. Returns a malloc'd NUL-terminated copy and its length. */
char *route_pct_decode(const char *s, size_t n, size_t *outlen);
/* Name of path parameter i of rt (the pattern's ":queue" -> "queue"), for error messages. */
void route_param_name(const struct route *rt, int i, char *buf, size_t len);

#endif
