-- 021_segments_lz4_arrays.sql: every array column of a segment compressed with LZ4 where the
-- server has it, not payloads alone.
--
-- A segment of more than about 120 messages holds an ids array over 2 KB, which TOAST then
-- tries to compress.  With the default pglz that try cost 1.4% of a push's server CPU and
-- mostly failed (random UUID bytes do not compress); LZ4 gives up on them at a fraction of
-- the cost.  A database created by 0.1.x got LZ4 for payloads only (016), so txn_ids is set
-- here too.  Only new values change.  A server built without LZ4 keeps pglz.
DO $$
BEGIN
	ALTER TABLE queen_segments ALTER COLUMN ids SET COMPRESSION lz4;
	ALTER TABLE queen_segments ALTER COLUMN txn_ids SET COMPRESSION lz4;
	ALTER TABLE queen_segments ALTER COLUMN trace_ids SET COMPRESSION lz4;
	ALTER TABLE queen_segments ALTER COLUMN producer_subs SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
	RAISE NOTICE 'queen: this PostgreSQL has no LZ4; segment arrays keep pglz';
END
$$;
