-- groups.sql: consumer groups, lag, subscription and seek (SPEC.md 10).

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
				pl.next_offset, p.created_at, pl.last_created_at,
				CASE WHEN gq.g = '__QUEUE_MODE__' THEN NULL ELSE s.start_at END)),
				p.log_start - 1) AS cm,
		       p.log_start AS ls, pl.next_offset - 1 AS le,
		       c.lease_expires_at AS lexp, c.retry_count AS rc, c.updated_at AS upd,
		       CASE WHEN gq.g = '__QUEUE_MODE__' THEN 'all' ELSE s.mode END AS mode,
		       s.start_at, s.created_at AS sc
		FROM gq
		JOIN queen_queues q ON q.id = gq.qid
		LEFT JOIN queen_partitions p ON p.queue_id = q.id
		LEFT JOIN LATERAL queen_log_tail(p.id, p.kept_next_offset,
						 p.kept_last_created_at) pl ON true
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
		       CASE WHEN p_ts IS NULL THEN pl.next_offset - 1
			    ELSE greatest(p.log_start - 1, coalesce((
				SELECT s.base_offset - 1 FROM queen_segments s
				WHERE s.partition_id = p.id AND s.created_at >= p_ts
				ORDER BY s.created_at, s.base_offset LIMIT 1), pl.next_offset - 1))
		       END AS target
		FROM queen_partitions p
		CROSS JOIN LATERAL queen_log_tail(p.id, p.kept_next_offset,
						  p.kept_last_created_at) pl
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
