/* longpoll: parked pops indexed three ways under one mutex, so that no operation visits
 * waiters it does not concern:
 *  - a hash of buckets by key (the queue name; on the discovery route its namespace filter,
 *    else its task filter), so a wake visits only the waiters of that queue and its labels;
 *  - a binary min-heap by the time each is next due (recheck or deadline), so the lp thread
 *    sleeps exactly until the first one and parking or releasing costs O(log n);
 *  - an epoll set of their sockets (EPOLLRDHUP), so a client that went away is noticed at
 *    once by the watch thread, not at its deadline.
 * Key invariant: a waiter is in all three or in none, and only whoever unlinks it (under
 * lp_mu) hands its request on, exactly once. */
#include "longpoll.h"
#include "conf.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "names.h"
#include "pindex.h"
#include "qassert.h"
#include "siphash.h"
#include "workers.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#define LP_GENS 4096
#define LP_BUCKETS 16384

struct waiter {
	struct req *r;
	char *queue, *ns, *task;
	uint64_t gh;
	int64_t deadline_ms, recheck_ms;
	int64_t due;			/* min(recheck, deadline): the heap key */
	size_t heap_i;
	unsigned bucket;
	struct waiter *prev, *next;	/* bucket list, oldest first */
	int fd;				/* watched socket, -1 = none */
};

struct bucket {
	struct waiter *first, *last;
};

static pthread_mutex_t lp_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t lp_cv;
static struct bucket lp_buckets[LP_BUCKETS];
static struct waiter **lp_heap;
static size_t lp_heap_len, lp_heap_cap;
static struct waiter **lp_by_fd;	/* the waiter watching each socket */
static size_t lp_by_fd_len;
static int lp_epfd = -1;
static int lp_stopping, lp_exit;
static pthread_t lp_thread, lp_watch_thread;
static _Atomic uint64_t lp_gens[LP_GENS];
static const uint8_t lp_key[16] = "queen-longpoll!";

/* Keys: queue waiters by queue name; discovery waiters by "\001" namespace, else "\002" task,
 * so that a queue name never collides with a label key. */
static uint64_t
key_hash(char kind, const char *s)
{
	char buf[NAMES_BUF];
	size_t n = strlen(s);

	if (kind == 0)
		return siphash24(lp_key, s, n);
	if (n > sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[0] = kind;
	memcpy(buf + 1, s, n);
	return siphash24(lp_key, buf, n + 1);
}

static unsigned
waiter_key(const char *queue, const char *ns, const char *task, uint64_t *h)
{
	*h = queue ? key_hash(0, queue) : ns ? key_hash(1, ns) : key_hash(2, task ? task : "");
	return (unsigned)(*h % LP_BUCKETS);
}

uint64_t
lp_gen(const char *queue, const char *ns, const char *task)
{
	uint64_t h;

	waiter_key(queue, ns, task, &h);
	return atomic_load(&lp_gens[h % LP_GENS]);
}

static void
bump_gen(char kind, const char *s)
{
	atomic_fetch_add(&lp_gens[key_hash(kind, s) % LP_GENS], 1);
}

static char *
dup_or_null(const char *s)
{
	char *d = s ? strdup(s) : NULL;

	QASSERT(!s || d);
	return d;
}

/* --- the heap, by due time; called with lp_mu held --- */

static void
heap_set(size_t i, struct waiter *w)
{
	lp_heap[i] = w;
	w->heap_i = i;
}

static void
heap_up(size_t i)
{
	struct waiter *w = lp_heap[i];

	while (i > 0 && lp_heap[(i - 1) / 2]->due > w->due) {
		heap_set(i, lp_heap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	heap_set(i, w);
}

static void
heap_down(size_t i)
{
	struct waiter *w = lp_heap[i];

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= lp_heap_len)
			break;
		if (c + 1 < lp_heap_len && lp_heap[c + 1]->due < lp_heap[c]->due)
			c++;
		if (lp_heap[c]->due >= w->due)
			break;
		heap_set(i, lp_heap[c]);
		i = c;
	}
	heap_set(i, w);
}

static void
heap_push(struct waiter *w)
{
	if (lp_heap_len == lp_heap_cap) {
		lp_heap_cap = lp_heap_cap ? lp_heap_cap * 2 : 1024;
		lp_heap = realloc(lp_heap, lp_heap_cap * sizeof(*lp_heap));
		QASSERT(lp_heap != NULL);
	}
	heap_set(lp_heap_len++, w);
	heap_up(w->heap_i);
}

static void
heap_remove(struct waiter *w)
{
	size_t i = w->heap_i;
	struct waiter *last = lp_heap[--lp_heap_len];

	if (last == w)
		return;
	heap_set(i, last);
	heap_up(i);
	heap_down(last->heap_i);
}

/* --- linking; called with lp_mu held --- */

static void
link_waiter(struct waiter *w)
{
	struct bucket *b = &lp_buckets[w->bucket];

	w->next = NULL;
	w->prev = b->last;
	if (b->last)
		b->last->next = w;
	else
		b->first = w;
	b->last = w;
	heap_push(w);
	if (w->fd >= 0 && (size_t)w->fd < lp_by_fd_len && !lp_by_fd[w->fd]) {
		struct epoll_event ev = { .events = EPOLLRDHUP, .data.fd = w->fd };

		if (epoll_ctl(lp_epfd, EPOLL_CTL_ADD, w->fd, &ev) == 0)
			lp_by_fd[w->fd] = w;
		else
			w->fd = -1;
	} else {
		w->fd = -1;
	}
	metrics_parked(1);
}

static void
unlink_waiter(struct waiter *w)
{
	struct bucket *b = &lp_buckets[w->bucket];

	if (w->prev)
		w->prev->next = w->next;
	else
		b->first = w->next;
	if (w->next)
		w->next->prev = w->prev;
	else
		b->last = w->prev;
	w->next = w->prev = NULL;
	heap_remove(w);
	if (w->fd >= 0) {
		/* Before the connection is resumed: once MHD may close the socket, its number
		 * may come back for another connection. */
		epoll_ctl(lp_epfd, EPOLL_CTL_DEL, w->fd, NULL);
		lp_by_fd[w->fd] = NULL;
	}
	metrics_parked(-1);
}

static void
waiter_free(struct waiter *w)
{
	free(w->queue);
	free(w->ns);
	free(w->task);
	free(w);
}

enum lp_park_result
lp_park(struct req *r, const struct lp_filter *f, uint64_t gen)
{
	struct waiter *w;
	uint64_t h;
	int64_t now = now_ms();

	w = calloc(1, sizeof(*w));
	QASSERT(w != NULL);
	w->r = r;
	w->queue = dup_or_null(f->queue);
	w->ns = f->queue ? NULL : dup_or_null(f->ns);
	w->task = f->queue ? NULL : dup_or_null(f->task);
	w->gh = f->group_hash;
	w->deadline_ms = f->deadline_ms;
	w->recheck_ms = f->recheck_ms;
	w->bucket = waiter_key(f->queue, f->ns, f->task, &h);
	w->fd = req_socket(r);
	pthread_mutex_lock(&lp_mu);
	if (lp_stopping || (!f->admitted && (int64_t)lp_heap_len >= qconf.max_longpolls)) {
		int stopping = lp_stopping;

		pthread_mutex_unlock(&lp_mu);
		waiter_free(w);
		if (!stopping)
			metrics_lp_refused();
		return stopping ? LP_REFUSED : LP_FULL;
	}
	/* A push came while the pop's query ran: it may have missed it, so it runs once more,
	 * from the workers' queue like any woken pop, instead of looping on its worker. */
	if (atomic_load(&lp_gens[h % LP_GENS]) != gen)
		w->recheck_ms = now;
	w->due = w->recheck_ms && w->recheck_ms < w->deadline_ms ? w->recheck_ms : w->deadline_ms;
	r->waiter = w;
	link_waiter(w);
	if (lp_heap[0] == w)
		pthread_cond_signal(&lp_cv);
	pthread_mutex_unlock(&lp_mu);
	return LP_PARKED;
}

enum release_why { WOKEN, EXPIRED, GONE };

/* Hands an unlinked waiter's request on: to a worker to try again, or answered 204 (its
 * deadline, shutdown, or a client that is gone: MHD then fails the write and closes).
 * Called without lp_mu. */
static void
release(struct waiter *w, enum release_why why)
{
	struct req *r = w->r;

	r->waiter = NULL;
	waiter_free(w);
	if (why == WOKEN) {
		metrics_wakeup();
		if (wk_submit(r) == QE_OK)
			return;
	}
	if (why == GONE)
		metrics_abandoned();
	req_reply(r, 204, NULL, 0);
	http_finish(r, QE_OK);
}

static void
release_list(struct waiter *list, enum release_why why)
{
	while (list) {
		struct waiter *next = list->next;

		release(list, why);
		list = next;
	}
}

static int
matches(const struct waiter *w, const char *queue, const char *ns, const char *task)
{
	if (w->queue)
		return strcmp(w->queue, queue) == 0;
	if (w->ns && (!ns || strcmp(w->ns, ns) != 0))
		return 0;
	if (w->task && (!task || strcmp(w->task, task) != 0))
		return 0;
	return 1;
}

/* Per wake: one waiter per group and partition touched; the others would only race them. */
struct wake_quota {
	uint64_t gh[16];
	int n[16], ngroups, nparts;
};

static int
quota_take(struct wake_quota *q, uint64_t gh)
{
	int g;

	for (g = 0; g < q->ngroups && q->gh[g] != gh; g++)
		;
	if (g == q->ngroups) {
		if (q->ngroups == (int)ARRAY_LEN(q->gh))
			return 1;	/* too many groups to count: wake them all */
		q->gh[g] = gh;
		q->n[g] = 0;
		q->ngroups++;
	}
	if (q->n[g] >= q->nparts)
		return 0;
	q->n[g]++;
	return 1;
}

/* Moves the matching waiters of one bucket onto *woken. Called with lp_mu held. */
static void
wake_bucket(unsigned b, const char *queue, const char *ns, const char *task,
	    struct wake_quota *q, struct waiter **woken)
{
	struct waiter *w = lp_buckets[b].first;

	while (w) {
		struct waiter *next = w->next;

		if (matches(w, queue, ns, task) && quota_take(q, w->gh)) {
			unlink_waiter(w);
			w->next = *woken;
			*woken = w;
		}
		w = next;
	}
}

void
lp_wake(const char *queue, const char *ns, const char *task, int nparts)
{
	struct waiter *woken = NULL;
	struct wake_quota q = { .nparts = nparts < 1 ? 1 : nparts };
	uint64_t h;
	unsigned bq, bn = LP_BUCKETS, bt = LP_BUCKETS;

	bq = waiter_key(queue, NULL, NULL, &h);
	bump_gen(0, queue);
	if (ns) {
		bn = waiter_key(NULL, ns, NULL, &h);
		bump_gen(1, ns);
	}
	if (task) {
		bt = waiter_key(NULL, NULL, task, &h);
		bump_gen(2, task);
	}
	pthread_mutex_lock(&lp_mu);
	wake_bucket(bq, queue, ns, task, &q, &woken);
	if (bn != LP_BUCKETS && bn != bq)
		wake_bucket(bn, queue, ns, task, &q, &woken);
	if (bt != LP_BUCKETS && bt != bq && bt != bn)
		wake_bucket(bt, queue, ns, task, &q, &woken);
	pthread_mutex_unlock(&lp_mu);
	release_list(woken, WOKEN);
}

void
lp_wake_queue(const char *queue, int nparts)
{
	char ns[NAMES_BUF], task[NAMES_BUF];

	if (!pidx_queue_labels(queue, ns, sizeof(ns), task, sizeof(task)))
		names_labels(queue, ns, sizeof(ns), task, sizeof(task));
	lp_wake(queue, ns, task, nparts);
}

struct lp_wake_ent {
	const char *queue;
	int n;
	char *own;		/* the copy queue points to, freed by fire; NULL: the caller's */
};

static void
wakes_append(struct lp_wakes *ws, const char *queue, int nparts, char *own)
{
	if (ws->len == ws->cap) {
		ws->cap = ws->cap ? ws->cap * 2 : 16;
		ws->v = realloc(ws->v, ws->cap * sizeof(*ws->v));
		QASSERT(ws->v != NULL);
	}
	ws->v[ws->len].queue = queue;
	ws->v[ws->len].own = own;
	ws->v[ws->len++].n = nparts;
}

void
lp_wakes_add(struct lp_wakes *ws, const char *queue, int nparts)
{
	wakes_append(ws, queue, nparts, NULL);
}

void
lp_wakes_add_copy(struct lp_wakes *ws, const char *queue, int nparts)
{
	char *copy;

	/* An ack's partitions come queue by queue: the same queue again adds to its entry. */
	if (ws->len > 0 && strcmp(ws->v[ws->len - 1].queue, queue) == 0) {
		ws->v[ws->len - 1].n += nparts;
		return;
	}
	copy = strdup(queue);
	QASSERT(copy != NULL);
	wakes_append(ws, copy, nparts, copy);
}

static int
wake_ent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct lp_wake_ent *)a)->queue,
		      ((const struct lp_wake_ent *)b)->queue);
}

void
lp_wakes_fire(struct lp_wakes *ws)
{
	/* Sorted, each queue's entries are adjacent: one wake per queue in O(n log n), where
	 * a search of the queues seen so far would be quadratic in a push to many queues. */
	if (ws->len > 1)
		qsort(ws->v, ws->len, sizeof(*ws->v), wake_ent_cmp);
	for (size_t i = 0; i < ws->len;) {
		size_t k = i;
		int n = 0;

		for (; k < ws->len && strcmp(ws->v[k].queue, ws->v[i].queue) == 0; k++)
			n += ws->v[k].n;
		lp_wake_queue(ws->v[i].queue, n);
		i = k;
	}
	for (size_t i = 0; i < ws->len; i++)
		free(ws->v[i].own);
	free(ws->v);
	ws->v = NULL;
	ws->len = ws->cap = 0;
}

/* Unlinks every parked pop (and, when stopping, refuses new ones) and hands each on. */
static void
release_all(enum release_why why, int stopping)
{
	struct waiter *all = NULL;

	pthread_mutex_lock(&lp_mu);
	if (stopping)
		lp_stopping = 1;
	while (lp_heap_len) {
		struct waiter *w = lp_heap[lp_heap_len - 1];

		unlink_waiter(w);
		w->next = all;
		all = w;
	}
	pthread_mutex_unlock(&lp_mu);
	release_list(all, why);
}

void
lp_wake_all(void)
{
	for (int i = 0; i < LP_GENS; i++)
		atomic_fetch_add(&lp_gens[i], 1);
	release_all(WOKEN, 0);
}

long
lp_parked(void)
{
	long n;

	pthread_mutex_lock(&lp_mu);
	n = (long)lp_heap_len;
	pthread_mutex_unlock(&lp_mu);
	return n;
}

/* The deadline thread: answers expired pops with 204, sends rechecks back to the workers. */
static void *
lp_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&lp_mu);
	while (!lp_exit) {
		int64_t now = now_ms(), next = now + 1000;
		struct waiter *woken = NULL, *expired = NULL;
		struct timespec ts;

		while (lp_heap_len && lp_heap[0]->due <= now) {
			struct waiter *w = lp_heap[0];

			unlink_waiter(w);
			if (w->deadline_ms <= now) {
				w->next = expired;
				expired = w;
			} else {
				w->next = woken;
				woken = w;
			}
		}
		if (woken || expired) {
			pthread_mutex_unlock(&lp_mu);
			release_list(expired, EXPIRED);
			release_list(woken, WOKEN);
			pthread_mutex_lock(&lp_mu);
			continue;
		}
		if (lp_heap_len && lp_heap[0]->due < next)
			next = lp_heap[0]->due;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		int64_t wait = next - now;

		ts.tv_sec += wait / 1000;
		ts.tv_nsec += (wait % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&lp_cv, &lp_mu, &ts);
	}
	pthread_mutex_unlock(&lp_mu);
	return NULL;
}

/* 1 when the peer of fd has closed its side or the socket failed (checked now, so a stale
 * event of a previous owner of the number is not taken for this one). */
static int
peer_gone(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLRDHUP };

	return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* The watch thread: releases parked pops whose client went away. */
static void *
lp_watch(void *arg)
{
	struct epoll_event evs[1024];

	(void)arg;
	for (;;) {
		struct waiter *gone = NULL;
		int n = epoll_wait(lp_epfd, evs, (int)ARRAY_LEN(evs), 200);

		pthread_mutex_lock(&lp_mu);
		if (lp_exit) {
			pthread_mutex_unlock(&lp_mu);
			break;
		}
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			struct waiter *w = (size_t)fd < lp_by_fd_len ? lp_by_fd[fd] : NULL;

			if (!w || !peer_gone(fd))
				continue;
			unlink_waiter(w);
			w->next = gone;
			gone = w;
		}
		pthread_mutex_unlock(&lp_mu);
		release_list(gone, GONE);
	}
	return NULL;
}

int
lp_start(void)
{
	pthread_condattr_t attr;
	struct rlimit rl;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&lp_cv, &attr);
	pthread_condattr_destroy(&attr);
	lp_by_fd_len = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
				       rl.rlim_cur < (1u << 22)
			       ? (size_t)rl.rlim_cur
			       : (1u << 22);
	lp_by_fd = calloc(lp_by_fd_len, sizeof(*lp_by_fd));
	lp_epfd = epoll_create1(EPOLL_CLOEXEC);
	QASSERT(lp_by_fd != NULL);
	if (lp_epfd < 0) {
		log_error("cannot create the long-poll epoll set");
		return -1;
	}
	if (pthread_create(&lp_thread, NULL, lp_main, NULL) != 0 ||
	    pthread_create(&lp_watch_thread, NULL, lp_watch, NULL) != 0) {
		log_error("cannot start the long-poll threads");
		return -1;
	}
	return 0;
}

void
lp_shutdown(void)
{
	release_all(EXPIRED, 1);
}

void
lp_stop(void)
{
	pthread_mutex_lock(&lp_mu);
	lp_exit = 1;
	pthread_cond_signal(&lp_cv);
	pthread_mutex_unlock(&lp_mu);
	pthread_join(lp_thread, NULL);
	pthread_join(lp_watch_thread, NULL);
	pthread_cond_destroy(&lp_cv);
	close(lp_epfd);
	lp_epfd = -1;
	free(lp_heap);
	lp_heap = NULL;
	lp_heap_len = lp_heap_cap = 0;
	free(lp_by_fd);
	lp_by_fd = NULL;
	lp_by_fd_len = 0;
}
