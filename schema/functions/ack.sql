-- ack.sql: the offset commit (SPEC.md 6 and 21).

-- Ack (SPEC.md 6 and 21): an offset commit per (partition, group).  One row per item.
--   1. lock the cursors touched, in (partition, group) order, and resolve each transactionId
--      to its offset inside the lease span committed+1 .. batch_end;
--   2. fast path: when every item is 'completed', was found in its span and holds the live
--      lease it names (or names none), the commit rule is only "the cursor moves to the
--      highest offset acked", and one UPDATE applies it.  That is nearly every ack of a
--      healthy consumer, so the rest of the function is the exception;
--   3. the rare rest (lease-less acks above the span, re-acks at or below the cursor, unknown
--      ids) is resolved one by one: dedup row, then a bounded segment scan;
--   4. one statement applies the full commit rule (failures, retries, dead letters) to every
--      group and writes cursors and DLQ rows.
CREATE FUNCTION queen_ack(p_group text[], p_pid uuid[], p_txn text[], p_status text[],
			  p_lease uuid[], p_error text[])
RETURNS TABLE (idx int, success bool, error text, lease_released bool, dlq bool, noop bool,
	       partition_id uuid, committed bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
	-- most segments a fallback lookup scans in each direction
	c_scan constant int := 1000;
	v_off bigint[];
	v_o bigint;
	v_lo bigint;
	v_fast bool;
	v_pass int;
	r record;
BEGIN
	IF coalesce(cardinality(p_txn), 0) = 0 THEN
		RETURN;
	END IF;

	-- Pass 1 reads only the head of each span, as many offsets as the call acks on that
	-- cursor: a consumer acks in order, so that is where its messages are, and a stage that
	-- acks a popped batch one message per transaction does not read the whole remaining
	-- batch each time.  Pass 2, when something was not there, reads the whole span.
	FOR v_pass IN 1 .. 2 LOOP
		WITH it AS (
			SELECT u.o, coalesce(u.g, '__QUEUE_MODE__') AS g, u.pid, u.txn, u.st,
			       u.lease
			FROM unnest(p_group, p_pid, p_txn, p_status, p_lease) WITH ORDINALITY
				AS u (g, pid, txn, st, lease, o)
		), lk AS (
			SELECT c.partition_id AS pid, c.group_name AS g, c.committed AS cm,
			       c.batch_end AS be, c.lease_id AS lid, c.lease_expires_at AS lexp
			FROM queen_cursors c
			WHERE (c.partition_id, c.group_name) IN (SELECT it.pid, it.g FROM it)
			ORDER BY c.partition_id, c.group_name
			FOR UPDATE OF c
		), sp AS (
			-- Each span read once, however many of its messages the call acks.
			SELECT lk.pid, lk.g, m.t,
			       min(s.base_offset + r.lo - 1 + m.o - 1) AS off
			FROM lk
			CROSS JOIN LATERAL (
				SELECT CASE WHEN v_pass = 1
					    THEN least(lk.be, lk.cm + (SELECT count(*) FROM it
								       WHERE it.pid = lk.pid
									 AND it.g = lk.g))
					    ELSE lk.be END AS last) w
			JOIN queen_segments s ON s.partition_id = lk.pid
				AND s.base_offset <= w.last
				AND s.base_offset >= coalesce((SELECT max(s0.base_offset)
							       FROM queen_segments s0
							       WHERE s0.partition_id = lk.pid
								 AND s0.base_offset <= lk.cm + 1),
							      lk.cm + 1 - 999)
				AND s.end_offset > lk.cm
			CROSS JOIN LATERAL (
				SELECT greatest(lk.cm + 1 - s.base_offset + 1, 1) AS lo,
				       least(w.last, s.end_offset) - s.base_offset + 1 AS hi) r
			CROSS JOIN LATERAL unnest(s.txn_ids[r.lo:r.hi]) WITH ORDINALITY
				AS m (t, o)
			WHERE lk.be > lk.cm
			GROUP BY 1, 2, 3
		)
		SELECT array_agg(sp.off ORDER BY it.o),
		       coalesce(bool_and(it.st = 'completed' AND sp.off IS NOT NULL
					 AND (it.lease IS NULL
					      OR (lk.lid = it.lease AND lk.lexp > now()))), false)
		INTO v_off, v_fast
		FROM it
		LEFT JOIN sp ON sp.pid = it.pid AND sp.g = it.g AND sp.t = it.txn
		LEFT JOIN lk ON lk.pid = it.pid AND lk.g = it.g;
		EXIT WHEN array_position(v_off, NULL) IS NULL;
	END LOOP;

	IF v_fast THEN
		-- Every offset is inside its cursor's lease span (so above committed), and no
		-- item is a failure: each cursor moves to its highest offset acked and gives up
		-- its lease when that reaches the end of the span (or it had no span).
		RETURN QUERY
		WITH x AS (
			SELECT u.pid, coalesce(u.g, '__QUEUE_MODE__') AS g, max(u.off) AS off
			FROM unnest(p_pid, p_group, v_off) AS u (pid, g, off)
			GROUP BY 1, 2
		), up AS (
			UPDATE queen_cursors c SET
				committed = x.off,
				lease_id = CASE WHEN x.off >= c.batch_end THEN NULL
						ELSE c.lease_id END,
				lease_expires_at = CASE WHEN x.off >= c.batch_end THEN NULL
							ELSE c.lease_expires_at END,
				retry_count = CASE WHEN x.off >= c.batch_end THEN 0
						   ELSE c.retry_count END,
				batch_end = CASE WHEN x.off >= c.batch_end THEN NULL
						 ELSE c.batch_end END,
				updated_at = now()
			FROM x
			WHERE c.partition_id = x.pid AND c.group_name = x.g
			RETURNING c.partition_id AS pid, c.group_name AS g, c.committed AS cm,
				  c.batch_end IS NULL AS rel
		)
		SELECT (u.o - 1)::int, true, NULL::text, up.rel, false, false, u.pid, up.cm
		FROM unnest(p_pid, p_group) WITH ORDINALITY AS u (pid, g, o)
		JOIN up ON up.pid = u.pid AND up.g = coalesce(u.g, '__QUEUE_MODE__')
		ORDER BY u.o;
		RETURN;
	END IF;

	IF array_position(v_off, NULL) IS NOT NULL THEN
		FOR r IN
			SELECT u.o, u.pid, u.txn, u.lease, c.committed AS cm,
			       greatest(c.committed, coalesce(c.batch_end, c.committed)) AS hi
			FROM unnest(p_group, p_pid, p_txn, p_lease, v_off) WITH ORDINALITY
				AS u (g, pid, txn, lease, off, o)
			JOIN queen_cursors c ON c.partition_id = u.pid
				AND c.group_name = coalesce(u.g, '__QUEUE_MODE__')
			WHERE u.off IS NULL AND u.txn IS NOT NULL
		LOOP
			-- A client transactionId within the dedup window: its latest offset.
			SELECT d.off INTO v_o FROM queen_dedup d
			WHERE d.partition_id = r.pid AND d.txn_id = queen_txn_key(r.txn);
			IF v_o IS NOT NULL AND v_o > r.cm AND r.lease IS NOT NULL THEN
				v_o := NULL;	-- above the cursor but outside the lease span
			END IF;
			-- Lease-less: anywhere above the lease span.
			IF v_o IS NULL AND r.lease IS NULL THEN
				v_lo := r.hi + 1;
				SELECT min(x.base_offset + x.pos - 1) INTO v_o FROM (
					SELECT s.base_offset, unnest(array_positions(s.txn_ids, r.txn)) AS pos
					FROM (SELECT s.base_offset, s.txn_ids FROM queen_segments s
					      WHERE s.partition_id = r.pid
						AND s.base_offset > v_lo - 1000
						AND s.end_offset >= v_lo
					      ORDER BY s.base_offset LIMIT c_scan) s) x
				WHERE x.base_offset + x.pos - 1 >= v_lo;
			END IF;
			-- At or below the cursor, newest first.
			IF v_o IS NULL THEN
				SELECT max(x.base_offset + x.pos - 1) INTO v_o FROM (
					SELECT s.base_offset, unnest(array_positions(s.txn_ids, r.txn)) AS pos
					FROM (SELECT s.base_offset, s.txn_ids FROM queen_segments s
					      WHERE s.partition_id = r.pid AND s.base_offset <= r.cm
					      ORDER BY s.base_offset DESC LIMIT c_scan) s) x
				WHERE x.base_offset + x.pos - 1 <= r.cm;
			END IF;
			v_off[r.o] := v_o;
		END LOOP;
	END IF;

	RETURN QUERY
	WITH it AS (
		SELECT (u.o - 1)::int AS i, coalesce(u.g, '__QUEUE_MODE__') AS g, u.pid, u.txn,
		       u.st, u.lease, u.err, u.off
		FROM unnest(p_group, p_pid, p_txn, p_status, p_lease, p_error, v_off)
			WITH ORDINALITY AS u (g, pid, txn, st, lease, err, off, o)
	), cur AS (
		SELECT c.partition_id AS pid, c.group_name AS g, c.committed AS cm,
		       c.batch_end AS be, c.lease_id AS lid, c.lease_expires_at AS lexp,
		       c.retry_count AS rc, q.retry_limit AS rl,
		       (q.dead_letter_queue OR q.dlq_after_max_retries) AS dl,
		       q.id AS qid, q.name AS qname, p.name AS pname
		FROM queen_cursors c
		JOIN queen_partitions p ON p.id = c.partition_id
		JOIN queen_queues q ON q.id = p.queue_id
		WHERE (c.partition_id, c.group_name) IN (SELECT it.pid, it.g FROM it)
	), v AS (
		SELECT it.*, cur.cm,
		       CASE
			WHEN p.id IS NULL THEN 'partition not found'
			WHEN cur.pid IS NULL THEN
				CASE WHEN it.lease IS NOT NULL THEN 'invalid or expired lease'
				     ELSE 'consumer group has no cursor on this partition' END
			WHEN it.off <= cur.cm THEN
				CASE WHEN it.st = 'completed' THEN NULL ELSE 'already committed' END
			WHEN it.lease IS NOT NULL AND (cur.lid IS DISTINCT FROM it.lease
						       OR cur.lexp IS NULL OR cur.lexp <= now())
				THEN 'invalid or expired lease'
			WHEN it.off IS NULL THEN 'transaction not found'
		       END AS verr,
		       coalesce(it.off <= cur.cm AND it.st = 'completed', false) AS isnoop
		FROM it
		LEFT JOIN queen_partitions p ON p.id = it.pid
		LEFT JOIN cur ON cur.pid = it.pid AND cur.g = it.g
	), ok AS (
		SELECT v.* FROM v WHERE v.verr IS NULL AND NOT v.isnoop
	), hd AS (
		SELECT DISTINCT ON (ok.pid, ok.g) ok.pid, ok.g, ok.off AS head, ok.st AS hst,
		       ok.err AS herr, ok.i AS hidx
		FROM ok WHERE ok.st <> 'completed'
		ORDER BY ok.pid, ok.g, ok.off, ok.i
	), gr AS (
		SELECT cur.*, hd.head, hd.hst, hd.herr, hd.hidx,
		       greatest(cur.cm, (SELECT max(ok.off) FROM ok
					 WHERE ok.pid = cur.pid AND ok.g = cur.g
					   AND ok.st = 'completed'
					   AND (hd.head IS NULL OR ok.off < hd.head))) AS nc,
		       CASE WHEN hd.hst = 'dlq' THEN 'dlq'
			    WHEN hd.hst = 'failed' AND cur.rc >= cur.rl THEN
				CASE WHEN cur.dl THEN 'dlq' ELSE 'drop' END
			    WHEN hd.hst = 'failed' THEN 'budget'
			    WHEN hd.hst = 'retry' THEN 'retry'
			    ELSE 'none' END AS act
		FROM cur LEFT JOIN hd ON hd.pid = cur.pid AND hd.g = cur.g
		WHERE EXISTS (SELECT 1 FROM ok WHERE ok.pid = cur.pid AND ok.g = cur.g)
	), fin0 AS (
		SELECT gr.*,
		       CASE WHEN gr.act IN ('dlq', 'drop') THEN gr.head ELSE gr.nc END AS ncm
		FROM gr
	), fin AS (
		SELECT fin0.*,
		       -- Any head signal ends the batch: the messages above the head were not
		       -- committed (SPEC 6 rule 3), so they must redeliver now, not at expiry.
		       CASE WHEN fin0.act IN ('budget', 'retry', 'dlq', 'drop') THEN true
			    ELSE fin0.be IS NULL OR fin0.ncm >= fin0.be END AS rel
		FROM fin0
	), upd AS (
		UPDATE queen_cursors c SET
			committed = fin.ncm,
			lease_id = CASE WHEN fin.rel THEN NULL ELSE c.lease_id END,
			lease_expires_at = CASE WHEN fin.rel THEN NULL ELSE c.lease_expires_at END,
			batch_end = CASE WHEN fin.rel THEN NULL ELSE c.batch_end END,
			retry_count = CASE WHEN fin.act = 'budget' THEN c.retry_count + 1
					   WHEN fin.act = 'retry' THEN c.retry_count
					   WHEN fin.act IN ('dlq', 'drop') OR fin.rel THEN 0
					   ELSE c.retry_count END,
			updated_at = now()
		FROM fin
		WHERE c.partition_id = fin.pid AND c.group_name = fin.g
	), dq AS (
		INSERT INTO queen_dlq (queue_id, partition_id, queue_name, partition_name,
				       group_name, off, message_id, txn_id, trace_id, payload,
				       error_message, retry_count, created_at, failed_at, producer_sub)
		SELECT fin.qid, fin.pid, fin.qname, fin.pname, fin.g, fin.head,
		       s.ids[k.k], s.txn_ids[k.k], s.trace_ids[k.k], s.payloads[k.k],
		       coalesce(fin.herr, 'Retries exhausted'), fin.rc, s.created_at, now(),
		       s.producer_subs[k.k]
		FROM fin
		JOIN queen_segments s ON s.partition_id = fin.pid
			AND s.base_offset <= fin.head AND s.base_offset > fin.head - 1000
			AND s.end_offset >= fin.head
		CROSS JOIN LATERAL (SELECT (fin.head - s.base_offset + 1)::int AS k) k
		WHERE fin.act = 'dlq'
	)
	SELECT v.i, v.verr IS NULL, v.verr,
	       coalesce(v.verr IS NULL AND NOT v.isnoop AND fin.rel, false),
	       coalesce(fin.act = 'dlq' AND fin.hidx = v.i, false),
	       v.isnoop, v.pid, coalesce(fin.ncm, v.cm)
	FROM v LEFT JOIN fin ON fin.pid = v.pid AND fin.g = v.g;
END
$$;

-- Ack of items whose offsets the broker already knows (from src/offmap.c: what its own pop
-- delivered under that lease, read from segments that never change).  The broker calls it
-- only when every item is 'completed' and names its lease and offset, and sends the items as
-- runs: run k is p_count[k] consecutive items of one (partition, group, lease) whose offsets
-- lie in p_lo[k] .. p_hi[k].  Then the commit is one keyed UPDATE per (partition, group), all
-- of them in one statement, that takes the new committed offset only where the lease is still
-- live and held by that id (so the span is the one the pop delivered) and the offsets lie
-- inside it (above committed, at most batch_end): nothing is read from the segments, and a
-- run is answered by one row (n = its items) however many messages it acks.  The cursors are
-- locked in (partition, group) order first, as queen_ack locks them.  A run whose cursor did
-- not take the update (an expired or foreign lease, a re-ack) gets no row: the broker sends
-- its items to queen_ack, which gives them their verdicts one row each.  (Handled here, that
-- rare case cost every ack its items' transactionIds as a text array to parse.)
CREATE FUNCTION queen_ack_known(p_group text[], p_pid uuid[], p_lease uuid[], p_lo bigint[],
				p_hi bigint[], p_count int[])
RETURNS TABLE (idx int, success bool, error text, lease_released bool, dlq bool, noop bool,
	       partition_id uuid, committed bigint, n int)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
	IF coalesce(cardinality(p_pid), 0) = 0 THEN
		RETURN;
	END IF;

	RETURN QUERY
	WITH sp AS (
		-- Each run, with the index of its first item (0-based).
		SELECT u.k, u.g, u.pid, u.lease, u.lo, u.hi, u.cnt,
		       (sum(u.cnt) OVER (ORDER BY u.k) - u.cnt)::int AS first
		FROM unnest(p_group, p_pid, p_lease, p_lo, p_hi, p_count) WITH ORDINALITY
			AS u (g, pid, lease, lo, hi, cnt, k)
	), x AS (
		SELECT sp.pid, coalesce(sp.g, '__QUEUE_MODE__') AS g,
		       (array_agg(sp.lease))[1] AS lease, min(sp.lo) AS lo, max(sp.hi) AS hi
		FROM sp
		GROUP BY 1, 2
		HAVING count(DISTINCT sp.lease) = 1
	), lk AS MATERIALIZED (
		-- Each locked row carries its run's span on, and the ctid of the row version
		-- locked: the update below finds it by that, not by a second probe and a join
		-- back to x (one row expected of each side: a nested loop, n x n comparisons).
		SELECT x.*, c.ctid AS lid
		FROM x
		JOIN queen_cursors c ON c.partition_id = x.pid AND c.group_name = x.g
		ORDER BY c.partition_id, c.group_name
		FOR UPDATE OF c
	), up AS (
		UPDATE queen_cursors c SET
			committed = lk.hi,
			lease_id = CASE WHEN lk.hi >= c.batch_end THEN NULL ELSE c.lease_id END,
			lease_expires_at = CASE WHEN lk.hi >= c.batch_end THEN NULL
						ELSE c.lease_expires_at END,
			retry_count = CASE WHEN lk.hi >= c.batch_end THEN 0 ELSE c.retry_count END,
			batch_end = CASE WHEN lk.hi >= c.batch_end THEN NULL ELSE c.batch_end END,
			updated_at = now()
		FROM lk
		WHERE c.ctid = lk.lid AND c.partition_id = lk.pid AND c.group_name = lk.g
		  AND c.lease_id = lk.lease AND c.lease_expires_at > now()
		  AND lk.lo > c.committed AND lk.hi <= c.batch_end
		  -- Every row locked before the first is written.  lk is read as the update goes,
		  -- so without this init plan a row would be written, and then the next waited
		  -- for: a pop holding that next row and inserting the cursor of the written one
		  -- (its snapshot older than that cursor) waits for this ack, which waits for it.
		  AND (SELECT count(*) FROM lk) > 0
		RETURNING c.partition_id AS pid, c.group_name AS g, c.committed AS cm,
			  c.batch_end IS NULL AS rel
	)
	SELECT sp.first, true, NULL::text, up.rel, false, false, sp.pid, up.cm, sp.cnt
	FROM sp JOIN up ON up.pid = sp.pid AND up.g = coalesce(sp.g, '__QUEUE_MODE__')
	ORDER BY sp.k;
END
$$;
