/* epollfix: a stall and a race of libmicrohttpd 0.9.75 (Debian 12's) epoll code, worked
 * around from outside.
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
#include <errno.h>
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

static __thread int full_epfd = -1;

int
epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout)
{
	int n = epoll_pwait(epfd, events, maxevents, epfd == full_epfd ? 0 : timeout, NULL);

	full_epfd = n == maxevents ? epfd : -1;
	return n;
}

/* A second race of the same library, at stop: MHD_quiesce_daemon marks each HTTP thread
 * quiesced and then takes the listening socket out of that thread's epoll set, while the
 * thread, if awake, takes it out too on seeing the mark. Both removals abort the process on
 * an error ("Failed to remove listen FD from epoll set"; seen in the ASan suite from the
 * quiescing call, daemon.c:5531, and from the thread, daemon.c:4940), which a SIGTERM under
 * load could meet. The second to come gets ENOENT; a thread that comes after the broker
 * closed the socket (http_quiesce closes it at once, so that new clients are refused rather
 * than left waiting) gets EBADF, which is what the thread's abort leaves possible, since
 * ENOENT already answered success there. A descriptor not in the set, or closed (closing
 * takes it out of every set), is where a removal wants it, so EPOLL_CTL_DEL answers success
 * for both; everything else goes to the kernel as it is (a system call: libc has no other
 * name for epoll_ctl). */
int
epoll_ctl(int epfd, int op, int fd, struct epoll_event *event)
{
	long rc = syscall(SYS_epoll_ctl, epfd, op, fd, event);

	if (rc < 0 && op == EPOLL_CTL_DEL && (errno == ENOENT || errno == EBADF))
		return 0;
	return (int)rc;
}
