/* lanes: a few threads with a connection each that run one job at a time for a waiting
 * caller (lanes.h). */
#include "lanes.h"

#include "dbpool.h"
#include "log.h"
#include "pindex.h"
#include "qassert.h"

#include <pthread.h>
#include <stdlib.h>

struct lane {
	pthread_t thread;
	struct dbconn *db;
	const struct lane_job *job;	/* set by lanes_run, cleared by the lane when done */
	int warm;			/* set by lanes_warm: connect now */
	int started;
};

static pthread_mutex_t ln_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ln_go = PTHREAD_COND_INITIALIZER;	/* a job was handed out */
static pthread_cond_t ln_done = PTHREAD_COND_INITIALIZER;	/* a job finished */
static struct lane *ln;
static int ln_n;		/* lane threads (the caller's connection not counted) */
static int ln_stopping;

static void *
lane_main(void *arg)
{
	struct lane *l = arg;

	pidx_thread_online();
	db_ensure(l->db);	/* connected before the first replay needs it */
	pthread_mutex_lock(&ln_mu);
	for (;;) {
		while (!l->job && !l->warm && !ln_stopping)
			pthread_cond_wait(&ln_go, &ln_mu);
		if (l->warm && !l->job) {
			l->warm = 0;
			pthread_mutex_unlock(&ln_mu);
			db_ensure(l->db);
			pthread_mutex_lock(&ln_mu);
			continue;
		}
		if (!l->job)
			break;
		pthread_mutex_unlock(&ln_mu);
		db_ensure(l->db);
		l->job->fn(l->db, l->job->arg);
		pthread_mutex_lock(&ln_mu);
		l->job = NULL;
		pthread_cond_broadcast(&ln_done);
	}
	pthread_mutex_unlock(&ln_mu);
	pidx_thread_offline();
	return NULL;
}

int
lanes_start(int n)
{
	ln_n = n > 1 ? n - 1 : 0;
	ln_stopping = 0;
	ln = calloc(ln_n ? (size_t)ln_n : 1, sizeof(*ln));
	QASSERT(ln != NULL);
	for (int i = 0; i < ln_n; i++) {
		ln[i].db = db_new(-1);
		if (pthread_create(&ln[i].thread, NULL, lane_main, &ln[i]) != 0) {
			log_error("cannot start lane thread %d", i);
			return -1;
		}
		ln[i].started = 1;
	}
	return 0;
}

void
lanes_stop(void)
{
	pthread_mutex_lock(&ln_mu);
	ln_stopping = 1;
	pthread_cond_broadcast(&ln_go);
	pthread_mutex_unlock(&ln_mu);
	for (int i = 0; i < ln_n; i++) {
		if (ln[i].started)
			pthread_join(ln[i].thread, NULL);
		db_free(ln[i].db);
	}
	free(ln);
	ln = NULL;
	ln_n = 0;
}

void
lanes_warm(void)
{
	pthread_mutex_lock(&ln_mu);
	for (int i = 0; i < ln_n; i++)
		ln[i].warm = 1;
	pthread_cond_broadcast(&ln_go);
	pthread_mutex_unlock(&ln_mu);
}

int
lanes_count(void)
{
	return ln_n + 1;
}

void
lanes_run(struct dbconn *own, const struct lane_job *jobs, int n)
{
	int busy;

	QASSERT(n >= 1 && n <= ln_n + 1);
	pthread_mutex_lock(&ln_mu);
	for (int i = 1; i < n; i++)
		ln[i - 1].job = &jobs[i];
	pthread_cond_broadcast(&ln_go);
	pthread_mutex_unlock(&ln_mu);
	jobs[0].fn(own, jobs[0].arg);
	pthread_mutex_lock(&ln_mu);
	do {
		busy = 0;
		for (int i = 0; i < n - 1; i++)
			busy |= ln[i].job != NULL;
		if (busy)
			pthread_cond_wait(&ln_done, &ln_mu);
	} while (busy);
	pthread_mutex_unlock(&ln_mu);
}
