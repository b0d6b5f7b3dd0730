-- retention.sql: retention rounds (SPEC.md 9 options) and dedup-window expiry.
--
-- The rounds (queen_retention_round, queen_retention_advance) plan with sequential scans
-- off: the broker's sessions plan generically and keep the plans of their first round; a
-- broker started on an empty database would otherwise read queen_segments whole on every
-- round once it has grown.  Every statement has an index or tuple-id path and is bounded by
-- the batch, never by the size of a table.

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
LANGUAGE plpgsql SET jit = off SET enable_seqscan = off AS $$
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
		SELECT p.id, p.log_start AS ls, pl.next_offset AS nx, c.t_any, c.t_done
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
		-- The partitions of each such queue, read through its index (OFFSET 0: a subquery
		-- of its own, never merged into a join): as a join, a plan that believed most
		-- queues had a rule read every partition of the database and kept those of the
		-- queues that have one (1.8-2.9 s a round beside 182,000 partitions, t9104).
		CROSS JOIN LATERAL (
			SELECT p.id, p.log_start, p.kept_next_offset, p.kept_last_created_at
			FROM queen_partitions p WHERE p.queue_id = c.qid OFFSET 0) p
		CROSS JOIN LATERAL queen_log_tail(p.id, p.kept_next_offset,
						  p.kept_last_created_at) pl
		CROSS JOIN LATERAL (
			SELECT s.created_at, s.end_offset FROM queen_segments s
			WHERE s.partition_id = p.id AND s.base_offset >= p.log_start
			ORDER BY s.base_offset LIMIT 1) f
		WHERE pl.next_offset > p.log_start
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
LANGUAGE plpgsql SET jit = off SET enable_seqscan = off AS $$
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
		-- The row keeps the log end as far as the start moves (the purge may release
		-- every segment, and with them what queen_log_tail reads).
		UPDATE queen_partitions p SET log_start = u.t,
			kept_next_offset = greatest(p.kept_next_offset, u.t),
			kept_last_created_at = greatest(p.kept_last_created_at, (
				SELECT s.created_at FROM queen_segments s
				WHERE s.partition_id = p.id AND s.base_offset < u.t
				ORDER BY s.base_offset DESC LIMIT 1))
		FROM unnest(p_pid, p_start, p_count) AS u (pid, t, n)
		WHERE p.id = u.pid AND p.id IN (SELECT lk.id FROM lk)
		  AND u.t > p.log_start
		  AND u.t <= (SELECT pl.next_offset
			      FROM queen_log_tail(p.id, p.kept_next_offset,
						  p.kept_last_created_at) pl)
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
