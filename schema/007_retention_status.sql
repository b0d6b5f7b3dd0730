-- 007_retention_status.sql: retention (SPEC.md 9, 21) and the operator reads (SPEC.md 16).
--
-- Retention removes whole segments from the front of a partition's log, one round every
-- RETENTION_INTERVAL, each step bounded:
--   1. purge   deletes segments that lie wholly below a log start moved by an earlier round
--              (at most p_batch segments);
--   2. plan    picks the partitions whose front segments are due and where their log start
--              goes (read only; at most p_batch segments in at most 1000 partitions);
--   3. dedup   deletes dedup keys older than their queue's window, in a slice of 2000
--              partitions per round (at most 20 * p_batch keys);
--   4. advance moves those log starts.
-- Steps 1-3 are queen_retention_round, one transaction that returns the plan; the broker then
-- runs step 4, queen_retention_advance, on chunks of the plan, one short transaction each.
-- Why: pushes lock partition rows FOR UPDATE in id order and keep them to commit, so the only
-- lock of ours that can stall a push is a partition row lock.  Each advance takes a few dozen
-- of them (id order, SKIP LOCKED: a busy partition is simply left for the next round) and
-- commits at once, so a push waits at most for one small UPDATE.  Nothing here ever waits
-- for a lock (segment and dedup rows are picked FOR UPDATE SKIP LOCKED too), so there is no
-- lock cycle with pushes or queen_queue_delete, and a round never stalls.  Between advance
-- and purge, released segments sit below the log start where no reader looks (every read
-- path starts at greatest(committed, log_start - 1)): the invariant "segments cover
-- [log_start, next_offset - 1]" holds at every commit, the log a client sees is always whole.
--
-- Which segments are due (created_at never decreases along offsets, so each rule frees a
-- prefix of the log and the union is the longest of them):
--   * maxWaitTimeSeconds > 0 (with or without retentionEnabled, SPEC 21): created_at older
--     than the window, whatever cursors and leases say;
--   * retentionEnabled and retentionSeconds > 0: the same with that window;
--   * retentionEnabled and completedRetentionSeconds > 0: older than the window and passed by
--     every group holding a cursor on the partition (__QUEUE_MODE__ included), i.e.
--     end_offset <= min(committed).  A partition no group has read keeps its messages.
-- Dead letters are copies in queen_dlq and are never touched.
--
-- One broker at a time: the round takes a transaction-level advisory lock and returns
-- {"skipped":true} when another broker holds it; each advance tries the same lock.
--
-- Changes to core tables: an index queen_dedup (partition_id, created_at), so that expired
-- keys are found per partition by one range probe instead of a scan of the table.

CREATE INDEX queen_dedup_age ON queen_dedup (partition_id, created_at);

-- Partitions whose log start moved past segments not yet deleted: every segment ending below
-- upto is to go.  Written and read by retention only, under its advisory lock.
CREATE TABLE queen_retention_pending (
	partition_id			uuid PRIMARY KEY,
	upto				bigint NOT NULL
);

-- Where the dedup sweep goes on: the last partition id it swept (NULL = from the start).
CREATE TABLE queen_retention_state (
	one				bool PRIMARY KEY DEFAULT true CHECK (one),
	dedup_after			uuid
);
INSERT INTO queen_retention_state DEFAULT VALUES;
