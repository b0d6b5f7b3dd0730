-- timers.sql: timers (SPEC.md 14): schedule, cancel, read, fire.
--
-- The rounds (queen_timers_fire, queen_timers_deliver) plan with sequential scans off: the
-- broker's sessions plan generically and keep the plans of their first round, and a plan
-- made on an empty table would read a grown one whole on every round.

-- Schedule and cancel when every operation names its own (queue, timerKey), so they are
-- independent: one upsert (in key order, so concurrent calls do not deadlock) and one delete.
-- Results as queen_timers_apply's.
CREATE FUNCTION queen_timers_apply_set(p_ops jsonb) RETURNS jsonb
LANGUAGE sql AS $$
	WITH x AS (
		SELECT * FROM ROWS FROM (jsonb_to_recordset(p_ops) AS (op text, queue text,
			"timerKey" text, partition text, "delayMs" bigint, txn text,
			"messageId" uuid, payload text, "producerSub" text))
			WITH ORDINALITY AS x (op, queue, k, part, delay, txn, mid, payload, sub, o)
	), ins AS (
		INSERT INTO queen_timers AS t (queue_name, timer_key, partition_name, deliver_at,
					       txn, message_id, payload, created_at, producer_sub)
		SELECT x.queue, x.k, coalesce(x.part, 'Default'),
		       now() + x.delay * interval '1 millisecond', coalesce(x.txn, x.mid::text),
		       x.mid, x.payload, now(), x.sub
		FROM x WHERE x.op = 'schedule'
		ORDER BY x.queue, x.k
		ON CONFLICT (queue_name, timer_key) DO UPDATE
		SET partition_name = excluded.partition_name, deliver_at = excluded.deliver_at,
		    txn = excluded.txn, message_id = excluded.message_id,
		    payload = excluded.payload, attempts = 0, last_error = NULL,
		    created_at = excluded.created_at, producer_sub = excluded.producer_sub
		RETURNING t.queue_name, t.timer_key, t.deliver_at, t.xmax = 0 AS fresh
	), del AS (
		DELETE FROM queen_timers t USING x
		WHERE x.op = 'cancel' AND t.queue_name = x.queue AND t.timer_key = x.k
		RETURNING t.queue_name, t.timer_key
	)
	SELECT coalesce(jsonb_agg(CASE WHEN x.op = 'schedule' THEN jsonb_build_object(
			'index', x.o - 1, 'op', 'schedule', 'ok', true, 'status', 'scheduled',
			'queue', x.queue, 'timerKey', x.k, 'partition', coalesce(x.part, 'Default'),
			'txn', coalesce(x.txn, x.mid::text), 'messageId', x.mid,
			'deliverAt', queen_ts(ins.deliver_at), 'replaced', NOT ins.fresh)
		ELSE jsonb_build_object(
			'index', x.o - 1, 'op', 'cancel', 'ok', true,
			'status', CASE WHEN del.queue_name IS NULL THEN 'absent'
				       ELSE 'cancelled' END,
			'queue', x.queue, 'timerKey', x.k) END ORDER BY x.o), '[]'::jsonb)
	FROM x
	LEFT JOIN ins ON x.op = 'schedule' AND ins.queue_name = x.queue AND ins.timer_key = x.k
	LEFT JOIN del ON x.op = 'cancel' AND del.queue_name = x.queue AND del.timer_key = x.k
$$;

-- Schedule and cancel (SPEC.md 14), in input order; one result per operation, as a jsonb
-- array.  p_ops is what the broker's validator (h_timers_validate_ops) produced:
--   {"op":"schedule","queue","timerKey","partition","delayMs","txn","messageId","payload"}
--     payload = the JSON text of the payload, as a string (stored as is);
--   {"op":"cancel","queue","timerKey"}.
-- Usable alone or inside a larger transaction (the transaction route's timers array).
-- The usual call names each key once (queen_timers_apply_set); a call naming a key twice is
-- applied one operation at a time, so a later operation sees the earlier ones.
CREATE FUNCTION queen_timers_apply(p_ops jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
	v_ops jsonb := coalesce(p_ops, '[]'::jsonb);
	v_bad bigint;
	v_repeats bool;
	v_op jsonb;
	v_i int;
	v_q text;
	v_k text;
	v_p text;
	v_txn text;
	v_at timestamptz;
	v_new bool;
	v_n int;
	v_out jsonb[] := '{}';
BEGIN
	SELECT count(*) FILTER (WHERE x.queue IS NULL OR x."timerKey" IS NULL OR x.op IS NULL
				  OR x.op NOT IN ('schedule', 'cancel')
				  OR (x.op = 'schedule' AND (x."delayMs" IS NULL OR x."delayMs" < 0
					OR x."messageId" IS NULL OR x.payload IS NULL))),
	       count(*) <> count(DISTINCT ROW(x.queue, x."timerKey"))
	INTO v_bad, v_repeats
	FROM jsonb_to_recordset(v_ops) AS x (op text, queue text, "timerKey" text,
					     "delayMs" bigint, "messageId" uuid, payload text);
	IF v_bad > 0 THEN
		RAISE EXCEPTION 'queen_timers_apply: % malformed operations', v_bad;
	END IF;
	IF NOT v_repeats THEN
		RETURN queen_timers_apply_set(v_ops);
	END IF;

	FOR v_op, v_i IN
		SELECT e.v, (e.o - 1)::int
		FROM jsonb_array_elements(v_ops) WITH ORDINALITY AS e (v, o)
		ORDER BY e.o
	LOOP
		v_q := v_op->>'queue';
		v_k := v_op->>'timerKey';
		IF v_op->>'op' = 'cancel' THEN
			DELETE FROM queen_timers t WHERE t.queue_name = v_q AND t.timer_key = v_k;
			GET DIAGNOSTICS v_n = ROW_COUNT;
			v_out := v_out || jsonb_build_object(
				'index', v_i, 'op', 'cancel', 'ok', true,
				'status', CASE WHEN v_n > 0 THEN 'cancelled' ELSE 'absent' END,
				'queue', v_q, 'timerKey', v_k);
			CONTINUE;
		END IF;
		v_p := coalesce(v_op->>'partition', 'Default');
		v_txn := coalesce(v_op->>'txn', v_op->>'messageId');
		v_at := now() + (v_op->>'delayMs')::bigint * interval '1 millisecond';
		INSERT INTO queen_timers AS t (queue_name, timer_key, partition_name, deliver_at,
					       txn, message_id, payload, created_at, producer_sub)
		VALUES (v_q, v_k, v_p, v_at, v_txn, (v_op->>'messageId')::uuid, v_op->>'payload',
			now(), v_op->>'producerSub')
		ON CONFLICT (queue_name, timer_key) DO UPDATE
		SET partition_name = excluded.partition_name, deliver_at = excluded.deliver_at,
		    txn = excluded.txn, message_id = excluded.message_id,
		    payload = excluded.payload, attempts = 0, last_error = NULL,
		    created_at = excluded.created_at, producer_sub = excluded.producer_sub
		RETURNING t.xmax = 0 INTO v_new;
		v_out := v_out || jsonb_build_object(
			'index', v_i, 'op', 'schedule', 'ok', true, 'status', 'scheduled',
			'queue', v_q, 'timerKey', v_k, 'partition', v_p, 'txn', v_txn,
			'messageId', v_op->>'messageId', 'deliverAt', queen_ts(v_at),
			'replaced', NOT v_new);
	END LOOP;
	RETURN to_jsonb(v_out);
END
$$;

-- One pending timer as the API shows it, without its payload (the payload is JSON text,
-- handed out as stored, never round-tripped through jsonb).
CREATE FUNCTION queen_timer_json(t queen_timers) RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT jsonb_build_object(
		'queue', t.queue_name, 'timerKey', t.timer_key, 'partition', t.partition_name,
		'txn', t.txn, 'messageId', t.message_id, 'deliverAt', queen_ts(t.deliver_at),
		'attempts', t.attempts, 'lastError', t.last_error,
		'createdAt', queen_ts(t.created_at), 'payloadBytes', octet_length(t.payload))
$$;

-- Peek: the pending timer and its payload text; no row when there is none.
CREATE FUNCTION queen_timers_get(p_queue text, p_key text)
RETURNS TABLE (timer jsonb, payload text)
LANGUAGE sql STABLE AS $$
	SELECT queen_timer_json(t), t.payload FROM queen_timers t
	WHERE t.queue_name = p_queue AND t.timer_key = p_key
$$;

-- List the pending timers of a queue in timerKey order, after p_after (exclusive), at most
-- p_limit; nextAfter is the key to pass as after= for the next page (NULL on the last one).
CREATE FUNCTION queen_timers_list(p_queue text, p_after text, p_limit int) RETURNS jsonb
LANGUAGE sql STABLE AS $$
	WITH rows AS (
		SELECT t, t.timer_key AS k, row_number() OVER (ORDER BY t.timer_key) AS rn
		FROM queen_timers t
		WHERE t.queue_name = p_queue AND (p_after IS NULL OR t.timer_key > p_after)
		ORDER BY t.timer_key
		LIMIT p_limit + 1
	)
	SELECT jsonb_build_object(
		'queue', p_queue,
		'timers', coalesce(jsonb_agg(queen_timer_json(r.t) ORDER BY r.k)
				   FILTER (WHERE r.rn <= p_limit), '[]'::jsonb),
		'truncated', count(*) > p_limit,
		'nextAfter', CASE WHEN count(*) > p_limit THEN
				(array_agg(r.k ORDER BY r.k DESC) FILTER (WHERE r.rn <= p_limit))[1]
			     END)
	FROM rows r
$$;

-- A claimed timer on its way to queen_push.  tid is its row's ctid: the row is locked by the
-- claiming transaction, so the ctid stays valid until that transaction deletes or updates it,
-- and every later statement of the round finds the row by a TID scan, whatever the planner
-- thinks of the table's size.
CREATE TYPE queen_timer_due AS (
	tid		tid,
	queue_name	text,
	timer_key	text,
	partition_name	text,
	txn		text,
	message_id	uuid,
	payload		text,
	attempts	int,
	producer_sub	text
);

-- What became of one claimed timer: status queued|duplicate with where it went, or error.
CREATE TYPE queen_timer_outcome AS (
	tid		tid,
	queue_name	text,
	timer_key	text,
	partition_name	text,
	attempts	int,
	status		text,
	queue_id	uuid,
	partition_id	uuid,
	log_end		bigint,
	error		text
);

-- Delivers p_due through one queen_push call and deletes the timers, in a subtransaction.
-- When that fails, the set is split in two and each half tried the same way, so one bad timer
-- costs about 2 log2(n) subtransactions and never undoes the others.  A single timer that
-- fails comes back with its error (the caller records it).  Transient errors (serialization,
-- deadlock, lock timeout, out of resources, cancel) are not charged to any timer: they abort
-- the whole round, which the next sweep repeats.
CREATE FUNCTION queen_timers_deliver(p_due queen_timer_due[])
RETURNS SETOF queen_timer_outcome
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
	v_n int := coalesce(cardinality(p_due), 0);
	v_half int;
	v_nulls text[];
	v_tids tid[];
	v_st text[];
	v_qid uuid[];
	v_pid uuid[];
	v_end bigint[];
	v_done bool := false;
	v_err text;
	v_state text;
BEGIN
	IF v_n = 0 THEN
		RETURN;
	END IF;
	v_nulls := array_fill(NULL::text, ARRAY[v_n]);
	BEGIN
		SELECT array_agg(p.status ORDER BY p.idx), array_agg(p.queue_id ORDER BY p.idx),
		       array_agg(p.partition_id ORDER BY p.idx), array_agg(p.log_end ORDER BY p.idx)
		INTO v_st, v_qid, v_pid, v_end
		FROM queen_push(NULL,
				ARRAY(SELECT d.queue_name FROM unnest(p_due) WITH ORDINALITY d
				      ORDER BY d.ordinality),
				ARRAY(SELECT d.partition_name FROM unnest(p_due) WITH ORDINALITY d
				      ORDER BY d.ordinality),
				ARRAY(SELECT d.message_id FROM unnest(p_due) WITH ORDINALITY d
				      ORDER BY d.ordinality),
				ARRAY(SELECT d.txn FROM unnest(p_due) WITH ORDINALITY d
				      ORDER BY d.ordinality),
				v_nulls,
				ARRAY(SELECT d.payload FROM unnest(p_due) WITH ORDINALITY d
				      ORDER BY d.ordinality),
				ARRAY(SELECT d.producer_sub FROM unnest(p_due) WITH ORDINALITY d
				      ORDER BY d.ordinality)) p;
		v_tids := ARRAY(SELECT d.tid FROM unnest(p_due) d);
		DELETE FROM queen_timers t WHERE t.ctid = ANY (v_tids);
		v_done := true;
	EXCEPTION WHEN OTHERS THEN
		GET STACKED DIAGNOSTICS v_err = MESSAGE_TEXT, v_state = RETURNED_SQLSTATE;
		IF left(v_state, 2) IN ('40', '53', '57') OR v_state = '55P03' THEN
			RAISE;
		END IF;
	END;
	IF v_done THEN
		RETURN QUERY
		SELECT d.tid, d.queue_name, d.timer_key, d.partition_name, d.attempts, x.st, x.qid,
		       x.pid, x.lend, NULL::text
		FROM unnest(p_due) WITH ORDINALITY AS d
		JOIN unnest(v_st, v_qid, v_pid, v_end) WITH ORDINALITY AS x (st, qid, pid, lend, o)
			ON x.o = d.ordinality;
	ELSIF v_n = 1 THEN
		RETURN QUERY
		SELECT d.tid, d.queue_name, d.timer_key, d.partition_name, d.attempts, NULL::text,
		       NULL::uuid, NULL::uuid, NULL::bigint, v_err
		FROM unnest(p_due) d;
	ELSE
		v_half := v_n / 2;
		RETURN QUERY SELECT * FROM queen_timers_deliver(p_due[1:v_half]);
		RETURN QUERY SELECT * FROM queen_timers_deliver(p_due[v_half + 1:v_n]);
	END IF;
END
$$;

-- The sweeper (one call = one round, one transaction): claims up to p_limit due timers (and
-- delivers at most about 16 MiB of payload) with FOR UPDATE SKIP LOCKED, so brokers sweeping
-- together never claim one timer twice; delivers them (queen_timers_deliver) and records failures:
-- attempts + 1 and a later deliver_at, or on the 5th failure a dead letter.
-- One row per (queue, partition) touched: queued = new messages (wake the parked pops),
-- fired = timers delivered (queued or duplicate), failed = retried later, dead =
-- dead-lettered.  fired + failed + dead over all rows = timers claimed.
CREATE FUNCTION queen_timers_fire(p_limit int)
RETURNS TABLE (queue_name text, partition_name text, queue_id uuid, partition_id uuid,
	       log_end bigint, queued int, fired int, failed int, dead int)
LANGUAGE plpgsql SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
	c_max_attempts constant int := 5;
	c_budget constant bigint := 16777216;	-- payload bytes a round
	v_tid tid[];
	v_len bigint[];
	v_n int;
	v_due queen_timer_due[];
	v_res queen_timer_outcome[];
BEGIN
	-- Claim the oldest due timers; one that another broker holds is skipped, one replaced
	-- meanwhile is re-checked (deliver_at).  Payloads are not read yet: the round takes the
	-- claimed timers up to the byte budget (at least one) and leaves the rest to the next
	-- round (their locks go with this one).
	SELECT array_agg(l.ctid ORDER BY l.o), array_agg(l.len ORDER BY l.o)
	INTO v_tid, v_len
	FROM (SELECT x.ctid, octet_length(x.payload)::bigint AS len, row_number() OVER () AS o
	      FROM (SELECT y.ctid, y.payload FROM queen_timers y
		    WHERE y.deliver_at <= now()
		    ORDER BY y.deliver_at, y.created_at
		    LIMIT greatest(p_limit, 1)
		    FOR UPDATE SKIP LOCKED) x) l;
	IF v_tid IS NULL THEN
		RETURN;
	END IF;
	SELECT count(*) INTO v_n
	FROM (SELECT sum(u.len) OVER (ORDER BY u.o ROWS UNBOUNDED PRECEDING) - u.len AS before
	      FROM unnest(v_len) WITH ORDINALITY AS u (len, o)) c
	WHERE c.before < c_budget;
	SELECT array_agg(ROW(t.ctid, t.queue_name, t.timer_key, t.partition_name, t.txn,
			     t.message_id, t.payload, t.attempts, t.producer_sub)::queen_timer_due
			 ORDER BY t.deliver_at, t.created_at)
	INTO v_due
	FROM queen_timers t WHERE t.ctid = ANY (v_tid[1:v_n]);

	SELECT array_agg(r) INTO v_res FROM queen_timers_deliver(v_due) r;

	-- Failed under the limit: try again later (0.2 s, 0.4 s, 0.8 s, 1.6 s).
	UPDATE queen_timers t
	SET attempts = t.attempts + 1, last_error = r.error,
	    deliver_at = now() + interval '200 milliseconds' * power(2, t.attempts)
	FROM unnest(v_res) r
	WHERE t.ctid = ANY (ARRAY(SELECT f.tid FROM unnest(v_res) f
				  WHERE f.error IS NOT NULL AND f.attempts + 1 < c_max_attempts))
	  AND t.ctid = r.tid;

	-- The last failure: a dead letter, with the names copied in (and the ids when known).
	WITH gone AS (
		DELETE FROM queen_timers t USING unnest(v_res) r
		WHERE t.ctid = ANY (ARRAY(SELECT f.tid FROM unnest(v_res) f
					  WHERE f.error IS NOT NULL
					    AND f.attempts + 1 >= c_max_attempts))
		  AND t.ctid = r.tid
		RETURNING t.*, r.error AS err
	)
	INSERT INTO queen_dlq (queue_id, partition_id, queue_name, partition_name, group_name,
			       message_id, txn_id, payload, error_message, retry_count, created_at,
			       failed_at, producer_sub)
	SELECT q.id, p.id, g.queue_name, g.partition_name, '__TIMERS__', g.message_id, g.txn,
	       g.payload, g.err, g.attempts + 1, g.created_at, now(), g.producer_sub
	FROM gone g
	LEFT JOIN queen_queues q ON q.name = g.queue_name
	LEFT JOIN queen_partitions p ON p.queue_id = q.id AND p.name = g.partition_name;

	RETURN QUERY
	SELECT r.queue_name, r.partition_name,
	       (array_agg(r.queue_id) FILTER (WHERE r.queue_id IS NOT NULL))[1],
	       (array_agg(r.partition_id) FILTER (WHERE r.partition_id IS NOT NULL))[1],
	       max(r.log_end),
	       (count(*) FILTER (WHERE r.status = 'queued'))::int,
	       (count(*) FILTER (WHERE r.error IS NULL))::int,
	       (count(*) FILTER (WHERE r.error IS NOT NULL
				 AND r.attempts + 1 < c_max_attempts))::int,
	       (count(*) FILTER (WHERE r.error IS NOT NULL
				 AND r.attempts + 1 >= c_max_attempts))::int
	FROM unnest(v_res) r
	GROUP BY r.queue_name, r.partition_name
	ORDER BY r.queue_name, r.partition_name;
END
$$;
