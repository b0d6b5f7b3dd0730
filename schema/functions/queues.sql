-- queues.sql: configure, queue detail, depth, delete (SPEC.md 9); the index snapshot and
-- the counters the broker samples.

-- Configure (SPEC.md 9).  Replace mode resets every option not given to its default
-- (leaseTime 300); merge mode keeps the stored value.  Creates the queue if absent.
CREATE FUNCTION queen_configure(p_queue text, p_namespace text, p_task text, p_options jsonb,
				p_merge bool)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
	o jsonb := coalesce(p_options, '{}'::jsonb);
	m bool := coalesce(p_merge, false);
	r queen_queues;
BEGIN
	INSERT INTO queen_queues (name, namespace, task)
	VALUES (p_queue, coalesce(p_namespace, queen_name_namespace(p_queue)),
		coalesce(p_task, queen_name_task(p_queue)))
	ON CONFLICT (name) DO NOTHING;

	UPDATE queen_queues q SET
		namespace = coalesce(p_namespace, q.namespace),
		task = coalesce(p_task, q.task),
		lease_time = CASE WHEN o->>'leaseTime' IS NOT NULL
			THEN (o->>'leaseTime')::numeric::int WHEN m THEN q.lease_time ELSE 300 END,
		retry_limit = CASE WHEN o->>'retryLimit' IS NOT NULL
			THEN (o->>'retryLimit')::numeric::int WHEN m THEN q.retry_limit ELSE 3 END,
		dead_letter_queue = CASE WHEN o->>'deadLetterQueue' IS NOT NULL
			THEN (o->>'deadLetterQueue')::bool WHEN m THEN q.dead_letter_queue ELSE true END,
		dlq_after_max_retries = CASE WHEN o->>'dlqAfterMaxRetries' IS NOT NULL
			THEN (o->>'dlqAfterMaxRetries')::bool WHEN m THEN q.dlq_after_max_retries
			ELSE true END,
		dedup_window_seconds = CASE WHEN o->>'dedupWindowSeconds' IS NOT NULL
			THEN (o->>'dedupWindowSeconds')::numeric::int WHEN m THEN q.dedup_window_seconds
			ELSE 3600 END,
		retention_enabled = CASE WHEN o->>'retentionEnabled' IS NOT NULL
			THEN (o->>'retentionEnabled')::bool WHEN m THEN q.retention_enabled ELSE false END,
		retention_seconds = CASE WHEN o->>'retentionSeconds' IS NOT NULL
			THEN (o->>'retentionSeconds')::numeric::int WHEN m THEN q.retention_seconds
			ELSE 0 END,
		completed_retention_seconds = CASE WHEN o->>'completedRetentionSeconds' IS NOT NULL
			THEN (o->>'completedRetentionSeconds')::numeric::int
			WHEN m THEN q.completed_retention_seconds ELSE 0 END,
		max_wait_time_seconds = CASE WHEN o->>'maxWaitTimeSeconds' IS NOT NULL
			THEN (o->>'maxWaitTimeSeconds')::numeric::int WHEN m THEN q.max_wait_time_seconds
			ELSE 0 END,
		delayed_processing = CASE WHEN o->>'delayedProcessing' IS NOT NULL
			THEN (o->>'delayedProcessing')::numeric::int WHEN m THEN q.delayed_processing
			ELSE 0 END,
		window_buffer = CASE WHEN o->>'windowBuffer' IS NOT NULL
			THEN (o->>'windowBuffer')::numeric::int WHEN m THEN q.window_buffer ELSE 0 END,
		encryption_enabled = CASE WHEN o->>'encryptionEnabled' IS NOT NULL
			THEN (o->>'encryptionEnabled')::bool WHEN m THEN q.encryption_enabled
			ELSE false END,
		priority = CASE WHEN o->>'priority' IS NOT NULL
			THEN (o->>'priority')::numeric::int WHEN m THEN q.priority ELSE 0 END,
		max_size = CASE WHEN o->>'maxSize' IS NOT NULL
			THEN (o->>'maxSize')::numeric::bigint WHEN m THEN q.max_size ELSE 0 END,
		ttl = CASE WHEN o->>'ttl' IS NOT NULL
			THEN (o->>'ttl')::numeric::int WHEN m THEN q.ttl ELSE 3600 END,
		retry_delay = CASE WHEN o->>'retryDelay' IS NOT NULL
			THEN (o->>'retryDelay')::numeric::int WHEN m THEN q.retry_delay ELSE 1000 END,
		updated_at = now()
	WHERE q.name = p_queue
	RETURNING q.* INTO r;

	RETURN jsonb_build_object('configured', true, 'queueId', r.id, 'queue', r.name,
				  'namespace', r.namespace, 'task', r.task,
				  'options', queen_queue_options(r));
END
$$;

-- Per (group, partition) of a queue: the group's committed offset, from its cursor or, when
-- it has none yet, from where the group would start (so lag is right before the first pop).
-- Groups: every group with a cursor on the queue or a stored start.
CREATE FUNCTION queen_queue_group_cursors(p_queue_id uuid)
RETURNS TABLE (group_name text, partition_id uuid, has_cursor bool, committed bigint,
	       log_start bigint, log_end bigint, leased bool, mode text, start_at timestamptz)
LANGUAGE sql STABLE AS $$
	WITH parts AS (
		SELECT p.*, pl.next_offset, pl.last_created_at
		FROM queen_partitions p
		CROSS JOIN LATERAL queen_log_tail(p.id, p.kept_next_offset,
						  p.kept_last_created_at) pl
		WHERE p.queue_id = p_queue_id
	), grps AS (
		SELECT c.group_name AS g FROM queen_cursors c JOIN parts p ON p.id = c.partition_id
		UNION
		SELECT s.group_name FROM queen_subscriptions s WHERE s.queue_id = p_queue_id
	)
	SELECT grps.g, p.id, c.partition_id IS NOT NULL,
	       coalesce(c.committed, queen_cursor_start(p.id, p.log_start, p.next_offset,
			p.created_at, p.last_created_at,
			CASE WHEN grps.g = '__QUEUE_MODE__' THEN NULL ELSE s.start_at END)),
	       p.log_start, p.next_offset - 1,
	       coalesce(c.lease_expires_at > now(), false),
	       CASE WHEN grps.g = '__QUEUE_MODE__' THEN 'all' ELSE s.mode END,
	       s.start_at
	FROM grps CROSS JOIN parts p
	LEFT JOIN queen_cursors c ON c.partition_id = p.id AND c.group_name = grps.g
	LEFT JOIN queen_subscriptions s ON s.group_name = grps.g AND s.queue_id = p_queue_id
$$;

-- Queue detail (SPEC.md 9, 21).  NULL when the queue does not exist.
CREATE FUNCTION queen_queue_detail(p_queue text) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
	q queen_queues;
	v_parts jsonb;
	v_groups jsonb;
	v_np bigint;
	v_msgs bigint;
	v_dlq bigint;
BEGIN
	SELECT * INTO q FROM queen_queues x WHERE x.name = p_queue;
	IF NOT FOUND THEN
		RETURN NULL;
	END IF;

	SELECT coalesce(jsonb_agg(jsonb_build_object(
			'name', p.name, 'id', p.id, 'logStart', p.log_start,
			'logEnd', p.next_offset - 1, 'messages', p.next_offset - p.log_start,
			'createdAt', queen_ts(p.created_at),
			'lastMessageAt', queen_ts(p.last_created_at))
		ORDER BY p.name), '[]'::jsonb),
	       count(*), coalesce(sum(p.next_offset - p.log_start), 0)
	INTO v_parts, v_np, v_msgs
	FROM (SELECT p.*, pl.next_offset, pl.last_created_at
	      FROM queen_partitions p
	      CROSS JOIN LATERAL queen_log_tail(p.id, p.kept_next_offset,
						p.kept_last_created_at) pl
	      WHERE p.queue_id = q.id) p;

	SELECT coalesce(jsonb_agg(jsonb_build_object(
			'name', x.g, 'lag', x.lag, 'partitions', x.ncur,
			'partitionsWithLag', x.nlag, 'activeLeases', x.nlease,
			'subscriptionMode', x.mode, 'subscriptionTimestamp', queen_ts(x.start_at))
		ORDER BY x.g), '[]'::jsonb)
	INTO v_groups
	FROM (
		SELECT gc.group_name AS g,
		       sum(greatest(gc.log_end - greatest(gc.committed, gc.log_start - 1), 0)) AS lag,
		       count(*) FILTER (WHERE gc.has_cursor) AS ncur,
		       count(*) FILTER (WHERE gc.log_end > greatest(gc.committed, gc.log_start - 1))
			AS nlag,
		       count(*) FILTER (WHERE gc.leased) AS nlease,
		       min(gc.mode) AS mode, min(gc.start_at) AS start_at
		FROM queen_queue_group_cursors(q.id) gc
		GROUP BY gc.group_name
	) x;

	SELECT count(*) INTO v_dlq FROM queen_dlq d WHERE d.queue_name = q.name;

	RETURN jsonb_build_object(
		'id', q.id, 'name', q.name, 'namespace', q.namespace, 'task', q.task,
		'createdAt', queen_ts(q.created_at), 'updatedAt', queen_ts(q.updated_at),
		'options', queen_queue_options(q),
		'partitions', v_parts,
		'groups', v_groups,
		'totals', jsonb_build_object('partitions', v_np, 'messages', v_msgs,
					     'groups', jsonb_array_length(v_groups),
					     'deadLetters', v_dlq));
END
$$;

-- Depth (SPEC.md 9): pending per partition for one group (default __QUEUE_MODE__), by offset
-- arithmetic.  NULL when the queue does not exist.
CREATE FUNCTION queen_queue_depth(p_queue text, p_group text) RETURNS jsonb
LANGUAGE sql STABLE AS $$
	WITH q AS (
		SELECT x.* FROM queen_queues x WHERE x.name = p_queue
	), g AS (
		SELECT coalesce(p_group, '__QUEUE_MODE__') AS g
	), rows AS (
		SELECT p.name, p.id, p.log_start, pl.next_offset - 1 AS lend,
		       coalesce(c.committed, queen_cursor_start(p.id, p.log_start, pl.next_offset,
				p.created_at, pl.last_created_at,
				CASE WHEN g.g = '__QUEUE_MODE__' THEN NULL ELSE s.start_at END)) AS cm,
		       coalesce(c.lease_expires_at > now(), false) AS leased
		FROM q CROSS JOIN g
		JOIN queen_partitions p ON p.queue_id = q.id
		CROSS JOIN LATERAL queen_log_tail(p.id, p.kept_next_offset,
						  p.kept_last_created_at) pl
		LEFT JOIN queen_cursors c ON c.partition_id = p.id AND c.group_name = g.g
		LEFT JOIN queen_subscriptions s ON s.group_name = g.g AND s.queue_id = q.id
	)
	SELECT jsonb_build_object(
		'queue', q.name, 'consumerGroup', g.g,
		'partitions', coalesce((SELECT jsonb_agg(jsonb_build_object(
				'name', r.name, 'id', r.id, 'logStart', r.log_start, 'logEnd', r.lend,
				'committed', r.cm,
				'pending', greatest(r.lend - greatest(r.cm, r.log_start - 1), 0),
				'leased', r.leased) ORDER BY r.name) FROM rows r), '[]'::jsonb),
		'totalPending', (SELECT coalesce(sum(greatest(r.lend - greatest(r.cm, r.log_start - 1),
							     0)), 0) FROM rows r),
		'totalMessages', (SELECT coalesce(sum(r.lend + 1 - r.log_start), 0) FROM rows r))
	FROM q CROSS JOIN g
$$;

-- Delete a queue and everything of it: partitions, segments, cursors, dedup rows,
-- subscriptions and dead letters.  Partition rows are locked first, so a push in flight
-- either commits before (and its rows are deleted here) or finds its partition gone.
CREATE FUNCTION queen_queue_delete(p_queue text) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
	v_id uuid;
BEGIN
	SELECT q.id INTO v_id FROM queen_queues q WHERE q.name = p_queue FOR UPDATE;
	IF v_id IS NULL THEN
		RETURN jsonb_build_object('deleted', false, 'existed', false);
	END IF;
	PERFORM 1 FROM queen_partitions p WHERE p.queue_id = v_id ORDER BY p.id FOR UPDATE;

	DELETE FROM queen_segments s USING queen_partitions p
	WHERE p.queue_id = v_id AND s.partition_id = p.id;
	DELETE FROM queen_cursors c USING queen_partitions p
	WHERE p.queue_id = v_id AND c.partition_id = p.id;
	DELETE FROM queen_dedup d USING queen_partitions p
	WHERE p.queue_id = v_id AND d.partition_id = p.id;
	DELETE FROM queen_subscriptions s WHERE s.queue_id = v_id;
	DELETE FROM queen_dlq d WHERE d.queue_name = p_queue;
	-- Pending timers would recreate the queue when they fire (queen_timers: 004).
	DELETE FROM queen_timers t WHERE t.queue_name = p_queue;
	DELETE FROM queen_queues q WHERE q.id = v_id;	-- cascades to queen_partitions
	RETURN jsonb_build_object('deleted', true, 'existed', true);
END
$$;

-- The broker's partition index is rebuilt from the queues, then these, read in one snapshot
-- (src/resync.c): every partition with its log end and start, then (see
-- queen_snapshot_scans_segments) the segments' ends, then every cursor. A partition's row
-- names its queue by id only: the queue's name and labels come once, not a million times.
-- The partitions' and the cursors' reads each take the rows of their table's pages
-- [p_from, p_to) (p_to NULL: to the end), so that connections sharing one snapshot read the
-- pages in parts side by side: a million partitions' log ends are a million index probes,
-- seconds of one backend.

-- The address of the first row of page p_page (NULL: one past any page).
CREATE FUNCTION queen_page_tid(p_page bigint) RETURNS tid
LANGUAGE sql STABLE AS $$
	SELECT format('(%s,0)', coalesce(p_page, 4294967295))::tid
$$;

-- The pages of relation p_rel now: where the broker cuts the snapshot's reads into parts.
CREATE FUNCTION queen_pages(p_rel regclass) RETURNS bigint
LANGUAGE sql VOLATILE AS $$
	SELECT pg_relation_size(p_rel) / current_setting('block_size')::bigint
$$;

-- The partitions' rows as kept: a log end here is only what the row keeps of the segments
-- retention deleted (-1: none). The start-up load that reads the segments' ends
-- (queen_snapshot_segment_ends) takes these, so that no partition is probed.
CREATE FUNCTION queen_snapshot_partitions_kept(p_from bigint DEFAULT 0, p_to bigint DEFAULT NULL)
RETURNS TABLE (queue_id uuid, partition_id uuid, partition_name text, log_end bigint,
	       log_start bigint, kept_last_created_at timestamptz)
LANGUAGE sql STABLE AS $$
	SELECT p.queue_id, p.id, p.name, p.kept_next_offset - 1, p.log_start,
	       p.kept_last_created_at
	FROM queen_partitions p
	WHERE p.ctid >= queen_page_tid(p_from) AND p.ctid < queen_page_tid(p_to)
$$;

-- The same with each log end from a probe of the partition's newest segment.
CREATE FUNCTION queen_snapshot_partitions(p_from bigint DEFAULT 0, p_to bigint DEFAULT NULL)
RETURNS TABLE (queue_id uuid, partition_id uuid, partition_name text, log_end bigint,
	       log_start bigint)
LANGUAGE sql STABLE AS $$
	SELECT k.queue_id, k.partition_id, k.partition_name, pl.next_offset - 1, k.log_start
	FROM queen_snapshot_partitions_kept(p_from, p_to) k
	CROSS JOIN LATERAL queen_log_tail(k.partition_id, k.log_end + 1,
					  k.kept_last_created_at) pl
$$;

-- Every segment's partition and last offset, in one sequential scan: a partition's log end
-- is the greatest of its rows (the broker keeps the greatest it reads).
CREATE FUNCTION queen_snapshot_segment_ends()
RETURNS TABLE (partition_id uuid, end_offset bigint)
LANGUAGE sql STABLE AS $$
	SELECT s.partition_id, s.end_offset FROM queen_segments s
$$;

-- Whether the snapshot reads the log ends by a scan of the segments' heap rather than by a
-- probe of each partition's newest segment. A probe is an index-only scan, which fetches
-- the segment's heap page unless the visibility map marks it all-visible, and segments
-- written since the last VACUUM are not: just after a million one-message partitions were
-- filled, the probes took 10.3 s of one backend where the scan took 2.3 s (1.3 GB of
-- segments, PostgreSQL restarted before each). The scan reads every page; the probes fetch
-- about a page per partition whose newest segment is not all-visible. So: a scan when the
-- segments hold fewer pages than the partitions times the share of pages not all-visible
-- (the count of partitions from the planner's density, 60 rows a page before any ANALYZE).
-- A queue of few partitions and long logs, or segments VACUUM has been through, probes.
CREATE FUNCTION queen_scan_reads_less(p_pages float8, p_visible float8, p_partitions float8)
RETURNS bool
LANGUAGE sql IMMUTABLE AS $$
	SELECT p_pages > 0
	       AND p_pages * p_pages < p_partitions * (p_pages - least(p_visible, p_pages))
$$;

CREATE FUNCTION queen_snapshot_scans_segments() RETURNS bool
LANGUAGE sql VOLATILE AS $$
	SELECT queen_scan_reads_less(s.pages, s.vis, p.n)
	FROM (SELECT queen_pages('queen_segments')::float8 AS pages, c.relallvisible AS vis
	      FROM pg_class c WHERE c.oid = 'queen_segments'::regclass) s,
	     (SELECT CASE WHEN c.relpages > 0 AND c.reltuples >= 0
			  THEN c.reltuples / c.relpages ELSE 60 END
		     * queen_pages('queen_partitions') AS n
	      FROM pg_class c WHERE c.oid = 'queen_partitions'::regclass) p
$$;

-- The cursors alone: a committed offset below its partition's log start counts as at it,
-- and the broker, which has just read the log starts above, raises it there.  A join with
-- the partitions here hashed all of them in each part: a million cursors read in two halves
-- took 0.83-1.9 s a half, 0.12 s without it.
CREATE FUNCTION queen_snapshot_cursors(p_from bigint DEFAULT 0, p_to bigint DEFAULT NULL)
RETURNS TABLE (partition_id uuid, group_name text, committed bigint,
	       lease_expires_at timestamptz)
LANGUAGE sql STABLE AS $$
	SELECT c.partition_id, c.group_name, c.committed, c.lease_expires_at
	FROM queen_cursors c
	WHERE c.ctid >= queen_page_tid(p_from) AND c.ctid < queen_page_tid(p_to)
$$;

-- A digest of every group's stored start: the index resync compares it with the last one
-- and, when it changed (a subscription moved on another broker), forgets the cursors it
-- inferred from the old starts.  The table holds a row per (group, queue): small.
CREATE FUNCTION queen_subscriptions_sum() RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT coalesce(md5(string_agg(s.group_name || '/' || s.queue_id || '/'
				       || coalesce(s.start_at::text, ''), ','
				       ORDER BY s.group_name, s.queue_id)), '')
	FROM queen_subscriptions s
$$;

-- Counts for /metrics.
CREATE FUNCTION queen_stats() RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT jsonb_build_object(
		'queues', (SELECT count(*) FROM queen_queues),
		'partitions', (SELECT count(*) FROM queen_partitions),
		'messages', (SELECT coalesce(sum(pl.next_offset - p.log_start), 0)
			     FROM queen_partitions p
			     CROSS JOIN LATERAL queen_log_tail(p.id, p.kept_next_offset,
							       p.kept_last_created_at) pl),
		'dlq', (SELECT count(*) FROM queen_dlq))
$$;
