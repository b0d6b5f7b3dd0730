/* workers: a FIFO of requests under one mutex, and the threads that drain it. The FIFO is
 * short-lived (jobs are taken within microseconds under load), so a mutex costs less here
 * than it would save; the hot shared state (the partition index) is RCU. Key invariant:
 * every job taken is finished (http_finish) or parked, never dropped.
 *
 * Idle workers wait on a stack, each on a condition variable of its own, and a job wakes the
 * one that went idle last: a load that keeps four workers busy runs on the same four
 * threads and the same four database sessions, whose caches stay warm, not on all sixteen
 * in turn (one shared condition variable wakes its oldest waiter). */
#include "workers.h"
#include "bulk.h"
#include "conf.h"
#include "dbpool.h"
#include "http.h"
#include "log.h"
#include "pindex.h"
#include "qassert.h"
#include "router.h"
#include "spool.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#define WK_MAX_BATCH 512

static pthread_mutex_t wk_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wk_call_cv = PTHREAD_COND_INITIALIZER;	/* a call finished */
static struct wk_call *wk_calls, *wk_calls_tail;
static struct req *wk_head, *wk_tail;
static long wk_len;
static int64_t wk_lanes_busy;	/* light push batches running */
static uint64_t wk_light_start_us;	/* when the latest of them started (now_us) */
static int wk_timer_armed;	/* a waiting worker wakes when a held-back group may open one */
static int64_t wk_heavy_busy;	/* heavy ones running (see heavy) */
static int64_t wk_consumers_busy;	/* pops and acks running (see consumer_held) */
static int wk_stopping;
static pthread_t *wk_threads;
static struct wk *wk_ctx;
static int wk_n;
/* The idle workers, the one that went idle last on top, and what each waits on. Under
 * wk_mu. */
static int *wk_idle, wk_nidle;
static pthread_cond_t *wk_idle_cv;

/* Wake-ups taken off the stack and not yet signalled: wk_stop waits for them before it
 * destroys the condition variables (a worker woken by its clock may have exited meanwhile). */
static int wk_waking;

/* Takes the worker that went idle last off the stack, for unlock_wake to wake; -1 when none
 * is idle. Called with wk_mu held. */
static int
take_idle(void)
{
	if (wk_nidle == 0)
		return -1;
	__atomic_add_fetch(&wk_waking, 1, __ATOMIC_RELAXED);
	return wk_idle[--wk_nidle];
}

/* Releases wk_mu, then wakes the worker take_idle took (none when id < 0). Signalled with the
 * mutex held, the worker woke only to block on it at once, and was woken again by the
 * unlock: 4.7-5.0 futex calls per consumer request then, 3.9-4.1 now. It cannot miss the
 * signal: it went on the stack and began to wait in one hold of the mutex, and a worker
 * that woke before it (its clock, a spurious wake-up) finds itself off the stack and looks
 * for work. */
static void
unlock_wake(int id)
{
	pthread_cond_t *cv = id >= 0 ? &wk_idle_cv[id] : NULL;

	pthread_mutex_unlock(&wk_mu);
	if (cv) {
		pthread_cond_signal(cv);
		__atomic_sub_fetch(&wk_waking, 1, __ATOMIC_RELEASE);
	}
}

/* Waits, idle, for unlock_wake (or the clock, at `at` when not NULL). Called with wk_mu held. */
static void
idle_wait(const struct wk *w, const struct timespec *at)
{
	int i;

	wk_idle[wk_nidle++] = w->id;
	if (at)
		pthread_cond_timedwait(&wk_idle_cv[w->id], &wk_mu, at);
	else
		pthread_cond_wait(&wk_idle_cv[w->id], &wk_mu);
	/* Still on the stack after the clock or a spurious wake-up (take_idle takes it off):
	 * off it all the same. */
	for (i = wk_nidle - 1; i >= 0 && wk_idle[i] != w->id; i--)
		;
	if (i < 0)
		return;
	for (; i < wk_nidle - 1; i++)
		wk_idle[i] = wk_idle[i + 1];
	wk_nidle--;
}

/* A heavy batch: one request too large to share a group commit (more items than a group
 * holds, or a body past WK_HEAVY_BYTES). It runs alone, on lanes of its own beside the
 * QUEEN_PUSH_LANES of the light pushes (QUEEN_PUSH_LANES - 1 of them, at least one), so a
 * client sending 64 MiB bodies delays nobody else's push beyond the commit of the batch it
 * shares. */
#define WK_HEAVY_BYTES (1024 * 1024)

int
wk_heavy(const struct req *r)
{
	return r->weight > (size_t)qconf.group_commit_items || r->body.len > WK_HEAVY_BYTES;
}

/* 1 when a coalescing job may start now as far as the lanes go. Called with wk_mu held. */
static int
lane_free(const struct req *r)
{
	if (wk_heavy(r))
		return wk_heavy_busy < (qconf.push_lanes > 1 ? qconf.push_lanes - 1 : 1);
	return wk_lanes_busy < qconf.push_lanes;
}

/* 1 when r is a consumer's request (a pop, an ack) run as what it is (not deferred). */
static int
consumer(const struct req *r)
{
	return r->route->consumer && !r->deferred;
}

/* While the spool drains, at most this many consumers' requests run at once. */
#define WK_DRAIN_CONSUMERS 1

/* 1 when the consumer's request r must wait for another to finish: the spool drains
 * (spool_replaying). After an outage the replay of what was spooled and the consumers popping
 * what it stored took the cores about equally (the bench machine has two), and the spool
 * emptied 10.7-17.4 s after the database's return at half load; with one consumer's request
 * at a time the replay ran 1.4x as fast (7.6-9.5 s), and consumers mostly wait for data the
 * replay has not stored yet anyway. Called with wk_mu held. */
static int
consumer_held(const struct req *r)
{
	return consumer(r) && wk_consumers_busy >= WK_DRAIN_CONSUMERS && spool_replaying();
}

/* A job that held one of the counted places (a light lane, a heavy one, a consumer's turn) is
 * done: one worker takes what waited for the place (this one looks again too once its
 * answers are out). Waking every idle worker at each commit only cost switches. */
static void
place_done(int64_t *busy)
{
	pthread_mutex_lock(&wk_mu);
	(*busy)--;
	unlock_wake(wk_head ? take_idle() : -1);
}

/* 1 when the job is run by the route's run_many (in a lane); a request whose parsing was
 * left to the workers (deferred) is first a plain job. */
static int
coalesces(const struct req *r)
{
	return r->route->run_many && !r->deferred;
}

/* A small group (below WK_SPLIT_MIN_ITEMS) opens a lane beside a running one once that one
 * has run this long: a commit slowed by other work (a 64 MiB push beside it) does not hold
 * every small push behind it. */
#define LANE_OPEN_US 2000

/* 1 when the light jobs of first's route from first on hold enough items to open a lane
 * beside a running one (WK_SPLIT_MIN_ITEMS). Called with wk_mu held. */
static int
group_opens_lane(const struct req *first)
{
	size_t items = 0;

	for (const struct req *r = first; r && items < WK_SPLIT_MIN_ITEMS; r = r->next)
		if (coalesces(r) && r->route->run_many == first->route->run_many && !wk_heavy(r))
			items += r->weight;
	return items >= WK_SPLIT_MIN_ITEMS;
}

/* 1 when first, the first waiting light job of its coalescing route, may open a lane now
 * as far as its group goes: no light lane runs, the light jobs of its route from it on hold
 * WK_SPLIT_MIN_ITEMS, or the running commit has taken LANE_OPEN_US. Called with wk_mu
 * held. */
static int
light_opens_now(const struct req *first)
{
	return wk_lanes_busy == 0 || now_us() >= wk_light_start_us + LANE_OPEN_US ||
	       group_opens_lane(first);
}

/* The first waiting light job of r's coalescing route (r itself when none is before it).
 * Called with wk_mu held. */
static const struct req *
first_light(const struct req *r)
{
	const struct req *f = wk_head;

	while (f != r &&
	       !(coalesces(f) && !wk_heavy(f) && f->route->run_many == r->route->run_many))
		f = f->next;
	return f;
}

enum qe
wk_submit(struct req *r)
{
	int idle = -1;

	pthread_mutex_lock(&wk_mu);
	if (wk_stopping) {
		pthread_mutex_unlock(&wk_mu);
		return QE_SHUTDOWN;
	}
	if (wk_len >= qconf.max_queued_jobs) {
		pthread_mutex_unlock(&wk_mu);
		return QE_BUSY;
	}
	r->next = NULL;
	if (wk_tail)
		wk_tail->next = r;
	else
		wk_head = r;
	wk_tail = r;
	wk_len++;
	/* A push that must wait for a lane wakes nobody: the lane's worker takes it with the
	 * others when it finishes. Waking a worker that cannot run it only costs a switch. Nor
	 * does one that is to gather behind the running commit, once a worker watches the clock
	 * for its group (LANE_OPEN_US). */
	if (!coalesces(r) ||
	    (lane_free(r) && (wk_heavy(r) || light_opens_now(first_light(r)) || !wk_timer_armed)))
		idle = take_idle();
	unlock_wake(idle);
	return QE_OK;
}

int
wk_contended(void)
{
	int busy;

	pthread_mutex_lock(&wk_mu);
	busy = wk_n - wk_nidle > 1 || wk_len > 0;
	pthread_mutex_unlock(&wk_mu);
	return busy;
}

long
wk_queued(void)
{
	long n;

	pthread_mutex_lock(&wk_mu);
	n = wk_len;
	pthread_mutex_unlock(&wk_mu);
	return n;
}

enum { CALL_QUEUED, CALL_TAKEN, CALL_DONE };

void
wk_call_submit(struct wk_call *c)
{
	c->state = CALL_QUEUED;
	c->next = NULL;
	pthread_mutex_lock(&wk_mu);
	if (wk_calls_tail)
		wk_calls_tail->next = c;
	else
		wk_calls = c;
	wk_calls_tail = c;
	unlock_wake(take_idle());
}

/* Takes the first queued call. Called with wk_mu held. */
static struct wk_call *
take_call(void)
{
	struct wk_call *c = wk_calls;

	if (!c)
		return NULL;
	wk_calls = c->next;
	if (!wk_calls)
		wk_calls_tail = NULL;
	c->state = CALL_TAKEN;
	return c;
}

static void
run_call(struct wk *w, struct wk_call *c)
{
	db_ensure(w->db);
	c->fn(w, c->arg);
	pthread_mutex_lock(&wk_mu);
	c->state = CALL_DONE;
	pthread_cond_broadcast(&wk_call_cv);
	pthread_mutex_unlock(&wk_mu);
}

void
wk_call_wait(struct wk *w, struct wk_call *c)
{
	pthread_mutex_lock(&wk_mu);
	if (c->state == CALL_QUEUED) {
		struct wk_call **pp = &wk_calls, *prev = NULL;

		while (*pp != c) {
			prev = *pp;
			pp = &(*pp)->next;
		}
		*pp = c->next;
		if (wk_calls_tail == c)
			wk_calls_tail = prev;
		c->state = CALL_TAKEN;
		pthread_mutex_unlock(&wk_mu);
		run_call(w, c);
		return;
	}
	while (c->state != CALL_DONE)
		pthread_cond_wait(&wk_call_cv, &wk_mu);
	pthread_mutex_unlock(&wk_mu);
}

/* Unlinks cur (whose predecessor is prev) from the queue. Called with wk_mu held. */
static void
unlink_job(struct req *prev, struct req *cur)
{
	if (prev)
		prev->next = cur->next;
	else
		wk_head = cur->next;
	if (wk_tail == cur)
		wk_tail = prev;
	wk_len--;
}

/* Takes the first job a worker may run now. A consumer's request may wait while the spool
 * drains (consumer_held). A job of a coalescing route (push) may only run when one of the
 * QUEEN_PUSH_LANES lanes is free; it then takes every other waiting light job of that route,
 * up to the item budget. Pushes to the same partitions serialise on their row locks anyway,
 * so a few large transactions beat many small ones racing for the same locks: while a lane
 * commits, the next group gathers. Returns 0 when nothing may run yet, and then in *wake_us
 * (now_us) when a group held back may open a lane, or 0; *is_heavy tells whether the batch
 * holds a heavy lane. Called with wk_mu held. */
static size_t
take_jobs(struct req **out, size_t max, int *is_heavy, uint64_t *wake_us)
{
	struct req *first, *prev = NULL, *cur;
	size_t n = 0, items;
	void (*held_back)(struct req **, size_t, struct wk *, enum qe *) = NULL;

	*is_heavy = 0;
	*wake_us = 0;
	for (first = wk_head; first; prev = first, first = first->next) {
		if (!coalesces(first)) {
			if (consumer_held(first))
				continue;
			break;
		}
		if (!lane_free(first) ||
		    (!wk_heavy(first) && first->route->run_many == held_back))
			continue;
		if (wk_heavy(first) || light_opens_now(first))
			break;
		held_back = first->route->run_many;	/* and every later job of its route */
		*wake_us = wk_light_start_us + LANE_OPEN_US;
	}
	if (!first)
		return 0;
	cur = first->next;
	unlink_job(prev, first);
	out[n++] = first;
	if (!coalesces(first)) {
		if (consumer(first))
			wk_consumers_busy++;
		return n;
	}
	if (wk_heavy(first)) {
		*is_heavy = 1;
		wk_heavy_busy++;
		return n;
	}
	wk_lanes_busy++;
	wk_light_start_us = now_us();
	items = first->weight;
	while (cur && n < max && items < (size_t)qconf.group_commit_items) {
		struct req *next = cur->next;

		if (coalesces(cur) && cur->route->run_many == first->route->run_many &&
		    !wk_heavy(cur) && items + cur->weight <= (size_t)qconf.group_commit_items) {
			unlink_job(prev, cur);
			items += cur->weight;
			out[n++] = cur;
		} else {
			prev = cur;
		}
		cur = next;
	}
	return n;
}

/* The large work of a worker, run by a bulk thread while the worker waits (bulk.h). */
struct bulk_work {
	struct req **jobs;
	size_t n;
	enum qe *rcs;
};

static void
bulk_prepare(struct wk *w, void *arg)
{
	struct bulk_work *b = arg;

	(void)w;
	b->rcs[0] = http_prepare_deferred(b->jobs[0]);
}

static void
bulk_store(struct wk *w, void *arg)
{
	struct bulk_work *b = arg;

	b->jobs[0]->route->run_many(b->jobs, b->n, w, b->rcs);
}

static void
run_jobs(struct wk *w, struct req **jobs, size_t n, int is_heavy)
{
	enum qe rcs[WK_MAX_BATCH];
	struct bulk_work b = { jobs, n, rcs };

	if (jobs[0]->deferred) {
		/* Parse and prepare off the HTTP threads, at the bulk threads' priority; then
		 * queue it again, now as what it is (a push joins a lane). */
		bulk_run(w, jobs[0]->id, bulk_prepare, &b);
		if (rcs[0] == QE_OK)
			rcs[0] = wk_submit(jobs[0]);
		if (rcs[0] != QE_OK)
			http_finish(jobs[0], rcs[0]);
		return;
	}
	if (jobs[0]->route->run_many) {
		if (is_heavy)
			bulk_run(w, jobs[0]->id, bulk_store, &b);
		else
			jobs[0]->route->run_many(jobs, n, w, rcs);
		place_done(is_heavy ? &wk_heavy_busy : &wk_lanes_busy);
	} else {
		/* Read before the run: a parked pop may be answered and freed by another
		 * thread before run returns. */
		int counted = consumer(jobs[0]);

		rcs[0] = jobs[0]->route->run(jobs[0], w);
		if (counted)
			place_done(&wk_consumers_busy);
	}
	for (size_t i = 0; i < n; i++)
		if (rcs[i] != QE_PARKED)
			http_finish(jobs[i], rcs[i]);
}

/* Waits for a job, a call or a finished lane; past wake_us (now_us) too, when not 0. Called
 * with wk_mu held. */
static void
wait_jobs(const struct wk *w, uint64_t wake_us)
{
	struct timespec at;
	uint64_t now = now_us(), ns;

	/* One worker watches the clock; the others wait for a signal. */
	if (!wake_us || wk_timer_armed) {
		idle_wait(w, NULL);
		return;
	}
	wk_timer_armed = 1;
	/* The condition variable's clock is the wall clock: the same distance from now. */
	clock_gettime(CLOCK_REALTIME, &at);
	ns = (uint64_t)at.tv_nsec + (wake_us > now ? wake_us - now : 0) * 1000;
	at.tv_sec += (time_t)(ns / 1000000000);
	at.tv_nsec = (long)(ns % 1000000000);
	idle_wait(w, &at);
	wk_timer_armed = 0;
}

static void *
wk_main(void *arg)
{
	struct wk *w = arg;
	struct req *jobs[WK_MAX_BATCH];
	int is_heavy = 0;
	uint64_t wake_us = 0;

	pidx_thread_online();
	/* Connected before the first request needs it: a connection costs a handshake and the
	 * preparation of the catalogue, tens of milliseconds a client should not wait for. */
	db_ensure(w->db);
	for (;;) {
		struct wk_call *call;
		size_t n = 0;

		pthread_mutex_lock(&wk_mu);
		/* Calls first: a worker waits for them with its lane's requests in hand. */
		while (!(call = take_call()) &&
		       (n = wk_head ? take_jobs(jobs, ARRAY_LEN(jobs), &is_heavy, &wake_us)
				    : 0) == 0 &&
		       !(wk_stopping && !wk_head))
			wait_jobs(w, wk_head ? wake_us : 0);
		pthread_mutex_unlock(&wk_mu);
		if (call) {
			run_call(w, call);
			continue;
		}
		if (n == 0)
			break;
		log_request(jobs[0]->id);
		db_ensure(w->db);
		run_jobs(w, jobs, n, is_heavy);
		log_request(0);
	}
	pidx_thread_offline();
	return NULL;
}

int
wk_start(int nthreads)
{
	wk_n = nthreads;
	wk_threads = calloc((size_t)nthreads, sizeof(*wk_threads));
	wk_ctx = calloc((size_t)nthreads, sizeof(*wk_ctx));
	wk_idle = calloc((size_t)nthreads, sizeof(*wk_idle));
	wk_idle_cv = calloc((size_t)nthreads, sizeof(*wk_idle_cv));
	QASSERT(wk_threads && wk_ctx && wk_idle && wk_idle_cv);
	for (int i = 0; i < nthreads; i++)
		pthread_cond_init(&wk_idle_cv[i], NULL);
	for (int i = 0; i < nthreads; i++) {
		wk_ctx[i].id = i;
		wk_ctx[i].db = db_new(i);
		if (pthread_create(&wk_threads[i], NULL, wk_main, &wk_ctx[i]) != 0) {
			log_error("cannot start worker thread %d", i);
			return -1;
		}
	}
	return 0;
}

void
wk_stop(void)
{
	pthread_mutex_lock(&wk_mu);
	wk_stopping = 1;
	while (wk_nidle > 0)
		pthread_cond_signal(&wk_idle_cv[wk_idle[--wk_nidle]]);
	pthread_mutex_unlock(&wk_mu);
	for (int i = 0; i < wk_n; i++) {
		pthread_join(wk_threads[i], NULL);
		db_free(wk_ctx[i].db);
	}
	while (__atomic_load_n(&wk_waking, __ATOMIC_ACQUIRE) > 0)
		sched_yield();
	for (int i = 0; i < wk_n; i++)
		pthread_cond_destroy(&wk_idle_cv[i]);
	free(wk_threads);
	free(wk_ctx);
	free(wk_idle);
	free(wk_idle_cv);
	wk_threads = NULL;
	wk_ctx = NULL;
	wk_idle = NULL;
	wk_idle_cv = NULL;
	wk_n = 0;
}
