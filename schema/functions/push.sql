-- push.sql: name resolution and the push (SPEC.md 4), and the spool's replay of it.

-- The partition of queue p_qid named p_name: one probe of the unique index on (queue_id,
-- name).  A set-returning SQL function is inlined into its caller as a subquery, and the LIMIT
-- keeps that subquery from being merged into the caller's join: planned on its own, both
-- columns are conditions of the index scan.  Written as a join, the planner may take a path
-- keyed by queue_id alone with the name as a join filter (same estimated cost while the table
-- is small, fewer outer relations), and a cached plan keeps it as the queue grows: every name
-- a scan of all its queue's partitions (t1008).
CREATE FUNCTION queen_partition_named(p_qid uuid, p_name text)
RETURNS TABLE (id uuid)
LANGUAGE sql STABLE AS $$
	SELECT p.id FROM queen_partitions p WHERE p.queue_id = p_qid AND p.name = p_name LIMIT 1
$$;

-- Fill the NULL elements of p_pid from (queue, partition) names, creating queues (lease_time
-- 60, labels from the name) and partitions that do not exist (ids of version 7:
-- queen_uuid_v7).  Creation goes in name order and ON CONFLICT DO NOTHING, so concurrent
-- creators neither fail nor deadlock; the reselect is a new statement and sees the winner's
-- rows.  The partitions that exist already are left to ON CONFLICT, which probes the unique
-- index on (queue_id, name) exactly: a NOT EXISTS probe before it was planned once (generic
-- plan) as an index scan on queue_id alone with the name as a filter, every new name a scan
-- of all its queue's partitions (12 s for a push of 800 new partitions into a queue of
-- 10,000).
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
	INSERT INTO queen_partitions (id, queue_id, name)
	SELECT queen_uuid_v7(), q.id, w.pn
	FROM w JOIN queen_queues q ON q.name = w.qn
	ORDER BY q.id, w.pn
	ON CONFLICT (queue_id, name) DO NOTHING;

	WITH w AS MATERIALIZED (
		SELECT DISTINCT u.qn COLLATE "C" AS qn, coalesce(u.pn, 'Default') COLLATE "C" AS pn
		FROM unnest(p_pid, p_queue, p_partition) AS u (pid, qn, pn) WHERE u.pid IS NULL),
	r AS MATERIALIZED (
		SELECT w.qn, w.pn, p.id
		FROM w JOIN queen_queues q ON q.name = w.qn
		CROSS JOIN LATERAL queen_partition_named(q.id, w.pn) p)
	SELECT array_agg(coalesce(u.pid, r.id) ORDER BY u.o) INTO v
	FROM unnest(p_pid, p_queue, p_partition) WITH ORDINALITY AS u (pid, qn, pn, o)
	LEFT JOIN r ON u.pid IS NULL AND r.qn = u.qn AND r.pn = coalesce(u.pn, 'Default');
	RETURN v;
END
$$;

-- Push (SPEC.md 4).  One row per input item.
--
-- The partition row locks are held until commit and every push to those partitions waits
-- for them.  First the partitions are locked (id order, a statement of its own: the next
-- statement's snapshot, taken after the locks, sees every push committed before); then one
-- statement lays the items out as segments (one per partition, in input order; a call is cut
-- into passes of 1000 items), reads each partition's log end from its newest segment
-- (queen_log_tail), inserts the segments, notifies and answers.  The partition row is locked,
-- never updated: a push leaves no version of it behind (022_log_end_from_segments.sql).
-- Before it: name resolution (creating queues and partitions).  With transactionIds, also
-- before it: dedup keys and in-call repeats; then, under the locks, the keys are claimed in
-- queen_dedup.  A key found live in its window makes its item a duplicate (slow path: only a
-- replayed or retried push).
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
		-- Dedup keys where the queue's window is on.  The windows are read for the
		-- call's partitions by their ids (a join of every item with queen_partitions
		-- was planned as a scan of the whole table).
		SELECT array_agg(CASE WHEN u.txn IS NOT NULL AND w.win > 0
				 THEN queen_txn_key(u.txn) END ORDER BY u.o)
		INTO v_key
		FROM unnest(v_pid, p_txn) WITH ORDINALITY AS u (pid, txn, o)
		LEFT JOIN (SELECT p.id, q.dedup_window_seconds AS win
			   FROM queen_partitions p JOIN queen_queues q ON q.id = p.queue_id
			   WHERE p.id = ANY (v_pid)) w ON w.id = u.pid;
		-- The first item with a key wins over its in-call repeats (rare: looked for
		-- by hashing before anything is sorted).
		IF EXISTS (SELECT 1 FROM unnest(v_pid, v_key) AS u (pid, key)
			   WHERE u.key IS NOT NULL GROUP BY u.pid, u.key HAVING count(*) > 1) THEN
			SELECT array_agg(CASE WHEN k.fi <> k.o THEN k.fi::int END ORDER BY k.o),
			       array_agg(k.fi <> k.o ORDER BY k.o)
			INTO v_first, v_skip
			FROM (SELECT u.o, CASE WHEN u.key IS NULL THEN u.o ELSE first_value(u.o)
					OVER (PARTITION BY u.pid, u.key ORDER BY u.o) END AS fi
			      FROM unnest(v_pid, v_key) WITH ORDINALITY AS u (pid, key, o)) k;
		ELSE
			v_skip := array_fill(false, ARRAY[v_n]);
		END IF;
	END IF;

	PERFORM 1 FROM (SELECT p.id FROM queen_partitions p WHERE p.id = ANY (v_pid)
			ORDER BY p.id FOR UPDATE) l;

	IF array_remove(v_key, NULL) <> '{}' THEN
		-- Claim the keys.  Under the partition locks no other push can write these
		-- partitions' keys, and this statement's snapshot (taken after the locks) sees
		-- every key committed before: a key not found is inserted plainly.  A key found
		-- live within its window is not claimed (its item is a duplicate); an expired
		-- one is taken over by ON CONFLICT, which sees the newest committed row
		-- (retention may be deleting it).  Offsets assume no committed duplicate; the
		-- slow path below corrects them.
		WITH p AS MATERIALIZED (
			SELECT p.id, pl.next_offset, make_interval(secs => q.dedup_window_seconds)
				AS win
			FROM queen_partitions p JOIN queen_queues q ON q.id = p.queue_id
			CROSS JOIN LATERAL queen_log_tail(p.id, p.kept_next_offset,
							  p.kept_last_created_at) pl
			WHERE p.id = ANY (v_pid)
		), r AS (
			SELECT u.pid, u.mid, u.key,
			       row_number() OVER (PARTITION BY u.pid ORDER BY u.o) - 1 AS rel
			FROM unnest(v_pid, p_id, v_key, v_skip) WITH ORDINALITY
				AS u (pid, mid, key, skip, o)
			WHERE NOT u.skip
		), k AS MATERIALIZED (
			SELECT r.pid, r.key, r.mid, p.next_offset + r.rel AS off, p.win,
			       d.created_at AS held_at
			FROM r JOIN p ON p.id = r.pid
			LEFT JOIN LATERAL (
				-- one probe of the primary key per key, whatever the plan
				SELECT d.created_at FROM queen_dedup d
				WHERE d.partition_id = r.pid AND d.txn_id = r.key LIMIT 1) d ON true
			WHERE r.key IS NOT NULL
		), ins AS (
			INSERT INTO queen_dedup (partition_id, txn_id, message_id, off, created_at)
			SELECT k.pid, k.key, k.mid, k.off, now() FROM k WHERE k.held_at IS NULL
			RETURNING 1
		), tk AS (
			INSERT INTO queen_dedup AS d (partition_id, txn_id, message_id, off,
						      created_at)
			SELECT k.pid, k.key, k.mid, k.off, now() FROM k
			WHERE k.held_at <= now() - k.win
			ON CONFLICT (partition_id, txn_id) DO UPDATE
			SET message_id = excluded.message_id, off = excluded.off,
			    created_at = excluded.created_at
			WHERE d.created_at <= now() - (
				SELECT make_interval(secs => q.dedup_window_seconds)
				FROM queen_partitions p JOIN queen_queues q ON q.id = p.queue_id
				WHERE p.id = d.partition_id)
			RETURNING 1
		)
		SELECT (SELECT count(*) FROM ins) + (SELECT count(*) FROM tk),
		       (SELECT count(*) FROM k)
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
			FROM (SELECT u.pid, u.mid, u.key, pl.next_offset + row_number() OVER (
					PARTITION BY u.pid ORDER BY u.o) - 1 AS off
			      FROM unnest(v_pid, p_id, v_key, v_skip) WITH ORDINALITY
					AS u (pid, mid, key, skip, o)
			      JOIN queen_partitions p ON p.id = u.pid
			      CROSS JOIN LATERAL queen_log_tail(p.id, p.kept_next_offset,
								p.kept_last_created_at) pl
			      WHERE NOT u.skip) r
			WHERE r.key IS NOT NULL AND d.partition_id = r.pid AND d.txn_id = r.key
			  AND d.message_id = r.mid AND d.off <> r.off;
		END IF;
	END IF;

	RETURN QUERY
	WITH g AS MATERIALIZED (
		-- One segment per partition (a call holds at most 1000 items): the input indexes
		-- of its items, in input order.  Only indexes: the payloads are read from the
		-- parameters once, into the segment row itself.  Carried through these CTEs as
		-- arrays, every 1 KiB payload was copied four times over (a sort, an aggregate, two
		-- materializations): a quarter of the database's time for a push (8.8 -> 6.5 us a
		-- message).
		SELECT s.pid, count(*)::int AS n, array_agg(s.o) AS idx
		FROM (SELECT u.pid, u.o::int AS o
		      FROM unnest(v_pid, v_skip) WITH ORDINALITY AS u (pid, skip, o)
		      WHERE u.skip IS NOT TRUE
		      ORDER BY u.pid, u.o) s
		GROUP BY s.pid
	), l AS MATERIALIZED (
		SELECT p.id, pl.next_offset AS base, p.queue_id AS qid,
		       greatest(clock_timestamp(), pl.last_created_at) AS ts
		FROM queen_partitions p
		CROSS JOIN LATERAL queen_log_tail(p.id, p.kept_next_offset,
						  p.kept_last_created_at) pl
		WHERE p.id = ANY (v_pid)
	), b AS MATERIALIZED (
		SELECT l.id AS pid, l.base, l.ts, l.qid, coalesce(g.n, 0) AS n, g.idx
		FROM l LEFT JOIN g ON g.pid = l.id
	), seg AS (
		-- Each array in the order of idx (unnest reads an array in order).  A trace or
		-- producer array whose every element is NULL is stored as NULL.
		INSERT INTO queen_segments (partition_id, base_offset, end_offset, created_at,
					    ids, txn_ids, trace_ids, payloads, producer_subs)
		SELECT b.pid, b.base, b.base + b.n - 1, b.ts,
		       ARRAY(SELECT p_id[i] FROM unnest(b.idx) i),
		       ARRAY(SELECT coalesce(p_txn[i], p_id[i]::text) FROM unnest(b.idx) i),
		       (SELECT CASE WHEN bool_or(p_trace[i] IS NOT NULL)
				    THEN array_agg(p_trace[i]) END
			FROM unnest(b.idx) i WHERE p_trace IS NOT NULL),
		       ARRAY(SELECT p_payload[i] FROM unnest(b.idx) i),
		       (SELECT CASE WHEN bool_or(p_sub[i] IS NOT NULL)
				    THEN array_agg(p_sub[i]) END
			FROM unnest(b.idx) i WHERE p_sub IS NOT NULL)
		FROM b WHERE b.n > 0
	), nt AS (
		SELECT pg_notify('queen_push', CASE WHEN length(x.s) > 7000 THEN '*' ELSE x.s END)
		FROM (SELECT string_agg(b.pid::text || ':' || (b.base + b.n - 1)::text, ',') AS s
		      FROM b WHERE b.n > 0) x
		WHERE x.s IS NOT NULL AND v_notify
	)
	SELECT b.idx[i] - 1, 'queued'::text, p_id[b.idx[i]], b.qid, b.pid, b.base + i - 1,
	       b.base + b.n - 1
	FROM b
	CROSS JOIN LATERAL generate_series(1, b.n) AS i
	LEFT JOIN nt ON true;
	GET DIAGNOSTICS v_acc = ROW_COUNT;

	IF v_skip IS NOT NULL AND array_position(v_skip, true) IS NOT NULL THEN
		-- Duplicates: a committed one answers its original, an in-call repeat its
		-- first.  The partitions are locked and written: this statement sees their log
		-- ends with the segments above.
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
		       u.pid, coalesce(u.doff, f.doff, pl.next_offset - fw.n + fw.r - 1),
		       pl.next_offset - 1
		FROM u
		JOIN queen_partitions p ON p.id = u.pid
		CROSS JOIN LATERAL queen_log_tail(p.id, p.kept_next_offset,
						  p.kept_last_created_at) pl
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

-- 008_spool.sql: replay of spooled pushes (SPEC.md 15; the spool itself is src/spool.c).
--
-- A push buffered while PostgreSQL was unreachable keeps the message id it was answered with.
-- A replay can run twice (the broker crashed after the commit, before it removed the spool
-- file), and a buffered push may even have been stored already (the commit went through but
-- its answer was lost with the connection).  For an item with a transactionId, queen_push
-- cannot tell such a repeat: it tells a live key from one it claims itself by the message id,
-- and a repeat has the same one.  So a replay first answers "duplicate" for every item whose
-- key is already held by its own message id, whatever the age of the key, and pushes only the
-- rest through queen_push (dedup against other messages as usual).  Items without a
-- transactionId carry no key: the drainer looks those up by message id (queen_spool_stored)
-- wherever a replay may repeat a commit.  One call, one round trip, the same rows as
-- queen_push.
--
-- Reads only: nothing here locks.  It is safe because one spool has one drainer (the broker
-- holds a lock on FILE_BUFFER_DIR) and message ids are unique: no one else can make a key
-- held by one of these ids appear meanwhile.

CREATE FUNCTION queen_spool_push(p_pid uuid[], p_queue text[], p_partition text[],
				 p_id uuid[], p_txn text[], p_trace text[], p_payload text[],
				 p_sub text[])
RETURNS TABLE (idx int, status text, message_id uuid, queue_id uuid, partition_id uuid,
	       off bigint, log_end bigint)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
	v_dup int[];		-- 1-based input indexes whose key their own message id holds
	v_doff bigint[];	-- and the offsets they were stored at
	v_rest int[];		-- 1-based input indexes still to push
BEGIN
	-- One probe of the dedup key's primary key per item, the keys computed first: a join on
	-- the key expression let the planner scan all of a partition's keys for every item
	-- (quadratic in the dedup window over a long replay).
	WITH k AS MATERIALIZED (
		SELECT u.o, u.mid, p.id AS pid, queen_txn_key(u.txn) AS key
		FROM unnest(p_queue, p_partition, p_id, p_txn) WITH ORDINALITY
			AS u (q, pn, mid, txn, o)
		JOIN queen_queues q ON q.name = u.q
		CROSS JOIN LATERAL queen_partition_named(q.id, u.pn) p
		WHERE u.txn IS NOT NULL
	)
	SELECT array_agg(k.o::int ORDER BY k.o), array_agg(d.off ORDER BY k.o)
	INTO v_dup, v_doff
	FROM k CROSS JOIN LATERAL (
		SELECT d.off FROM queen_dedup d
		WHERE d.partition_id = k.pid AND d.txn_id = k.key AND d.message_id = k.mid
		LIMIT 1) d;
	IF v_dup IS NULL THEN
		RETURN QUERY SELECT * FROM queen_push(p_pid, p_queue, p_partition, p_id, p_txn,
						      p_trace, p_payload, p_sub);
		RETURN;
	END IF;

	RETURN QUERY
	SELECT (x.o - 1)::int, 'duplicate'::text, p_id[x.o], p.queue_id, p.id, x.off,
	       pl.next_offset - 1
	FROM unnest(v_dup, v_doff) AS x (o, off)
	JOIN queen_queues q ON q.name = p_queue[x.o]
	CROSS JOIN LATERAL queen_partition_named(q.id, p_partition[x.o]) n
	JOIN queen_partitions p ON p.id = n.id
	CROSS JOIN LATERAL queen_log_tail(p.id, p.kept_next_offset, p.kept_last_created_at) pl;

	SELECT array_agg(i ORDER BY i) INTO v_rest
	FROM generate_subscripts(p_id, 1) AS i
	WHERE i <> ALL (v_dup);
	IF v_rest IS NULL THEN
		RETURN;
	END IF;
	RETURN QUERY
	SELECT v_rest[r.idx + 1] - 1, r.status, r.message_id, r.queue_id, r.partition_id, r.off,
	       r.log_end
	FROM queen_push(ARRAY(SELECT p_pid[k] FROM unnest(v_rest) k),
			ARRAY(SELECT p_queue[k] FROM unnest(v_rest) k),
			ARRAY(SELECT p_partition[k] FROM unnest(v_rest) k),
			ARRAY(SELECT p_id[k] FROM unnest(v_rest) k),
			ARRAY(SELECT p_txn[k] FROM unnest(v_rest) k),
			ARRAY(SELECT p_trace[k] FROM unnest(v_rest) k),
			ARRAY(SELECT p_payload[k] FROM unnest(v_rest) k),
			ARRAY(SELECT p_sub[k] FROM unnest(v_rest) k)) r;
END
$$;
