-- status.sql: operator reads (SPEC.md 16).
--
-- Counts are offset arithmetic on partition and cursor rows, never a scan of messages:
--   messages    retained messages, next_offset - log_start;
--   completed   retained messages every group holding a cursor on the partition has
--               committed (none when no group has read the partition);
--   processing  messages delivered under a live lease and not yet committed (the largest
--               such span over the groups of the partition);
--   pending     the rest: retained, not completed, not in flight.
-- A group that has a stored start on a queue but no cursor on a partition yet does not count
-- on that partition.  The views are planned without JIT: compiling costs more than it saves
-- on these short queries.

CREATE FUNCTION queen_partition_depth()
RETURNS TABLE (queue_id uuid, partition_id uuid, messages bigint, completed bigint,
	       processing bigint, pending bigint, leases bigint, slowest bigint,
	       last_created_at timestamptz)
LANGUAGE sql STABLE AS $$
	SELECT x.queue_id, x.id, x.m, x.m - x.unc, x.inf, x.unc - x.inf, x.nlease, x.minc,
	       x.last_created_at
	FROM (
		SELECT p.queue_id, p.id, p.last_created_at, p.next_offset - p.log_start AS m,
		       coalesce(c.minc, p.log_start - 1) AS minc,
		       p.next_offset - 1 - coalesce(c.minc, p.log_start - 1) AS unc,
		       least(greatest(coalesce(c.inflight, 0), 0),
			     p.next_offset - 1 - coalesce(c.minc, p.log_start - 1)) AS inf,
		       coalesce(c.nlease, 0) AS nlease
		FROM (SELECT p.*, pl.next_offset, pl.last_created_at
		      FROM queen_partitions p
		      CROSS JOIN LATERAL queen_log_tail(p.id, p.kept_next_offset,
							p.kept_last_created_at) pl) p
		LEFT JOIN LATERAL (
			SELECT min(greatest(k.committed, p.log_start - 1)) AS minc,
			       count(*) FILTER (WHERE k.lease_expires_at > now()) AS nlease,
			       max(least(k.batch_end, p.next_offset - 1)
				   - greatest(k.committed, p.log_start - 1))
				FILTER (WHERE k.lease_expires_at > now()) AS inflight
			FROM queen_cursors k WHERE k.partition_id = p.id) c ON true
	) x
$$;

-- created_at of the segment holding offset p_off (NULL when there is none).
CREATE FUNCTION queen_status_offset_time(p_pid uuid, p_off bigint) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
	SELECT s.created_at FROM queen_segments s
	WHERE s.partition_id = p_pid AND s.base_offset <= p_off
	ORDER BY s.base_offset DESC LIMIT 1
$$;

-- GET /api/v1/resources/queues: every queue, by name.
CREATE FUNCTION queen_resources_queues() RETURNS jsonb
LANGUAGE sql STABLE SET jit = off AS $$
	SELECT jsonb_build_object(
		'queues', coalesce(jsonb_agg(x.j ORDER BY x.name), '[]'::jsonb),
		'total', count(*))
	FROM (
		SELECT q.name, jsonb_build_object(
			'id', q.id, 'name', q.name, 'namespace', q.namespace, 'task', q.task,
			'createdAt', queen_ts(q.created_at),
			'partitions', count(d.partition_id),
			'messages', coalesce(sum(d.messages), 0),
			'pending', coalesce(sum(d.pending), 0),
			'processing', coalesce(sum(d.processing), 0),
			'completed', coalesce(sum(d.completed), 0),
			'consumerGroups', (SELECT count(DISTINCT k.group_name)
					   FROM queen_partitions p2
					   JOIN queen_cursors k ON k.partition_id = p2.id
					   WHERE p2.queue_id = q.id),
			'lastMessageAt', queen_ts(max(d.last_created_at))) AS j
		FROM queen_queues q
		LEFT JOIN queen_partition_depth() d ON d.queue_id = q.id
		GROUP BY q.id
	) x
$$;

-- GET /api/v1/resources/overview: totals over the whole broker.
CREATE FUNCTION queen_resources_overview() RETURNS jsonb
LANGUAGE sql STABLE SET jit = off AS $$
	SELECT jsonb_build_object(
		'queues', (SELECT count(*) FROM queen_queues),
		'partitions', count(d.partition_id),
		'namespaces', (SELECT count(DISTINCT q.namespace) FROM queen_queues q
			       WHERE q.namespace <> ''),
		'tasks', (SELECT count(*) FROM (SELECT DISTINCT q.namespace, q.task
						FROM queen_queues q WHERE q.task <> '') t),
		'consumerGroups', (SELECT count(*) FROM (
					SELECT k.group_name FROM queen_cursors k
					UNION
					SELECT s.group_name FROM queen_subscriptions s) g),
		'messages', jsonb_build_object(
			'total', coalesce(sum(d.messages), 0),
			'pending', coalesce(sum(d.pending), 0),
			'processing', coalesce(sum(d.processing), 0),
			'completed', coalesce(sum(d.completed), 0),
			'deadLetter', (SELECT count(*) FROM queen_dlq)),
		'leases', jsonb_build_object('active', coalesce(sum(d.leases), 0)),
		'lastMessageAt', queen_ts(max(d.last_created_at)),
		'timestamp', queen_ts(now()))
	FROM queen_partition_depth() d
$$;

-- GET /api/v1/resources/namespaces: per namespace (queues without one are not listed).
CREATE FUNCTION queen_resources_namespaces() RETURNS jsonb
LANGUAGE sql STABLE SET jit = off AS $$
	SELECT jsonb_build_object(
		'namespaces', coalesce(jsonb_agg(x.j ORDER BY x.ns), '[]'::jsonb),
		'total', count(*))
	FROM (
		SELECT q.namespace AS ns, jsonb_build_object(
			'namespace', q.namespace,
			'queues', count(DISTINCT q.id),
			'partitions', count(d.partition_id),
			'messages', coalesce(sum(d.messages), 0),
			'pending', coalesce(sum(d.pending), 0),
			'processing', coalesce(sum(d.processing), 0)) AS j
		FROM queen_queues q
		LEFT JOIN queen_partition_depth() d ON d.queue_id = q.id
		WHERE q.namespace <> ''
		GROUP BY q.namespace
	) x
$$;

-- GET /api/v1/resources/tasks: per (namespace, task) (queues without a task are not listed).
CREATE FUNCTION queen_resources_tasks() RETURNS jsonb
LANGUAGE sql STABLE SET jit = off AS $$
	SELECT jsonb_build_object(
		'tasks', coalesce(jsonb_agg(x.j ORDER BY x.ns, x.task), '[]'::jsonb),
		'total', count(*))
	FROM (
		SELECT q.namespace AS ns, q.task, jsonb_build_object(
			'namespace', q.namespace, 'task', q.task,
			'queues', count(DISTINCT q.id),
			'partitions', count(d.partition_id),
			'messages', coalesce(sum(d.messages), 0),
			'pending', coalesce(sum(d.pending), 0),
			'processing', coalesce(sum(d.processing), 0)) AS j
		FROM queen_queues q
		LEFT JOIN queen_partition_depth() d ON d.queue_id = q.id
		WHERE q.task <> ''
		GROUP BY q.namespace, q.task
	) x
$$;

-- GET /api/v1/status, the database half (the broker adds its own).  Row counts of the big
-- tables are the planner's estimates: exact counts would scan them.
CREATE FUNCTION queen_status() RETURNS jsonb
LANGUAGE sql STABLE SET jit = off AS $$
	SELECT jsonb_build_object(
		'connected', true,
		'serverVersion', current_setting('server_version'),
		'name', current_database(),
		'sizeBytes', pg_database_size(current_database()),
		'connections', (SELECT count(*) FROM pg_stat_activity a
				WHERE a.datname = current_database()),
		'schemaVersion', (SELECT max(v.version) FROM queen_schema_version v),
		'queues', (SELECT count(*) FROM queen_queues),
		'partitions', count(d.partition_id),
		'consumerGroups', (SELECT count(*) FROM (
					SELECT k.group_name FROM queen_cursors k
					UNION
					SELECT s.group_name FROM queen_subscriptions s) g),
		'messages', coalesce(sum(d.messages), 0),
		'pending', coalesce(sum(d.pending), 0),
		'processing', coalesce(sum(d.processing), 0),
		'activeLeases', coalesce(sum(d.leases), 0),
		'deadLetters', (SELECT count(*) FROM queen_dlq),
		'segmentsEstimate', (SELECT greatest(c.reltuples, 0)::bigint FROM pg_class c
				     WHERE c.oid = 'queen_segments'::regclass),
		'dedupKeysEstimate', (SELECT greatest(c.reltuples, 0)::bigint FROM pg_class c
				      WHERE c.oid = 'queen_dedup'::regclass),
		'retentionBacklogPartitions', (SELECT count(*) FROM queen_retention_pending),
		'time', queen_ts(now()))
	FROM queen_partition_depth() d
$$;

-- GET /api/v1/status/queues: per queue depth and flow, by name, one page; NULL filters = all.
-- The per-partition probes (oldest pending message, last minute's segments) are only made
-- for the queues of the page.
CREATE FUNCTION queen_status_queues(p_namespace text, p_task text, p_limit int, p_offset int)
RETURNS jsonb
LANGUAGE sql STABLE SET jit = off AS $$
	WITH sel AS (
		SELECT q.* FROM queen_queues q
		WHERE (p_namespace IS NULL OR q.namespace = p_namespace)
		  AND (p_task IS NULL OR q.task = p_task)
	), page AS (
		SELECT sel.* FROM sel ORDER BY sel.name
		LIMIT coalesce(p_limit, 100) OFFSET coalesce(p_offset, 0)
	), parts AS (
		SELECT d.*,
		       CASE WHEN d.messages - d.completed > 0
			    THEN queen_status_offset_time(d.partition_id, d.slowest + 1)
		       END AS oldest,
		       (SELECT coalesce(sum(s.end_offset - s.base_offset + 1), 0)
			FROM queen_segments s
			WHERE s.partition_id = d.partition_id
			  AND s.created_at >= now() - interval '60 seconds') AS last_min
		FROM queen_partition_depth() d
		WHERE d.queue_id IN (SELECT page.id FROM page)
	), rows AS (
		SELECT page.name, jsonb_build_object(
			'id', page.id, 'name', page.name, 'namespace', page.namespace,
			'task', page.task,
			'partitions', count(parts.partition_id),
			'messages', coalesce(sum(parts.messages), 0),
			'pending', coalesce(sum(parts.pending), 0),
			'processing', coalesce(sum(parts.processing), 0),
			'completed', coalesce(sum(parts.completed), 0),
			'activeLeases', coalesce(sum(parts.leases), 0),
			'deadLetters', (SELECT count(*) FROM queen_dlq x
					WHERE x.queue_name = page.name),
			'oldestPendingAt', queen_ts(min(parts.oldest)),
			'lagSeconds', coalesce(floor(extract(epoch FROM now() - min(parts.oldest))),
					       0)::bigint,
			'lastMessageAt', queen_ts(max(parts.last_created_at)),
			'ingestedLastMinute', coalesce(sum(parts.last_min), 0),
			'ingestedPerSecond', round(coalesce(sum(parts.last_min), 0) / 60.0, 2),
			'retention', jsonb_build_object(
				'enabled', page.retention_enabled,
				'retentionSeconds', page.retention_seconds,
				'completedRetentionSeconds', page.completed_retention_seconds,
				'maxWaitTimeSeconds', page.max_wait_time_seconds,
				'dedupWindowSeconds', page.dedup_window_seconds)) AS j
		FROM page
		LEFT JOIN parts ON parts.queue_id = page.id
		GROUP BY page.id, page.name, page.namespace, page.task, page.retention_enabled,
			 page.retention_seconds, page.completed_retention_seconds,
			 page.max_wait_time_seconds, page.dedup_window_seconds
	)
	SELECT jsonb_build_object(
		'queues', coalesce((SELECT jsonb_agg(rows.j ORDER BY rows.name) FROM rows),
				   '[]'::jsonb),
		'pagination', jsonb_build_object('limit', coalesce(p_limit, 100),
						 'offset', coalesce(p_offset, 0)),
		'total', (SELECT count(*) FROM sel),
		'timestamp', queen_ts(now()))
$$;
