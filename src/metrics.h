/* metrics: process-wide counters (atomics), read by /metrics and /metrics/prometheus. */
#ifndef QUEEN_METRICS_H
#define QUEEN_METRICS_H

#include <stdint.h>

struct metrics_snapshot {
	uint64_t requests, req_2xx, req_4xx, req_5xx, req_us_total;
	uint64_t pushed, duplicates, popped, acked, nacked, dead_lettered;
	uint64_t push_commits, db_errors, wakeups, pop_queries, lp_refused, abandoned;
	uint64_t pauses, paused_us;
	int64_t parked;
};

void metrics_request(int status, uint64_t us);
void metrics_pushed(uint64_t queued, uint64_t dup);
void metrics_push_commit(void);
void metrics_popped(uint64_t n);
void metrics_acked(uint64_t ok, uint64_t nack, uint64_t dlq);
void metrics_db_error(void);
void metrics_parked(int delta);
void metrics_wakeup(void);
/* A pop ran its query (queen_pop). */
void metrics_pop_query(void);
/* A long-poll refused at QUEEN_MAX_LONGPOLLS; a parked one whose client went away. */
void metrics_lp_refused(void);
void metrics_abandoned(void);
/* Large work paused us microseconds for small requests beside it (pace.h). */
void metrics_paused(uint64_t us);
void metrics_read(struct metrics_snapshot *s);



/* Process start, for uptime. */
void metrics_start(void);
int64_t metrics_uptime_s(void);
#endif
