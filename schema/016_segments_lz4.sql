-- 016_segments_lz4.sql: segment payloads compressed with LZ4 where the server has it.
--
-- A segment of a batch push holds many payloads in one array, which TOAST compresses when the
-- row passes 2 KB.  With the default pglz that compression was a fifth of a push's server CPU
-- (and it runs while the push holds its partition row locks); LZ4 costs a twentieth of it and
-- still shrinks JSON.  Only new values change: a segment written before keeps its pglz data,
-- which reads as before.  A server built without LZ4 keeps pglz.
DO $$
BEGIN
	ALTER TABLE queen_segments ALTER COLUMN payloads SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
	RAISE NOTICE 'queen: this PostgreSQL has no LZ4; segment payloads keep pglz';
END
$$;
