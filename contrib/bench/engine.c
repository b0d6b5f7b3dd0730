/*
 * queen-bench: the epoll engine (bench.h says what it does).  One thread, N non-blocking
 * keep-alive connections, one request in flight on each; a request unanswered after
 * REQUEST_TIMEOUT_S is counted and its connection reopened.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"

static void conn_start(struct conn *c);

static bool conn_open(struct conn *c)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };

	c->fd = tcp_connect(true);
	if (c->fd < 0)
		return false;
	if (epoll_ctl(c->en->ep, EPOLL_CTL_ADD, c->fd, &ev) < 0)
		die("epoll_ctl: %s", strerror(errno));
	c->want_out = false;
	return true;
}

static void conn_close(struct conn *c)
{
	if (c->fd < 0)
		return;
	epoll_ctl(c->en->ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
}

static void conn_want_out(struct conn *c, bool on)
{
	struct epoll_event ev = { .events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c };

	if (c->want_out == on)
		return;
	epoll_ctl(c->en->ep, EPOLL_CTL_MOD, c->fd, &ev);
	c->want_out = on;
}

static void conn_error(struct conn *c, const char *why)
{
	struct failures *f = c->en->fail;

	f->transport++;
	failures_note(f, "transport", why, strlen(why));
	conn_close(c);
	c->st = CS_SLEEP;
	c->not_before = now() + 0.01;
}

static void conn_finish(struct conn *c, bool eof)
{
	struct engine *en = c->en;
	struct http_resp r;
	int rc = http_parse(c->in.p, c->in.len, eof, &c->dechunk, &r);

	if (rc == 0 && !eof)
		return;
	if (rc <= 0) {
		conn_error(c, eof ? "connection closed before a full response" :
			   "malformed HTTP response");
		return;
	}
	en->t_last = now();
	c->st = CS_IDLE;
	c->not_before = 0;
	en->reply(en, c, &r);
	if (r.close || eof)
		conn_close(c);
	c->in.len = 0;
	if (c->not_before > now())
		c->st = CS_SLEEP;
	else
		conn_start(c);
}

static void conn_flush(struct conn *c)
{
	while (c->out_off < c->out.len) {
		ssize_t n = send(c->fd, c->out.p + c->out_off, c->out.len - c->out_off,
				 MSG_NOSIGNAL);

		if (n > 0) {
			c->out_off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			conn_want_out(c, true);
			return;
		}
		conn_error(c, strerror(errno));
		return;
	}
	conn_want_out(c, false);
	c->st = CS_RECV;
	if (c->in.len)		/* an early answer arrived while we were still sending */
		conn_finish(c, false);
}

static void conn_read(struct conn *c)
{
	bool eof = false;

	for (;;) {
		ssize_t n;

		buf_reserve(&c->in, 65536);
		n = recv(c->fd, c->in.p + c->in.len, c->in.cap - c->in.len - 1, 0);
		if (n > 0) {
			c->in.len += (size_t)n;
			continue;
		}
		if (n == 0) {
			eof = true;
			break;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			break;
		conn_error(c, strerror(errno));
		return;
	}
	if (c->st == CS_RECV)
		conn_finish(c, eof);
	else if (c->st == CS_SEND && eof)
		conn_error(c, "connection closed while sending");
	else if (c->st != CS_SEND) {
		c->in.len = 0;	/* idle keep-alive connection closed by the server: reopen later */
		if (eof)
			conn_close(c);
	}
}

static void conn_start(struct conn *c)
{
	struct engine *en = c->en;

	if (en->next(en, c) == STEP_STOP) {
		conn_close(c);
		c->st = CS_DONE;
		en->active--;
		return;
	}
	if (c->fd < 0 && !conn_open(c)) {
		conn_error(c, "cannot connect");
		c->not_before = now() + 0.1;
		return;
	}
	c->out_off = 0;
	c->in.len = 0;
	c->t_sent = now();
	c->st = CS_SEND;
	conn_flush(c);
}

/* Runs until every connection's `next` said stop.  `sess` is an array of `sess_size` bytes each. */
void engine_run(struct engine *en, void *sess, size_t sess_size)
{
	struct epoll_event evs[128];

	en->ep = epoll_create1(EPOLL_CLOEXEC);
	if (en->ep < 0)
		die("epoll_create1: %s", strerror(errno));
	en->conns = calloc((size_t)en->nconns, sizeof(*en->conns));
	if (!en->conns)
		die("out of memory");
	for (int i = 0; i < en->nconns; i++) {
		struct conn *c = &en->conns[i];

		c->en = en;
		c->idx = i;
		c->sess = (char *)sess + (size_t)i * sess_size;
		if (!conn_open(c))
			die("cannot connect to %s:%s: %s", opt.host, opt.port, strerror(errno));
	}
	en->active = en->nconns;
	en->t_start = en->t_last = now();
	for (int i = 0; i < en->nconns; i++)
		conn_start(&en->conns[i]);

	while (en->active > 0) {
		double t = now(), wake = t + 0.1;
		int n, ms;

		for (int i = 0; i < en->nconns; i++) {
			struct conn *c = &en->conns[i];

			if (c->st == CS_SLEEP && c->not_before < wake)
				wake = c->not_before;
			if ((c->st == CS_SEND || c->st == CS_RECV) &&
			    t - c->t_sent > REQUEST_TIMEOUT_S) {
				en->fail->timeouts++;
				failures_note(en->fail, "timeout", "request unanswered", 18);
				conn_close(c);
				c->st = CS_SLEEP;
				c->not_before = t;
			}
		}
		ms = wake > t ? (int)((wake - t) * 1000) + 1 : 0;
		n = epoll_wait(en->ep, evs, 128, ms);
		if (n < 0 && errno != EINTR)
			die("epoll_wait: %s", strerror(errno));
		for (int k = 0; k < n; k++) {
			struct conn *c = evs[k].data.ptr;

			if (c->fd < 0 || c->st == CS_DONE)
				continue;
			if ((evs[k].events & EPOLLOUT) && c->st == CS_SEND)
				conn_flush(c);
			if ((evs[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && c->fd >= 0)
				conn_read(c);
		}
		t = now();
		for (int i = 0; i < en->nconns; i++) {
			struct conn *c = &en->conns[i];

			if (c->st == CS_SLEEP && c->not_before <= t)
				conn_start(c);
		}
	}
	for (int i = 0; i < en->nconns; i++) {
		buf_free(&en->conns[i].out);
		buf_free(&en->conns[i].in);
		buf_free(&en->conns[i].dechunk);
	}
	free(en->conns);
	close(en->ep);
}

/* Records an unexpected HTTP status and its body. */
void fail_http_as(struct failures *f, const struct http_resp *r, const char *what)
{
	char code[8];

	snprintf(code, sizeof(code), "%d", r->status);
	tally_add(f->http, code, strlen(code), 1);
	failures_note(f, what ? what : code, r->body_len ? r->body : "(no body)",
		      r->body_len ? r->body_len : 9);
}

void fail_http(struct failures *f, const struct http_resp *r)
{
	fail_http_as(f, r, NULL);
}
