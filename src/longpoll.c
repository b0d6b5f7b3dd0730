/* longpoll: a list of parked pops under one mutex, scanned on wake, and a deadline thread.
 * Parked pops are few compared with pushes, and a wake scan is one pass over them. */
#include "longpoll.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "pindex.h"
#include "qassert.h"
#include "siphash.h"
#include "workers.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define LP_GENS 4096

struct waiter {
	struct req *r;
	char *queue, *ns, *task;
	uint64_t gh;
	int64_t deadline_ms, recheck_ms;
	struct waiter *next;
};

static pthread_mutex_t lp_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t lp_cv;
static struct waiter *lp_list;
static long lp_count;
static int lp_stopping, lp_exit;
static pthread_t lp_thread;
static _Atomic uint64_t lp_gens[LP_GENS];
static _Atomic uint64_t lp_gen_any;
static const uint8_t lp_key[16] = "queen-longpoll!";

static unsigned
gen_slot(const char *queue)
{
	return (unsigned)(siphash24(lp_key, queue, strlen(queue)) % LP_GENS);
}

uint64_t
lp_gen(const char *queue)
{
	return queue ? atomic_load(&lp_gens[gen_slot(queue)]) : atomic_load(&lp_gen_any);
}

static char *
dup_or_null(const char *s)
{
	char *d = s ? strdup(s) : NULL;

	QASSERT(!s || d);
	return d;
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

	pthread_mutex_lock(&lp_mu);
	if (lp_stopping) {
		pthread_mutex_unlock(&lp_mu);
		return LP_REFUSED;
	}
	if (lp_gen(f->queue) != gen) {
		pthread_mutex_unlock(&lp_mu);
		return LP_RETRY;
	}
	w = calloc(1, sizeof(*w));
	QASSERT(w != NULL);
	w->r = r;
	w->queue = dup_or_null(f->queue);
	w->ns = dup_or_null(f->ns);
	w->task = dup_or_null(f->task);
	w->gh = f->group_hash;
	w->deadline_ms = f->deadline_ms;
	w->recheck_ms = f->recheck_ms;
	w->next = lp_list;
	lp_list = w;
	lp_count++;
	r->waiter = w;
	metrics_parked(1);
	pthread_cond_signal(&lp_cv);
	pthread_mutex_unlock(&lp_mu);
	return LP_PARKED;
}

/* Hands a waiter's request back: to a worker to try again, or answered 204. Called without
 * lp_mu; the waiter is already unlinked. */
static void
release(struct waiter *w, int expired)
{
	struct req *r = w->r;

	r->waiter = NULL;
	waiter_free(w);
	metrics_parked(-1);
	if (!expired) {
		metrics_wakeup();
		if (wk_submit(r) == QE_OK)
			return;
	}
	req_reply(r, 204, NULL, 0);
	http_finish(r, QE_OK);
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

void
lp_wake(const char *queue, const char *ns, const char *task, int nparts)
{
	struct waiter *woken = NULL, **pp;
	uint64_t seen[16];
	int nseen[16], ngroups = 0;

	atomic_fetch_add(&lp_gens[gen_slot(queue)], 1);
	atomic_fetch_add(&lp_gen_any, 1);
	if (nparts < 1)
		nparts = 1;
	pthread_mutex_lock(&lp_mu);
	for (pp = &lp_list; *pp;) {
		struct waiter *w = *pp;
		int g;

		if (!matches(w, queue, ns, task)) {
			pp = &w->next;
			continue;
		}
		/* One waiter per group and partition touched: the others would only race them. */
		for (g = 0; g < ngroups && seen[g] != w->gh; g++)
			;
		if (g == ngroups && ngroups < (int)ARRAY_LEN(seen)) {
			seen[ngroups] = w->gh;
			nseen[ngroups++] = 0;
		}
		if (g < ngroups && nseen[g] >= nparts) {
			pp = &w->next;
			continue;
		}
		if (g < ngroups)
			nseen[g]++;
		*pp = w->next;
		lp_count--;
		w->next = woken;
		woken = w;
	}
	pthread_mutex_unlock(&lp_mu);
	while (woken) {
		struct waiter *next = woken->next;

		release(woken, 0);
		woken = next;
	}
}

void
lp_wake_queue(const char *queue, int nparts)
{
	char ns[256], task[256];
	int have = pidx_queue_labels(queue, ns, sizeof(ns), task, sizeof(task));

	lp_wake(queue, have ? ns : NULL, have ? task : NULL, nparts);
}

/* Unlinks every parked pop (and, when stopping, refuses new ones) and hands each back:
 * to the workers to try again, or answered 204 when expired. */
static void
release_all(int expired, int stopping)
{
	struct waiter *all;

	pthread_mutex_lock(&lp_mu);
	if (stopping)
		lp_stopping = 1;
	all = lp_list;
	lp_list = NULL;
	lp_count = 0;
	pthread_mutex_unlock(&lp_mu);
	while (all) {
		struct waiter *next = all->next;

		release(all, expired);
		all = next;
	}
}

void
lp_wake_all(void)
{
	atomic_fetch_add(&lp_gen_any, 1);
	for (int i = 0; i < LP_GENS; i++)
		atomic_fetch_add(&lp_gens[i], 1);
	release_all(0, 0);
}

long
lp_parked(void)
{
	long n;

	pthread_mutex_lock(&lp_mu);
	n = lp_count;
	pthread_mutex_unlock(&lp_mu);
	return n;
}

/* The deadline thread: answers expired pops with 204, sends rechecks back to the workers. */
static void *
lp_main(void *arg)
{
	pthread_mutex_lock(&lp_mu);
	while (!lp_exit) {
		int64_t now = now_ms(), next = now + 1000;
		struct waiter *due = NULL, **pp;

		for (pp = &lp_list; *pp;) {
			struct waiter *w = *pp;
			int64_t when = w->recheck_ms && w->recheck_ms < w->deadline_ms ?
					       w->recheck_ms : w->deadline_ms;

			if (when <= now) {
				*pp = w->next;
				lp_count--;
				w->next = due;
				due = w;
				continue;
			}
			if (when < next)
				next = when;
			pp = &w->next;
		}
		if (due) {
			pthread_mutex_unlock(&lp_mu);
			while (due) {
				struct waiter *n = due->next;

				release(due, due->deadline_ms <= now);
				due = n;
			}
			pthread_mutex_lock(&lp_mu);
			continue;
		}
		struct timespec ts;

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

int
lp_start(void)
{
	pthread_condattr_t attr;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&lp_cv, &attr);
	pthread_condattr_destroy(&attr);
	if (pthread_create(&lp_thread, NULL, lp_main, NULL) != 0) {
		log_error("cannot start the long-poll thread");
		return -1;
	}
	return 0;
}

void
lp_shutdown(void)
{
	release_all(1, 1);
}

void
lp_stop(void)
{
	pthread_mutex_lock(&lp_mu);
	lp_exit = 1;
	pthread_cond_signal(&lp_cv);
	pthread_mutex_unlock(&lp_mu);
	pthread_join(lp_thread, NULL);
	pthread_cond_destroy(&lp_cv);
}
