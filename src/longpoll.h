/* longpoll: parked pops. A pop that finds nothing with wait=true parks here without a
 * database connection; a push that concerns it (on this broker, or on another one via
 * NOTIFY) wakes it within milliseconds by handing it back to the worker pool, and its
 * deadline answers it with 204. One thread keeps the deadlines and rechecks; another watches
 * the sockets of parked pops, so a client that went away frees its slot within a second.
 *
 * The lost-wakeup race (a push lands between the pop's query and its parking) is closed by
 * generation counters: the pop reads lp_gen before its query, and when the generation moved
 * meanwhile lp_park parks it already due, so it goes back to the workers once, like a woken
 * pop. A pop never loops on a worker: each re-run of its query is one wake or one recheck. */
#ifndef QUEEN_LONGPOLL_H
#define QUEEN_LONGPOLL_H

#include <stddef.h>
#include <stdint.h>

struct req;

struct lp_filter {
	const char *queue;	/* NULL on the namespace/task route */
	const char *ns;		/* discovery filters, NULL = any */
	const char *task;
	uint64_t group_hash;
	int64_t deadline_ms;	/* monotonic */
	int64_t recheck_ms;	/* monotonic, 0 = none: try again then even without a push */
	int admitted;		/* the request parked before: the cap does not apply again */
};

enum lp_park_result { LP_PARKED, LP_FULL, LP_REFUSED };

int lp_start(void);
/* Answers every parked pop with 204 and refuses new ones (SIGTERM). */
void lp_shutdown(void);
void lp_stop(void);

/* Generation to read before the pop's query: of the queue, or on the discovery route of its
 * namespace (else task) filter. */
uint64_t lp_gen(const char *queue, const char *ns, const char *task);
/* Parks r. LP_FULL when QUEEN_MAX_LONGPOLLS pops are parked and r was not admitted before
 * (answer 429); LP_REFUSED while stopping (answer 204). When the generation moved since gen
 * was read, r is parked due at once: the lp thread hands it back to the workers. */
enum lp_park_result lp_park(struct req *r, const struct lp_filter *f, uint64_t gen);
/* A push committed to queue (labels ns/task) touching nparts partitions: wake the parked
 * pops it concerns (one per group and partition touched). Cost: the waiters of that queue
 * and of its labels, never every waiter. */
void lp_wake(const char *queue, const char *ns, const char *task, int nparts);
/* The same, with the queue's labels taken from the partition index (derived from the name
 * when the index does not know the queue yet). */
void lp_wake_queue(const char *queue, int nparts);
/* The one wake path of a commit that touched many queues (a push, a transaction, a timer
 * round): add each queue touched (the string must live until fire) with the partitions it
 * touched there; fire wakes each distinct queue once with the sum, however many there are,
 * and empties the set. */
struct lp_wakes {
	struct lp_wake_ent *v;
	size_t len, cap;
};
#define LP_WAKES_INIT { NULL, 0, 0 }
void lp_wakes_add(struct lp_wakes *ws, const char *queue, int nparts);
/* The same with a queue name that does not live until fire (it is copied). */
void lp_wakes_add_copy(struct lp_wakes *ws, const char *queue, int nparts);
void lp_wakes_fire(struct lp_wakes *ws);
/* Wake everything (index resync found changes it cannot attribute). */
void lp_wake_all(void);
long lp_parked(void);

#endif
