/* longpoll: parked pops. A pop that finds nothing with wait=true parks here without a
 * database connection; a push that concerns it (on this broker, or on another one via
 * NOTIFY) wakes it within milliseconds by handing it back to the worker pool, and its
 * deadline answers it with 204. One thread keeps the deadlines.
 *
 * The lost-wakeup race (a push lands between the pop's query and its parking) is closed by
 * generation counters: the pop reads lp_gen before its query and lp_park refuses to park
 * when the generation moved, so the pop simply tries again. */
#ifndef QUEEN_LONGPOLL_H
#define QUEEN_LONGPOLL_H

#include <stdint.h>

struct req;

struct lp_filter {
	const char *queue;	/* NULL on the namespace/task route */
	const char *ns;		/* discovery filters, NULL = any */
	const char *task;
	uint64_t group_hash;
	int64_t deadline_ms;	/* monotonic */
	int64_t recheck_ms;	/* monotonic, 0 = none: try again then even without a push */
};

enum lp_park_result { LP_PARKED, LP_RETRY, LP_REFUSED };

int lp_start(void);
/* Answers every parked pop with 204 and refuses new ones (SIGTERM). */
void lp_shutdown(void);
void lp_stop(void);

/* Generation to read before the pop's query; queue NULL for the discovery route. */
uint64_t lp_gen(const char *queue);
/* Parks r; LP_RETRY when a push came since gen was read; LP_REFUSED while stopping. */
enum lp_park_result lp_park(struct req *r, const struct lp_filter *f, uint64_t gen);
/* A push committed to queue (labels ns/task) touching nparts partitions: wake the parked
 * pops it concerns (one per group and partition touched). */
void lp_wake(const char *queue, const char *ns, const char *task, int nparts);
/* The same, with the queue's labels taken from the partition index (derived from the name
 * when the index does not know the queue yet). */
void lp_wake_queue(const char *queue, int nparts);
/* Wake everything (index resync found changes it cannot attribute). */
void lp_wake_all(void);
long lp_parked(void);

#endif
