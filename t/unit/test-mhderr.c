/* libmicrohttpd's own answers as the broker's JSON errors (src/mhderr.c): the rewrite keeps
 * the status, the other fields and the byte count; the executable's sendmsg sends it, and the
 * rest of an answer the socket took only part of when the library asks for it. */
#include "conf.h"
#include "mhderr.h"
#include "tap.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static const char page431[] = "<html><head><title>Request too big</title></head><body>Your HTTP "
	"header was too big for the memory constraints of this webserver.</body></html>";
static const char head431[] = "HTTP/1.1 431 Request Header Fields Too Large\r\n"
	"Date: Wed, 02 Dec 2026 09:18:35 GMT\r\nConnection: close\r\nContent-Length: 143\r\n\r\n";
static const char head414[] = "HTTP/1.1 414 URI Too Long\r\n"
	"Date: Wed, 02 Dec 2026 09:18:35 GMT\r\nConnection: close\r\nContent-Length: 143\r\n\r\n";
static const char page400[] = "<html><head><title>Request malformed</title></head><body>Your "
	"HTTP request was syntactically incorrect.</body></html>";
static const char head400[] = "HTTP/1.1 400 Bad Request\r\n"
	"Date: Wed, 02 Dec 2026 09:18:35 GMT\r\nConnection: close\r\nContent-Length: 117\r\n\r\n";
static const char head505[] = "HTTP/1.1 505 HTTP Version Not Supported\r\n"
	"Connection: close\r\nContent-Length: 117\r\n\r\n";

/* The body of an answer (after its head), parsed; NULL unless the head says JSON and the
 * length the body has. */
static json_t *
body_of(const char *ans, size_t len)
{
	const char *b = strstr(ans, "\r\n\r\n");
	const char *cl = strstr(ans, "Content-Length: ");

	if (!b || !cl || cl > b || !strstr(ans, "Content-Type: application/json\r\n"))
		return NULL;
	b += 4;
	if ((size_t)atol(cl + 16) != len - (size_t)(b - ans))
		return NULL;
	return json_loadb(b, len - (size_t)(b - ans), 0, NULL);
}

static int
is_error(json_t *j, const char *msg, long long limit)
{
	int good = j && json_is_object(j) &&
		   json_is_string(json_object_get(j, "error")) &&
		   strcmp(json_string_value(json_object_get(j, "error")), msg) == 0 &&
		   (limit < 0 ? json_object_size(j) == 1
			      : json_integer_value(json_object_get(j, "limit")) == limit);

	json_decref(j);
	return good;
}

static void
rewrites(void)
{
	char out[MHDERR_MAX + 1];
	size_t n, total = strlen(head431) + strlen(page431);

	n = mhderr_rewrite(head431, strlen(head431), page431, strlen(page431), out, MHDERR_MAX);
	ok(n == total, "431: rewritten in as many bytes (%zu)", total);
	out[n] = '\0';
	ok(strncmp(out, "HTTP/1.1 431 Request Header Fields Too Large\r\n", 46) == 0,
	   "431: the status line kept");
	ok(strstr(out, "\r\nDate: Wed, 02 Dec 2026 09:18:35 GMT\r\nConnection: close\r\n") != NULL,
	   "431: the other fields kept");
	ok(strstr(out, "<html>") == NULL && strstr(out, "Content-Length: 143") == NULL,
	   "431: nothing of the page, nor its length");
	ok(is_error(body_of(out, n), "request header fields too large", 16384),
	   "431: {\"error\":\"request header fields too large\",\"limit\":16384}");

	n = mhderr_rewrite(head414, strlen(head414), page431, strlen(page431), out, MHDERR_MAX);
	out[n] = '\0';
	ok(n == strlen(head414) + strlen(page431) && is_error(body_of(out, n), "URL too long", 8192),
	   "414: {\"error\":\"URL too long\",\"limit\":8192}");
	n = mhderr_rewrite(head400, strlen(head400), page400, strlen(page400), out, MHDERR_MAX);
	out[n] = '\0';
	ok(n == strlen(head400) + strlen(page400) && is_error(body_of(out, n), "bad request", -1),
	   "400: {\"error\":\"bad request\"}");
	n = mhderr_rewrite(head505, strlen(head505), page400, strlen(page400), out, MHDERR_MAX);
	out[n] = '\0';
	ok(n && is_error(body_of(out, n), "HTTP Version Not Supported", -1),
	   "a status the broker has no error of: the reason phrase");

	{
		/* The library's head twice, then its page (0.9.75, a cookie past the memory). */
		char twice[2 * sizeof(head431)];

		snprintf(twice, sizeof(twice), "%s%s", head431, head431);
		n = mhderr_rewrite(twice, strlen(twice), page431, strlen(page431), out, MHDERR_MAX);
		out[n] = '\0';
		ok(n == strlen(twice) + strlen(page431) &&
		   is_error(body_of(out, n), "request header fields too large", 16384) &&
		   strstr(out + 1, "HTTP/1.1") == NULL,
		   "a head repeated before the page: one answer, in as many bytes");
		snprintf(twice, sizeof(twice), "%sX-Not-A-Head\r\n\r\n", head431);
		ok(mhderr_rewrite(twice, strlen(twice), page431, strlen(page431), out,
				  MHDERR_MAX) == 0, "anything else after the head: left alone");
	}
	ok(mhderr_rewrite(head400, strlen(head400), "{\"error\":\"x\"}", 13, out, MHDERR_MAX) == 0,
	   "a JSON body is not the library's: left alone");
	ok(mhderr_rewrite("HTTP/1.1 200 OK\r\n\r\n", 19, "<html></html>", 13, out, MHDERR_MAX) == 0,
	   "too few bytes for the JSON: left alone");
	ok(mhderr_rewrite(head431, strlen(head431) - 2, page431, strlen(page431), out,
			  MHDERR_MAX) == 0, "a head without its blank line: left alone");
	ok(mhderr_rewrite("HTTP/1.1 4x1 Odd\r\n\r\n", 20, page431, strlen(page431), out,
			  MHDERR_MAX) == 0, "a status that is not three digits: left alone");
	ok(mhderr_rewrite(head431, strlen(head431), page431, strlen(page431), out, 100) == 0,
	   "no room: left alone");
}

static void
sends(void)
{
	int sv[2];
	struct iovec iov[2] = { { (void *)head431, strlen(head431) },
				{ (void *)page431, strlen(page431) } };
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2 };
	size_t total = iov[0].iov_len + iov[1].iov_len;
	char got[4096], want[MHDERR_MAX];
	ssize_t n;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return;
	n = sendmsg(sv[0], &msg, MSG_NOSIGNAL);
	ok(n == (ssize_t)total, "sendmsg of the library's page: its own byte count (%zd)", n);
	mhderr_rewrite(head431, iov[0].iov_len, page431, iov[1].iov_len, want, sizeof(want));
	ok(read(sv[1], got, sizeof(got)) == (ssize_t)total && memcmp(got, want, total) == 0,
	   "what the peer reads is the JSON answer");

	iov[1].iov_base = (void *)"{\"error\":\"request header fields too large\"}";
	iov[1].iov_len = strlen(iov[1].iov_base);
	n = sendmsg(sv[0], &msg, MSG_NOSIGNAL);
	ok(n == (ssize_t)(iov[0].iov_len + iov[1].iov_len) &&
	   read(sv[1], got, sizeof(got)) == n && memcmp(got + iov[0].iov_len, iov[1].iov_base,
							iov[1].iov_len) == 0,
	   "any other answer goes out as it is");
	ok(send(sv[0], "abc", 3, MSG_NOSIGNAL) == 3 && read(sv[1], got, 3) == 3 &&
	   memcmp(got, "abc", 3) == 0, "send passes through");
	close(sv[0]);
	close(sv[1]);
}

static ssize_t
stingy_sendto(int fd, const void *buf, size_t len, int flags)
{
	return (ssize_t)syscall(SYS_sendto, fd, buf, len < 50 ? len : 50, flags, NULL, 0);
}

/* What libmicrohttpd does with an answer the socket took part of: asks again for the rest,
 * head and body together while some of the head is left, then the body alone. Returns the
 * bytes the library would count as sent. */
static size_t
send_as_library(int fd, const struct iovec *iov)
{
	size_t total = iov[0].iov_len + iov[1].iov_len, sent = 0;
	ssize_t n;

	while (sent < total) {
		if (sent < iov[0].iov_len) {
			struct iovec rest[2] = { { (char *)iov[0].iov_base + sent,
						   iov[0].iov_len - sent }, iov[1] };
			struct msghdr m = { .msg_iov = rest, .msg_iovlen = 2 };

			n = sendmsg(fd, &m, MSG_NOSIGNAL);
		} else {
			n = send(fd, (char *)iov[1].iov_base + (sent - iov[0].iov_len), total - sent,
				 MSG_NOSIGNAL);
		}
		if (n <= 0)
			break;
		sent += (size_t)n;
	}
	return sent;
}

/* A socket that takes 50 bytes at a time: the rest of each answer comes from the rewrite,
 * also with two connections of one thread taking turns, and an answer given up midway does
 * not leak into the next answer on its descriptor. */
static void
partial_sends(void)
{
	int a[2], b[2];
	struct iovec p431[2] = { { (void *)head431, strlen(head431) },
				 { (void *)page431, strlen(page431) } };
	struct iovec p400[2] = { { (void *)head400, strlen(head400) },
				 { (void *)page400, strlen(page400) } };
	size_t t431 = p431[0].iov_len + p431[1].iov_len, t400 = p400[0].iov_len + p400[1].iov_len;
	char want431[MHDERR_MAX], want400[MHDERR_MAX], got[4096];
	struct msghdr m431 = { .msg_iov = p431, .msg_iovlen = 2 };
	struct msghdr m400 = { .msg_iov = p400, .msg_iovlen = 2 };
	ssize_t (*kernel)(int, const void *, size_t, int) = mhderr_sendto;
	ssize_t n1, n2;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, a) < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, b) < 0)
		return;
	mhderr_rewrite(head431, p431[0].iov_len, page431, p431[1].iov_len, want431, MHDERR_MAX);
	mhderr_rewrite(head400, p400[0].iov_len, page400, p400[1].iov_len, want400, MHDERR_MAX);
	mhderr_sendto = stingy_sendto;

	ok(send_as_library(a[0], p431) == t431 && read(a[1], got, sizeof(got)) == (ssize_t)t431 &&
	   memcmp(got, want431, t431) == 0,
	   "50 bytes at a time, the rest asked for as the library does: the whole JSON answer");

	/* Two connections of one thread, each answer begun before the other ends. */
	n1 = sendmsg(a[0], &m431, MSG_NOSIGNAL);
	n2 = sendmsg(b[0], &m400, MSG_NOSIGNAL);
	ok(n1 == 50 && n2 == 50, "two answers begun on two connections (50 bytes each)");
	{
		struct iovec r431[2] = { { (char *)head431 + 50, p431[0].iov_len - 50 }, p431[1] };
		struct iovec r400[2] = { { (char *)head400 + 50, p400[0].iov_len - 50 }, p400[1] };

		ok(send_as_library(b[0], r400) == t400 - 50 &&
		   send_as_library(a[0], r431) == t431 - 50, "each continued to its end");
	}
	ok(read(a[1], got, sizeof(got)) == (ssize_t)t431 && memcmp(got, want431, t431) == 0,
	   "the first connection reads its JSON answer");
	ok(read(b[1], got, sizeof(got)) == (ssize_t)t400 && memcmp(got, want400, t400) == 0,
	   "the second reads its own");

	/* An answer given up after 50 bytes; the next on the same descriptor is a new one. */
	ok(sendmsg(a[0], &m431, MSG_NOSIGNAL) == 50 && read(a[1], got, sizeof(got)) == 50,
	   "an answer begun and given up");
	mhderr_sendto = kernel;
	ok(send(a[0], "next", 4, MSG_NOSIGNAL) == 4 && read(a[1], got, sizeof(got)) == 4 &&
	   memcmp(got, "next", 4) == 0, "the next bytes on that descriptor go out as they are");
	close(a[0]);
	close(a[1]);
	close(b[0]);
	close(b[1]);
}

int
main(void)
{
	qconf.max_header_bytes = 16384;
	qconf.max_url_bytes = 8192;
	rewrites();
	sends();
	partial_sends();
	return tap_done();
}
