-- transaction.sql: the transaction route (SPEC.md 8, 21).
--
-- queen_txn applies bundles (acks, kv ops, timers, pushes) in the statement's own
-- transaction, in one round trip, by calling the functions the single routes use: queen_ack,
-- queen_kv_apply, queen_timers_apply, queen_push.  Nothing here repeats their rules.
--
-- Group commit: the broker may hand over several bundles of concurrent requests at once.
-- Their acks go to ONE queen_ack call and their push items to ONE queen_push call (that is
-- where the saving is); kv ops and timers run bundle by bundle, in order.  The call commits
-- only when every bundle may: the effect is that of the bundles run one after the other.
-- Anything that is refused fails the whole call, and the broker then runs each bundle alone,
-- so that one bad bundle cannot fail the others.  Bundles of one call must not depend on
-- each other's acks: two that ack on the same (partition, group) (the commit rule would
-- judge their acks together, not in turn), or one that requires a lease another acks by
-- (the ack may release it), make the call refuse itself with QT002 before it acks.
--
-- A call that must not commit RAISEs SQLSTATE QT001, which undoes everything the statement
-- did (no subtransaction is paid for on the way that commits).  The message says what went
-- wrong; DETAIL is a JSON object whose "reason" is the verdict, with fields naming the item:
--   {"reason":"ack_rejected","ackIndex":i,"ackError":"invalid or expired lease"}
--   {"reason":"ack_rejected","lease":"<id>"}                 (a required lease is not live)
--   {"reason":"duplicate","pushIndex":i,"messageId":"<id of the message it duplicates>"}
--   {"reason":"kv_precondition","bundle":b,"failedIndex":i,"kvReason",...}
--                                                    (queen_kv_apply's answer, and the bundle)
-- ackIndex and pushIndex count acks and push items from 0 over the whole call, in input
-- order; bundle counts bundles from 0.
--
-- Order of work, and so of locks: cursor rows (acks), kv rows, timer rows, partition rows
-- (pushes) last.  Partition rows are the most contended locks (every producer of a queue
-- takes them, and holds them to commit), so they are taken last and held the shortest.
-- Timer rows before partition rows is also the order of the timer sweeper, which claims
-- timers and then pushes them.  Within each kind the called function keeps its own order
-- (cursors and partitions sorted, over all the bundles of the call).
--
-- Plans: the broker's sessions run with plan_cache_mode = force_generic_plan (dbpool.c); the
-- statements here are index probes per item, which a generic plan serves as well as a
-- custom one planned for each call's arrays.

-- One row of queen_txn's answer.  kind 'p' (push item): idx, ok = queued, id = message id,
-- queue_id, partition_id, num = the partition's log end.  kind 'a' (ack): idx, ok, grp = the
-- group acked (resolved), error, released, dlq, noop, partition_id, num = committed offset.
-- kind 'k' (kv) and 't' (timers) of bundle number idx: body = their results as a JSON array,
-- each element with "index" (its position in the bundle's results), "type" and its position
-- in its own array ("kvIndex", "timerIndex").
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
CREATE FUNCTION queen_txn(p_pid uuid[], p_queue text[], p_partition text[], p_id uuid[],
			  p_txn text[], p_trace text[], p_payload text[],
			  a_group text[], a_pid uuid[], a_txn text[], a_status text[],
			  a_lease uuid[], a_error text[], a_bundle int[],
			  r_lease uuid[], r_bundle int[], p_kv jsonb, p_timers jsonb, p_base int[],
			  p_sub text[])
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
					       p_payload, p_sub)
		      ORDER BY 1) x
		WHERE x.status = 'queued'
		   OR queen_txn_refuse('duplicate', x.idx, NULL, x.message_id);
	END IF;
END
$$;

-- The verdict of an ack refused or a push item found a duplicate inside queen_txn, raised as
-- SQLSTATE QT001 (see 006_transaction.sql for the detail's fields).  Never returns: it is
-- called from the WHERE clause of queen_txn's results, on the first row that fails, so the
-- common case pays for no check beyond the row's own status.
CREATE FUNCTION queen_txn_refuse(p_reason text, p_idx int, p_error text, p_mid uuid)
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
