-- 006_transaction.sql: the transaction route (SPEC.md 8, 21).
--
-- queen_txn applies one bundle (acks, kv ops, timers, pushes) in the statement's own
-- transaction, in one round trip, by calling the functions the single routes use: queen_ack,
-- queen_kv_apply, queen_timers_apply, queen_push.  Nothing here repeats their rules.
--
-- A bundle that must not commit RAISEs SQLSTATE QT001, which undoes everything the statement
-- did (no subtransaction is paid for on the way that commits).  The message says what went
-- wrong; DETAIL is a JSON object whose "reason" is the verdict, with fields naming the item:
--   {"reason":"ack_rejected","ackIndex":i,"ackError":"invalid or expired lease"}
--   {"reason":"ack_rejected","lease":"<id>"}                 (a required lease is not live)
--   {"reason":"duplicate","pushIndex":i,"messageId":"<id of the message it duplicates>"}
--   {"reason":"kv_precondition","failedIndex":i,"kvReason",...}   (queen_kv_apply's answer)
-- ackIndex and pushIndex count acks and push items from 0, in input order.
--
-- Order of work, and so of locks: cursor rows (acks), kv rows, timer rows, partition rows
-- (pushes) last.  Partition rows are the most contended locks (every producer of a queue
-- takes them, and holds them to commit), so they are taken last and held the shortest.
-- Timer rows before partition rows is also the order of the timer sweeper, which claims
-- timers and then pushes them.  Within each kind the called function keeps its own order.

-- One row of queen_txn's answer.  kind 'p' (push item): idx, ok = queued, id = message id,
-- queue_id, partition_id, num = the partition's log end.  kind 'a' (ack): idx, ok, grp = the
-- group acked (resolved), error, released, dlq, noop, partition_id, num = committed offset.
-- kind 'k' (kv) and 't' (timers): body = their results as a JSON array, each element with
-- "index" (its position in the transaction's results), "type" and its position in its own
-- array ("kvIndex", "timerIndex").
CREATE TYPE queen_txn_row AS (
	kind		text,
	idx		int,
	ok		bool,
	id		uuid,
	queue_id	uuid,
	partition_id	uuid,
	num		bigint,
	grp		text,
	error		text,
	released	bool,
	dlq		bool,
	noop		bool,
	body		text
);

-- Transaction (SPEC.md 8).  Push items as queen_push takes them (the broker's message ids and
-- known partition ids), acks as queen_ack takes them except that a_group and a_lease may hold
-- NULL for "not given"; p_required = the requiredLeases of the body (NULL or empty: none).
--
-- Lease rule of an ack: its own leaseId first; else, with requiredLeases, the lease the
-- (partition, group) cursor holds must be one of them; else lease-less.  An ack that names
-- no consumerGroup acks for the group whose cursor on that partition holds its lease (its
-- own, else one of requiredLeases): a lease id names one pop of one group, and clients that
-- send requiredLeases name no group.  Without a lease to go by the group is __QUEUE_MODE__.
CREATE FUNCTION queen_txn(p_pid uuid[], p_queue text[], p_partition text[], p_id uuid[],
			  p_txn text[], p_trace text[], p_payload text[],
			  a_group text[], a_pid uuid[], a_txn text[], a_status text[],
			  a_lease uuid[], a_error text[], p_required uuid[], p_kv jsonb,
			  p_timers jsonb)
RETURNS SETOF queen_txn_row
LANGUAGE plpgsql AS $$
DECLARE
	-- never a lease id: an ack given it fails its lease check in queen_ack
	c_no_lease constant uuid := '00000000-0000-0000-0000-000000000000';
	v_np int := coalesce(cardinality(p_id), 0);
	v_na int := coalesce(cardinality(a_txn), 0);
	v_req bool := coalesce(cardinality(p_required), 0) > 0;
	v_group text[] := a_group;
	v_lease uuid[] := a_lease;
	v_rows queen_txn_row[] := '{}';
	v_bad uuid;
	v_fi int;
	v_ferr text;
	v_fmid uuid;
	v_kv jsonb;
	v_tm jsonb;
	v_nkv int := 0;
BEGIN
	-- Every required lease must be live, whether or not an ack goes by it.
	IF v_req THEN
		SELECT u.l INTO v_bad FROM unnest(p_required) AS u (l)
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
		-- Groups and leases the body left out (the lease rule above).  Read without
		-- locks: queen_ack checks the lease chosen under the cursor row lock.
		IF array_position(a_group, NULL) IS NOT NULL
		   OR (v_req AND array_position(a_lease, NULL) IS NOT NULL) THEN
			SELECT array_agg(g.g ORDER BY u.o),
			       array_agg(CASE WHEN u.l IS NOT NULL OR NOT v_req THEN u.l
					      WHEN c.lease_id = ANY (p_required) THEN c.lease_id
					      ELSE c_no_lease END ORDER BY u.o)
			INTO v_group, v_lease
			FROM unnest(a_group, a_pid, a_lease) WITH ORDINALITY AS u (g, pid, l, o)
			LEFT JOIN LATERAL (
				SELECT x.group_name FROM queen_cursors x
				WHERE u.g IS NULL AND x.partition_id = u.pid
				  AND (x.lease_id = u.l
				       OR (u.l IS NULL AND v_req AND x.lease_id = ANY (p_required)))
				ORDER BY x.lease_expires_at DESC NULLS LAST
				LIMIT 1) byl ON true
			CROSS JOIN LATERAL (SELECT coalesce(u.g, byl.group_name, '__QUEUE_MODE__')
					    AS g) g
			LEFT JOIN queen_cursors c ON u.l IS NULL AND v_req
				AND c.partition_id = u.pid AND c.group_name = g.g;
		END IF;

		SELECT array_agg(ROW('a', a.idx, a.success, NULL, NULL, a.partition_id, a.committed,
				     coalesce(v_group[a.idx + 1], '__QUEUE_MODE__'), a.error,
				     a.lease_released, a.dlq, a.noop, NULL)::queen_txn_row
				 ORDER BY a.idx),
		       (array_agg(a.idx ORDER BY a.idx) FILTER (WHERE NOT a.success))[1],
		       (array_agg(a.error ORDER BY a.idx) FILTER (WHERE NOT a.success))[1]
		INTO v_rows, v_fi, v_ferr
		FROM queen_ack(v_group, a_pid, a_txn, a_status, v_lease, a_error) a;
		IF v_fi IS NOT NULL THEN
			RAISE EXCEPTION USING ERRCODE = 'QT001',
				MESSAGE = format('ack %s rejected: %s', v_fi, v_ferr),
				DETAIL = jsonb_build_object('reason', 'ack_rejected', 'ackIndex', v_fi,
							    'ackError', v_ferr);
		END IF;
	END IF;

	IF jsonb_array_length(coalesce(p_kv, '[]')) > 0 THEN
		v_kv := queen_kv_apply(p_kv, false);
		IF (v_kv->'ok') = 'false'::jsonb THEN
			RAISE EXCEPTION USING ERRCODE = 'QT001',
				MESSAGE = format('kv precondition lost: kv[%s] %s %s: %s',
						 v_kv->'failedIndex', v_kv->>'op', v_kv->>'key',
						 v_kv->>'kvReason'),
				DETAIL = v_kv - 'ok';
		END IF;
		v_nkv := jsonb_array_length(v_kv->'results');
		v_rows := v_rows || ROW('k', NULL, true, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
					NULL, NULL,
					(SELECT jsonb_agg(e.v || jsonb_build_object(
							'index', v_np + v_na + e.o - 1, 'type', 'kv',
							'kvIndex', e.o - 1) ORDER BY e.o)
					 FROM jsonb_array_elements(v_kv->'results')
						WITH ORDINALITY AS e (v, o))::text)::queen_txn_row;
	END IF;

	IF jsonb_array_length(coalesce(p_timers, '[]')) > 0 THEN
		v_tm := queen_timers_apply(p_timers);
		v_rows := v_rows || ROW('t', NULL, true, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
					NULL, NULL,
					(SELECT jsonb_agg(e.v || jsonb_build_object(
							'index', v_np + v_na + v_nkv + e.o - 1,
							'type', 'timer', 'timerIndex', e.o - 1) ORDER BY e.o)
					 FROM jsonb_array_elements(v_tm) WITH ORDINALITY AS e (v, o))::text
				       )::queen_txn_row;
	END IF;

	IF v_np > 0 THEN
		v_fi := NULL;
		SELECT v_rows || array_agg(ROW('p', x.idx, x.status = 'queued', x.message_id,
					       x.queue_id, x.partition_id, x.log_end, NULL, NULL,
					       NULL, NULL, NULL, NULL)::queen_txn_row ORDER BY x.idx),
		       (array_agg(x.idx ORDER BY x.idx) FILTER (WHERE x.status <> 'queued'))[1],
		       (array_agg(x.message_id ORDER BY x.idx) FILTER (WHERE x.status <> 'queued'))[1]
		INTO v_rows, v_fi, v_fmid
		FROM queen_push(p_pid, p_queue, p_partition, p_id, p_txn, p_trace, p_payload,
				NULL) x;
		IF v_fi IS NOT NULL THEN
			RAISE EXCEPTION USING ERRCODE = 'QT001',
				MESSAGE = format('push item %s is a duplicate of message %s', v_fi, v_fmid),
				DETAIL = jsonb_build_object('reason', 'duplicate', 'pushIndex', v_fi,
							    'messageId', v_fmid);
		END IF;
	END IF;

	RETURN QUERY SELECT * FROM unnest(v_rows);
END
$$;
