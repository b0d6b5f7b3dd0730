/* timers: the sweeper that fires due timers, a task of the maintenance thread (maint.c).
 *
 * Each round is one call of queen_timers_fire (schema/functions/timers.sql): it claims up to
 * TIMERS_ROUND due timers with FOR UPDATE SKIP LOCKED, pushes them and deletes them in one
 * transaction, so any number of brokers may sweep one database and a timer fires once. The
 * broker then learns the partitions written and wakes the pops parked on their queues. */
#ifndef QUEEN_TIMERS_H
#define QUEEN_TIMERS_H

#include <stdint.h>

struct dbconn;

#define TIMERS_ROUND 2000		/* timers claimed by one round (one transaction) */
#define TIMERS_SWEEP_BUDGET_MS 500	/* a sweep stops starting rounds after this long */
#define TIMERS_INTERVAL_MS 50		/* between sweeps */

/* Fires what is due: rounds of TIMERS_ROUND while a round comes back full, within
 * TIMERS_SWEEP_BUDGET_MS (the rest is for the next sweep, so the maintenance thread keeps
 * serving notifications). A failing statement is logged by dbpool and retried next sweep.
 * Maintenance thread only (uses its connection and the partition index). */
void timers_sweep(struct dbconn *db);
/* Interval of the maintenance task, in ms. */
int64_t timers_interval_ms(void);

#endif
