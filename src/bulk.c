/* bulk: a few threads of lower CPU priority that run a worker's large work for it
 * (bulk.h). */
#include "bulk.h"
#include "conf.h"
#include "log.h"
#include "pindex.h"
#include "qassert.h"
#include "workers.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Work handed over at once: a worker waits for its own, so more threads than cores only
 * matter when several clients send large bodies together. */
#define BULK_THREADS 4

struct bulk_job {
	struct wk *w;
	unsigned long long req;
	void (*fn)(struct wk *w, void *arg);
	void *arg;
	int done;
	struct bulk_job *next;
};

static pthread_mutex_t bk_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bk_go = PTHREAD_COND_INITIALIZER;	/* work was handed over */
static pthread_cond_t bk_done = PTHREAD_COND_INITIALIZER;	/* some work has run */
static struct bulk_job *bk_head, *bk_tail;
static pthread_t bk_threads[BULK_THREADS];
static int bk_n;		/* threads running; 0: work runs on its worker */
static int bk_stopping;

static void *
bulk_main(void *arg)
{
	(void)arg;
	/* Lowering one's own priority needs no privilege; only raising it back would, which is
	 * why the threads are kept for this work alone. */
	if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), (int)qconf.bulk_nice) != 0)
		log_warn("bulk thread: cannot set nice %lld: %s", (long long)qconf.bulk_nice,
			 strerror(errno));
	pidx_thread_online();
	pthread_mutex_lock(&bk_mu);
	for (;;) {
		struct bulk_job *j;

		while (!bk_head && !bk_stopping)
			pthread_cond_wait(&bk_go, &bk_mu);
		if (!bk_head)
			break;
		j = bk_head;
		bk_head = j->next;
		if (!bk_head)
			bk_tail = NULL;
		pthread_mutex_unlock(&bk_mu);
		log_request(j->req);
		j->fn(j->w, j->arg);
		log_request(0);
		pthread_mutex_lock(&bk_mu);
		j->done = 1;
		pthread_cond_broadcast(&bk_done);
	}
	pthread_mutex_unlock(&bk_mu);
	pidx_thread_offline();
	return NULL;
}

int
bulk_start(void)
{
	if (qconf.bulk_nice == 0)
		return 0;
	for (int i = 0; i < BULK_THREADS; i++) {
		if (pthread_create(&bk_threads[i], NULL, bulk_main, NULL) != 0) {
			log_error("cannot start bulk thread %d", i);
			bulk_stop();
			return -1;
		}
		pthread_mutex_lock(&bk_mu);
		bk_n++;
		pthread_mutex_unlock(&bk_mu);
	}
	return 0;
}

void
bulk_stop(void)
{
	int n;

	pthread_mutex_lock(&bk_mu);
	bk_stopping = 1;
	n = bk_n;
	pthread_cond_broadcast(&bk_go);
	pthread_mutex_unlock(&bk_mu);
	/* Queued work is run before the threads leave (they take it before they stop). */
	for (int i = 0; i < n; i++)
		pthread_join(bk_threads[i], NULL);
	pthread_mutex_lock(&bk_mu);
	bk_n = 0;
	bk_stopping = 0;
	pthread_mutex_unlock(&bk_mu);
}

void
bulk_run(struct wk *w, unsigned long long req, void (*fn)(struct wk *w, void *arg), void *arg)
{
	struct bulk_job j = { .w = w, .req = req, .fn = fn, .arg = arg };

	pthread_mutex_lock(&bk_mu);
	if (bk_n == 0 || bk_stopping) {
		pthread_mutex_unlock(&bk_mu);
		fn(w, arg);
		return;
	}
	if (bk_tail)
		bk_tail->next = &j;
	else
		bk_head = &j;
	bk_tail = &j;
	pthread_cond_signal(&bk_go);
	while (!j.done)
		pthread_cond_wait(&bk_done, &bk_mu);
	pthread_mutex_unlock(&bk_mu);
}
