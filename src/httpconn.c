/* httpconn: what the broker knows of each HTTP connection's bytes (httpconn.h). One byte of
 * state per fd, changed by compare-and-swap: an fd is served by one HTTP thread at a time, so
 * the atomics only keep other threads' sends and receives (PostgreSQL's, on fds that are not
 * tracked) from ever touching the state of a tracked fd. */
#include "httpconn.h"

#include <stdatomic.h>

/* Not an HTTP connection; one whose bytes so far were answered or formed a request line; one
 * holding bytes neither. */
enum { FD_OTHER, FD_ANSWERED, FD_UNANSWERED };

#define TRACKED_FDS 65536
static _Atomic unsigned char fd_state[TRACKED_FDS];

static void
move(int fd, unsigned char from, unsigned char to)
{
	unsigned char expect = from;

	if (fd >= 0 && fd < TRACKED_FDS)
		atomic_compare_exchange_strong_explicit(&fd_state[fd], &expect, to,
							memory_order_relaxed, memory_order_relaxed);
}

void
httpconn_open(int fd)
{
	if (fd >= 0 && fd < TRACKED_FDS)
		atomic_store_explicit(&fd_state[fd], FD_ANSWERED, memory_order_relaxed);
}

void
httpconn_closed(int fd)
{
	if (fd >= 0 && fd < TRACKED_FDS)
		atomic_store_explicit(&fd_state[fd], FD_OTHER, memory_order_relaxed);
}

void
httpconn_request_line(int fd)
{
	move(fd, FD_UNANSWERED, FD_ANSWERED);
}

void
httpconn_received(int fd)
{
	move(fd, FD_ANSWERED, FD_UNANSWERED);
}

void
httpconn_sent(int fd)
{
	move(fd, FD_UNANSWERED, FD_ANSWERED);
}

int
httpconn_take_unanswered(int fd)
{
	unsigned char expect = FD_UNANSWERED;

	return fd >= 0 && fd < TRACKED_FDS &&
	       atomic_compare_exchange_strong_explicit(&fd_state[fd], &expect, FD_ANSWERED,
						       memory_order_relaxed, memory_order_relaxed);
}
