-- 002_core_functions.sql: the hot paths of queend, one PL/pgSQL function per round trip.
--
-- The broker generates message and lease ids (UUIDv7) and passes them in; it caches ids, log
-- ends and cursors (the partition index), but every decision is taken here, under row locks:
--   * push allocates offsets under the partition row lock (partitions locked in id order),
--     claims dedup keys and writes one segment per partition (passes of at most 1000 items)
--     with set-based SQL;
--   * pop claims cursor rows with FOR UPDATE SKIP LOCKED, so claims never wait;
--   * ack locks the cursor rows it moves (in (partition, group) order) and applies the commit
--   rule of SPEC.md 6 / 21.
-- A statement in PL/pgSQL takes a fresh snapshot, so whatever is read after a lock statement
-- sees every transaction that committed before the lock was granted.

-- ISO-8601 UTC with milliseconds, the one timestamp format of the API.
CREATE FUNCTION queen_ts(p timestamptz) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT to_char(p AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

-- Dedup key of a transactionId (queen_dedup.txn_id): itself when it fits an index entry
-- comfortably, else chr(1) || hex SHA-256 (a transactionId holds no control character).
CREATE FUNCTION queen_txn_key(p text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT CASE WHEN octet_length(p) <= 512 THEN p
		ELSE chr(1) || encode(sha256(convert_to(p, 'UTF8')), 'hex') END COLLATE "C"
$$;

-- Labels of a queue created from its name: billing.invoice.v2 -> (billing, invoice).
CREATE FUNCTION queen_name_namespace(p text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT CASE WHEN strpos(p, '.') > 0 THEN split_part(p, '.', 1) ELSE '' END
$$;

CREATE FUNCTION queen_name_task(p text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT split_part(p, '.', 2)
$$;

-- The first offset of partition p_pid whose segment was created at or after p_ts (strictly
-- after when p_strict), NULL when there is none.  created_at never decreases along offsets,
-- so this is a binary search over the offsets [log_start, next_offset), one primary-key probe
-- per step.  Used for first contact by time, delayed visibility, seek by timestamp.
CREATE FUNCTION queen_offset_at(p_pid uuid, p_ts timestamptz, p_strict bool DEFAULT false)
RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
	lo bigint;		-- every offset below lo is before p_ts
	hi bigint;		-- the answer is at most hi (hi = next_offset: none)
	mid bigint;
	s record;
BEGIN
	SELECT p.log_start, p.next_offset INTO lo, hi FROM queen_partitions p WHERE p.id = p_pid;
	IF NOT FOUND OR lo >= hi THEN
		RETURN NULL;
	END IF;
	WHILE lo < hi LOOP
		mid := lo + (hi - lo) / 2;
		SELECT g.base_offset, g.end_offset, g.created_at INTO s
		FROM queen_segments g
		WHERE g.partition_id = p_pid AND g.base_offset <= mid
		ORDER BY g.base_offset DESC LIMIT 1;
		IF NOT FOUND OR s.end_offset < mid THEN
			-- hole (retention raced us): treat as before p_ts
			lo := mid + 1;
		ELSIF s.created_at > p_ts OR (s.created_at = p_ts AND NOT p_strict) THEN
			hi := s.base_offset;	-- this whole segment qualifies
		ELSE
			lo := s.end_offset + 1;
		END IF;
	END LOOP;
	SELECT p.next_offset INTO mid FROM queen_partitions p WHERE p.id = p_pid;
	RETURN CASE WHEN lo < mid THEN lo END;
END
$$;

-- Where a new cursor starts (its committed offset), from the group's stored start on the queue
-- (SPEC.md 5 "First contact"): p_start NULL = everything retained; else the first segment
-- created at or after p_start (the log end when there is none).  Cheap answers first; the
-- search only for a partition that has data on both sides of p_start.
CREATE FUNCTION queen_cursor_start(p_pid uuid, p_log_start bigint, p_next bigint,
				   p_created timestamptz, p_last timestamptz, p_start timestamptz)
RETURNS bigint
LANGUAGE sql STABLE AS $$
	SELECT CASE
		WHEN p_start IS NULL THEN p_log_start - 1
		WHEN p_last IS NULL OR p_last < p_start THEN p_next - 1
		WHEN p_created >= p_start THEN p_log_start - 1
		ELSE greatest(p_log_start - 1,
			      coalesce(queen_offset_at(p_pid, p_start), p_next) - 1)
	END
$$;

-- Every option of a queue row, SPEC.md 9 names.
CREATE FUNCTION queen_queue_options(q queen_queues) RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT jsonb_build_object(
		'leaseTime', q.lease_time,
		'retryLimit', q.retry_limit,
		'deadLetterQueue', q.dead_letter_queue,
		'dlqAfterMaxRetries', q.dlq_after_max_retries,
		'dedupWindowSeconds', q.dedup_window_seconds,
		'retentionEnabled', q.retention_enabled,
		'retentionSeconds', q.retention_seconds,
		'completedRetentionSeconds', q.completed_retention_seconds,
		'maxWaitTimeSeconds', q.max_wait_time_seconds,
		'delayedProcessing', q.delayed_processing,
		'windowBuffer', q.window_buffer,
		'encryptionEnabled', q.encryption_enabled,
		'priority', q.priority,
		'maxSize', q.max_size,
		'ttl', q.ttl,
		'retryDelay', q.retry_delay)
$$;

-- Fill the NULL elements of p_pid from (queue, partition) names, creating queues (lease_time
-- 60, labels from the name) and partitions that do not exist.  Creation goes in name order
-- and ON CONFLICT DO NOTHING, so concurrent creators neither fail nor deadlock; the reselect
-- is a new statement and sees the winner's rows.
CREATE FUNCTION queen_resolve_partitions(p_pid uuid[], p_queue text[], p_partition text[])
RETURNS uuid[]
LANGUAGE plpgsql AS $$
DECLARE
	v uuid[];
BEGIN
	IF EXISTS (SELECT 1 FROM unnest(p_pid, p_queue) AS u (pid, q)
		   WHERE u.pid IS NULL AND u.q IS NULL) THEN
		RAISE EXCEPTION 'queen_push: unknown partition id and no queue name'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	-- Each statement resolves the names once each, as plain C-collated columns of a
	-- materialized CTE: then a join on them is an index condition on (queue_id, name),
	-- whatever the planner believes about the table's size.
	WITH w AS MATERIALIZED (
		SELECT DISTINCT u.qn COLLATE "C" AS qn
		FROM unnest(p_pid, p_queue) AS u (pid, qn) WHERE u.pid IS NULL)
	INSERT INTO queen_queues (name, namespace, task, lease_time)
	SELECT w.qn, queen_name_namespace(w.qn), queen_name_task(w.qn), 60
	FROM w
	WHERE NOT EXISTS (SELECT 1 FROM queen_queues x WHERE x.name = w.qn)
	ORDER BY 1
	ON CONFLICT (name) DO NOTHING;

	WITH w AS MATERIALIZED (
		SELECT DISTINCT u.qn COLLATE "C" AS qn, coalesce(u.pn, 'Default') COLLATE "C" AS pn
		FROM unnest(p_pid, p_queue, p_partition) AS u (pid, qn, pn) WHERE u.pid IS NULL)
	INSERT INTO queen_partitions (queue_id, name)
	SELECT q.id, w.pn
	FROM w JOIN queen_queues q ON q.name = w.qn
	WHERE NOT EXISTS (SELECT 1 FROM queen_partitions x WHERE x.queue_id = q.id AND x.name = w.pn)
	ORDER BY 1, 2
	ON CONFLICT (queue_id, name) DO NOTHING;

	WITH w AS MATERIALIZED (
		SELECT DISTINCT u.qn COLLATE "C" AS qn, coalesce(u.pn, 'Default') COLLATE "C" AS pn
		FROM unnest(p_pid, p_queue, p_partition) AS u (pid, qn, pn) WHERE u.pid IS NULL),
	r AS MATERIALIZED (
		SELECT w.qn, w.pn, p.id
		FROM w JOIN queen_queues q ON q.name = w.qn
		JOIN queen_partitions p ON p.queue_id = q.id AND p.name = w.pn)
	SELECT array_agg(coalesce(u.pid, r.id) ORDER BY u.o) INTO v
	FROM unnest(p_pid, p_queue, p_partition) WITH ORDINALITY AS u (pid, qn, pn, o)
	LEFT JOIN r ON u.pid IS NULL AND r.qn = u.qn AND r.pn = coalesce(u.pn, 'Default');
	RETURN v;
END
$$;

-- Push (SPEC.md 4).  One row per input item.
--
-- The partition row locks are held until commit and every push to those partitions waits
-- for them, so the locked part is one statement: lay the items out as segments (one per
-- partition, in input order; a call is cut into passes of 1000 items), lock the partitions
-- (id order; FOR UPDATE reads their newest next_offset), insert the segments, advance the
-- partitions, notify, answer.
-- Before it: name resolution (creating queues and partitions).  With transactionIds, also
-- before it: dedup keys and in-call repeats; then the partitions are locked first and the
-- keys claimed in queen_dedup.  A key found live in its window makes its item a duplicate
-- (slow path: only a replayed or retried push).
CREATE FUNCTION queen_push(p_pid uuid[], p_queue text[], p_partition text[], p_id uuid[],
			   p_txn text[], p_trace text[], p_payload text[], p_sub text[])
RETURNS TABLE (idx int, status text, message_id uuid, queue_id uuid, partition_id uuid,
	       off bigint, log_end bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
	v_n int := coalesce(cardinality(p_id), 0);
	v_pid uuid[] := p_pid;
	v_keys bool := p_txn IS NOT NULL AND array_remove(p_txn, NULL) <> '{}';
	-- per item, input order
	v_key text[];		-- dedup key (NULL: none, or the queue's window is 0)
	v_first int[];		-- 1-based index of the first item with its key (repeats)
	v_skip bool[];		-- not written: in-call repeat or committed duplicate
	v_dmid uuid[];		-- id of the committed message it duplicates
	v_doff bigint[];
	v_nkeys int;
	v_acc int;
	v_try int := 0;
	-- NOTIFY serializes the commits of every notifying transaction (a database-wide lock
	-- held through commit).  A broker that wakes the others itself, after commit and from
	-- another connection, sets queen.push_notify = off on its push connections.
	v_notify bool := coalesce(current_setting('queen.push_notify', true), '') <> 'off';
BEGIN
	IF v_n = 0 THEN
		RETURN;
	END IF;
	IF v_n > 1000 THEN
		-- At most 1000 items a pass, so a pass writes one segment per partition.  The
		-- passes run in order in this transaction: offsets stay dense and in input
		-- order, and a repeat of a key claimed by an earlier pass is its duplicate.
		FOR v_try IN 0 .. (v_n - 1) / 1000 LOOP
			RETURN QUERY
			SELECT r.idx + v_try * 1000, r.status, r.message_id, r.queue_id,
			       r.partition_id, r.off, r.log_end
			FROM queen_push(p_pid[v_try * 1000 + 1 : v_try * 1000 + 1000],
					p_queue[v_try * 1000 + 1 : v_try * 1000 + 1000],
					p_partition[v_try * 1000 + 1 : v_try * 1000 + 1000],
					p_id[v_try * 1000 + 1 : v_try * 1000 + 1000],
					p_txn[v_try * 1000 + 1 : v_try * 1000 + 1000],
					p_trace[v_try * 1000 + 1 : v_try * 1000 + 1000],
					p_payload[v_try * 1000 + 1 : v_try * 1000 + 1000],
					p_sub[v_try * 1000 + 1 : v_try * 1000 + 1000]) r;
		END LOOP;
		RETURN;
	END IF;
	IF v_pid IS NULL THEN
		v_pid := array_fill(NULL::uuid, ARRAY[v_n]);
	END IF;
	IF array_position(v_pid, NULL) IS NOT NULL THEN
		v_pid := queen_resolve_partitions(v_pid, p_queue, p_partition);
	END IF;

	IF v_keys THEN
		-- Dedup keys where the queue's window is on; the first item with a key wins
		-- over its in-call repeats.
		SELECT array_agg(k.key ORDER BY k.o),
		       array_agg(CASE WHEN k.fi <> k.o THEN k.fi::int END ORDER BY k.o),
		       array_agg(k.fi <> k.o ORDER BY k.o)
		INTO v_key, v_first, v_skip
		FROM (SELECT u.o, x.key,
			     CASE WHEN x.key IS NULL THEN u.o ELSE first_value(u.o) OVER (
				PARTITION BY u.pid, x.key ORDER BY u.o) END AS fi
		      FROM unnest(v_pid, p_txn) WITH ORDINALITY AS u (pid, txn, o)
		      LEFT JOIN queen_partitions p ON p.id = u.pid
		      LEFT JOIN queen_queues q ON q.id = p.queue_id
		      CROSS JOIN LATERAL (SELECT CASE WHEN u.txn IS NOT NULL
					AND q.dedup_window_seconds > 0
					THEN queen_txn_key(u.txn) END AS key) x) k;
	END IF;

	IF array_remove(v_key, NULL) <> '{}' THEN
		-- Lock, then claim the keys.  ON CONFLICT sees the newest committed rows
		-- whatever the snapshot: a key live within its window is not claimed (its item
		-- is a duplicate), an expired one is taken over.  Offsets assume no committed
		-- duplicate; the slow path below corrects them.
		PERFORM 1 FROM (SELECT p.id FROM queen_partitions p WHERE p.id = ANY (v_pid)
				ORDER BY p.id FOR UPDATE) l;
		WITH r AS (
			SELECT u.pid, u.mid, u.key,
			       row_number() OVER (PARTITION BY u.pid ORDER BY u.o) - 1 AS rel
			FROM unnest(v_pid, p_id, v_key, v_skip) WITH ORDINALITY
				AS u (pid, mid, key, skip, o)
			WHERE NOT u.skip
		), ins AS (
			INSERT INTO queen_dedup AS d (partition_id, txn_id, message_id, off,
						      created_at)
			SELECT r.pid, r.key, r.mid, p.next_offset + r.rel, now()
			FROM r JOIN queen_partitions p ON p.id = r.pid
			WHERE r.key IS NOT NULL
			ON CONFLICT (partition_id, txn_id) DO UPDATE
			SET message_id = excluded.message_id, off = excluded.off,
			    created_at = excluded.created_at
			WHERE d.created_at <= now() - (
				SELECT make_interval(secs => q.dedup_window_seconds)
				FROM queen_partitions p JOIN queen_queues q ON q.id = p.queue_id
				WHERE p.id = d.partition_id)
			RETURNING 1
		)
		SELECT (SELECT count(*) FROM ins),
		       (SELECT count(*) FROM r JOIN queen_partitions p ON p.id = r.pid
			WHERE r.key IS NOT NULL)
		INTO v_acc, v_nkeys;

		IF v_acc < v_nkeys THEN
			-- Slow path: some keys are live.  Their rows were left alone: mark those
			-- items, then correct the offsets of the rows claimed.
			SELECT array_agg(CASE WHEN d.message_id <> u.mid THEN d.message_id END
					 ORDER BY u.o),
			       array_agg(CASE WHEN d.message_id <> u.mid THEN d.off END ORDER BY u.o),
			       array_agg(u.skip OR coalesce(d.message_id <> u.mid, false)
					 ORDER BY u.o)
			INTO v_dmid, v_doff, v_skip
			FROM unnest(v_pid, p_id, v_key, v_skip) WITH ORDINALITY
				AS u (pid, mid, key, skip, o)
			LEFT JOIN queen_dedup d ON NOT u.skip AND d.partition_id = u.pid
				AND d.txn_id = u.key;
			UPDATE queen_dedup d SET off = r.off
			FROM (SELECT u.pid, u.mid, u.key, p.next_offset + row_number() OVER (
					PARTITION BY u.pid ORDER BY u.o) - 1 AS off
			      FROM unnest(v_pid, p_id, v_key, v_skip) WITH ORDINALITY
					AS u (pid, mid, key, skip, o)
			      JOIN queen_partitions p ON p.id = u.pid
			      WHERE NOT u.skip) r
			WHERE r.key IS NOT NULL AND d.partition_id = r.pid AND d.txn_id = r.key
			  AND d.message_id = r.mid AND d.off <> r.off;
		END IF;
	END IF;

	RETURN QUERY
	WITH g AS MATERIALIZED (
		-- One segment per partition (a call holds at most 1000 items): one pass over
		-- the items sorted by (partition, input order), every array aggregated in that
		-- same order.
		SELECT s.pid, count(*)::int AS n, array_agg(s.o) AS idx, array_agg(s.mid) AS ids,
		       array_agg(coalesce(s.txn, s.mid::text)) AS txns,
		       array_agg(s.trace) AS traces, bool_or(s.trace IS NOT NULL) AS has_trace,
		       array_agg(s.payload) AS pays,
		       array_agg(s.sub) AS subs, bool_or(s.sub IS NOT NULL) AS has_sub
		FROM (SELECT u.pid, u.o::int AS o, u.mid, u.txn, u.trace, u.payload, u.sub
		      FROM unnest(v_pid, p_id, p_txn, p_trace, p_payload, p_sub, v_skip)
			WITH ORDINALITY AS u (pid, mid, txn, trace, payload, sub, skip, o)
		      WHERE u.skip IS NOT TRUE
		      ORDER BY u.pid, u.o) s
		GROUP BY s.pid
	), l AS MATERIALIZED (
		-- The count(*) over g is an init plan run before the first row is locked: the
		-- segments are laid out before the locks are taken, not while they are held.
		SELECT p.id, p.next_offset AS base, p.queue_id AS qid,
		       greatest(clock_timestamp(), p.last_created_at) AS ts
		FROM queen_partitions p
		WHERE p.id = ANY (v_pid) AND (SELECT count(*) FROM g) >= 0
		ORDER BY p.id
		FOR UPDATE
	), b AS MATERIALIZED (
		SELECT l.id AS pid, l.base, l.ts, l.qid, coalesce(g.n, 0) AS n, g.idx, g.ids,
		       g.txns, CASE WHEN g.has_trace THEN g.traces END AS traces, g.pays,
		       CASE WHEN g.has_sub THEN g.subs END AS subs
		FROM l LEFT JOIN g ON g.pid = l.id
	), seg AS (
		INSERT INTO queen_segments (partition_id, base_offset, end_offset, created_at,
					    ids, txn_ids, trace_ids, payloads, producer_subs)
		SELECT b.pid, b.base, b.base + b.n - 1, b.ts, b.ids, b.txns, b.traces, b.pays,
		       b.subs
		FROM b WHERE b.n > 0
	), up AS (
		UPDATE queen_partitions p
		SET next_offset = b.base + b.n, last_created_at = b.ts
		FROM b WHERE p.id = b.pid AND b.n > 0
	), nt AS (
		SELECT pg_notify('queen_push', CASE WHEN length(x.s) > 7000 THEN '*' ELSE x.s END)
		FROM (SELECT string_agg(b.pid::text || ':' || (b.base + b.n - 1)::text, ',') AS s
		      FROM b WHERE b.n > 0) x
		WHERE x.s IS NOT NULL AND v_notify
	)
	SELECT b.idx[i] - 1, 'queued'::text, b.ids[i], b.qid, b.pid, b.base + i - 1,
	       b.base + b.n - 1
	FROM b
	CROSS JOIN LATERAL generate_series(1, b.n) AS i
	LEFT JOIN nt ON true;
	GET DIAGNOSTICS v_acc = ROW_COUNT;

	IF v_skip IS NOT NULL AND array_position(v_skip, true) IS NOT NULL THEN
		-- Duplicates: a committed one answers its original, an in-call repeat its
		-- first.  The partitions are locked and written: log end = next_offset - 1.
		RETURN QUERY
		WITH u AS (
			SELECT x.o::int AS o, x.pid, x.mid, x.skip, x.fi, x.dmid, x.doff
			FROM unnest(v_pid, p_id, v_skip, v_first, v_dmid, v_doff) WITH ORDINALITY
				AS x (pid, mid, skip, fi, dmid, doff, o)
		), w AS (
			SELECT u.o, u.pid, u.mid,
			       row_number() OVER (PARTITION BY u.pid ORDER BY u.o) AS r,
			       count(*) OVER (PARTITION BY u.pid) AS n
			FROM u WHERE NOT u.skip
		)
		SELECT u.o - 1, 'duplicate'::text, coalesce(u.dmid, f.dmid, fw.mid), p.queue_id,
		       u.pid, coalesce(u.doff, f.doff, p.next_offset - fw.n + fw.r - 1),
		       p.next_offset - 1
		FROM u
		JOIN queen_partitions p ON p.id = u.pid
		LEFT JOIN u f ON f.o = u.fi
		LEFT JOIN w fw ON fw.o = u.fi
		WHERE u.skip;
		GET DIAGNOSTICS v_try = ROW_COUNT;
		v_acc := v_acc + v_try;
	END IF;
	IF v_acc = v_n THEN
		RETURN;
	END IF;

	-- Some partition ids the broker knew are gone (their queue was deleted): push those
	-- items again, resolved by name.  Rare; the locks taken so far are kept.
	RETURN QUERY
	SELECT m.o[r.idx + 1] - 1, r.status, r.message_id, r.queue_id, r.partition_id, r.off,
	       r.log_end
	FROM (SELECT array_agg(x.o::int ORDER BY x.o) AS o
	      FROM unnest(v_pid) WITH ORDINALITY AS x (pid, o)
	      WHERE NOT EXISTS (SELECT 1 FROM queen_partitions p WHERE p.id = x.pid)) m
	CROSS JOIN LATERAL queen_push(
		array_fill(NULL::uuid, ARRAY[cardinality(m.o)]),
		ARRAY(SELECT p_queue[k] FROM unnest(m.o) k),
		ARRAY(SELECT p_partition[k] FROM unnest(m.o) k),
		ARRAY(SELECT p_id[k] FROM unnest(m.o) k),
		ARRAY(SELECT p_txn[k] FROM unnest(m.o) k),
		ARRAY(SELECT p_trace[k] FROM unnest(m.o) k),
		ARRAY(SELECT p_payload[k] FROM unnest(m.o) k),
		ARRAY(SELECT p_sub[k] FROM unnest(m.o) k)) r
	WHERE m.o IS NOT NULL;
END
$$;

-- Pop (SPEC.md 5).  Claims up to p_max_partitions partitions with deliverable data for the
-- group (cursor rows FOR UPDATE SKIP LOCKED: claims never wait), leases them under
-- p_lease_id (or commits at once when p_auto_ack) and returns up to p_batch messages, one row
-- each, in claim order then offset order.  No row = nothing deliverable.
CREATE FUNCTION queen_pop(p_queue text, p_partition text, p_namespace text, p_task text,
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
BEGIN
	IF v_batch < 1 OR v_width < 1 THEN
		RETURN;
	END IF;

	IF p_queue IS NOT NULL THEN
		SELECT array_agg(q.id) INTO v_queues FROM queen_queues q WHERE q.name = p_queue;
	ELSE
		SELECT array_agg(q.id) INTO v_queues FROM queen_queues q
		WHERE (p_namespace IS NULL OR q.namespace = p_namespace)
		  AND (p_task IS NULL OR q.task = p_task);
	END IF;
	IF v_queues IS NULL THEN
		RETURN;
	END IF;

	-- Candidate partitions, in the order they are to be tried.  Without a list from the
	-- broker: every partition holding data, least recently served cursor first.
	IF p_candidates IS NOT NULL THEN
		SELECT array_agg(p.id ORDER BY u.o) INTO v_cand
		FROM unnest(p_candidates) WITH ORDINALITY AS u (pid, o)
		JOIN queen_partitions p ON p.id = u.pid
		WHERE p.queue_id = ANY (v_queues)
		  AND (p_partition IS NULL OR p.name = p_partition)
		  AND p.next_offset > p.log_start;
	ELSE
		SELECT array_agg(p.id ORDER BY c.updated_at NULLS FIRST, p.id) INTO v_cand
		FROM queen_partitions p
		LEFT JOIN queen_cursors c ON c.partition_id = p.id AND c.group_name = v_group
		WHERE p.queue_id = ANY (v_queues)
		  AND (p_partition IS NULL OR p.name = p_partition)
		  AND p.next_offset > p.log_start
		  AND (c.partition_id IS NULL
		       OR (p.next_offset - 1 > greatest(c.committed, p.log_start - 1)
			   AND (c.lease_expires_at IS NULL OR c.lease_expires_at <= now())));
	END IF;

	-- First contact of a named group with a queue: decide and store where it starts.
	IF NOT v_qmode THEN
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
	IF v_cand IS NULL THEN
		RETURN;
	END IF;

	-- Cursor rows for candidates the group has never read, at the group's start.
	INSERT INTO queen_cursors (partition_id, group_name, committed)
	SELECT p.id, v_group,
	       queen_cursor_start(p.id, p.log_start, p.next_offset, p.created_at,
				  p.last_created_at, s.start_at)
	FROM queen_partitions p
	LEFT JOIN queen_subscriptions s ON s.group_name = v_group AND s.queue_id = p.queue_id
	WHERE p.id = ANY (v_cand)
	  AND (v_qmode OR s.group_name IS NOT NULL)
	  AND NOT EXISTS (SELECT 1 FROM queen_cursors c
			  WHERE c.partition_id = p.id AND c.group_name = v_group)
	ORDER BY p.id
	ON CONFLICT DO NOTHING;

	-- Claim.  The lease condition is rechecked on the locked row version (EvalPlanQual).
	SELECT array_agg(x.pid ORDER BY x.o) INTO v_claim FROM (
		SELECT c.partition_id AS pid, u.o
		FROM unnest(v_cand) WITH ORDINALITY AS u (pid, o)
		JOIN queen_partitions p ON p.id = u.pid
		JOIN queen_queues q ON q.id = p.queue_id
		JOIN queen_cursors c ON c.partition_id = u.pid AND c.group_name = v_group
		WHERE p.next_offset - 1 > greatest(c.committed, p.log_start - 1)
		  AND (c.lease_expires_at IS NULL OR c.lease_expires_at <= now())
		  AND (q.window_buffer <= 0
		       OR p.last_created_at <= now() - make_interval(secs => q.window_buffer))
		  AND (q.delayed_processing <= 0 OR EXISTS (
			SELECT 1 FROM queen_segments s
			WHERE s.partition_id = p.id
			  AND s.base_offset <= greatest(c.committed, p.log_start - 1) + 1
			  AND s.base_offset > greatest(c.committed, p.log_start - 1) + 1 - 1000
			  AND s.end_offset >= greatest(c.committed, p.log_start - 1) + 1
			  AND s.created_at <= now() - make_interval(secs => q.delayed_processing)))
		ORDER BY u.o
		LIMIT v_width
		FOR UPDATE OF c SKIP LOCKED
	) x;
	IF v_claim IS NULL THEN
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
		SELECT cl.*,
		       least(greatest(cl.vend - cl.base, 0),
			     greatest(v_batch - coalesce(sum(greatest(cl.vend - cl.base, 0)) OVER (
				ORDER BY cl.o ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0), 0))
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
	SELECT qt.pid, qt.pname, qt.qname, s.base_offset + r.lo - 1 + m.o - 1,
	       m.mid, m.txn, m.trace, m.payload, s.created_at,
	       upd.att, upd.cmt, qt.lend, upd.lexp
	FROM qt
	JOIN upd ON upd.pid = qt.pid
	JOIN queen_segments s ON s.partition_id = qt.pid
		AND s.base_offset <= qt.base + qt.take
		AND s.base_offset > qt.base + 1 - 1000
		AND s.end_offset > qt.base
	CROSS JOIN LATERAL (SELECT greatest(qt.base + 1 - s.base_offset + 1, 1) AS lo,
				   least(qt.base + qt.take, s.end_offset) - s.base_offset + 1 AS hi) r
	CROSS JOIN LATERAL unnest(s.ids[r.lo:r.hi], s.txn_ids[r.lo:r.hi], s.trace_ids[r.lo:r.hi],
				  s.payloads[r.lo:r.hi]) WITH ORDINALITY AS m (mid, txn, trace, payload, o)
	WHERE qt.take > 0
	ORDER BY qt.o, 4;
END
$$;

-- Ack (SPEC.md 6 and 21): an offset commit per (partition, group).  One row per item.
--   1. lock the cursors touched, in (partition, group) order, and resolve each transactionId
--      to its offset inside the lease span committed+1 .. batch_end;
--   2. the rare rest (lease-less acks above the span, re-acks at or below the cursor, unknown
--      ids) is resolved one by one: dedup row, then a bounded segment scan;
--   3. one statement applies the commit rule to every group and writes cursors and DLQ rows.
CREATE FUNCTION queen_ack(p_group text[], p_pid uuid[], p_txn text[], p_status text[],
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
	r record;
BEGIN
	IF coalesce(cardinality(p_txn), 0) = 0 THEN
		RETURN;
	END IF;

	WITH it AS (
		SELECT u.o, coalesce(u.g, '__QUEUE_MODE__') AS g, u.pid, u.txn
		FROM unnest(p_group, p_pid, p_txn) WITH ORDINALITY AS u (g, pid, txn, o)
	), lk AS (
		SELECT c.partition_id AS pid, c.group_name AS g, c.committed AS cm,
		       c.batch_end AS be
		FROM queen_cursors c
		WHERE (c.partition_id, c.group_name) IN (SELECT it.pid, it.g FROM it)
		ORDER BY c.partition_id, c.group_name
		FOR UPDATE OF c
	), sp AS (
		SELECT lk.pid, lk.g, m.t,
		       min(s.base_offset + r.lo - 1 + m.o - 1) AS off
		FROM lk
		JOIN queen_segments s ON s.partition_id = lk.pid
			AND s.base_offset <= lk.be
			AND s.base_offset > lk.cm + 1 - 1000
			AND s.end_offset > lk.cm
		CROSS JOIN LATERAL (SELECT greatest(lk.cm + 1 - s.base_offset + 1, 1) AS lo,
				    least(lk.be, s.end_offset) - s.base_offset + 1 AS hi) r
		CROSS JOIN LATERAL unnest(s.txn_ids[r.lo:r.hi]) WITH ORDINALITY AS m (t, o)
		WHERE lk.be > lk.cm
		GROUP BY 1, 2, 3
	)
	SELECT array_agg(sp.off ORDER BY it.o) INTO v_off
	FROM it LEFT JOIN sp ON sp.pid = it.pid AND sp.g = it.g AND sp.t = it.txn;

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

-- Lease extend (SPEC.md 7): every live lease held by p_lease, expiry never shortened, expired
-- leases not revived.  Rows are locked in (partition, group) order, as ack does.
CREATE FUNCTION queen_extend(p_lease uuid, p_seconds int)
RETURNS TABLE (renewed int, expires_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
	PERFORM 1 FROM queen_cursors c
	WHERE c.lease_id = p_lease AND c.lease_expires_at > now()
	ORDER BY c.partition_id, c.group_name
	FOR UPDATE;

	RETURN QUERY
	WITH u AS (
		UPDATE queen_cursors c
		SET lease_expires_at = greatest(c.lease_expires_at,
					       now() + make_interval(secs => coalesce(p_seconds, 60))),
		    updated_at = now()
		WHERE c.lease_id = p_lease AND c.lease_expires_at > now()
		RETURNING c.lease_expires_at
	)
	SELECT count(*)::int, min(u.lease_expires_at) FROM u;
END
$$;

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
		SELECT p.* FROM queen_partitions p WHERE p.queue_id = p_queue_id
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
	FROM queen_partitions p WHERE p.queue_id = q.id;

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
		SELECT p.name, p.id, p.log_start, p.next_offset - 1 AS lend,
		       coalesce(c.committed, queen_cursor_start(p.id, p.log_start, p.next_offset,
				p.created_at, p.last_created_at,
				CASE WHEN g.g = '__QUEUE_MODE__' THEN NULL ELSE s.start_at END)) AS cm,
		       coalesce(c.lease_expires_at > now(), false) AS leased
		FROM q CROSS JOIN g
		JOIN queen_partitions p ON p.queue_id = q.id
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

-- Dead letters (SPEC.md 11), newest first.  NULL filters = all.
CREATE FUNCTION queen_dlq_list(p_queue text, p_group text, p_limit int, p_offset int)
RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT jsonb_build_object(
		'messages', coalesce((
			SELECT jsonb_agg(x.j ORDER BY x.failed_at DESC, x.id)
			FROM (SELECT d.failed_at, d.id, jsonb_build_object(
					'id', d.id, 'transactionId', d.txn_id,
					'messageId', d.message_id, 'partitionId', d.partition_id,
					'queue', d.queue_name, 'partition', d.partition_name,
					'consumerGroup', d.group_name, 'offset', d.off,
					'errorMessage', d.error_message, 'retryCount', d.retry_count,
					'traceId', d.trace_id, 'data', d.payload::jsonb,
					'createdAt', queen_ts(d.created_at),
					'failedAt', queen_ts(d.failed_at)) AS j
			      FROM queen_dlq d
			      WHERE (p_queue IS NULL OR d.queue_name = p_queue)
				AND (p_group IS NULL OR d.group_name = p_group)
			      ORDER BY d.failed_at DESC, d.id
			      LIMIT coalesce(p_limit, 100) OFFSET coalesce(p_offset, 0)) x),
			'[]'::jsonb),
		'pagination', jsonb_build_object('limit', coalesce(p_limit, 100),
						 'offset', coalesce(p_offset, 0)),
		'total', (SELECT count(*) FROM queen_dlq d
			  WHERE (p_queue IS NULL OR d.queue_name = p_queue)
			    AND (p_group IS NULL OR d.group_name = p_group)))
$$;

-- The broker's partition index, rebuilt from here: one row per (partition, cursor), group
-- columns NULL for a partition no group has read.
CREATE FUNCTION queen_index_snapshot()
RETURNS TABLE (queue_id uuid, queue_name text, namespace text, task text, partition_id uuid,
	       partition_name text, log_end bigint, last_created_at timestamptz, group_name text,
	       committed bigint, lease_expires_at timestamptz)
LANGUAGE sql STABLE AS $$
	SELECT q.id, q.name, q.namespace, q.task, p.id, p.name, p.next_offset - 1,
	       p.last_created_at, c.group_name,
	       greatest(c.committed, p.log_start - 1),	-- below the log start = at it
	       c.lease_expires_at
	FROM queen_queues q
	JOIN queen_partitions p ON p.queue_id = q.id
	LEFT JOIN queen_cursors c ON c.partition_id = p.id
$$;

-- Counts for /metrics.
CREATE FUNCTION queen_stats() RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT jsonb_build_object(
		'queues', (SELECT count(*) FROM queen_queues),
		'partitions', (SELECT count(*) FROM queen_partitions),
		'messages', (SELECT coalesce(sum(p.next_offset - p.log_start), 0)
			     FROM queen_partitions p),
		'dlq', (SELECT count(*) FROM queen_dlq))
$$;
