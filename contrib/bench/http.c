/*
 * queen-bench: a hand-written HTTP/1.1 client: request building, response parsing (length or
 * chunked), and the blocking keep-alive client the phases use for single calls.  Hand-written
 * so that on a 2-core machine shared with PostgreSQL and the broker the client costs far less
 * CPU than either.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "bench.h"

static struct addrinfo *target_ai;

/* ---------------------------------------------------------------- HTTP/1.1 */

void http_request(struct buf *out, const char *method, const char *path, const char *body,
			 size_t blen)
{
	out->len = 0;
	buf_addf(out, "%s %s HTTP/1.1\r\nHost: %s:%s\r\n", method, path, opt.host, opt.port);
	if (body)
		buf_addf(out, "Content-Type: application/json\r\nContent-Length: %zu\r\n", blen);
	buf_adds(out, "\r\n");
	if (body)
		buf_add(out, body, blen);
}

static bool hdr_value(const char *line, size_t n, const char *name, const char **v, size_t *vlen)
{
	size_t k = strlen(name);
	const char *p, *e = line + n;

	if (n <= k || line[k] != ':' || strncasecmp(line, name, k) != 0)
		return false;
	for (p = line + k + 1; p < e && (*p == ' ' || *p == '\t'); p++)
		;
	*v = p;
	*vlen = (size_t)(e - p);
	return true;
}

static bool has_token(const char *v, size_t n, const char *tok)
{
	size_t k = strlen(tok);

	for (size_t i = 0; i + k <= n; i++)
		if (strncasecmp(v + i, tok, k) == 0)
			return true;
	return false;
}

static int http_dechunk(const char *p, const char *e, struct buf *out, struct http_resp *r)
{
	out->len = 0;
	for (;;) {
		const char *nl = memmem(p, (size_t)(e - p), "\r\n", 2);
		unsigned long sz;
		char *endp;

		if (!nl)
			return 0;
		sz = strtoul(p, &endp, 16);
		if (endp == p)
			return -1;
		p = nl + 2;
		if (sz == 0) {
			for (;;) {	/* trailers, up to the empty line */
				nl = memmem(p, (size_t)(e - p), "\r\n", 2);
				if (!nl)
					return 0;
				if (nl == p)
					break;
				p = nl + 2;
			}
			buf_reserve(out, 0);
			r->body = out->p;
			r->body_len = out->len;
			return 1;
		}
		if ((size_t)(e - p) < sz + 2)
			return 0;
		buf_add(out, p, sz);
		p += sz + 2;
	}
}

/*
 * Parses the response in in[0..len).  Returns 1 when it is complete, 0 when more bytes are
 * needed, -1 when it is malformed.  `eof`: the peer closed, so a body without a length ends.
 */
int http_parse(const char *in, size_t len, bool eof, struct buf *dechunk,
		      struct http_resp *r)
{
	const char *he, *p, *body;
	long clen = -1;
	bool chunked = false;
	size_t avail;

	if (len == 0)
		return eof ? -1 : 0;
	he = memmem(in, len, "\r\n\r\n", 4);
	if (!he)
		return eof || len > 65536 ? -1 : 0;
	if (len < 12 || memcmp(in, "HTTP/1.", 7) != 0)
		return -1;
	r->status = atoi(in + 9);
	r->close = in[7] == '0';
	p = (const char *)memmem(in, (size_t)(he + 2 - in), "\r\n", 2) + 2;
	while (p < he + 2) {
		const char *q = memmem(p, (size_t)(he + 2 - p), "\r\n", 2), *v;
		size_t vlen;

		if (hdr_value(p, (size_t)(q - p), "content-length", &v, &vlen))
			clen = strtol(v, NULL, 10);
		else if (hdr_value(p, (size_t)(q - p), "transfer-encoding", &v, &vlen))
			chunked = has_token(v, vlen, "chunked");
		else if (hdr_value(p, (size_t)(q - p), "connection", &v, &vlen))
			r->close = has_token(v, vlen, "close");
		p = q + 2;
	}
	body = he + 4;
	avail = (size_t)(in + len - body);
	r->body = body;
	r->body_len = 0;
	if (r->status < 200)
		return -1;		/* no 1xx expected: we never send Expect */
	if (r->status == 204 || r->status == 304)
		return 1;
	if (chunked)
		return http_dechunk(body, in + len, dechunk, r);
	if (clen >= 0) {
		if (avail < (size_t)clen)
			return 0;
		r->body_len = (size_t)clen;
		return 1;
	}
	if (!eof)
		return 0;
	r->body_len = avail;
	r->close = true;
	return 1;
}

void resolve_target(void)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	int rc = getaddrinfo(opt.host, opt.port, &hints, &target_ai);

	if (rc)
		die("cannot resolve %s:%s: %s", opt.host, opt.port, gai_strerror(rc));
}

/* A connected TCP socket to the broker, or -1.  Connect is blocking: it is loopback. */
int tcp_connect(bool nonblock)
{
	int fd, one = 1;

	fd = socket(target_ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, target_ai->ai_addr, target_ai->ai_addrlen) < 0) {
		close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (nonblock)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	else {
		struct timeval tv = { .tv_sec = 30 };

		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	return fd;
}

/* ---------------------------------------------------------------- blocking client */

int hc_send(struct hclient *h, const char *method, const char *path, const char *body,
		   size_t blen)
{
	size_t off = 0;

	if (h->fd < 0 && (h->fd = tcp_connect(false)) < 0)
		return -1;
	http_request(&h->req, method, path, body, blen);
	while (off < h->req.len) {
		ssize_t n = send(h->fd, h->req.p + off, h->req.len - off, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			close(h->fd);
			h->fd = -1;
			return -1;
		}
		off += (size_t)n;
	}
	return 0;
}

/* Reads one response; r->body stays valid until the next call on this client. */
int hc_recv(struct hclient *h, struct http_resp *r)
{
	int rc;

	h->in.len = 0;
	for (;;) {
		ssize_t n;

		rc = http_parse(h->in.p, h->in.len, false, &h->dechunk, r);
		if (rc)
			break;
		buf_reserve(&h->in, 65536);
		n = recv(h->fd, h->in.p + h->in.len, h->in.cap - h->in.len - 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		if (n == 0) {
			rc = http_parse(h->in.p, h->in.len, true, &h->dechunk, r);
			r->close = true;
			break;
		}
		h->in.len += (size_t)n;
	}
	if (rc != 1 || r->close) {
		close(h->fd);
		h->fd = -1;
	}
	return rc == 1 ? 0 : -1;
}

int hc_call(struct hclient *h, const char *method, const char *path, const char *body,
		   size_t blen, struct http_resp *r)
{
	if (hc_send(h, method, path, body, blen) < 0)
		return -1;
	return hc_recv(h, r);
}

void hc_free(struct hclient *h)
{
	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
	buf_free(&h->req);
	buf_free(&h->in);
	buf_free(&h->dechunk);
}

void check_health(void)
{
	struct hclient h = { .fd = -1 };
	struct http_resp r;

	if (hc_call(&h, "GET", "/health", NULL, 0, &r) < 0)
		die("queend at %s:%s does not answer", opt.host, opt.port);
	if (r.status != 200)
		die("queend /health answered %d: %.*s", r.status, (int)r.body_len, r.body);
	hc_free(&h);
}
