-- spool.sql: what the spool's drainer asks before it replays (SPEC.md 15; src/spool.c).
--
-- A push whose connection dropped after it was sent may have committed all the same: the
-- broker spooled it ("buffered") without knowing; and a replay may repeat a commit (the broker
-- stopped between a commit and the removal of a segment, or a replay failed after one of its
-- lanes committed).  An item with a transactionId is found on replay by its dedup key
-- (queen_spool_push); one without has no key, so the drainer asks this function about those
-- records (the pushes in flight when the connection went, the segment a stopped broker was
-- draining, the batch of a failed replay) and leaves out those already stored.  Returns the
-- 0-based input indexes of the items whose message id is in a segment of their partition.
--
-- Only segments written after the id was made are read, found by binary search over the
-- primary key (queen_offset_at): a few segments, not the partition.  The id's first 48 bits
-- are the broker's clock in ms (UUIDv7) and a segment's created_at is the database's, so the
-- broker passes its clock now (p_now_ms) and the difference to the database's moves each id's
-- time onto the database's clock; 5 s are left for the round trip and for a clock that was
-- stepped since.  (A fixed minute of allowance read every segment of the last minute: 287,000
-- ids for the first batch after an outage under load, 0.4-0.8 s, and a broker clock more than
-- a minute ahead of the database's found nothing.)
--
-- The ids asked about are few (a batch) and the ids those segments hold many (5 s of pushes):
-- INTERSECT hashes the smaller input and streams the other through it, where EXISTS made the
-- planner de-duplicate every id read (a hash aggregate of 40,000-290,000 rows) before probing.
-- Each id found is mapped back to its input index by position (a batch's ids are unique).
CREATE FUNCTION queen_spool_stored(p_queue text[], p_partition text[], p_id uuid[],
				   p_now_ms bigint)
RETURNS TABLE (idx int)
LANGUAGE sql STABLE AS $$
	WITH u AS MATERIALIZED (
		SELECT p.id AS pid, x.mid,
		       to_timestamp(('x' || substr(replace(x.mid::text, '-', ''), 1, 12))::bit(48)::bigint
				    / 1000.0)
		       + (clock_timestamp() - to_timestamp(p_now_ms / 1000.0))
		       - interval '5 seconds' AS since
		FROM unnest(p_queue, p_partition, p_id) AS x (q, pn, mid)
		JOIN queen_queues q ON q.name = x.q
		JOIN queen_partitions p ON p.queue_id = q.id AND p.name = x.pn
	), f AS MATERIALIZED (
		SELECT u.pid, queen_offset_at(u.pid, min(u.since)) AS first
		FROM u GROUP BY u.pid
	), hit AS (
		SELECT u.pid, u.mid FROM u
		INTERSECT
		SELECT f.pid, i.id
		FROM f
		JOIN queen_segments g ON g.partition_id = f.pid AND g.base_offset >= f.first
		CROSS JOIN LATERAL unnest(g.ids) AS i (id)
		WHERE f.first IS NOT NULL
	)
	SELECT (array_position(p_id, hit.mid) - 1)::int FROM hit
	ORDER BY 1
$$;
