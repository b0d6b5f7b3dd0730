/* mhderr: the answers libmicrohttpd 0.9.75 (Debian 12's) makes by itself, sent as the
 * broker's JSON errors.
 *
 * Some requests never reach the broker: a head that does not fit the connection's memory
 * (QUEEN_CONNECTION_MEMORY_BYTES) gets 414 or 431, a head the library cannot parse gets 400,
 * and each of these answers carries one of the library's fixed HTML pages, which no option
 * changes. The library sends an answer's head and body in one sendmsg. The executable's own
 * sendmsg and send take precedence over libc's for every caller, the library included (as
 * epoll_wait does in epollfix.c): an answer whose body is one of those pages goes out as the
 * JSON error the broker gives for that status, in exactly as many bytes (the JSON padded with
 * spaces), so that the library's count of what it sent stays true when the socket takes only
 * part of it (a head the library repeated before its page goes into the padding). The rest
 * of such an answer, asked for later from the same buffers, is taken from the same rewrite.
 * Everything else goes to the kernel as it is.
 *
 * A request line the library cannot parse at all (no method or target, a space too many,
 * lines ended by a bare LF) gets no answer from it: it shuts the connection down. So the
 * executable's recv and shutdown take precedence too: on an HTTP connection, bytes read with
 * neither an answer sent nor a request line parsed since (httpconn.h) are a request the
 * library gave up on, and before the connection is shut down they are answered
 * 400 {"error":"bad request"}, as a head it can parse but not accept already is. */
#include "mhderr.h"
#include "conf.h"
#include "errors.h"
#include "httpconn.h"

#include <jansson.h>

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PAGE_MARK "<html>"

/* An answer the socket took only part of: the library's buffers, what replaces them, and how
 * much of it has gone out. An HTTP thread serves many connections, so each keeps a few; one
 * whose client reads nothing is dropped for a newer one (its client gets a garbled end). */
struct rewrite {
	int fd;			/* -1: a free slot */
	const char *head, *body;
	size_t head_len, body_len, sent;
	char out[MHDERR_MAX];
};

#define SLOTS 4
static __thread struct rewrite rw_slots[SLOTS] = { { .fd = -1 }, { .fd = -1 }, { .fd = -1 },
						   { .fd = -1 } };
static __thread unsigned rw_next;

/* The broker's error body for an answer of this status, into out (the reason phrase when the
 * broker has no error of its own for it); its length, or -1. */
static int
json_error(int status, const char *reason, size_t reason_len, char *out, size_t cap)
{
	const char *msg = NULL;
	long long limit = -1;
	json_t *body;
	size_t n;

	switch (status) {
	case 400: msg = qe_message(QE_BAD_REQUEST); break;
	case 413: msg = qe_message(QE_TOO_LARGE); limit = qconf.max_body_bytes; break;
	case 414: msg = qe_message(QE_URL_TOO_LONG); limit = qconf.max_url_bytes; break;
	case 431: msg = qe_message(QE_HEAD_TOO_LARGE); limit = qconf.max_header_bytes; break;
	case 500: msg = qe_message(QE_INTERNAL); break;
	}
	body = msg ? json_pack("{ss}", "error", msg)
		   : json_pack("{ss%}", "error", reason, reason_len);
	if (!body)
		return -1;	/* a reason phrase that is not UTF-8 */
	if (limit >= 0)
		json_object_set_new(body, "limit", json_integer(limit));
	n = json_dumpb(body, out, cap, JSON_COMPACT);
	json_decref(body);
	return n == 0 || n > cap ? -1 : (int)n;
}

static size_t
digits(size_t n)
{
	size_t d = 1;

	while (n >= 10) {
		n /= 10;
		d++;
	}
	return d;
}

/* Whether these bytes are one more answer head: a status line, fields, the blank line. */
static int
repeated_head(const char *p, size_t n)
{
	const char *blank;

	if (n < 11 || memcmp(p, "HTTP/1.", 7) != 0)
		return 0;
	blank = memmem(p, n, "\r\n\r\n", 4);
	return blank && blank + 4 == p + n;
}

size_t
mhderr_rewrite(const char *head, size_t head_len, const char *body, size_t body_len,
	       char *out, size_t cap)
{
	static const char ctype[] = "Content-Type: application/json\r\n";
	static const char clen[] = "Content-Length: ";
	size_t total = head_len + body_len, o = 0, fixed, json_len = 0;
	const char *p = head, *end = head + head_len, *eol;
	char json[256];
	int status, n;

	if (body_len < sizeof(PAGE_MARK) - 1 || memcmp(body, PAGE_MARK, sizeof(PAGE_MARK) - 1) != 0 ||
	    head_len < 13 || memcmp(head, "HTTP/1.", 7) != 0 || head[8] != ' ' ||
	    total > cap || total > MHDERR_MAX)
		return 0;
	if (head[9] < '1' || head[9] > '5' || head[10] < '0' || head[10] > '9' ||
	    head[11] < '0' || head[11] > '9' || head[12] != ' ')
		return 0;
	status = (head[9] - '0') * 100 + (head[10] - '0') * 10 + (head[11] - '0');
	if (!(eol = memchr(p, '\r', (size_t)(end - p))) || eol + 1 >= end || eol[1] != '\n')
		return 0;
	n = json_error(status, head + 13, (size_t)(eol - head - 13), json, sizeof(json));
	if (n < 0)
		return 0;
	json_len = (size_t)n;
	/* The status line and every field but the body's type and length, as they were. */
	for (;;) {
		size_t line = (size_t)(eol + 2 - p);

		if (line == 2)
			break;		/* the blank line that ends the head */
		if (strncasecmp(p, "Content-Length:", 15) != 0 && strncasecmp(p, "Content-Type:", 13) != 0) {
			memcpy(out + o, p, line);
			o += line;
		}
		p = eol + 2;
		if (p >= end || !(eol = memchr(p, '\r', (size_t)(end - p))) || eol + 1 >= end ||
		    eol[1] != '\n')
			return 0;
	}
	/* The library queues some refusals twice (0.9.75: a cookie that does not fit the
	 * connection's memory), and the head buffer then holds a second head: its bytes go
	 * to the body's padding, so that the client reads one answer. Anything else after the
	 * head is not the library's refusal. */
	if (p + 2 != end && !repeated_head(p + 2, (size_t)(end - p - 2)))
		return 0;
	memcpy(out + o, ctype, sizeof(ctype) - 1);
	o += sizeof(ctype) - 1;
	fixed = o + (sizeof(clen) - 1) + 4;
	/* The body is what is left of the bytes: its length is printed in the head it follows. */
	for (size_t d = 1; d <= 6; d++) {
		size_t blen;

		if (total < fixed + d)
			return 0;
		blen = total - fixed - d;
		if (digits(blen) != d)
			continue;
		if (blen < json_len)
			return 0;
		o += (size_t)snprintf(out + o, cap - o, "%s%zu\r\n\r\n", clen, blen);
		memcpy(out + o, json, json_len);
		memset(out + o + json_len, ' ', blen - json_len);
		return total;
	}
	return 0;
}

static ssize_t
kernel_sendto(int fd, const void *buf, size_t len, int flags)
{
	return (ssize_t)syscall(SYS_sendto, fd, buf, len, flags, NULL, 0);
}

ssize_t (*mhderr_sendto)(int fd, const void *buf, size_t len, int flags) = kernel_sendto;

/* Where the library's next bytes of a partly sent answer start, in its own buffers. */
static const char *
resume_at(const struct rewrite *w)
{
	return w->sent < w->head_len ? w->head + w->sent : w->body + (w->sent - w->head_len);
}

/* Sends up to want more bytes of a partly sent answer; the library counts them as its own. */
static ssize_t
send_rest(struct rewrite *w, int fd, size_t want, int flags)
{
	size_t left = w->head_len + w->body_len - w->sent;
	ssize_t n = mhderr_sendto(fd, w->out + w->sent, want < left ? want : left, flags);

	if (n > 0)
		w->sent += (size_t)n;
	if (w->sent == w->head_len + w->body_len)
		w->fd = -1;
	return n;
}

/* Continues the partly sent answer on fd when the library asks for its next bytes from p,
 * and frees its slot when the library asks for anything else (that answer was given up).
 * -2: no answer continued. */
static ssize_t
resume(int fd, const void *p, size_t want, int flags)
{
	for (int i = 0; i < SLOTS; i++) {
		struct rewrite *w = &rw_slots[i];

		if (w->fd != fd)
			continue;
		if (p == resume_at(w))
			return send_rest(w, fd, want, flags);
		w->fd = -1;
	}
	return -2;
}

/* Keeps what is left of an answer the socket took only part of: in a free slot, or in place
 * of the oldest. With nothing sent no slot is needed: the library asks again with the same
 * buffers, which are rewritten again. */
static void
keep_rest(int fd, const struct iovec *iov, const char *out, size_t sent)
{
	struct rewrite *w = NULL;

	for (int i = 0; i < SLOTS && !w; i++)
		if (rw_slots[i].fd == -1)
			w = &rw_slots[i];
	if (!w)
		w = &rw_slots[rw_next++ % SLOTS];
	w->fd = fd;
	w->head = iov[0].iov_base;
	w->head_len = iov[0].iov_len;
	w->body = iov[1].iov_base;
	w->body_len = iov[1].iov_len;
	w->sent = sent;
	memcpy(w->out, out, w->head_len + w->body_len);
}

static ssize_t sent(int fd, ssize_t n);

ssize_t
sendmsg(int fd, const struct msghdr *msg, int flags)
{
	const struct iovec *iov = msg->msg_iov;
	char out[MHDERR_MAX];
	size_t want = 0, total;
	ssize_t n;

	for (size_t i = 0; i < msg->msg_iovlen; i++)
		want += iov[i].iov_len;
	if (msg->msg_iovlen >= 1 && (n = resume(fd, iov[0].iov_base, want, flags)) != -2)
		return sent(fd, n);
	if (msg->msg_iovlen != 2 || msg->msg_name ||
	    !(total = mhderr_rewrite(iov[0].iov_base, iov[0].iov_len, iov[1].iov_base,
				     iov[1].iov_len, out, sizeof(out))))
		return sent(fd, (ssize_t)syscall(SYS_sendmsg, fd, msg, flags));
	n = mhderr_sendto(fd, out, total, flags);
	if (n > 0 && (size_t)n < total)
		keep_rest(fd, iov, out, (size_t)n);
	return sent(fd, n);
}

/* An answer left the broker on fd: whatever it had read is answered. */
static ssize_t
sent(int fd, ssize_t n)
{
	if (n > 0)
		httpconn_sent(fd);
	return n;
}

ssize_t
send(int fd, const void *buf, size_t len, int flags)
{
	ssize_t n = resume(fd, buf, len, flags);

	return sent(fd, n != -2 ? n : kernel_sendto(fd, buf, len, flags));
}

ssize_t
recv(int fd, void *buf, size_t len, int flags)
{
	ssize_t n = (ssize_t)syscall(SYS_recvfrom, fd, buf, len, flags, NULL, NULL);

	if (n > 0)
		httpconn_received(fd);
	return n;
}

int
shutdown(int fd, int how)
{
	if (how != SHUT_RD && httpconn_take_unanswered(fd)) {
		char out[MHDERR_MAX], json[128];
		int jn = json_error(400, NULL, 0, json, sizeof(json)), n;

		n = jn < 0 ? -1 : snprintf(out, sizeof(out), "HTTP/1.1 400 Bad Request\r\n"
					   "Connection: close\r\nContent-Type: application/json\r\n"
					   "Content-Length: %d\r\n\r\n%.*s", jn, jn, json);
		/* Best effort, never waiting: a client that went away gets nothing. */
		if (n > 0 && (size_t)n < sizeof(out))
			(void)kernel_sendto(fd, out, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	return (int)syscall(SYS_shutdown, fd, how);
}
