/* http: libmicrohttpd in internal-polling thread-pool mode with epoll and suspend/resume.
 *
 * Request states: NEW (headers seen, route matched) -> BODY (collecting) -> RUNNING (suspended,
 * owned by the worker pool or the long-poll waiters) -> DONE (response ready, connection
 * resumed; the next access call queues it). Key invariant: a RUNNING request belongs to exactly
 * one owner, and only that owner calls http_finish, exactly once. */
#include "http.h"
#include "conf.h"
#include "jsonio.h"
#include "httpconn.h"
#include "log.h"
#include "metrics.h"
#include "names.h"
#include "pace.h"
#include "qassert.h"
#include "router.h"
#include "workers.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

enum { ST_NEW, ST_BODY, ST_RUNNING, ST_DONE };

static struct MHD_Daemon *http_daemon;
static _Atomic uint64_t http_next_id;
/* Bytes of request bodies held by all requests together (QUEEN_MAX_INFLIGHT_BYTES). */
static _Atomic int64_t http_inflight;

uint64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int64_t
now_ms(void)
{
	return (int64_t)(now_us() / 1000u);
}

int64_t
wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t
http_last_id(void)
{
	return atomic_load(&http_next_id);
}

struct req *
req_new(struct MHD_Connection *conn, const char *method, const char *url)
{
	struct req *r = calloc(1, sizeof(*r));

	QASSERT(r != NULL);
	r->conn = conn;
	snprintf(r->method, sizeof(r->method), "%s", method);
	r->path = strdup(url);
	QASSERT(r->path != NULL);
	sb_init(&r->body);
	r->start_us = now_us();
	r->id = atomic_fetch_add(&http_next_id, 1) + 1;
	r->pace_from_us = r->start_us;	/* a large body's first step (pace_body) */
	r->pace_mark = r->id;
	return r;
}

void
req_free(struct req *r)
{
	if (!r)
		return;
	if (r->job_free)
		r->job_free(r->job);
	for (int i = 0; i < r->nparams; i++)
		free(r->params[i]);
	for (int i = 0; i < r->nquery; i++) {
		free(r->qkeys[i]);
		free(r->qvals[i]);
	}
	free(r->qkeys);
	free(r->qvals);
	for (int i = 0; i < r->nhdr; i++) {
		free(r->hdr_names[i]);
		free(r->hdr_vals[i]);
	}
	atomic_fetch_sub(&http_inflight, (int64_t)r->body_held);
	sb_free(&r->body);
	auth_id_clear(&r->auth);
	json_decref(r->json);
	json_decref(r->err_extra);
	free(r->err_msg);
	free(r->resp);
	free(r->path);
	free(r);
}

const char *
req_query(const struct req *r, const char *key)
{
	for (int i = 0; i < r->nquery; i++)
		if (strcmp(r->qkeys[i], key) == 0)
			return r->qvals[i];
	return NULL;
}

const char *
req_query_set(const struct req *r, const char *key)
{
	const char *v = req_query(r, key);

	return v && *v ? v : NULL;
}

int
req_socket(const struct req *r)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);

	return ci ? (int)ci->connect_fd : -1;
}

const char *
req_param(const struct req *r, int i)
{
	QASSERT(i >= 0 && i < r->nparams);
	return r->params[i];
}

void
req_reply(struct req *r, int status, char *body, size_t len)
{
	free(r->resp);
	r->status = status;
	r->resp = body;
	r->resp_len = len;
}

void
req_reply_sb(struct req *r, int status, struct strbuf *sb)
{
	size_t len;
	char *body = sb_steal(sb, &len);

	req_reply(r, status, body, len);
}

void
req_reply_json(struct req *r, int status, json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);

	QASSERT(s != NULL);
	json_decref(j);
	req_reply(r, status, s, strlen(s));
}

void
req_reply_text(struct req *r, int status, const char *s)
{
	char *copy = strdup(s);

	QASSERT(copy != NULL);
	req_reply(r, status, copy, strlen(copy));
}

void
req_header(struct req *r, const char *name, const char *value)
{
	QASSERT(r->nhdr < REQ_MAX_HEADERS);
	r->hdr_names[r->nhdr] = strdup(name);
	r->hdr_vals[r->nhdr] = strdup(value);
	QASSERT(r->hdr_names[r->nhdr] && r->hdr_vals[r->nhdr]);
	r->nhdr++;
}

enum qe
req_fail(struct req *r, enum qe e, const char *fmt, ...)
{
	va_list ap;
	char buf[512];

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	free(r->err_msg);
	r->err_msg = strdup(buf);
	return e;
}

void
req_err_field(struct req *r, const char *key, json_t *v)
{
	if (!r->err_extra)
		r->err_extra = json_object();
	json_object_set_new(r->err_extra, key, v);
}

/* Renders the error body of e from the table, the handler's message and its extra fields. */
static void
render_error(struct req *r, enum qe e)
{
	json_t *body = json_object();
	char msg[600];
	const char *text = r->err_msg ? r->err_msg : qe_message(e);

	if (e == QE_BAD_BODY)
		snprintf(msg, sizeof(msg), "bad body: %s", text);
	else
		snprintf(msg, sizeof(msg), "%s", text);
	json_object_set_new(body, "error", json_string(msg));
	if (r->err_extra)
		json_object_update(body, r->err_extra);
	if (e == QE_TOO_LARGE && !json_object_get(body, "limit"))
		json_object_set_new(body, "limit", json_integer(qconf.max_body_bytes));
	if (e == QE_BUSY)
		req_header(r, "Retry-After", "1");
	if (e == QE_UNAUTHORIZED)
		req_header(r, "WWW-Authenticate", "Bearer");
	r->content_type = NULL;
	req_reply_json(r, qe_status(e), body);
}

void
http_finish(struct req *r, enum qe e)
{
	QASSERT(r->state == ST_RUNNING);
	QASSERT(e != QE_PARKED);
	if (e != QE_OK)
		render_error(r, e);
	QASSERT(r->status != 0);
	r->state = ST_DONE;
	MHD_resume_connection(r->conn);
}

static enum MHD_Result
queue_reply(struct req *r)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	/* The answer is made: the body is not needed any more, nor counted in flight. A client
	 * that has read the answer may send its next body at once and must find room for it. */
	atomic_fetch_sub(&http_inflight, (int64_t)r->body_held);
	r->body_held = 0;
	sb_free(&r->body);
	resp = MHD_create_response_from_buffer(r->resp_len, r->resp, MHD_RESPMEM_MUST_FREE);
	QASSERT(resp != NULL);
	r->resp = NULL;
	if (r->resp_len || r->status != 204)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
					r->content_type ? r->content_type : "application/json");
	for (int i = 0; i < r->nhdr; i++)
		MHD_add_response_header(resp, r->hdr_names[i], r->hdr_vals[i]);
	ret = MHD_queue_response(r->conn, (unsigned)r->status, resp);
	MHD_destroy_response(resp);
	metrics_request(r->status, now_us() - r->start_us);
	log_info("req=%llu %s %s -> %d %lluus", (unsigned long long)r->id, r->method, r->path,
		 r->status, (unsigned long long)(now_us() - r->start_us));
	return ret;
}

/* Answers right away from the MHD thread (404, 405, 400, 413, 429 ...). */
static enum MHD_Result
reply_now(struct req *r, enum qe e)
{
	render_error(r, e);
	r->state = ST_DONE;
	return queue_reply(r);
}

/* Refuses a body while it arrives (a chunked body past the limit, or the memory of all
 * bodies in flight). libmicrohttpd takes no response while a body is being received, so the
 * rest of it is dropped unread-into-memory as it comes, and the answer goes out when it ends;
 * a client that keeps sending more than another QUEEN_MAX_BODY_BYTES is disconnected. */
static enum MHD_Result
refuse_body(struct req *r, enum qe e)
{
	render_error(r, e);
	r->state = ST_DONE;
	atomic_fetch_sub(&http_inflight, (int64_t)r->body_held);
	r->body_held = 0;
	sb_free(&r->body);
	return MHD_YES;
}

/* Query keys and values arrive as the client sent them (see no_unescape) and are decoded
 * here, once. A value that is not valid UTF-8 (or holds a NUL) is refused for the whole
 * request: PostgreSQL would refuse it later, as a 5xx. */
void
req_add_query(struct req *r, const char *key, const char *value)
{
	size_t klen, vlen;
	char *k, *v;

	if (!key || r->nquery >= qconf.max_query_params)
		return;
	if (!r->qkeys) {
		r->qkeys = calloc((size_t)qconf.max_query_params, sizeof(*r->qkeys));
		r->qvals = calloc((size_t)qconf.max_query_params, sizeof(*r->qvals));
		QASSERT(r->qkeys && r->qvals);
	}
	k = route_pct_decode(key, strlen(key), &klen);
	v = route_pct_decode(value ? value : "", value ? strlen(value) : 0, &vlen);
	if (!r->bad_input && (!names_utf8(k, klen) || !names_utf8(v, vlen))) {
		r->bad_input = 1;
		req_fail(r, QE_BAD_REQUEST, "query parameter %s must be valid UTF-8 without NUL",
			 names_utf8(k, klen) ? k : "name");
	} else if (!r->bad_input && vlen && names_is_name_field(k)) {
		/* An empty filter means no filter; any other value is a name. */
		const char *why = names_invalid(v, vlen);

		if (why) {
			r->bad_input = 1;
			req_fail(r, QE_BAD_REQUEST, "%s %s", k, why);
		}
	}
	r->qkeys[r->nquery] = k;
	r->qvals[r->nquery] = v;
	r->nquery++;
}

static enum MHD_Result
collect_query(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	(void)kind;
	req_add_query(cls, key, value);
	return MHD_YES;
}

/* libmicrohttpd decodes the path before the access handler sees it, which made every path
 * parameter decoded twice (router.c decodes it too): "%2F" became a separator. Telling it to
 * leave the URL alone leaves one decoding, the router's (and collect_query's). */
static size_t
no_unescape(void *cls, struct MHD_Connection *c, char *s)
{
	(void)cls;
	(void)c;
	return strlen(s);
}

static int
conn_fd(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);

	return ci ? ci->connect_fd : -1;
}

/* Which fds are HTTP connections, for the answer to a request line the library cannot parse
 * (httpconn.h). */
static void
conn_cb(void *cls, struct MHD_Connection *c, void **socket_context,
	enum MHD_ConnectionNotificationCode code)
{
	(void)cls;
	(void)socket_context;
	if (code == MHD_CONNECTION_NOTIFY_STARTED)
		httpconn_open(conn_fd(c));
	else
		httpconn_closed(conn_fd(c));
}

/* What the URI callback hands the access handler for a query string past
 * QUEEN_MAX_QUERY_PARAMS (as its request context; NULL otherwise). */
static char query_refused_mark;

/* libmicrohttpd calls this with the request line's target before it parses the query string
 * into the connection's memory, a record per parameter. A few thousand short parameters
 * within QUEEN_MAX_URL_BYTES fill that memory, and libmicrohttpd 0.9.75 then leaves the
 * request unanswered. So a query string with more parameters than the limit is emptied here,
 * in libmicrohttpd's own buffer (the target is a part of it, writable as the library writes
 * it), and the access handler answers 414. It also tells httpconn that the connection's
 * bytes formed a request line, which the library answers. */
static void *
uri_cb(void *cls, const char *uri, struct MHD_Connection *c)
{
	char *q = strchr(uri, '?');
	int64_t n = 1;

	(void)cls;
	httpconn_request_line(conn_fd(c));
	if (!q || !q[1])
		return NULL;
	for (const char *p = q + 1; *p; p++)
		n += *p == '&';
	if (n <= qconf.max_query_params)
		return NULL;
	q[1] = '\0';
	return &query_refused_mark;
}

/* Path parameters must be valid UTF-8 without NUL, and those that hold names (":queue",
 * ":group", ":partition") follow the rules of names.c. */
enum qe
req_check_params(struct req *r, const size_t *plens)
{
	for (int i = 0; i < r->nparams; i++) {
		char name[32];
		const char *why;

		route_param_name(r->route, i, name, sizeof(name));
		/* The kv routes check their ns and key themselves, in the error vocabulary of
		 * SPEC 13 ({"error":"kv_bad_request",...}). */
		if (strcmp(name, "ns") == 0 || strcmp(name, "key") == 0)
			continue;
		if (!names_utf8(r->params[i], plens[i]))
			return req_fail(r, QE_BAD_REQUEST, "%s must be valid UTF-8 without NUL",
					name);
		if (names_is_name_field(name) &&
		    (why = names_invalid(r->params[i], plens[i])) != NULL)
			return req_fail(r, QE_BAD_REQUEST, "%s %s", name, why);
	}
	return QE_OK;
}

/* Answers an authentication refusal with the body SPEC 17 writes for it, and counts it. */
static enum MHD_Result
refuse(struct req *r, enum auth_refusal why)
{
	static const char *const msg[AUTH_REFUSAL__COUNT] = {
		[AUTH_MISSING] = "Authentication required",
		[AUTH_INVALID] = "Invalid token",
		[AUTH_EXPIRED] = "Token has expired",
		[AUTH_FORBIDDEN] = "Insufficient permissions",
		[AUTH_PROTECTED] = "protected mode: enable JWT authentication or set "
				   "QUEEN_PROTECTED_MODE=off",
	};
	enum qe e = why == AUTH_FORBIDDEN || why == AUTH_PROTECTED ? QE_FORBIDDEN
								 : QE_UNAUTHORIZED;

	QASSERT(why > AUTH_PASS && why < AUTH_REFUSAL__COUNT);
	auth_count(why);
	return reply_now(r, req_fail(r, e, "%s", why == AUTH_EXPIRED && r->auth.not_yet
						    ? "Token not yet valid" : msg[why]));
}

static enum MHD_Result
add_query_bytes(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	size_t *n = cls;

	(void)kind;
	/* "?" or "&", the key, and "=value" when it has one (as sent: see no_unescape). */
	*n += 1 + strlen(key) + (value ? 1 + strlen(value) : 0);
	return MHD_YES;
}

struct head_fields {
	int64_t n, bytes;
	const char *length;		/* the first Content-Length */
	int lengths_differ;		/* another one with another value */
	int chunked;			/* a Transfer-Encoding field */
	int hosts;			/* Host fields */
};

static enum MHD_Result
add_header_field(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct head_fields *h = cls;

	(void)kind;
	h->n++;
	/* "Name: value" and its CRLF. */
	h->bytes += (int64_t)(strlen(key) + 2 + (value ? strlen(value) : 0) + 2);
	if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
		if (!h->length)
			h->length = value ? value : "";
		else if (strcmp(h->length, value ? value : "") != 0)
			h->lengths_differ = 1;
	} else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
		h->chunked = 1;
	} else if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0) {
		h->hosts++;
	}
	return MHD_YES;
}

/* The limits of a request head (QUEEN_MAX_QUERY_PARAMS, QUEEN_MAX_URL_BYTES,
 * QUEEN_MAX_HEADER_BYTES, QUEEN_MAX_HEADERS), where its body ends, and its host.
 * libmicrohttpd has read the whole head into the connection's memory
 * (QUEEN_CONNECTION_MEMORY_BYTES, sized to hold heads well past these limits) before it calls
 * us; what did not fit there it refused itself (its answer goes out in our JSON: mhderr.c).
 * query_refused: uri_cb emptied a query string past QUEEN_MAX_QUERY_PARAMS. */
static enum qe
check_head(struct req *r, const char *version, int query_refused)
{
	size_t url = strlen(r->path);
	struct head_fields h = { 0, 0 };

	if (query_refused) {
		req_err_field(r, "limit", json_integer(qconf.max_query_params));
		return req_fail(r, QE_URL_TOO_LONG, "too many query parameters");
	}
	MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, add_query_bytes, &url);
	if ((int64_t)url > qconf.max_url_bytes) {
		req_err_field(r, "limit", json_integer(qconf.max_url_bytes));
		return req_fail(r, QE_URL_TOO_LONG, "URL too long");
	}
	MHD_get_connection_values(r->conn, MHD_HEADER_KIND, add_header_field, &h);
	if (h.n > qconf.max_headers) {
		req_err_field(r, "limit", json_integer(qconf.max_headers));
		return req_fail(r, QE_HEAD_TOO_LARGE, "too many request header fields");
	}
	if (h.bytes > qconf.max_header_bytes) {
		req_err_field(r, "limit", json_integer(qconf.max_header_bytes));
		return req_fail(r, QE_HEAD_TOO_LARGE, "request header fields too large");
	}
	/* Where the body ends must not be open to two readings (RFC 9112 6.3): a proxy in
	 * front may take the other one, and the rest of the body for the next request. The
	 * answer closes the connection, so that nothing after this head is read as one. */
	if (h.lengths_differ || (h.length && h.chunked)) {
		req_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
		return req_fail(r, QE_BAD_REQUEST, h.chunked ? "both Content-Length and "
				"Transfer-Encoding" : "Content-Length fields that differ");
	}
	/* RFC 9112 3.2: an HTTP/1.1 request names one host (two could each be read by a
	 * different party in front of the broker). */
	if (h.hosts > 1 || (h.hosts == 0 && strcmp(version, MHD_HTTP_VERSION_1_1) == 0))
		return req_fail(r, QE_BAD_REQUEST, h.hosts ? "more than one Host field"
				: "no Host field");
	return QE_OK;
}

static enum MHD_Result
start_request(struct req *r, const char *version, int query_refused)
{
	const union MHD_ConnectionInfo *ci;
	enum auth_refusal why;
	char allow[64];
	size_t plens[REQ_MAX_PARAMS];
	const char *cl;
	long long declared;
	enum qe e;

	/* The size of the head comes first: it says nothing about routes or tokens, and a
	 * head too large is refused before anything reads it. */
	if ((e = check_head(r, version, query_refused)) != QE_OK)
		return reply_now(r, e);
	/* Authentication comes before routing (SPEC 17): an unknown path without a token is a
	 * 401, so the route table cannot be probed anonymously. */
	ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	why = auth_authenticate(r->path, MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
								     MHD_HTTP_HEADER_AUTHORIZATION),
				ci ? ci->client_addr : NULL, &r->auth);
	if (why != AUTH_PASS)
		return refuse(r, why);
	switch (route_match(r->method, r->path, &r->route, r->params, plens, &r->nparams, allow,
			    sizeof(allow))) {
	case ROUTE_NO_PATH:
		return reply_now(r, QE_NOT_FOUND);
	case ROUTE_NO_METHOD:
		req_header(r, "Allow", allow);
		return reply_now(r, QE_METHOD);
	case ROUTE_FOUND:
		break;
	}
	if (!auth_allows(&r->auth, r->route->level))
		return refuse(r, AUTH_FORBIDDEN);
	if ((e = req_check_params(r, plens)) != QE_OK)
		return reply_now(r, e);
	MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, collect_query, r);
	if (r->bad_input)
		return reply_now(r, QE_BAD_REQUEST);
	cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	declared = cl ? strtoll(cl, NULL, 10) : 0;
	if (declared > qconf.max_body_bytes)
		return reply_now(r, QE_TOO_LARGE);
	if (declared > qconf.max_inflight_bytes - atomic_load(&http_inflight))
		return reply_now(r, req_fail(r, QE_BUSY, "too much request data in flight, "
					     "retry later"));
	r->body_declared = declared > 0 ? (size_t)declared : 0;
	r->state = ST_BODY;
	return MHD_YES;
}

enum qe
req_json_body(struct req *r)
{
	json_error_t jerr;

	if (r->body.len == 0)
		return req_fail(r, QE_BAD_BODY, "a JSON body is required");
	r->json = jio_load(r->body.buf, r->body.len, &jerr);
	if (!r->json && jerr.line < 0)
		return req_fail(r, QE_BAD_BODY, "%s", jerr.text);
	if (!r->json)
		return req_fail(r, QE_BAD_BODY, "%s at line %d column %d", jerr.text, jerr.line,
				jerr.column);
	return QE_OK;
}

enum qe
req_prepare(struct req *r)
{
	enum qe e;

	if (r->route->body == BODY_JSON ||
	    (r->route->body == BODY_JSON_OPTIONAL && r->body.len > 0)) {
		if ((e = req_json_body(r)) != QE_OK)
			return e;
	}
	return r->route->prepare ? r->route->prepare(r) : QE_OK;
}

enum qe
http_prepare_deferred(struct req *r)
{
	QASSERT(r->deferred && r->state == ST_RUNNING);
	r->deferred = 0;
	return req_prepare(r);
}

/* The body is complete: parse, prepare, and hand the request to the workers. A large body
 * is parsed by a worker instead (deferred): scanning megabytes here would stall every other
 * connection of this HTTP thread. */
static enum MHD_Result
submit_request(struct req *r)
{
	enum qe e;

	if (r->body.len > HTTP_PARSE_INLINE_BYTES)
		r->deferred = 1;
	else if ((e = req_prepare(r)) != QE_OK)
		return reply_now(r, e);
	r->state = ST_RUNNING;
	MHD_suspend_connection(r->conn);
	e = wk_submit(r);
	if (e != QE_OK) {
		/* Nobody owns it yet: answer from here and resume. */
		render_error(r, e);
		r->state = ST_DONE;
		MHD_resume_connection(r->conn);
	}
	return MHD_YES;
}

/* A body declared longer than this (Content-Length) gets its whole buffer when its first
 * bytes arrive: grown by doubling, a 64 MiB body was copied at every step and faulted in
 * afresh (a third of the page faults of a 64 MiB push). The buffer is address space until
 * written: a client that declares 64 MiB and sends little holds little memory. */
#define BODY_GROWN_BELOW ((size_t)1 << 20)

/* Counts n more body bytes against QUEEN_MAX_INFLIGHT_BYTES; 0 when that would pass it. */
static int
hold_body(struct req *r, size_t n)
{
	int64_t was = atomic_fetch_add(&http_inflight, (int64_t)n);

	if (was + (int64_t)n > qconf.max_inflight_bytes) {
		atomic_fetch_sub(&http_inflight, (int64_t)n);
		return 0;
	}
	r->body_held += n;
	return 1;
}

/* A large body is read in steps of PACE_RECV_STEP; after each, while other requests run,
 * its connection is held so that the body comes at most at PACE_RECV_BYTES_S (pace.h). */
static void
pace_body(struct req *r, size_t n)
{
	uint64_t now = now_us(), pause;

	r->pace_bytes += n;
	if (r->pace_bytes < PACE_RECV_STEP)
		return;
	pause = pace_recv_pause_us(r->pace_mark, r->pace_bytes, now - r->pace_from_us);
	r->pace_bytes = 0;
	r->pace_from_us = now + pause;
	r->pace_mark = pace_mark();
	if (pause > 0)
		pace_hold(r->conn, pause);
}

static enum MHD_Result
access_cb(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
	  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	struct req *r = *con_cls;

	if (!r || r == (void *)&query_refused_mark) {
		int refused = r != NULL;

		r = req_new(conn, method, url);
		*con_cls = r;
		return start_request(r, version, refused);
	}
	switch (r->state) {
	case ST_BODY:
		if (*upload_size) {
			if (r->body.len + *upload_size > (size_t)qconf.max_body_bytes) {
				*upload_size = 0;
				return refuse_body(r, QE_TOO_LARGE);
			}
			if (!hold_body(r, *upload_size)) {
				*upload_size = 0;
				return refuse_body(r, req_fail(r, QE_BUSY, "too much request data "
							       "in flight, retry later"));
			}
			if (r->body.cap == 0 && r->body_declared > BODY_GROWN_BELOW)
				sb_reserve(&r->body, r->body_declared);
			sb_add(&r->body, upload, *upload_size);
			if (r->body_declared > BODY_GROWN_BELOW)
				pace_body(r, *upload_size);
			*upload_size = 0;
			return MHD_YES;
		}
		return submit_request(r);
	case ST_DONE:
		if (*upload_size) {
			/* Rest of a body we already refused: drop it, up to a bound. */
			r->discarded += *upload_size;
			*upload_size = 0;
			return r->discarded > (size_t)qconf.max_body_bytes ? MHD_NO : MHD_YES;
		}
		return queue_reply(r);
	default:
		/* Spurious call while a worker owns the request: nothing to do yet. */
		*upload_size = 0;
		return MHD_YES;
	}
}

static void
completed_cb(void *cls, struct MHD_Connection *conn, void **con_cls,
	     enum MHD_RequestTerminationCode toe)
{
	struct req *r = *con_cls;

	if (!r || r == (void *)&query_refused_mark)
		return;
	/* A running request cannot end here: its connection is suspended until http_finish. */
	QASSERT(r->state != ST_RUNNING);
	req_free(r);
	*con_cls = NULL;
}

static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512];

	vsnprintf(buf, sizeof(buf), fmt, ap);
	buf[strcspn(buf, "\n")] = '\0';
	log_warn("http: %s", buf);
}

int
http_start(void)
{
	struct sockaddr_in addr;
	unsigned threads = (unsigned)qconf.num_workers;

	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_port = htons((uint16_t)qconf.port);
	if (inet_pton(AF_INET, qconf.host, &addr.sin_addr) != 1) {
		log_error("HOST: '%s' is not an IPv4 address", qconf.host);
		return -1;
	}
	if (threads == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		threads = n > 0 ? (unsigned)n : 2;
	}
	if (pace_start() < 0)
		return -1;
	http_daemon = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
		MHD_USE_ITC |
		MHD_USE_ERROR_LOG,
		(uint16_t)qconf.port, NULL, NULL, access_cb, NULL,
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
		MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
		MHD_OPTION_THREAD_POOL_SIZE, threads,
		MHD_OPTION_NOTIFY_COMPLETED, completed_cb, NULL,
		MHD_OPTION_NOTIFY_CONNECTION, conn_cb, NULL,
		MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, NULL,
		MHD_OPTION_URI_LOG_CALLBACK, uri_cb, NULL,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)60000,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600,
		MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)qconf.connection_memory_bytes,
		MHD_OPTION_END);
	if (!http_daemon) {
		log_error("cannot listen on %s:%lld (address in use or not permitted)", qconf.host,
			  (long long)qconf.port);
		pace_stop();
		return -1;
	}
	log_info("listening on %s:%lld with %u HTTP threads", qconf.host, (long long)qconf.port,
		 threads);
	return 0;
}

void
http_quiesce(void)
{
	if (http_daemon) {
		MHD_socket s = MHD_quiesce_daemon(http_daemon);

		if (s != MHD_INVALID_SOCKET)
			close(s);
	}
}

void
http_stop(void)
{
	/* Give answered requests a moment to reach their clients before the sockets close. */
	for (int i = 0; http_daemon && i < 50; i++) {
		const union MHD_DaemonInfo *info =
			MHD_get_daemon_info(http_daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);

		if (!info || info->num_connections == 0)
			break;
		usleep(20000);
	}
	pace_stop();	/* resumes the connections it holds: a suspended one blocks the stop */
	if (http_daemon)
		MHD_stop_daemon(http_daemon);
	http_daemon = NULL;
}
