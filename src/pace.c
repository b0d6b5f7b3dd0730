/* pace: large work yields the cores to small requests while they run (pace.h).
 *
 * Held connections wait in a small array under one mutex, in no order: a held connection is
 * a large body being read while other requests run, a handful at most. The resumer thread
 * sleeps until the earliest pause ends (or a shorter one is added) and resumes the
 * connections whose pause is over, outside the mutex: libmicrohttpd's own locks are taken
 * by MHD_resume_connection, and its threads take this mutex in pace_hold. */
#include "pace.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "qassert.h"
#include "workers.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

struct held {
	struct MHD_Connection *conn;
	uint64_t until_us;
};

static pthread_mutex_t pace_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pace_cv;
static struct held *pace_held;
static size_t pace_n, pace_cap;
static int pace_running, pace_stopping;
static pthread_t pace_thread;

uint64_t
pace_mark(void)
{
	return http_last_id();
}

int
pace_contended(uint64_t mark)
{
	return http_last_id() != mark || wk_contended();
}

uint64_t
pace_pause_us(uint64_t mark, uint64_t worked_us)
{
	return pace_contended(mark) ? worked_us * PACE_PASS_FACTOR : 0;
}

uint64_t
pace_recv_pause_us(uint64_t mark, size_t bytes, uint64_t took_us)
{
	uint64_t due = (uint64_t)bytes * 1000000 / PACE_RECV_BYTES_S;

	return due > took_us && pace_contended(mark) ? due - took_us : 0;
}

/* Resumes every held connection whose pause ends by now (all of them when all is set). */
static void
resume_due(int all)
{
	struct MHD_Connection *due[64];
	size_t k;
	uint64_t now = now_us();

	do {
		k = 0;
		pthread_mutex_lock(&pace_mu);
		for (size_t i = 0; i < pace_n && k < sizeof(due) / sizeof(due[0]);) {
			if (all || pace_held[i].until_us <= now) {
				due[k++] = pace_held[i].conn;
				pace_held[i] = pace_held[--pace_n];
			} else {
				i++;
			}
		}
		pthread_mutex_unlock(&pace_mu);
		for (size_t i = 0; i < k; i++)
			MHD_resume_connection(due[i]);
	} while (k == sizeof(due) / sizeof(due[0]));
}

/* The earliest end of a pause, 0 when nothing is held. Under pace_mu. */
static uint64_t
next_end(void)
{
	uint64_t next = 0;

	for (size_t i = 0; i < pace_n; i++)
		if (next == 0 || pace_held[i].until_us < next)
			next = pace_held[i].until_us;
	return next;
}

static void *
resumer(void *arg)
{
	(void)arg;
	for (;;) {
		uint64_t next, now;
		struct timespec at;

		resume_due(0);
		/* Looked at again under the mutex: a connection held since is not missed. */
		pthread_mutex_lock(&pace_mu);
		if (pace_stopping) {
			pthread_mutex_unlock(&pace_mu);
			break;
		}
		next = next_end();
		now = now_us();
		if (next == 0) {
			pthread_cond_wait(&pace_cv, &pace_mu);
		} else if (next > now) {
			clock_gettime(CLOCK_MONOTONIC, &at);
			at.tv_sec += (time_t)((next - now) / 1000000);
			at.tv_nsec += (long)((next - now) % 1000000) * 1000;
			if (at.tv_nsec >= 1000000000L) {
				at.tv_sec++;
				at.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&pace_cv, &pace_mu, &at);
		}
		pthread_mutex_unlock(&pace_mu);
	}
	resume_due(1);
	return NULL;
}

int
pace_start(void)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&pace_cv, &ca);
	pthread_condattr_destroy(&ca);
	pace_stopping = 0;
	if (pthread_create(&pace_thread, NULL, resumer, NULL) != 0) {
		log_error("pace: cannot start its thread");
		return -1;
	}
	pace_running = 1;
	return 0;
}

void
pace_stop(void)
{
	if (!pace_running)
		return;
	pthread_mutex_lock(&pace_mu);
	pace_stopping = 1;
	pthread_cond_signal(&pace_cv);
	pthread_mutex_unlock(&pace_mu);
	pthread_join(pace_thread, NULL);
	pace_running = 0;
	free(pace_held);
	pace_held = NULL;
	pace_n = pace_cap = 0;
	pthread_cond_destroy(&pace_cv);
}

void
pace_sleep(uint64_t us)
{
	metrics_paused(us);
	usleep((useconds_t)us);
}

void
pace_hold(struct MHD_Connection *conn, uint64_t us)
{
	pthread_mutex_lock(&pace_mu);
	if (pace_running && !pace_stopping) {
		if (pace_n == pace_cap) {
			pace_cap = pace_cap ? 2 * pace_cap : 16;
			pace_held = realloc(pace_held, pace_cap * sizeof(*pace_held));
			QASSERT(pace_held != NULL);
		}
		pace_held[pace_n++] = (struct held){ conn, now_us() + us };
		metrics_paused(us);
		/* Suspended under the mutex: the resumer cannot resume it before it is. */
		MHD_suspend_connection(conn);
		pthread_cond_signal(&pace_cv);
	}
	pthread_mutex_unlock(&pace_mu);
}
