/* mhderr: the answers libmicrohttpd makes by itself, sent as the broker's JSON errors (the
 * executable's own sendmsg and send; see mhderr.c). */
#ifndef QUEEN_MHDERR_H
#define QUEEN_MHDERR_H

#include <stddef.h>
#include <sys/types.h>

/* The longest answer rewritten (the library's own are under 400 bytes). */
#define MHDERR_MAX 512

/* When head and body are one of libmicrohttpd's own answers (an HTML page), writes into out
 * the same answer as the broker's JSON error of that status, in exactly head_len + body_len
 * bytes, and returns that length; otherwise 0. */
size_t mhderr_rewrite(const char *head, size_t head_len, const char *body, size_t body_len,
		      char *out, size_t cap);

/* How a rewritten answer goes to the kernel (sendto); a unit test puts a socket that takes a
 * few bytes at a time in its place. */
extern ssize_t (*mhderr_sendto)(int fd, const void *buf, size_t len, int flags);

#endif
