-- spool.sql: what the spool's drainer asks before it replays (SPEC.md 15; src/spool.c).
--
-- A push whose connection dropped after it was sent may have committed all the same: the
-- broker spooled it ("buffered") without knowing; and a replay may repeat a commit (the broker
-- stopped between a commit and the removal of a segment, or a replay failed after one of its
-- lanes committed).  An item with a transactionId is found on replay by its dedup key
-- (queen_spool_push); one without has no key, so the drainer asks this function about those
-- records (the pushes in flight when the connection went, the segment a stopped broker was
-- draining, the batch of a failed replay) and leaves out those already stored.  Returns the 0-based input indexes
-- of the items whose message id is in a segment of their partition.  Only segments written
-- since a minute before the id's own time (UUIDv7: its first 48 bits are the broker's clock
-- in ms; the minute covers a clock skew between broker and database) are read, found by
-- binary search over the primary key (queen_offset_at): a few segments, not the partition.
CREATE FUNCTION queen_spool_stored(p_queue text[], p_partition text[], p_id uuid[])
RETURNS TABLE (idx int)
LANGUAGE sql STABLE AS $$
	WITH u AS MATERIALIZED (
		SELECT (x.o - 1)::int AS o, p.id AS pid, x.mid,
		       to_timestamp(('x' || substr(replace(x.mid::text, '-', ''), 1, 12))::bit(48)::bigint
				    / 1000.0) - interval '1 minute' AS since
		FROM unnest(p_queue, p_partition, p_id) WITH ORDINALITY AS x (q, pn, mid, o)
		JOIN queen_queues q ON q.name = x.q
		JOIN queen_partitions p ON p.queue_id = q.id AND p.name = x.pn
	), f AS MATERIALIZED (
		SELECT u.pid, queen_offset_at(u.pid, min(u.since)) AS first
		FROM u GROUP BY u.pid
	), s AS MATERIALIZED (
		SELECT f.pid, i.id
		FROM f
		JOIN queen_segments g ON g.partition_id = f.pid AND g.base_offset >= f.first
		CROSS JOIN LATERAL unnest(g.ids) AS i (id)
		WHERE f.first IS NOT NULL
	)
	SELECT u.o FROM u WHERE EXISTS (SELECT 1 FROM s WHERE s.pid = u.pid AND s.id = u.mid)
	ORDER BY u.o
$$;
