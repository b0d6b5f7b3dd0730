-- dlq_messages.sql: dead letters (SPEC.md 11) and the messages routes (SPEC.md 12).

-- Dead letters (SPEC.md 11), newest first.  NULL filters = all.  Text, not jsonb: each
-- payload is spliced in as stored (queen_json_splice), so a \u0000 in one breaks no page.
CREATE FUNCTION queen_dlq_list(p_queue text, p_group text, p_limit int, p_offset int)
RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT '{"messages": [' || coalesce((
			SELECT string_agg(x.j, ', ' ORDER BY x.failed_at DESC, x.id)
			FROM (SELECT d.failed_at, d.id, queen_json_splice(jsonb_build_object(
					'id', d.id, 'transactionId', d.txn_id,
					'messageId', d.message_id, 'partitionId', d.partition_id,
					'queue', d.queue_name, 'partition', d.partition_name,
					'consumerGroup', d.group_name, 'offset', d.off,
					'errorMessage', d.error_message, 'retryCount', d.retry_count,
					'traceId', d.trace_id, 'producerSub', d.producer_sub,
					'createdAt', queen_ts(d.created_at),
					'failedAt', queen_ts(d.failed_at))::text, 'data',
					d.payload) AS j
			      FROM queen_dlq d
			      WHERE (p_queue IS NULL OR d.queue_name = p_queue)
				AND (p_group IS NULL OR d.group_name = p_group)
			      ORDER BY d.failed_at DESC, d.id
			      LIMIT coalesce(p_limit, 100) OFFSET coalesce(p_offset, 0)) x),
			'')
		|| '], "pagination": '
		|| jsonb_build_object('limit', coalesce(p_limit, 100),
				      'offset', coalesce(p_offset, 0))::text
		|| ', "total": '
		|| (SELECT count(*) FROM queen_dlq d
		    WHERE (p_queue IS NULL OR d.queue_name = p_queue)
		      AND (p_group IS NULL OR d.group_name = p_group))::text
		|| '}'
$$;

-- DELETE /api/v1/dlq?queue=&consumerGroup=
CREATE FUNCTION queen_dlq_purge(p_queue text, p_group text) RETURNS jsonb
LANGUAGE sql AS $$
	WITH d AS (
		DELETE FROM queen_dlq d
		WHERE d.queue_name = p_queue AND (p_group IS NULL OR d.group_name = p_group)
		RETURNING 1
	)
	SELECT jsonb_build_object('success', true, 'queue', p_queue, 'consumerGroup', p_group,
				  'deleted', count(*))
	FROM d
$$;

-- Replay (SPEC.md 11): a move in one transaction.  The row (by id, or the newest at a
-- (partition, transactionId) address) is locked, its message pushed again through
-- queen_push with transactionId dlq:<row id> (so dedup makes a repeat harmless) to its own
-- queue and partition or to p_queue/p_partition, and the row deleted when the push stored
-- it.  o_result: moved | duplicate (nothing written, row kept) | gone (no such row).
CREATE FUNCTION queen_dlq_replay(p_id uuid, p_pid uuid, p_txn text, p_queue text,
				 p_partition text, p_msg_id uuid)
RETURNS TABLE (o_result text, o_dlq_id uuid, o_status text, o_message_id uuid,
	       o_queue_id uuid, o_partition_id uuid, o_off bigint, o_log_end bigint,
	       o_queue text, o_partition text, o_txn text)
LANGUAGE plpgsql AS $$
DECLARE
	d queen_dlq;
	v_queue text;
	v_part text;
	v_txn text;
	r record;
BEGIN
	IF p_id IS NOT NULL THEN
		SELECT * INTO d FROM queen_dlq x WHERE x.id = p_id FOR UPDATE;
	ELSE
		SELECT * INTO d FROM queen_dlq x
		WHERE x.txn_id = p_txn AND x.partition_id = p_pid
		ORDER BY x.failed_at DESC, x.id DESC LIMIT 1
		FOR UPDATE;
	END IF;
	IF d.id IS NULL THEN
		RETURN QUERY SELECT 'gone'::text, NULL::uuid, NULL::text, NULL::uuid, NULL::uuid,
			NULL::uuid, NULL::bigint, NULL::bigint, NULL::text, NULL::text, NULL::text;
		RETURN;
	END IF;

	v_queue := coalesce(p_queue, d.queue_name);
	v_part := coalesce(p_partition, d.partition_name);
	v_txn := 'dlq:' || d.id::text;
	SELECT x.status, x.message_id, x.queue_id, x.partition_id, x.off, x.log_end INTO r
	FROM queen_push(NULL, ARRAY[v_queue], ARRAY[v_part], ARRAY[p_msg_id], ARRAY[v_txn],
			ARRAY[d.trace_id], ARRAY[coalesce(d.payload, 'null')],
			ARRAY[d.producer_sub]) x;
	IF r.status = 'queued' THEN
		DELETE FROM queen_dlq x WHERE x.id = d.id;
	END IF;

	RETURN QUERY SELECT CASE WHEN r.status = 'queued' THEN 'moved' ELSE 'duplicate' END,
		d.id, r.status, r.message_id, r.queue_id, r.partition_id, r.off, r.log_end,
		v_queue, v_part, v_txn;
END
$$;

-- Status of the messages [p_lo, p_hi] of a partition, one row each (SPEC.md 12):
-- dead_letter (a dead-letter row holds it), processing (some group's live lease covers it),
-- completed (every group holding a cursor on the partition is past it), else pending.
CREATE FUNCTION queen_message_status(p_pid uuid, p_lo bigint, p_hi bigint)
RETURNS TABLE (off bigint, status text)
LANGUAGE sql STABLE AS $$
	WITH cur AS (
		SELECT min(c.committed) AS mincm FROM queen_cursors c WHERE c.partition_id = p_pid
	)
	SELECT o.off,
	       CASE WHEN EXISTS (SELECT 1 FROM queen_dlq d
				 WHERE d.partition_id = p_pid AND d.off = o.off) THEN 'dead_letter'
		    WHEN EXISTS (SELECT 1 FROM queen_cursors c
				 WHERE c.partition_id = p_pid AND c.lease_expires_at > now()
				   AND c.committed < o.off AND c.batch_end >= o.off) THEN 'processing'
		    WHEN cur.mincm >= o.off THEN 'completed'
		    ELSE 'pending' END
	FROM generate_series(p_lo, p_hi) AS o (off) CROSS JOIN cur
$$;

-- GET /api/v1/messages: retained messages, newest first (segment time, then offset), with
-- optional filters.  Segments are walked newest first and the walk stops as soon as the
-- page (and one more, for hasMore) is filled, so a page costs what it shows; a status
-- filter that matches little may walk far.  Dead letters are found from their table.
-- p_to is inclusive to the millisecond (the precision of the createdAt the API shows).
-- Payloads are not listed (GET one message for it).
CREATE FUNCTION queen_messages_list(p_queue text, p_partition text, p_status text,
				    p_from timestamptz, p_to timestamptz, p_limit int,
				    p_offset int)
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
	v_limit int := coalesce(p_limit, 200);
	v_skip int := coalesce(p_offset, 0);
	v_seen bigint := 0;
	v_out jsonb[] := '{}';
	v_more bool := false;
	seg record;
	m record;
BEGIN
	IF p_status = 'dead_letter' THEN
		SELECT coalesce(array_agg(jsonb_build_object(
				'id', y.message_id, 'transactionId', y.txn_id,
				'partitionId', y.partition_id, 'queue', y.qname,
				'partition', y.pname, 'queuePath', y.qname || '/' || y.pname,
				'namespace', y.namespace, 'task', y.task, 'offset', y.off,
				'status', 'dead_letter', 'traceId', y.trace_id,
				'createdAt', queen_ts(y.created_at))
			ORDER BY y.created_at DESC, y.partition_id, y.off DESC), '{}')
		INTO v_out
		FROM (
			SELECT DISTINCT ON (d.created_at, d.partition_id, d.off)
			       d.message_id, d.txn_id, d.partition_id, d.off, d.trace_id,
			       d.created_at, q.name AS qname, p.name AS pname, q.namespace, q.task
			FROM queen_dlq d
			JOIN queen_partitions p ON p.id = d.partition_id
			CROSS JOIN LATERAL queen_log_tail(p.id, p.kept_next_offset,
							  p.kept_last_created_at) pl
			JOIN queen_queues q ON q.id = p.queue_id
			WHERE (p_queue IS NULL OR q.name = p_queue)
			  AND (p_partition IS NULL OR p.name = p_partition)
			  AND (p_from IS NULL OR d.created_at >= p_from)
			  AND (p_to IS NULL OR d.created_at < p_to + interval '1 millisecond')
			  AND d.off >= p.log_start AND d.off < pl.next_offset
			ORDER BY d.created_at DESC, d.partition_id, d.off DESC
			LIMIT v_limit + 1 OFFSET v_skip) y;
		v_more := cardinality(v_out) > v_limit;
		IF v_more THEN
			v_out := v_out[1:v_limit];
		END IF;
	ELSE
		<<walk>>
		FOR seg IN
			SELECT s.partition_id AS pid, s.base_offset, s.end_offset, s.created_at,
			       s.ids, s.txn_ids, s.trace_ids, p.log_start, p.name AS pname,
			       q.name AS qname, q.namespace, q.task
			FROM queen_segments s
			JOIN queen_partitions p ON p.id = s.partition_id
			JOIN queen_queues q ON q.id = p.queue_id
			WHERE (p_queue IS NULL OR q.name = p_queue)
			  AND (p_partition IS NULL OR p.name = p_partition)
			  AND (p_from IS NULL OR s.created_at >= p_from)
			  AND (p_to IS NULL OR s.created_at < p_to + interval '1 millisecond')
			  AND s.end_offset >= p.log_start
			ORDER BY s.created_at DESC, s.partition_id, s.base_offset DESC
		LOOP
			FOR m IN
				SELECT st.off, st.status, seg.ids[k.k] AS mid, seg.txn_ids[k.k] AS txn,
				       seg.trace_ids[k.k] AS trace
				FROM queen_message_status(seg.pid,
					greatest(seg.base_offset, seg.log_start), seg.end_offset) st
				CROSS JOIN LATERAL (SELECT (st.off - seg.base_offset + 1)::int AS k) k
				WHERE p_status IS NULL OR st.status = p_status
				ORDER BY st.off DESC
			LOOP
				v_seen := v_seen + 1;
				IF v_seen > v_skip + v_limit THEN
					v_more := true;
					EXIT walk;
				END IF;
				IF v_seen > v_skip THEN
					v_out := v_out || jsonb_build_object(
						'id', m.mid, 'transactionId', m.txn,
						'partitionId', seg.pid, 'queue', seg.qname,
						'partition', seg.pname,
						'queuePath', seg.qname || '/' || seg.pname,
						'namespace', seg.namespace, 'task', seg.task,
						'offset', m.off, 'status', m.status, 'traceId', m.trace,
						'createdAt', queen_ts(seg.created_at));
				END IF;
			END LOOP;
		END LOOP;
	END IF;

	RETURN jsonb_build_object(
		'messages', to_jsonb(v_out),
		'pagination', jsonb_build_object('limit', v_limit, 'offset', v_skip),
		'hasMore', v_more);
END
$$;

-- Offset of the newest retained message of a partition with this transactionId (a message
-- pushed without one answers to its message id), or NULL.  The dedup row answers when the
-- id is within its window; else the partition's segments are scanned newest first.
CREATE FUNCTION queen_message_locate(p_pid uuid, p_txn text) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
	v_off bigint;
	v_ls bigint;
BEGIN
	SELECT p.log_start INTO v_ls FROM queen_partitions p WHERE p.id = p_pid;
	IF v_ls IS NULL THEN
		RETURN NULL;
	END IF;
	SELECT d.off INTO v_off FROM queen_dedup d
	WHERE d.partition_id = p_pid AND d.txn_id = queen_txn_key(p_txn);
	IF v_off IS NOT NULL AND v_off >= v_ls AND EXISTS (
		SELECT 1 FROM queen_segments s
		WHERE s.partition_id = p_pid AND s.base_offset <= v_off
		  AND s.base_offset > v_off - 1000 AND s.end_offset >= v_off
		  AND s.txn_ids[(v_off - s.base_offset + 1)::int] = p_txn) THEN
		RETURN v_off;
	END IF;
	SELECT max(x.base_offset + x.pos - 1) INTO v_off FROM (
		SELECT s.base_offset, unnest(array_positions(s.txn_ids, p_txn)) AS pos
		FROM (SELECT s.base_offset, s.txn_ids FROM queen_segments s
		      WHERE s.partition_id = p_pid AND s.end_offset >= v_ls
			AND p_txn = ANY (s.txn_ids)
		      ORDER BY s.base_offset DESC LIMIT 1) s) x;
	RETURN v_off;
END
$$;

-- GET /api/v1/messages/:partitionId/:transactionId: the message with its payload, status,
-- the state of every group holding a cursor on its partition (or a dead letter of it) and
-- its dead letters, newest first.  A message retention removed from the log but still held
-- by a dead-letter row is answered from that row ("inLog":false).  NULL when neither.
CREATE FUNCTION queen_message_get(p_pid uuid, p_txn text) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
	v_off bigint := queen_message_locate(p_pid, p_txn);
	v_in_log bool := false;
	v_dl jsonb;
	v_groups jsonb;
	v_status text;
	m record;
BEGIN
	IF v_off IS NOT NULL THEN
		SELECT s.ids[k.k] AS mid, s.txn_ids[k.k] AS txn, s.trace_ids[k.k] AS trace,
		       s.payloads[k.k] AS payload, s.created_at, p.name AS pname, q.name AS qname,
		       q.namespace, q.task, s.producer_subs[k.k] AS sub
		INTO m
		FROM queen_segments s
		JOIN queen_partitions p ON p.id = s.partition_id
		JOIN queen_queues q ON q.id = p.queue_id
		CROSS JOIN LATERAL (SELECT (v_off - s.base_offset + 1)::int AS k) k
		WHERE s.partition_id = p_pid AND s.base_offset <= v_off
		  AND s.base_offset > v_off - 1000 AND s.end_offset >= v_off;
		v_in_log := FOUND;
	END IF;
	IF v_in_log THEN
		SELECT st.status INTO v_status FROM queen_message_status(p_pid, v_off, v_off) st;
	ELSE
		SELECT d.message_id AS mid, d.txn_id AS txn, d.trace_id AS trace, d.payload,
		       d.created_at, d.partition_name AS pname, d.queue_name AS qname,
		       q.namespace, q.task, d.producer_sub AS sub, d.off
		INTO m
		FROM queen_dlq d LEFT JOIN queen_queues q ON q.id = d.queue_id
		WHERE d.txn_id = p_txn AND d.partition_id = p_pid
		ORDER BY d.failed_at DESC, d.id DESC LIMIT 1;
		IF NOT FOUND THEN
			RETURN NULL;
		END IF;
		v_off := m.off;
		v_status := 'dead_letter';
	END IF;

	SELECT coalesce(jsonb_agg(jsonb_build_object(
			'id', d.id, 'consumerGroup', d.group_name, 'errorMessage', d.error_message,
			'retryCount', d.retry_count, 'failedAt', queen_ts(d.failed_at))
		ORDER BY d.failed_at DESC, d.id), '[]'::jsonb)
	INTO v_dl
	FROM queen_dlq d
	WHERE d.txn_id = p_txn AND d.partition_id = p_pid
	  AND d.off IS NOT DISTINCT FROM v_off;

	SELECT coalesce(jsonb_agg(jsonb_build_object(
			'consumerGroup', g.g, 'committed', c.committed,
			'status', CASE
				WHEN EXISTS (SELECT 1 FROM queen_dlq d
					     WHERE d.partition_id = p_pid AND d.off = v_off
					       AND d.group_name = g.g) THEN 'dead_letter'
				WHEN c.lease_expires_at > now() AND c.committed < v_off
				     AND c.batch_end >= v_off THEN 'processing'
				WHEN c.committed >= v_off THEN 'completed'
				ELSE 'pending' END,
			'leaseActive', coalesce(c.lease_expires_at > now(), false),
			'leaseExpiresAt', CASE WHEN c.lease_expires_at > now()
					  THEN queen_ts(c.lease_expires_at) END)
		ORDER BY g.g), '[]'::jsonb)
	INTO v_groups
	FROM (SELECT c.group_name AS g FROM queen_cursors c WHERE c.partition_id = p_pid
	      UNION
	      SELECT d.group_name FROM queen_dlq d
	      WHERE d.partition_id = p_pid AND d.off = v_off) g
	LEFT JOIN queen_cursors c ON c.partition_id = p_pid AND c.group_name = g.g;

	-- The payload as both data and payload (SPEC 21), spliced in as stored text.
	RETURN queen_json_splice(queen_json_splice(jsonb_build_object(
		'id', m.mid, 'transactionId', m.txn, 'partitionId', p_pid,
		'queue', m.qname, 'partition', m.pname, 'queuePath', m.qname || '/' || m.pname,
		'namespace', m.namespace, 'task', m.task, 'offset', v_off,
		'status', v_status, 'inLog', v_in_log,
		'traceId', m.trace, 'producerSub', m.sub,
		'createdAt', queen_ts(m.created_at),
		'errorMessage', v_dl->0->'errorMessage', 'retryCount', v_dl->0->'retryCount',
		'groups', v_groups, 'deadLetters', v_dl)::text, 'data', m.payload), 'payload',
		m.payload);
END
$$;

-- DELETE /api/v1/messages/:partitionId/:transactionId: the log is immutable, so this deletes
-- the message's dead-letter rows only and says how many.  NULL when the address names
-- neither a retained message nor a dead letter.
CREATE FUNCTION queen_message_delete(p_pid uuid, p_txn text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
	v_n int;
BEGIN
	WITH d AS (
		DELETE FROM queen_dlq d WHERE d.txn_id = p_txn AND d.partition_id = p_pid
		RETURNING 1
	)
	SELECT count(*) INTO v_n FROM d;
	IF v_n = 0 AND queen_message_locate(p_pid, p_txn) IS NULL THEN
		RETURN NULL;
	END IF;
	RETURN jsonb_build_object('success', true, 'partitionId', p_pid,
				  'transactionId', p_txn, 'deleted', v_n);
END
$$;
