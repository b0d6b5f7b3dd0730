-- 022_log_end_from_segments.sql: a push no longer updates its partition's row.
--
-- The log end of a partition (the next offset to take, the created_at of its newest
-- message) was kept on the partition row and updated by every push.  While any transaction
-- older than a push is open (a backup's snapshot, an analyst's query, a large push cut into
-- passes), PostgreSQL cannot prune the row versions those updates leave, and every later
-- push walks the growing chain of them to find and lock its row: an idle transaction alone
-- took the p99 of batch-1 pushes from 1.3 to 3.0 ms.  The newest segment holds both values
-- already; the partition row now keeps them only as of its creation or of the retention
-- round that last moved its log start (which may release every segment).  The log end is
-- the greater of the two (queen_log_tail, schema/functions/common.sql); a push locks the
-- partition row without writing a version.
ALTER TABLE queen_partitions RENAME COLUMN next_offset TO kept_next_offset;
ALTER TABLE queen_partitions RENAME COLUMN last_created_at TO kept_last_created_at;
