/* metrics: relaxed atomic counters; exact enough for monitoring, free on the hot path. */
#include "metrics.h"

#include <stdatomic.h>
#include <time.h>

static _Atomic uint64_t m_requests, m_2xx, m_4xx, m_5xx, m_us;
static _Atomic uint64_t m_pushed, m_dup, m_popped, m_acked, m_nacked, m_dlq;
static _Atomic uint64_t m_commits, m_db_errors, m_wakeups, m_pop_queries, m_lp_refused;
static _Atomic uint64_t m_abandoned, m_pauses, m_paused_us;
static _Atomic int64_t m_parked;

#define ADD(v, n) atomic_fetch_add_explicit(&(v), (n), memory_order_relaxed)
#define GET(v) atomic_load_explicit(&(v), memory_order_relaxed)

void
metrics_request(int status, uint64_t us)
{
	ADD(m_requests, 1);
	ADD(m_us, us);
	if (status >= 500)
		ADD(m_5xx, 1);
	else if (status >= 400)
		ADD(m_4xx, 1);
	else
		ADD(m_2xx, 1);
}

void
metrics_pushed(uint64_t queued, uint64_t dup)
{
	ADD(m_pushed, queued);
	ADD(m_dup, dup);
}

void metrics_push_commit(void) { ADD(m_commits, 1); }
void metrics_popped(uint64_t n) { ADD(m_popped, n); }
void metrics_db_error(void) { ADD(m_db_errors, 1); }
void metrics_parked(int delta) { ADD(m_parked, delta); }
void metrics_wakeup(void) { ADD(m_wakeups, 1); }
void metrics_pop_query(void) { ADD(m_pop_queries, 1); }
void metrics_lp_refused(void) { ADD(m_lp_refused, 1); }
void metrics_abandoned(void) { ADD(m_abandoned, 1); }

void
metrics_paused(uint64_t us)
{
	ADD(m_pauses, 1);
	ADD(m_paused_us, us);
}

void
metrics_acked(uint64_t ok, uint64_t nack, uint64_t dlq)
{
	ADD(m_acked, ok);
	ADD(m_nacked, nack);
	ADD(m_dlq, dlq);
}

void
metrics_read(struct metrics_snapshot *s)
{
	s->requests = GET(m_requests);
	s->req_2xx = GET(m_2xx);
	s->req_4xx = GET(m_4xx);
	s->req_5xx = GET(m_5xx);
	s->req_us_total = GET(m_us);
	s->pushed = GET(m_pushed);
	s->duplicates = GET(m_dup);
	s->popped = GET(m_popped);
	s->acked = GET(m_acked);
	s->nacked = GET(m_nacked);
	s->dead_lettered = GET(m_dlq);
	s->push_commits = GET(m_commits);
	s->db_errors = GET(m_db_errors);
	s->wakeups = GET(m_wakeups);
	s->parked = GET(m_parked);
	s->pop_queries = GET(m_pop_queries);
	s->lp_refused = GET(m_lp_refused);
	s->abandoned = GET(m_abandoned);
	s->pauses = GET(m_pauses);
	s->paused_us = GET(m_paused_us);
}

static struct timespec m_started;

void
metrics_start(void)
{
	clock_gettime(CLOCK_MONOTONIC, &m_started);
}

int64_t
metrics_uptime_s(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (int64_t)(now.tv_sec - m_started.tv_sec);
}
