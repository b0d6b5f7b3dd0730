-- planner.sql: planner statistics kept in step with the tables the hot functions probe.
--
-- The pop, ack and push are PL/pgSQL, whose plans are cached per connection and made from the
-- statistics of the moment.  A plan made while queen_cursors held ten rows joins a pop's
-- candidates to it with a sequential scan, and keeps doing so when it holds a hundred
-- thousand: only an ANALYZE of the table invalidates it.  Autovacuum analyses a table about
-- once a minute at best, while a group meeting 10,000 partitions writes 10,000 cursors in
-- seconds.  So the broker calls this twice a second.

-- ANALYZE each small, fast-growing queue table whose live rows have more than doubled (plus
-- 64) since its last ANALYZE; returns the names of those analysed, comma-separated, or NULL.
-- SKIP_LOCKED: a table another ANALYZE or a vacuum holds is left to the next call, so that
-- the caller never waits.
CREATE FUNCTION queen_stats_refresh() RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	v_rel regclass;
	v_done text;
BEGIN
	FOR v_rel IN
		SELECT c.oid::regclass
		FROM pg_class c
		WHERE c.oid IN ('queen_queues'::regclass, 'queen_partitions'::regclass,
				'queen_cursors'::regclass, 'queen_subscriptions'::regclass)
		  AND pg_stat_get_live_tuples(c.oid) >= 2 * greatest(c.reltuples, 0) + 64
		ORDER BY c.oid
	LOOP
		EXECUTE format('ANALYZE (SKIP_LOCKED) %s', v_rel);
		v_done := concat_ws(', ', v_done, v_rel::text);
	END LOOP;
	RETURN v_done;
END
$$;
