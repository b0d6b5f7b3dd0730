-- 009_lean_paths.sql: the pop (SPEC.md 5), the ack (SPEC.md 6 and 21) and the transaction
-- (SPEC.md 8), replacing those of 0.1.0 (002_core_functions.sql, 006_transaction.sql) with
-- ones whose common case runs fewer and plainer statements.  In PL/pgSQL every
-- statement pays for its executor start-up (plan nodes, expression programs, memory contexts)
-- whatever the rows it touches, and a pop or an ack of a healthy consumer touches few rows:
-- there the number of statements, not their rows, is the cost.
--
-- A span of offsets (a lease, a pop) is read as the primary-key range of queen_segments from
-- the segment holding its first offset (one backward probe: max(base_offset) <= first) to its
-- last.  Bounding that range below by "first - 1000" instead (a segment holds at most 1000
-- offsets) reads every small segment in between: up to a thousand index entries and heap
-- rows for a partition fed one message per push.

-- Pop (SPEC.md 5).  Claims up to p_max_partitions partitions with deliverable data for the
-- group (cursor rows FOR UPDATE SKIP LOCKED: claims never wait), leases them under
-- p_lease_id (or commits at once when p_auto_ack) and returns up to p_batch messages, one row
-- each, in claim order then offset order.  No row = nothing deliverable.
CREATE OR REPLACE FUNCTION queen_pop(p_queue text, p_partition text, p_namespace text, p_task text,
			  p_group text, p_batch int, p_max_partitions int, p_lease_seconds int,
			  p_auto_ack bool, p_sub_mode text, p_sub_from timestamptz, p_lease_id uuid,
			  p_candidates uuid[])
RETURNS TABLE (partition_id uuid, partition_name text, queue_name text, off bigint,
	       message_id uuid, txn_id text, trace_id text, payload text, created_at timestamptz,
	       attempt int, committed bigint, log_end bigint, lease_expires_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
	v_group text := coalesce(p_group, '__QUEUE_MODE__');
	v_qmode bool := coalesce(p_group, '__QUEUE_MODE__') = '__QUEUE_MODE__';
	v_batch int := coalesce(p_batch, 200);
	v_width int := coalesce(p_max_partitions, 1);
	v_auto bool := coalesce(p_auto_ack, false);
	v_lease uuid := coalesce(p_lease_id, gen_random_uuid());
	v_queues uuid[];
	v_cand uuid[];
	v_claim uuid[];
	v_met bool;
	v_missing bigint := 0;
	v_round int;
BEGIN
	IF v_batch < 1 OR v_width < 1 THEN
		RETURN;
	END IF;

	-- The queues; whether the group has met them all yet; how many of the broker's
	-- candidates the group has no cursor on.  One statement: in the steady state (a known
	-- group, cursors on every candidate) the pop is this, the claim and the read.
	IF p_queue IS NOT NULL THEN
		SELECT array_agg(q.id),
		       bool_and(v_qmode OR EXISTS (SELECT 1 FROM queen_subscriptions s
						   WHERE s.group_name = v_group
						     AND s.queue_id = q.id)),
		       (SELECT count(*) FROM unnest(p_candidates) AS u (pid)
			WHERE NOT EXISTS (SELECT 1 FROM queen_cursors c
					  WHERE c.partition_id = u.pid
					    AND c.group_name = v_group))
		INTO v_queues, v_met, v_missing
		FROM queen_queues q WHERE q.name = p_queue;
	ELSE
		SELECT array_agg(q.id),
		       bool_and(v_qmode OR EXISTS (SELECT 1 FROM queen_subscriptions s
						   WHERE s.group_name = v_group
						     AND s.queue_id = q.id))
		INTO v_queues, v_met
		FROM queen_queues q
		WHERE (p_namespace IS NULL OR q.namespace = p_namespace)
		  AND (p_task IS NULL OR q.task = p_task);
	END IF;
	IF v_queues IS NULL THEN
		RETURN;
	END IF;

	-- First contact of a named group with a queue: decide and store where it starts.
	IF NOT v_met THEN
		INSERT INTO queen_subscriptions (group_name, queue_id, mode, start_at)
		SELECT v_group, u.qid,
		       CASE WHEN p_sub_from IS NOT NULL THEN 'timestamp'
			    WHEN p_sub_mode = 'all' THEN 'all' ELSE 'new' END,
		       CASE WHEN p_sub_from IS NOT NULL THEN p_sub_from
			    WHEN p_sub_mode = 'all' THEN NULL ELSE now() END
		FROM unnest(v_queues) AS u (qid)
		WHERE NOT EXISTS (SELECT 1 FROM queen_subscriptions s
				  WHERE s.group_name = v_group AND s.queue_id = u.qid)
		ON CONFLICT DO NOTHING;
	END IF;

	-- Candidate partitions, in the order they are to be tried: the broker's list (the
	-- claim below keeps those of the queues and partition asked for), else every
	-- partition holding data, least recently served cursor first.
	IF p_candidates IS NOT NULL THEN
		v_cand := p_candidates;
	ELSE
		SELECT array_agg(p.id ORDER BY c.updated_at NULLS FIRST, p.id),
		       count(*) FILTER (WHERE c.partition_id IS NULL)
		INTO v_cand, v_missing
		FROM queen_partitions p
		LEFT JOIN queen_cursors c ON c.partition_id = p.id AND c.group_name = v_group
		WHERE p.queue_id = ANY (v_queues)
		  AND (p_partition IS NULL OR p.name = p_partition)
		  AND p.next_offset > p.log_start
		  AND (c.partition_id IS NULL
		       OR (p.next_offset - 1 > greatest(c.committed, p.log_start - 1)
			   AND (c.lease_expires_at IS NULL OR c.lease_expires_at <= now())));
	END IF;
	IF v_cand IS NULL THEN
		RETURN;
	END IF;

	-- Claim, in candidate order, among the candidates the group has a cursor on; the lease
	-- condition is rechecked on the locked row version (EvalPlanQual).  Candidates the group
	-- has never read get their cursor first, at the group's start, but only as many as the
	-- pop may claim: concurrent pops are handed overlapping candidate lists, and a cursor
	-- row inserted for a partition another pop inserts too makes each wait for the other's
	-- commit (ON CONFLICT).  When the claim comes up short and more candidates lack a
	-- cursor, those get theirs and the claim runs once more.
	v_claim := '{}';
	FOR v_round IN 1 .. 2 LOOP
		IF v_missing > 0 THEN
			INSERT INTO queen_cursors (partition_id, group_name, committed)
			SELECT n.id, v_group, n.start
			FROM (SELECT p.id,
				     queen_cursor_start(p.id, p.log_start, p.next_offset,
							p.created_at, p.last_created_at,
							s.start_at) AS start
			      FROM unnest(v_cand) WITH ORDINALITY AS u (pid, o)
			      JOIN queen_partitions p ON p.id = u.pid
			      LEFT JOIN queen_subscriptions s ON s.group_name = v_group
				AND s.queue_id = p.queue_id
			      WHERE p.queue_id = ANY (v_queues)
				AND (p_partition IS NULL OR p.name = p_partition)
				AND (v_qmode OR s.group_name IS NOT NULL)
				AND NOT EXISTS (SELECT 1 FROM queen_cursors c
						WHERE c.partition_id = p.id
						  AND c.group_name = v_group)
			      ORDER BY u.o
			      LIMIT CASE WHEN v_round = 1 THEN v_width END) n
			ORDER BY n.id
			ON CONFLICT DO NOTHING;
		END IF;

		SELECT v_claim || coalesce(array_agg(x.pid ORDER BY x.o), '{}') INTO v_claim FROM (
			SELECT c.partition_id AS pid, u.o
			FROM unnest(v_cand) WITH ORDINALITY AS u (pid, o)
			JOIN queen_partitions p ON p.id = u.pid
			JOIN queen_queues q ON q.id = p.queue_id
			JOIN queen_cursors c ON c.partition_id = u.pid AND c.group_name = v_group
			WHERE p.queue_id = ANY (v_queues)
			  AND (p_partition IS NULL OR p.name = p_partition)
			  AND u.pid <> ALL (v_claim)
			  AND p.next_offset - 1 > greatest(c.committed, p.log_start - 1)
			  AND (c.lease_expires_at IS NULL OR c.lease_expires_at <= now())
			  AND (q.window_buffer <= 0
			       OR p.last_created_at <= now() - make_interval(
					secs => q.window_buffer))
			  AND (q.delayed_processing <= 0 OR EXISTS (
				SELECT 1 FROM queen_segments s
				WHERE s.partition_id = p.id
				  AND s.base_offset <= greatest(c.committed, p.log_start - 1) + 1
				  AND s.base_offset > greatest(c.committed, p.log_start - 1) + 1 - 1000
				  AND s.end_offset >= greatest(c.committed, p.log_start - 1) + 1
				  AND s.created_at <= now() - make_interval(
					secs => q.delayed_processing)))
			ORDER BY u.o
			LIMIT v_width - cardinality(v_claim)
			FOR UPDATE OF c SKIP LOCKED
		) x;
		EXIT WHEN cardinality(v_claim) >= v_width OR v_missing <= v_width;
	END LOOP;
	IF cardinality(v_claim) = 0 THEN
		RETURN;
	END IF;

	RETURN QUERY
	WITH cl AS (
		SELECT u.o, p.id AS pid, p.name AS pname, q.name AS qname,
		       p.next_offset - 1 AS lend,
		       greatest(c.committed, p.log_start - 1) AS base,
		       CASE WHEN q.delayed_processing <= 0
				 OR p.last_created_at <= now() - make_interval(
					secs => q.delayed_processing)
			    THEN p.next_offset - 1
			    ELSE coalesce(queen_offset_at(p.id,
					now() - make_interval(secs => q.delayed_processing), true),
					p.next_offset) - 1
		       END AS vend,
		       coalesce(p_lease_seconds, nullif(q.lease_time, 0), 60) AS secs
		FROM unnest(v_claim) WITH ORDINALITY AS u (pid, o)
		JOIN queen_cursors c ON c.partition_id = u.pid AND c.group_name = v_group
		JOIN queen_partitions p ON p.id = u.pid
		JOIN queen_queues q ON q.id = p.queue_id
	), qt AS (
		-- sum() of bigint is numeric: cast back, or every offset computed from take is
		-- numeric and the segment probe below loses its index bound.
		SELECT cl.*,
		       least(greatest(cl.vend - cl.base, 0),
			     greatest(v_batch - coalesce(sum(greatest(cl.vend - cl.base, 0)) OVER (
				ORDER BY cl.o ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)::bigint,
				0), 0))
			AS take
		FROM cl
	), upd AS (
		UPDATE queen_cursors c SET
			committed = CASE WHEN v_auto THEN qt.base + qt.take ELSE c.committed END,
			lease_id = CASE WHEN v_auto THEN NULL ELSE v_lease END,
			lease_expires_at = CASE WHEN v_auto THEN NULL
					   ELSE now() + make_interval(secs => qt.secs) END,
			batch_end = CASE WHEN v_auto THEN NULL ELSE qt.base + qt.take END,
			retry_count = CASE WHEN v_auto THEN 0 ELSE c.retry_count END,
			attempt_base = qt.base + 1,
			attempt_count = CASE WHEN c.attempt_base = qt.base + 1
					THEN c.attempt_count + 1 ELSE 1 END,
			updated_at = now()
		FROM qt
		WHERE qt.take > 0 AND c.partition_id = qt.pid AND c.group_name = v_group
		RETURNING c.partition_id AS pid, c.committed AS cmt, c.attempt_count AS att,
			  c.lease_expires_at AS lexp
	)
	-- The messages: set-returning functions in the select list run in lockstep and stream
	-- (ProjectSet), where a function in FROM would fill a tuple store per segment.
	SELECT z.pid, z.pname, z.qname, z.first + z.k, z.mid, z.txn, z.trace, z.payload,
	       z.created_at, z.att, z.cmt, z.lend, z.lexp
	FROM (SELECT qt.o, qt.pid, qt.pname, qt.qname, s.base_offset + r.lo - 1 AS first,
		     s.created_at, upd.att, upd.cmt, qt.lend, upd.lexp,
		     generate_series(0, r.hi - r.lo) AS k,
		     unnest(s.ids[r.lo:r.hi]) AS mid, unnest(s.txn_ids[r.lo:r.hi]) AS txn,
		     unnest(s.trace_ids[r.lo:r.hi]) AS trace,
		     unnest(s.payloads[r.lo:r.hi]) AS payload
	      FROM qt
	      JOIN upd ON upd.pid = qt.pid
	      JOIN queen_segments s ON s.partition_id = qt.pid
		AND s.base_offset <= qt.base + qt.take
		AND s.base_offset >= coalesce((SELECT max(s0.base_offset) FROM queen_segments s0
					       WHERE s0.partition_id = qt.pid
						 AND s0.base_offset <= qt.base + 1),
					      qt.base + 1 - 999)
		AND s.end_offset > qt.base
	      CROSS JOIN LATERAL (SELECT greatest(qt.base + 1 - s.base_offset + 1, 1) AS lo,
					 least(qt.base + qt.take, s.end_offset) - s.base_offset + 1
					 AS hi) r
	      WHERE qt.take > 0) z
	ORDER BY z.o, 4;
END
$$;

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
CREATE OR REPLACE FUNCTION queen_ack(p_group text[], p_pid uuid[], p_txn text[], p_status text[],
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
				       error_message, retry_count, created_at, failed_at)
		SELECT fin.qid, fin.pid, fin.qname, fin.pname, fin.g, fin.head,
		       s.ids[k.k], s.txn_ids[k.k], s.trace_ids[k.k], s.payloads[k.k],
		       coalesce(fin.herr, 'Retries exhausted'), fin.rc, s.created_at, now()
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

-- The verdict of an ack refused or a push item found a duplicate inside queen_txn, raised as
-- SQLSTATE QT001 (see 006_transaction.sql for the detail's fields).  Never returns: it is
-- called from the WHERE clause of queen_txn's results, on the first row that fails, so the
-- common case pays for no check beyond the row's own status.
CREATE OR REPLACE FUNCTION queen_txn_refuse(p_reason text, p_idx int, p_error text, p_mid uuid)
RETURNS bool
LANGUAGE plpgsql AS $$
BEGIN
	IF p_reason = 'duplicate' THEN
		RAISE EXCEPTION USING ERRCODE = 'QT001',
			MESSAGE = format('push item %s is a duplicate of message %s', p_idx, p_mid),
			DETAIL = jsonb_build_object('reason', 'duplicate', 'pushIndex', p_idx,
						    'messageId', p_mid);
	END IF;
	RAISE EXCEPTION USING ERRCODE = 'QT001',
		MESSAGE = format('ack %s rejected: %s', p_idx, p_error),
		DETAIL = jsonb_build_object('reason', 'ack_rejected', 'ackIndex', p_idx,
					    'ackError', p_error);
END
$$;

-- Transaction (SPEC.md 8).  Push items as queen_push takes them (the broker's message ids and
-- known partition ids); acks as queen_ack takes them, except that a_group and a_lease may hold
-- NULL for "not given", and a_bundle says which bundle each belongs to; r_lease, r_bundle: the
-- requiredLeases of each bundle.  p_kv and p_timers: one element per bundle, its kv (timers)
-- array or null.  p_base: per bundle, its number of push items and acks (where its kv results
-- start in its results).  The number of bundles is cardinality(p_base).
--
-- Lease rule of an ack: its own leaseId first; else, when its bundle has requiredLeases, the
-- lease the (partition, group) cursor holds must be one of them; else lease-less.  An ack
-- that names no consumerGroup acks for the group whose cursor on that partition holds its
-- lease (its own, else one of its bundle's requiredLeases): a lease id names one pop of one
-- group, and clients that send requiredLeases name no group.  Without a lease to go by, the
-- group is __QUEUE_MODE__.
CREATE OR REPLACE FUNCTION queen_txn(p_pid uuid[], p_queue text[], p_partition text[], p_id uuid[],
			  p_txn text[], p_trace text[], p_payload text[],
			  a_group text[], a_pid uuid[], a_txn text[], a_status text[],
			  a_lease uuid[], a_error text[], a_bundle int[],
			  r_lease uuid[], r_bundle int[], p_kv jsonb, p_timers jsonb, p_base int[])
RETURNS SETOF queen_txn_row
LANGUAGE plpgsql AS $$
DECLARE
	-- never a lease id: an ack given it fails its lease check in queen_ack
	c_no_lease constant uuid := '00000000-0000-0000-0000-000000000000';
	v_nb int := coalesce(cardinality(p_base), 0);
	v_np int := coalesce(cardinality(p_id), 0);
	v_na int := coalesce(cardinality(a_txn), 0);
	v_req bool := coalesce(cardinality(r_lease), 0) > 0;
	v_group text[] := a_group;
	v_lease uuid[] := a_lease;
	v_bad uuid;
	v_ops jsonb;
	v_res jsonb;
	v_nkv int[] := array_fill(0, ARRAY[greatest(v_nb, 1)]);
BEGIN
	-- Every required lease must be live, whether or not an ack goes by it.
	IF v_req THEN
		SELECT u.l INTO v_bad FROM unnest(r_lease) AS u (l)
		WHERE NOT EXISTS (SELECT 1 FROM queen_cursors c
				  WHERE c.lease_id = u.l AND c.lease_expires_at > now())
		LIMIT 1;
		IF v_bad IS NOT NULL THEN
			RAISE EXCEPTION USING ERRCODE = 'QT001',
				MESSAGE = format('required lease %s is not live', v_bad),
				DETAIL = jsonb_build_object('reason', 'ack_rejected', 'lease', v_bad);
		END IF;
	END IF;

	IF v_na > 0 THEN
		-- Groups and leases the bodies left out (the lease rule above).  Read without
		-- locks: queen_ack checks the lease chosen under the cursor row lock.
		IF array_position(a_group, NULL) IS NOT NULL
		   OR (v_req AND array_position(a_lease, NULL) IS NOT NULL) THEN
			SELECT array_agg(g.g ORDER BY u.o),
			       array_agg(CASE WHEN u.l IS NOT NULL OR rq.req IS NULL THEN u.l
					      WHEN c.lease_id = ANY (rq.req) THEN c.lease_id
					      ELSE c_no_lease END ORDER BY u.o)
			INTO v_group, v_lease
			FROM unnest(a_group, a_pid, a_lease, a_bundle) WITH ORDINALITY
				AS u (g, pid, l, b, o)
			LEFT JOIN LATERAL (
				SELECT array_agg(r.l) AS req FROM unnest(r_lease, r_bundle) AS r (l, b)
				WHERE v_req AND r.b = u.b) rq ON true
			LEFT JOIN LATERAL (
				SELECT x.group_name FROM queen_cursors x
				WHERE u.g IS NULL AND x.partition_id = u.pid
				  AND (x.lease_id = u.l
				       OR (u.l IS NULL AND x.lease_id = ANY (rq.req)))
				ORDER BY x.lease_expires_at DESC NULLS LAST
				LIMIT 1) byl ON true
			CROSS JOIN LATERAL (SELECT coalesce(u.g, byl.group_name, '__QUEUE_MODE__')
					    AS g) g
			LEFT JOIN queen_cursors c ON u.l IS NULL AND rq.req IS NOT NULL
				AND c.partition_id = u.pid AND c.group_name = g.g;
		END IF;

		-- Bundles that would see each other's acks: the same cursor, or a lease one of
		-- them requires and another acks by (and may release).
		IF v_nb > 1 AND (EXISTS (
			SELECT 1 FROM unnest(v_group, a_pid, a_bundle) AS u (g, pid, b)
			GROUP BY coalesce(u.g, '__QUEUE_MODE__'), u.pid
			HAVING count(DISTINCT u.b) > 1) OR (v_req AND EXISTS (
			SELECT 1 FROM unnest(r_lease, r_bundle) AS r (l, b)
			JOIN unnest(v_lease, a_bundle) AS u (l, b) ON u.l = r.l AND u.b <> r.b))) THEN
			RAISE EXCEPTION USING ERRCODE = 'QT002',
				MESSAGE = 'bundles of one call depend on each other''s acks';
		END IF;

		-- Rows go out as they come; the first refused ack (in input order) raises, and
		-- the raise undoes the rows already returned along with everything else.
		RETURN QUERY
		SELECT 'a', a.idx, a.success, NULL::uuid, NULL::uuid, a.partition_id, a.committed,
		       coalesce(v_group[a.idx + 1], '__QUEUE_MODE__'), a.error, a.lease_released,
		       a.dlq, a.noop, NULL::text
		FROM (SELECT * FROM queen_ack(v_group, a_pid, a_txn, a_status, v_lease, a_error)
		      ORDER BY 1) a
		WHERE a.success OR queen_txn_refuse('ack_rejected', a.idx, a.error, NULL);
	END IF;

	FOR b IN 1 .. CASE WHEN p_kv IS NULL THEN 0 ELSE v_nb END LOOP
		v_ops := p_kv->(b - 1);
		CONTINUE WHEN jsonb_typeof(v_ops) IS DISTINCT FROM 'array'
			OR jsonb_array_length(v_ops) = 0;
		v_res := queen_kv_apply(v_ops, false);
		IF (v_res->'ok') = 'false'::jsonb THEN
			RAISE EXCEPTION USING ERRCODE = 'QT001',
				MESSAGE = format('kv precondition lost: kv[%s] %s %s: %s',
						 v_res->'failedIndex', v_res->>'op', v_res->>'key',
						 v_res->>'kvReason'),
				DETAIL = (v_res - 'ok') || jsonb_build_object('bundle', b - 1);
		END IF;
		v_nkv[b] := jsonb_array_length(v_res->'results');
		RETURN QUERY
		SELECT 'k', b - 1, true, NULL::uuid, NULL::uuid, NULL::uuid, NULL::bigint, NULL,
		       NULL, NULL::bool, NULL::bool, NULL::bool,
		       jsonb_agg(e.v || jsonb_build_object('index', p_base[b] + e.o - 1,
							   'type', 'kv', 'kvIndex', e.o - 1)
				 ORDER BY e.o)::text
		FROM jsonb_array_elements(v_res->'results') WITH ORDINALITY AS e (v, o);
	END LOOP;

	FOR b IN 1 .. CASE WHEN p_timers IS NULL THEN 0 ELSE v_nb END LOOP
		v_ops := p_timers->(b - 1);
		CONTINUE WHEN jsonb_typeof(v_ops) IS DISTINCT FROM 'array'
			OR jsonb_array_length(v_ops) = 0;
		v_res := queen_timers_apply(v_ops);
		RETURN QUERY
		SELECT 't', b - 1, true, NULL::uuid, NULL::uuid, NULL::uuid, NULL::bigint, NULL,
		       NULL, NULL::bool, NULL::bool, NULL::bool,
		       jsonb_agg(e.v || jsonb_build_object('index', p_base[b] + v_nkv[b] + e.o - 1,
							   'type', 'timer', 'timerIndex', e.o - 1)
				 ORDER BY e.o)::text
		FROM jsonb_array_elements(v_res) WITH ORDINALITY AS e (v, o);
	END LOOP;

	IF v_np > 0 THEN
		RETURN QUERY
		SELECT 'p', x.idx, true, x.message_id, x.queue_id, x.partition_id, x.log_end,
		       NULL, NULL, NULL::bool, NULL::bool, NULL::bool, NULL::text
		FROM (SELECT * FROM queen_push(p_pid, p_queue, p_partition, p_id, p_txn, p_trace,
					       p_payload, NULL)
		      ORDER BY 1) x
		WHERE x.status = 'queued'
		   OR queen_txn_refuse('duplicate', x.idx, NULL, x.message_id);
	END IF;
END
$$;
