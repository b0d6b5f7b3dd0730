/* epollfix: a stall in libmicrohttpd 0.9.75 (Debian 12's), worked around from outside.
 *
 * Its epoll loop reads the ready list in calls of at most 128 events and, while a call
 * returns a full 128, calls again to drain the rest: with the same timeout as the first
 * call, which is the time to the nearest connection timeout (600 s here). When
 * exactly 128 events were ready, that second call blocks, and the requests whose bytes
 * arrived in the first are left unread until some other event reaches that thread: a burst
 * of clients (many pops woken by one push, which all poll again at once) could leave up
 * to 128 of them unanswered for minutes, the broker otherwise idle. Draining needs no
 * wait: here a call right after a full one polls (timeout 0).
 *
 * The executable's own definition of epoll_wait takes precedence over libc's for every
 * caller, the library included. A call on the thread that just had a full call on the same
 * epoll set does not block; any other call is passed on as it is. */
#include <stddef.h>
#include <sys/epoll.h>

static __thread int full_epfd = -1;

int
epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout)
{
	int n = epoll_pwait(epfd, events, maxevents, epfd == full_epfd ? 0 : timeout, NULL);

	full_epfd = n == maxevents ? epfd : -1;
	return n;
}
