-- 023_segments_no_array_stats.sql: no planner statistics for a segment's arrays.
--
-- Every statement reads queen_segments by its primary key (partition_id, base_offset); no
-- plan depends on what the arrays hold.  Yet each ANALYZE of the table (autovacuum's, as it
-- grows by a tenth) read every array of its 30,000 sampled rows whole, decompressing the
-- payloads, and hashed each element for statistics nobody reads: 2.1-2.2 s of CPU for one
-- automatic analyze during the bench's push phases, 0.4 s without them.  The scalar columns
-- keep theirs.
ALTER TABLE queen_segments
	ALTER COLUMN ids SET STATISTICS 0,
	ALTER COLUMN txn_ids SET STATISTICS 0,
	ALTER COLUMN trace_ids SET STATISTICS 0,
	ALTER COLUMN payloads SET STATISTICS 0,
	ALTER COLUMN producer_subs SET STATISTICS 0;
