-- 007_retention_status.sql: retention (SPEC.md 9, 21) and the operator reads (SPEC.md 16).
--
-- Retention removes whole segments from the front of a partition's log, one round every
-- RETENTION_INTERVAL, each step bounded:
--   1. purge   deletes segments that lie wholly below a log start moved by an earlier round
--              (at most p_batch segments);
--   2. plan    picks the partitions whose front segments are due and where their log start
--              goes (read only; at most p_batch segments in at most 1000 partitions);
--   3. dedup   deletes dedup keys older than their queue's window, in a slice of 2000
--              partitions per round (at most 20 * p_batch keys);
--   4. advance moves those log starts.
-- Steps 1-3 are queen_retention_round, one transaction that returns the plan; the broker then
-- runs step 4, queen_retention_advance, on chunks of the plan, one short transaction each.
-- Why: pushes lock partition rows FOR UPDATE in id order and keep them to commit, so the only
-- lock of ours that can stall a push is a partition row lock.  Each advance takes a few dozen
-- of them (id order, SKIP LOCKED: a busy partition is simply left for the next round) and
-- commits at once, so a push waits at most for one small UPDATE.  Nothing here ever waits
-- for a lock (segment and dedup rows are picked FOR UPDATE SKIP LOCKED too), so there is no
-- lock cycle with pushes or queen_queue_delete, and a round never stalls.  Between advance
-- and purge, released segments sit below the log start where no reader looks (every read
-- path starts at greatest(committed, log_start - 1)): the invariant "segments cover
-- [log_start, next_offset - 1]" holds at every commit, the log a client sees is always whole.
--
-- Which segments are due (created_at never decreases along offsets, so each rule frees a
-- prefix of the log and the union is the longest of them):
--   * maxWaitTimeSeconds > 0 (with or without retentionEnabled, SPEC 21): created_at older
--     than the window, whatever cursors and leases say;
--   * retentionEnabled and retentionSeconds > 0: the same with that window;
--   * retentionEnabled and completedRetentionSeconds > 0: older than the window and passed by
--     every group holding a cursor on the partition (__QUEUE_MODE__ included), i.e.
--     end_offset <= min(committed).  A partition no group has read keeps its messages.
-- Dead letters are copies in queen_dlq and are never touched.
--
-- One broker at a time: the round takes a transaction-level advisory lock and returns
-- {"skipped":true} when another broker holds it; each advance tries the same lock.
--
-- Changes to core tables: an index queen_dedup (partition_id, created_at), so that expired
-- keys are found per partition by one range probe instead of a scan of the table.

CREATE INDEX queen_dedup_age ON queen_dedup (partition_id, created_at);

-- Partitions whose log start moved past segments not yet deleted: every segment ending below
-- upto is to go.  Written and read by retention only, under its advisory lock.
CREATE TABLE queen_retention_pending (
	partition_id			uuid PRIMARY KEY,
	upto				bigint NOT NULL
);

-- Where the dedup sweep goes on: the last partition id it swept (NULL = from the start).
CREATE TABLE queen_retention_state (
	one				bool PRIMARY KEY DEFAULT true CHECK (one),
	dedup_after			uuid
);
INSERT INTO queen_retention_state DEFAULT VALUES;

-- Arbitrary constant: the advisory lock that makes one broker at a time run retention.
CREATE FUNCTION queen_retention_lock_key() RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT 7305271907::bigint $$;

-- Dedup keys expired per round, per segment of the batch size.
CREATE FUNCTION queen_retention_dedup_factor() RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT 20 $$;

-- Partitions whose dedup keys one round sweeps.
CREATE FUNCTION queen_retention_dedup_slice() RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT 2000 $$;

-- Most partitions whose log start one round plans to move, whatever the batch size.
CREATE FUNCTION queen_retention_max_partitions() RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT 1000 $$;

-- Segments created before this are due under a window of p_secs (NULL: the rule is off).
CREATE FUNCTION queen_retention_cutoff(p_on bool, p_secs int) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
	SELECT CASE WHEN p_on AND p_secs > 0 THEN now() - make_interval(secs => p_secs) END
$$;

CREATE FUNCTION queen_retention_round(p_batch int) RETURNS jsonb
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
	v_batch int := greatest(coalesce(p_batch, 1000), 1);
	v_budget bigint;
	v_deleted bigint := 0;
	v_expired bigint := 0;
	v_pids uuid[] := '{}';
	v_new bigint[] := '{}';
	v_cnt bigint[] := '{}';
	v_t bigint;
	v_x bigint;
	v_y bigint;
	v_c bigint;
	v_after uuid;
	v_slice uuid[];
	r record;
BEGIN
	IF NOT pg_try_advisory_xact_lock(queen_retention_lock_key()) THEN
		RETURN jsonb_build_object('skipped', true);
	END IF;

	-- 1. Purge what earlier rounds released.  The rows are found by primary key, locked
	-- without waiting, and deleted by tuple id (a TID scan, whatever the table's size).
	DELETE FROM queen_segments s
	WHERE s.ctid = ANY (ARRAY(
		SELECT x.ctid
		FROM queen_retention_pending rp
		CROSS JOIN LATERAL (
			SELECT s2.ctid FROM queen_segments s2
			WHERE s2.partition_id = rp.partition_id AND s2.base_offset < rp.upto
			  AND s2.end_offset < rp.upto
			ORDER BY s2.base_offset
			LIMIT v_batch
			FOR UPDATE SKIP LOCKED) x
		LIMIT v_batch));
	GET DIAGNOSTICS v_deleted = ROW_COUNT;

	-- Partitions with nothing left below their mark are done (one probe each).
	DELETE FROM queen_retention_pending rp
	WHERE rp.partition_id IN (
		SELECT r2.partition_id FROM queen_retention_pending r2
		LEFT JOIN LATERAL (
			SELECT 1 AS left_over FROM queen_segments s
			WHERE s.partition_id = r2.partition_id AND s.base_offset < r2.upto
			LIMIT 1) k ON true
		WHERE k.left_over IS NULL);

	-- 2. Plan: which partitions advance, and to where (read only; step 4 moves them).
	-- Candidates: partitions whose first retained segment is due under some rule, oldest
	-- first.
	v_budget := v_batch;
	FOR r IN
		SELECT p.id, p.log_start AS ls, p.next_offset AS nx, c.t_any, c.t_done
		FROM (SELECT q.id AS qid,
			     greatest(queen_retention_cutoff(true, q.max_wait_time_seconds),
				      queen_retention_cutoff(q.retention_enabled,
							     q.retention_seconds)) AS t_any,
			     queen_retention_cutoff(q.retention_enabled,
						    q.completed_retention_seconds) AS t_done
		      FROM queen_queues q
		      WHERE q.max_wait_time_seconds > 0
			 OR (q.retention_enabled
			     AND (q.retention_seconds > 0 OR q.completed_retention_seconds > 0))) c
		JOIN queen_partitions p ON p.queue_id = c.qid
		CROSS JOIN LATERAL (
			SELECT s.created_at, s.end_offset FROM queen_segments s
			WHERE s.partition_id = p.id AND s.base_offset >= p.log_start
			ORDER BY s.base_offset LIMIT 1) f
		WHERE p.next_offset > p.log_start
		  AND (f.created_at < c.t_any
		       OR (f.created_at < c.t_done
			   AND f.end_offset <= (SELECT min(k.committed) FROM queen_cursors k
						WHERE k.partition_id = p.id)))
		ORDER BY f.created_at, p.id
	LOOP
		EXIT WHEN v_budget <= 0 OR cardinality(v_pids) >= queen_retention_max_partitions();
		v_t := r.ls;
		IF r.t_any IS NOT NULL THEN
			-- the first segment young enough to stay
			SELECT s.base_offset INTO v_x FROM queen_segments s
			WHERE s.partition_id = r.id AND s.base_offset >= r.ls
			  AND s.created_at >= r.t_any
			ORDER BY s.created_at, s.base_offset LIMIT 1;
			v_t := greatest(v_t, coalesce(v_x, r.nx));
		END IF;
		IF r.t_done IS NOT NULL THEN
			SELECT min(k.committed) INTO v_c FROM queen_cursors k
			WHERE k.partition_id = r.id;
			IF v_c IS NOT NULL AND v_c >= r.ls THEN
				-- the segment holding the first offset some group still needs ...
				IF v_c + 1 >= r.nx THEN
					v_x := r.nx;
				ELSE
					SELECT s.base_offset INTO v_x FROM queen_segments s
					WHERE s.partition_id = r.id AND s.base_offset <= v_c + 1
					ORDER BY s.base_offset DESC LIMIT 1;
				END IF;
				-- ... or the first one young enough, whichever comes first
				SELECT s.base_offset INTO v_y FROM queen_segments s
				WHERE s.partition_id = r.id AND s.base_offset >= r.ls
				  AND s.created_at >= r.t_done
				ORDER BY s.created_at, s.base_offset LIMIT 1;
				v_t := greatest(v_t,
						least(coalesce(v_x, r.ls), coalesce(v_y, r.nx)));
			END IF;
		END IF;
		CONTINUE WHEN v_t <= r.ls;
		-- Within the budget: stop at the segment after the budget's last one.
		SELECT s.base_offset INTO v_x FROM queen_segments s
		WHERE s.partition_id = r.id AND s.base_offset >= r.ls
		ORDER BY s.base_offset OFFSET v_budget LIMIT 1;
		IF v_x IS NOT NULL AND v_x < v_t THEN
			v_t := v_x;
		END IF;
		SELECT count(*) INTO v_x FROM queen_segments s
		WHERE s.partition_id = r.id AND s.base_offset >= r.ls AND s.base_offset < v_t;
		CONTINUE WHEN v_x = 0;
		v_budget := v_budget - v_x;
		v_pids := v_pids || r.id;
		v_new := v_new || v_t;
		v_cnt := v_cnt || v_x;
	END LOOP;

	-- 3. Expire dedup keys past their queue's window (window 0: the probe is off and every
	-- key is dead) in the next slice of partitions, by id: the whole table is swept every
	-- few rounds whatever the number of partitions.  A key a push is taking over right now
	-- is locked and skipped.  When the budget runs out the slice is swept again next round.
	v_budget := v_batch::bigint * queen_retention_dedup_factor();
	SELECT st.dedup_after INTO v_after FROM queen_retention_state st;
	SELECT array_agg(x.id ORDER BY x.id) INTO v_slice FROM (
		SELECT p.id FROM queen_partitions p
		WHERE p.id > coalesce(v_after, '00000000-0000-0000-0000-000000000000'::uuid)
		ORDER BY p.id LIMIT queen_retention_dedup_slice()) x;
	DELETE FROM queen_dedup d
	WHERE d.ctid = ANY (ARRAY(
		SELECT x.ctid
		FROM queen_partitions p
		JOIN (SELECT q.id,
			     CASE WHEN q.dedup_window_seconds > 0
				  THEN now() - make_interval(secs => q.dedup_window_seconds)
				  ELSE 'infinity'::timestamptz END AS cutoff
		      FROM queen_queues q) q ON q.id = p.queue_id
		CROSS JOIN LATERAL (
			SELECT d2.ctid FROM queen_dedup d2
			WHERE d2.partition_id = p.id AND d2.created_at < q.cutoff
			ORDER BY d2.created_at
			LIMIT v_budget
			FOR UPDATE SKIP LOCKED) x
		WHERE p.id = ANY (v_slice)
		LIMIT v_budget));
	GET DIAGNOSTICS v_expired = ROW_COUNT;
	IF v_expired < v_budget THEN
		UPDATE queen_retention_state SET dedup_after =
			CASE WHEN coalesce(cardinality(v_slice), 0) < queen_retention_dedup_slice()
			     THEN NULL ELSE v_slice[cardinality(v_slice)] END;
	END IF;

	RETURN jsonb_build_object('skipped', false, 'segmentsDeleted', v_deleted,
				  'dedupExpired', v_expired,
				  'advance', coalesce((
					SELECT jsonb_agg(jsonb_build_array(u.pid, u.t, u.n))
					FROM unnest(v_pids, v_new, v_cnt) AS u (pid, t, n)),
					'[]'::jsonb));
END
$$;

-- Step 4, one short transaction per chunk of a round's plan (the broker sends a few dozen
-- partitions at a time): lock them in id order without waiting (a partition a push holds is
-- left for the next round), move their log start, remember what the purge is to delete, and
-- name the cursors that now sit below the log start (the broker's index counts them from
-- there).  Log starts only ever grow and never pass next_offset, so a plan that went stale
-- meanwhile, or another broker's, cannot harm.  The retention lock is tried first, so that a
-- purge never judges queen_retention_pending while an advance writes it: when another
-- broker's round holds it the chunk is skipped ({"skipped":true}; that round plans the same
-- work again).  The partition row locks are held from the one statement to its commit.
CREATE FUNCTION queen_retention_advance(p_pid uuid[], p_start bigint[], p_count bigint[])
RETURNS jsonb
LANGUAGE plpgsql SET jit = off AS $$
DECLARE
	v jsonb;
BEGIN
	IF NOT pg_try_advisory_xact_lock(queen_retention_lock_key()) THEN
		RETURN jsonb_build_object('skipped', true);
	END IF;
	WITH lk AS MATERIALIZED (
		SELECT p.id FROM queen_partitions p
		WHERE p.id = ANY (p_pid)
		ORDER BY p.id
		FOR UPDATE SKIP LOCKED
	), up AS (
		UPDATE queen_partitions p SET log_start = u.t
		FROM unnest(p_pid, p_start, p_count) AS u (pid, t, n)
		WHERE p.id = u.pid AND p.id IN (SELECT lk.id FROM lk)
		  AND u.t > p.log_start AND u.t <= p.next_offset
		RETURNING p.id, p.log_start, u.n
	), pend AS (
		INSERT INTO queen_retention_pending AS rp (partition_id, upto)
		SELECT up.id, up.log_start FROM up
		ON CONFLICT (partition_id) DO UPDATE
		SET upto = greatest(rp.upto, excluded.upto)
	)
	SELECT jsonb_build_object(
		'partitionsAdvanced', count(*),
		'segmentsReleased', coalesce(sum(up.n), 0),
		'cursors', coalesce((
			SELECT jsonb_agg(jsonb_build_array(k.partition_id, k.group_name,
							   u2.log_start - 1))
			FROM up u2 JOIN queen_cursors k ON k.partition_id = u2.id
			WHERE k.committed < u2.log_start - 1), '[]'::jsonb))
	INTO v
	FROM up;
	RETURN v;
END
$$;

-- ---- operator reads --------------------------------------------------------------------
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
		FROM queen_partitions p
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
