-- 005_groups_dlq_messages.sql: consumer groups and seek (SPEC.md 10), dead-letter purge and
-- replay (SPEC.md 11), the message browser (SPEC.md 12).
--
-- None of this is a hot path; every function is still one round trip.  What a group is:
-- a name that holds a cursor on some partition of a queue or a stored start on it
-- (queen_subscriptions).  On a queue where a group is known, a partition it has no cursor on
-- yet counts from where the group would start there (queen_cursor_start), so lag is right
-- before the first pop.
--
-- Changes to core tables: two indexes on queen_dlq (below).

-- Dead letters by message address: the message browser's status probe (partition, offset)
-- and replay/delete by (partitionId, transactionId).  A transactionId can be 64 KiB, more
-- than a btree entry holds, so that one is a hash index (it stores only the hash).
CREATE INDEX queen_dlq_addr ON queen_dlq (partition_id, off);
CREATE INDEX queen_dlq_txn ON queen_dlq USING hash (txn_id);

-- Seconds without cursor activity (pop, ack, extend, seek) after which a group with lag and
-- no live lease is reported Dead: its consumers are gone, not slow.
CREATE FUNCTION queen_group_dead_seconds() RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT 3600 $$;

-- created_at of the segment holding offset p_off of a partition (NULL when retained away).
-- Segments hold at most 1000 offsets, so this is one primary-key range probe.
CREATE FUNCTION queen_offset_time(p_pid uuid, p_off bigint) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
	SELECT s.created_at FROM queen_segments s
	WHERE s.partition_id = p_pid AND s.base_offset <= p_off AND s.base_offset > p_off - 1000
	  AND s.end_offset >= p_off
$$;

-- One row per (group, partition) of every queue the group is known on (p_group NULL = every
-- group): the effective committed offset (never below log start - 1), the lag in messages
-- and seconds, and the cursor's lease and activity.  A known queue without partitions gives
-- one row with NULL partition columns, so the group still shows on it.
CREATE FUNCTION queen_group_lag(p_group text)
RETURNS TABLE (group_name text, queue_id uuid, queue_name text, partition_id uuid,
	       partition_name text, has_cursor bool, committed bigint, log_start bigint,
	       log_end bigint, lag bigint, time_lag bigint, oldest_unconsumed timestamptz,
	       lease_active bool, lease_expires_at timestamptz, retry_count int,
	       updated_at timestamptz, mode text, start_at timestamptz, sub_created_at timestamptz)
LANGUAGE sql STABLE AS $$
	WITH gq AS (
		SELECT DISTINCT c.group_name AS g, p.queue_id AS qid
		FROM queen_cursors c JOIN queen_partitions p ON p.id = c.partition_id
		WHERE p_group IS NULL OR c.group_name = p_group
		UNION
		SELECT s.group_name, s.queue_id FROM queen_subscriptions s
		WHERE p_group IS NULL OR s.group_name = p_group
	), base AS (
		SELECT gq.g, q.id AS qid, q.name AS qname, p.id AS pid, p.name AS pname,
		       c.partition_id IS NOT NULL AS hc,
		       greatest(coalesce(c.committed, queen_cursor_start(p.id, p.log_start,
				p.next_offset, p.created_at, p.last_created_at,
				CASE WHEN gq.g = '__QUEUE_MODE__' THEN NULL ELSE s.start_at END)),
				p.log_start - 1) AS cm,
		       p.log_start AS ls, p.next_offset - 1 AS le,
		       c.lease_expires_at AS lexp, c.retry_count AS rc, c.updated_at AS upd,
		       CASE WHEN gq.g = '__QUEUE_MODE__' THEN 'all' ELSE s.mode END AS mode,
		       s.start_at, s.created_at AS sc
		FROM gq
		JOIN queen_queues q ON q.id = gq.qid
		LEFT JOIN queen_partitions p ON p.queue_id = q.id
		LEFT JOIN queen_cursors c ON c.partition_id = p.id AND c.group_name = gq.g
		LEFT JOIN queen_subscriptions s ON s.group_name = gq.g AND s.queue_id = q.id
	), t AS (
		SELECT base.*,
		       CASE WHEN base.le > base.cm THEN queen_offset_time(base.pid, base.cm + 1) END
			AS oldest
		FROM base
	)
	SELECT t.g, t.qid, t.qname, t.pid, t.pname, coalesce(t.hc, false), t.cm, t.ls, t.le,
	       greatest(coalesce(t.le - t.cm, 0), 0),
	       coalesce(greatest(floor(extract(epoch FROM now() - t.oldest)), 0)::bigint, 0),
	       t.oldest, coalesce(t.lexp > now(), false), t.lexp, t.rc, t.upd, t.mode,
	       t.start_at, t.sc
	FROM t
$$;

-- Per (group, queue) summaries, the rows of GET /api/v1/consumer-groups.
CREATE FUNCTION queen_group_summary(p_group text)
RETURNS TABLE (group_name text, queue_name text, summary jsonb)
LANGUAGE sql STABLE AS $$
	SELECT x.g, x.qname, jsonb_build_object(
		'name', x.g, 'queueName', x.qname, 'topics', jsonb_build_array(x.qname),
		'partitionCursors', x.ncur, 'members', x.ncur,
		'partitionsWithLag', x.nlag, 'totalLag', x.lag, 'maxTimeLag', x.tlag,
		'activeLeases', x.nlease,
		'state', CASE
			WHEN x.lag > 0 AND x.nlease = 0
			     AND coalesce(x.last_act, '-infinity') <
				 now() - make_interval(secs => queen_group_dead_seconds()) THEN 'Dead'
			WHEN x.tlag > 300 THEN 'Lagging'
			ELSE 'Stable' END,
		'lastActivityAt', queen_ts(x.last_act),
		'subscriptionMode', x.mode,
		'subscriptionTimestamp', queen_ts(x.start_at),
		'subscriptionCreatedAt', queen_ts(x.sc))
	FROM (
		SELECT l.group_name AS g, l.queue_name AS qname,
		       count(*) FILTER (WHERE l.has_cursor) AS ncur,
		       count(*) FILTER (WHERE l.lag > 0) AS nlag,
		       coalesce(sum(l.lag), 0) AS lag, coalesce(max(l.time_lag), 0) AS tlag,
		       count(*) FILTER (WHERE l.lease_active) AS nlease,
		       greatest(max(l.updated_at), min(l.sub_created_at)) AS last_act,
		       min(l.mode) AS mode, min(l.start_at) AS start_at, min(l.sub_created_at) AS sc
		FROM queen_group_lag(p_group) l
		GROUP BY l.group_name, l.queue_name
	) x
$$;

-- GET /api/v1/consumer-groups: every (group, queue), by group then queue.
CREATE FUNCTION queen_groups_list() RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT coalesce(jsonb_agg(s.summary ORDER BY s.group_name, s.queue_name), '[]'::jsonb)
	FROM queen_group_summary(NULL) s
$$;

-- GET /api/v1/consumer-groups/lagging: every (group, partition) whose oldest unconsumed
-- message is at least p_min seconds old, most lagging first.  Field names are those of the
-- reference broker's answer, which dashboards read as is.
CREATE FUNCTION queen_groups_lagging(p_min int) RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT coalesce(jsonb_agg(jsonb_build_object(
			'consumer_group', l.group_name, 'queue_name', l.queue_name,
			'partition_name', l.partition_name, 'partition_id', l.partition_id,
			'committed', l.committed, 'offset_lag', l.lag,
			'time_lag_seconds', l.time_lag,
			'lag_hours', round(l.time_lag / 3600.0, 2),
			'oldest_unconsumed_at', queen_ts(l.oldest_unconsumed),
			'last_consumed_at', queen_ts(l.updated_at),
			'lease_active', l.lease_active)
		ORDER BY l.time_lag DESC, l.group_name, l.queue_name, l.partition_name), '[]'::jsonb)
	FROM queen_group_lag(NULL) l
	WHERE l.lag > 0 AND l.time_lag >= coalesce(p_min, 3600)
$$;

-- GET /api/v1/consumer-groups/:group: an object keyed by queue name (the reference broker's
-- shape), each with the queue summary and its partitions.  NULL when the group is unknown.
CREATE FUNCTION queen_group_detail(p_group text) RETURNS jsonb
LANGUAGE sql STABLE AS $$
	WITH parts AS (
		SELECT l.queue_name, jsonb_agg(jsonb_build_object(
				'partition', l.partition_name, 'partitionId', l.partition_id,
				'committed', l.committed, 'logStart', l.log_start, 'logEnd', l.log_end,
				'lag', l.lag, 'offsetLag', l.lag, 'timeLagSeconds', l.time_lag,
				'leaseActive', l.lease_active,
				'leaseExpiresAt', CASE WHEN l.lease_active
						  THEN queen_ts(l.lease_expires_at) END,
				'hasCursor', l.has_cursor, 'retryCount', coalesce(l.retry_count, 0),
				'lastConsumedAt', queen_ts(l.updated_at))
			ORDER BY l.partition_name) AS j
		FROM queen_group_lag(p_group) l
		WHERE l.partition_id IS NOT NULL
		GROUP BY l.queue_name
	)
	SELECT jsonb_object_agg(s.queue_name, s.summary || jsonb_build_object(
		'partitions', coalesce(parts.j, '[]'::jsonb)))
	FROM queen_group_summary(p_group) s
	LEFT JOIN parts ON parts.queue_name = s.queue_name
$$;

-- DELETE /api/v1/consumer-groups/:group[/queues/:queue]: removes the group's cursors (on
-- one queue or all) and, unless p_meta is false, its stored starts, so the next pop is a
-- first contact again.  Keys starting with "_" are for the broker (its index and wakeups)
-- and are not part of the answer.
CREATE FUNCTION queen_group_delete(p_group text, p_queue text, p_meta bool) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
	v_pids uuid[];
	v_queues text[];
	v_nsub int := 0;
BEGIN
	WITH d AS (
		DELETE FROM queen_cursors c
		USING queen_partitions p, queen_queues q
		WHERE c.group_name = p_group AND p.id = c.partition_id AND q.id = p.queue_id
		  AND (p_queue IS NULL OR q.name = p_queue)
		RETURNING c.partition_id, q.name
	)
	SELECT array_agg(d.partition_id), array_agg(DISTINCT d.name) INTO v_pids, v_queues FROM d;

	IF coalesce(p_meta, true) THEN
		WITH d AS (
			DELETE FROM queen_subscriptions s
			USING queen_queues q
			WHERE s.group_name = p_group AND q.id = s.queue_id
			  AND (p_queue IS NULL OR q.name = p_queue)
			RETURNING 1
		)
		SELECT count(*) INTO v_nsub FROM d;
	END IF;

	RETURN jsonb_build_object(
		'success', true, 'consumerGroup', p_group, 'queueName', p_queue,
		'deletedPartitions', coalesce(cardinality(v_pids), 0),
		'deletedSubscriptions', v_nsub,
		'metadataDeleted', coalesce(p_meta, true),
		'_pids', coalesce(to_jsonb(v_pids), '[]'::jsonb),
		'_queues', coalesce(to_jsonb(v_queues), '[]'::jsonb));
END
$$;

-- POST /api/v1/consumer-groups/:group/subscription: the group's stored start on every queue
-- it is known on becomes p_ts.  Cursors do not move (that is seek's job): the new start
-- applies to partitions the group has no cursor on yet.  "_queues" is for the broker.
CREATE FUNCTION queen_group_subscription(p_group text, p_ts timestamptz) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
	v_queues text[];
BEGIN
	WITH qs AS (
		SELECT DISTINCT p.queue_id AS qid FROM queen_cursors c
		JOIN queen_partitions p ON p.id = c.partition_id
		WHERE c.group_name = p_group
		UNION
		SELECT s.queue_id FROM queen_subscriptions s WHERE s.group_name = p_group
	), up AS (
		INSERT INTO queen_subscriptions AS s (group_name, queue_id, mode, start_at)
		SELECT p_group, qs.qid, 'timestamp', p_ts FROM qs ORDER BY qs.qid
		ON CONFLICT (group_name, queue_id) DO UPDATE
		SET mode = 'timestamp', start_at = excluded.start_at
		RETURNING s.queue_id
	)
	SELECT array_agg(q.name ORDER BY q.name) INTO v_queues
	FROM up JOIN queen_queues q ON q.id = up.queue_id;

	RETURN jsonb_build_object(
		'success', true, 'consumerGroup', p_group,
		'subscriptionTimestamp', queen_ts(p_ts), 'newTimestamp', queen_ts(p_ts),
		'rowsUpdated', coalesce(cardinality(v_queues), 0),
		'_queues', coalesce(to_jsonb(v_queues), '[]'::jsonb));
END
$$;

-- Seek (SPEC.md 10): moves one group on every partition of a queue (or the one named).
-- p_ts NULL = to the end; else committed = (first offset of the first segment created at or
-- after p_ts) - 1, the end when there is none; never below log start - 1.  The cursor is
-- created when absent; a live lease is released (the batch is abandoned, not acked), the
-- retry budget and the delivery-attempt bookkeeping start over.  The group's stored start
-- is not touched: where it starts on partitions it has no cursor on (a partition route
-- seek, partitions created later) stays the business of its first contact.
-- One row per partition moved; a single row with verdict no_queue or no_partition (and
-- NULL columns) when the address is unknown.  Other brokers resync their index at once.
CREATE FUNCTION queen_seek(p_group text, p_queue text, p_partition text, p_ts timestamptz)
RETURNS TABLE (verdict text, partition_id uuid, partition_name text, committed bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
	v_qid uuid;
BEGIN
	SELECT q.id INTO v_qid FROM queen_queues q WHERE q.name = p_queue;
	IF v_qid IS NULL THEN
		RETURN QUERY SELECT 'no_queue'::text, NULL::uuid, NULL::text, NULL::bigint;
		RETURN;
	END IF;
	IF p_partition IS NOT NULL AND NOT EXISTS (
		SELECT 1 FROM queen_partitions p WHERE p.queue_id = v_qid AND p.name = p_partition)
	THEN
		RETURN QUERY SELECT 'no_partition'::text, NULL::uuid, NULL::text, NULL::bigint;
		RETURN;
	END IF;

	-- Cursor rows are written in partition order (as ack locks them); a pop holding one
	-- is waited for, then its lease is released here.
	RETURN QUERY
	WITH t AS (
		SELECT p.id, p.name,
		       CASE WHEN p_ts IS NULL THEN p.next_offset - 1
			    ELSE greatest(p.log_start - 1, coalesce((
				SELECT s.base_offset - 1 FROM queen_segments s
				WHERE s.partition_id = p.id AND s.created_at >= p_ts
				ORDER BY s.created_at, s.base_offset LIMIT 1), p.next_offset - 1))
		       END AS target
		FROM queen_partitions p
		WHERE p.queue_id = v_qid AND (p_partition IS NULL OR p.name = p_partition)
	), up AS (
		INSERT INTO queen_cursors AS c (partition_id, group_name, committed)
		SELECT t.id, p_group, t.target FROM t ORDER BY t.id
		ON CONFLICT (partition_id, group_name) DO UPDATE SET
			committed = excluded.committed,
			lease_id = NULL, lease_expires_at = NULL, batch_end = NULL,
			retry_count = 0, attempt_base = NULL, attempt_count = 0,
			updated_at = now()
		RETURNING c.partition_id AS pid, c.committed AS cm
	)
	SELECT 'ok'::text, up.pid, t.name, up.cm FROM up JOIN t ON t.id = up.pid
	ORDER BY t.name;

	PERFORM pg_notify('queen_push', '*');
END
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
			ARRAY[d.trace_id], ARRAY[coalesce(d.payload, 'null')], NULL) x;
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
			JOIN queen_queues q ON q.id = p.queue_id
			WHERE (p_queue IS NULL OR q.name = p_queue)
			  AND (p_partition IS NULL OR p.name = p_partition)
			  AND (p_from IS NULL OR d.created_at >= p_from)
			  AND (p_to IS NULL OR d.created_at < p_to + interval '1 millisecond')
			  AND d.off >= p.log_start AND d.off < p.next_offset
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
CREATE FUNCTION queen_message_get(p_pid uuid, p_txn text) RETURNS jsonb
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
		       q.namespace, q.task
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
		       q.namespace, q.task, d.off
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

	RETURN jsonb_build_object(
		'id', m.mid, 'transactionId', m.txn, 'partitionId', p_pid,
		'queue', m.qname, 'partition', m.pname, 'queuePath', m.qname || '/' || m.pname,
		'namespace', m.namespace, 'task', m.task, 'offset', v_off,
		'status', v_status, 'inLog', v_in_log,
		'payload', m.payload::jsonb, 'traceId', m.trace,
		'createdAt', queen_ts(m.created_at),
		'errorMessage', v_dl->0->'errorMessage', 'retryCount', v_dl->0->'retryCount',
		'groups', v_groups, 'deadLetters', v_dl);
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
