-- 025_cursors_small_stats.sql: small planner statistics for queen_cursors.
--
-- The broker analyses queen_cursors whenever its rows have doubled (planner.sql), so that
-- the cached plans see its size: a group meeting 100,000 partitions triggers an ANALYZE at
-- every doubling on the way.  No statement filters it but by its primary key or by ctid;
-- what the plans need is its row count, which ANALYZE extrapolates as well from a small
-- sample.  At the default target each ANALYZE sampled 30,000 rows and built statistics of
-- ten columns from them: 0.3-0.45 s of the database's CPU each (two of them in the bench's
-- drain of 100,000 partitions), 10-15 ms at target 10 (3,000 rows).  Autovacuum's analyses
-- of the table take the same targets.
ALTER TABLE queen_cursors
	ALTER COLUMN partition_id SET STATISTICS 10,
	ALTER COLUMN group_name SET STATISTICS 10,
	ALTER COLUMN committed SET STATISTICS 10,
	ALTER COLUMN lease_id SET STATISTICS 10,
	ALTER COLUMN lease_expires_at SET STATISTICS 10,
	ALTER COLUMN batch_end SET STATISTICS 10,
	ALTER COLUMN retry_count SET STATISTICS 10,
	ALTER COLUMN attempt_base SET STATISTICS 10,
	ALTER COLUMN attempt_count SET STATISTICS 10,
	ALTER COLUMN updated_at SET STATISTICS 10;
