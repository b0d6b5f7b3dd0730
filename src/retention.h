/* retention: the maintenance task that deletes what queues no longer keep (SPEC 9, 21).
 *
 * Every RETENTION_INTERVAL ms the maintenance thread runs one round: one call of
 * queen_retention_round (schema/functions/retention.sql), which deletes at most
 * RETENTION_BATCH_SIZE whole segments released by earlier rounds, expires dedup keys past
 * their queue's window and plans which partitions' log starts move (their front segments are
 * due under retentionSeconds, completedRetentionSeconds or maxWaitTimeSeconds); then the plan
 * is applied by queen_retention_advance, RETENTION_ADVANCE_CHUNK partitions per transaction.
 * Every decision is taken in SQL; one broker at a time runs a round (advisory lock), the
 * others skip theirs. This module schedules rounds, chunks the advance, tells the partition
 * index which cursors now count from the new log start, and keeps counters for
 * GET /api/v1/status. */
#ifndef QUEEN_RETENTION_H
#define QUEEN_RETENTION_H

#include <stdint.h>

struct dbconn;

/* Partitions whose log start one advance transaction moves: their row locks are held for one
 * small UPDATE, so a push to one of them waits a millisecond or two at most. */
#define RETENTION_ADVANCE_CHUNK 32

struct retention_stats {
	uint64_t rounds;		/* rounds run by this broker (skipped ones included) */
	uint64_t skipped;		/* rounds skipped: another broker held the lock */
	uint64_t failed;		/* rounds whose statement failed */
	uint64_t segments_deleted;
	uint64_t partitions_advanced;
	uint64_t dedup_expired;
	int64_t last_run_ms;		/* wall ms of the last round, 0 = none yet */
	int64_t last_segments_deleted;	/* of the last round that ran */
};

/* Runs one round on the maintenance connection. A failing statement is logged by dbpool and
 * counted; the next round tries again. Maintenance thread only (it updates the partition
 * index, so the thread must be online in it). */
void retention_run(struct dbconn *db);
/* Interval of the task: RETENTION_INTERVAL, ms (reloadable). */
int64_t retention_interval_ms(void);
/* Copies the counters; any thread. */
void retention_stats_read(struct retention_stats *out);

#endif
