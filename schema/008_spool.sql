-- 008_spool.sql: replay of spooled pushes (SPEC.md 15; the spool itself is src/spool.c).
--
-- A push buffered while PostgreSQL was unreachable keeps the message id it was answered with,
-- and its replay carries a dedup key: its transactionId, or else its message id.  A replay
-- can run twice (the broker crashed after the commit, before it removed the spool file), and
-- a buffered push may even have been stored already (the commit went through but its answer
-- was lost with the connection).  queen_push cannot tell such a repeat: it tells a live key
-- from one it claims itself by the message id, and a repeat has the same one.  So a replay
-- first answers "duplicate" for every item whose key is already held by its own message id,
-- whatever the age of the key, and pushes only the rest through queen_push (dedup against
-- other messages as usual).  One call, one round trip, the same rows as queen_push.
--
-- Reads only: nothing here locks.  It is safe because one spool has one drainer (the broker
-- holds a lock on FILE_BUFFER_DIR) and message ids are unique: no one else can make a key
-- held by one of these ids appear meanwhile.

CREATE FUNCTION queen_spool_push(p_pid uuid[], p_queue text[], p_partition text[],
				 p_id uuid[], p_txn text[], p_trace text[], p_payload text[],
				 p_sub text[])
RETURNS TABLE (idx int, status text, message_id uuid, queue_id uuid, partition_id uuid,
	       off bigint, log_end bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
	v_rest int[];		-- 1-based input indexes still to push
BEGIN
	RETURN QUERY
	SELECT (u.o - 1)::int, 'duplicate'::text, u.mid, p.queue_id, p.id, d.off,
	       p.next_offset - 1
	FROM unnest(p_queue, p_partition, p_id, p_txn) WITH ORDINALITY AS u (q, pn, mid, txn, o)
	JOIN queen_queues q ON q.name = u.q
	JOIN queen_partitions p ON p.queue_id = q.id AND p.name = u.pn
	JOIN queen_dedup d ON d.partition_id = p.id AND d.txn_id = queen_txn_key(u.txn)
			  AND d.message_id = u.mid
	WHERE u.txn IS NOT NULL;

	SELECT array_agg(u.o::int ORDER BY u.o) INTO v_rest
	FROM unnest(p_queue, p_partition, p_id, p_txn) WITH ORDINALITY AS u (q, pn, mid, txn, o)
	WHERE u.txn IS NULL OR NOT EXISTS (
		SELECT 1 FROM queen_queues q
		JOIN queen_partitions p ON p.queue_id = q.id AND p.name = u.pn
		JOIN queen_dedup d ON d.partition_id = p.id AND d.txn_id = queen_txn_key(u.txn)
				  AND d.message_id = u.mid
		WHERE q.name = u.q);
	IF v_rest IS NULL THEN
		RETURN;
	END IF;
	IF cardinality(v_rest) = cardinality(p_id) THEN
		RETURN QUERY SELECT * FROM queen_push(p_pid, p_queue, p_partition, p_id, p_txn,
						      p_trace, p_payload, p_sub);
		RETURN;
	END IF;
	RETURN QUERY
	SELECT v_rest[r.idx + 1] - 1, r.status, r.message_id, r.queue_id, r.partition_id, r.off,
	       r.log_end
	FROM queen_push(ARRAY(SELECT p_pid[k] FROM unnest(v_rest) k),
			ARRAY(SELECT p_queue[k] FROM unnest(v_rest) k),
			ARRAY(SELECT p_partition[k] FROM unnest(v_rest) k),
			ARRAY(SELECT p_id[k] FROM unnest(v_rest) k),
			ARRAY(SELECT p_txn[k] FROM unnest(v_rest) k),
			ARRAY(SELECT p_trace[k] FROM unnest(v_rest) k),
			ARRAY(SELECT p_payload[k] FROM unnest(v_rest) k),
			ARRAY(SELECT p_sub[k] FROM unnest(v_rest) k)) r;
END
$$;
