/* The broker's epoll_ctl (src/epollfix.c): a removal of a descriptor that is not in the set,
 * or no longer open, succeeds; every other call answers as the kernel does. */
#include "tap.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

int
main(void)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int ep = epoll_create1(0), sv[2], rc;

	if (ep < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return 1;
	ok(epoll_ctl(ep, EPOLL_CTL_ADD, sv[0], &ev) == 0, "add");
	ok(epoll_ctl(ep, EPOLL_CTL_DEL, sv[0], NULL) == 0, "remove");
	ok(epoll_ctl(ep, EPOLL_CTL_DEL, sv[0], NULL) == 0,
	   "remove again: not in the set, a success (two threads removing the same socket)");
	ok(epoll_ctl(ep, EPOLL_CTL_ADD, sv[1], &ev) == 0, "add the other end");
	close(sv[1]);
	ok(epoll_ctl(ep, EPOLL_CTL_DEL, sv[1], NULL) == 0,
	   "remove a closed descriptor: a success (closing took it out of the set)");
	errno = 0;
	rc = epoll_ctl(ep, EPOLL_CTL_MOD, sv[0], &ev);
	ok(rc == -1 && errno == ENOENT, "modify what is not in the set: ENOENT, as the kernel says");
	errno = 0;
	rc = epoll_ctl(ep, EPOLL_CTL_ADD, sv[1], &ev);
	ok(rc == -1 && errno == EBADF, "add a closed descriptor: EBADF, as the kernel says");
	close(sv[0]);
	close(ep);
	return tap_done();
}
