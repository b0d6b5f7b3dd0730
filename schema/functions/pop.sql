-- pop.sql: the pop (SPEC.md 5) and lease extend (SPEC.md 7).
--
-- In PL/pgSQL every statement pays for its executor start-up (plan nodes, expression
-- programs, memory contexts) whatever the rows it touches, and a pop of a healthy consumer
-- touches few rows: there the number of statements, not their rows, is the cost.
--
-- A span of offsets (a lease, a pop) is read as the primary-key range of queen_segments from
-- the segment holding its first offset (one backward probe: max(base_offset) <= first) to its
-- last.  Bounding that range below by "first - 1000" instead (a segment holds at most 1000
-- offsets) reads every small segment in between: up to a thousand index entries and heap
-- rows for a partition fed one message per push.

-- The class (first key) of the advisory locks that gate the writing of a new cursor row; the
-- second key is a hash of (partition, group).  Two int4 keys never meet the bigint keys of
-- the migration and retention locks.
CREATE FUNCTION queen_cursor_lock_class() RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 515176 $$;

-- The row of group p_group's cursor on partition p_pid (its ctid), or no row: one probe of
-- the primary key with both its columns.  Inlined into the caller as a subquery that the
-- LIMIT keeps out of the caller's join, so it is planned on its own.  Written as a join of
-- the candidates with queen_cursors, a plan cached while the table was small read the cursors
-- by group_name alone (the key's second column: every entry of the index) and matched them
-- to the candidates afterwards: 15-200 ms a pop once the table held 100,000 cursors (t2009).
-- Each caller reaches the row by that ctid alone (a condition on its key beside it would
-- offer the planner that group_name scan again), locks it and rechecks the lease on the
-- locked version: a row locked after an update is the same cursor (no update changes a
-- cursor's key, and a version this statement's snapshot sees is not pruned under it).
CREATE FUNCTION queen_cursor_row(p_pid uuid, p_group text)
RETURNS TABLE (cid tid)
LANGUAGE sql STABLE AS $$
	SELECT c.ctid FROM queen_cursors c
	WHERE c.partition_id = p_pid AND c.group_name = p_group
	LIMIT 1
$$;

-- The messages at offsets (p_after, p_upto] of a partition: the slices of the segments that
-- hold them, one row each, its first offset and its arrays (a message a row cost PostgreSQL
-- its unnesting, a tuple, a row of the answer with every field of the pop repeated, and
-- libpq as much again to read).  Both pop statements read their leases through it.  It is
-- one SELECT of LANGUAGE sql, STABLE: the planner inlines it into the calling statement, so
-- that it costs what the same text written out there costs (no function call, no tuple
-- store).
CREATE FUNCTION queen_segment_slice(p_pid uuid, p_after bigint, p_upto bigint)
RETURNS TABLE (off bigint, message_ids uuid[], txn_ids text[], trace_ids text[],
	       payloads text[], created_at timestamptz, producer_subs text[])
LANGUAGE sql STABLE AS $$
	SELECT s.base_offset + r.lo - 1, s.ids[r.lo:r.hi], s.txn_ids[r.lo:r.hi],
	       s.trace_ids[r.lo:r.hi], s.payloads[r.lo:r.hi], s.created_at,
	       s.producer_subs[r.lo:r.hi]
	FROM queen_segments s
	CROSS JOIN LATERAL (
		SELECT greatest(p_after + 1 - s.base_offset + 1, 1) AS lo,
		       least(p_upto, s.end_offset) - s.base_offset + 1 AS hi) r
	WHERE s.partition_id = p_pid
	  AND s.base_offset <= p_upto
	  AND s.base_offset >= coalesce((SELECT max(s0.base_offset)
					 FROM queen_segments s0
					 WHERE s0.partition_id = p_pid
					   AND s0.base_offset <= p_after + 1),
					p_after + 1 - 999)
	  AND s.end_offset > p_after
$$;

-- The claim of the group's cursors that exist among p_cand (in that order, SKIP LOCKED, the
-- conditions rechecked on the locked row version), their leases under p_lease (or the commit
-- when p_auto), and the slices of the segments the leases cover: queen_pop's rows.  A pop in
-- the steady state is this alone; the pop that had to look further claims its partitions
-- (locked already, by the same transaction) through it too.  p_group is never NULL here, and
-- p_queue only when the candidates were chosen among the queues of a discovery route.
-- p_cand_ends: the log end the broker's index knows for each candidate, as for queen_pop;
-- where the queue holds nothing back (windowBuffer, delayedProcessing) the claim reads up to
-- it (queen_log_tail_known).
CREATE FUNCTION queen_pop_held(p_queue text, p_partition text, p_group text, p_batch int,
			       p_width int, p_lease_seconds int, p_auto bool, p_lease uuid,
			       p_cand uuid[], p_cand_ends bigint[] DEFAULT NULL)
RETURNS TABLE (partition_id uuid, partition_name text, queue_name text, off bigint,
	       message_ids uuid[], txn_ids text[], trace_ids text[], payloads text[],
	       created_at timestamptz, attempt int, committed bigint, log_end bigint,
	       lease_expires_at timestamptz, producer_subs text[])
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
	RETURN QUERY
	WITH cl AS (
		SELECT u.o, p.id AS pid, p.name AS pname, q.name AS qname,
		       pl.next_offset - 1 AS lend,
		       greatest(c.committed, p.log_start - 1) AS base,
		       CASE WHEN q.delayed_processing <= 0
				 OR pl.last_created_at <= now() - make_interval(
					secs => q.delayed_processing)
			    THEN pl.next_offset - 1
			    ELSE coalesce(queen_offset_at(p.id, now() - make_interval(
					secs => q.delayed_processing), true),
					  pl.next_offset) - 1
		       END AS vend,
		       coalesce(p_lease_seconds, nullif(q.lease_time, 0), 60) AS secs,
		       c.ctid AS lid
		FROM queen_queues q
		CROSS JOIN unnest(p_cand, p_cand_ends) WITH ORDINALITY AS u (pid, kend, o)
		JOIN queen_partitions p ON p.id = u.pid AND p.queue_id = q.id
		CROSS JOIN LATERAL queen_cursor_row(p.id, p_group) k
		JOIN queen_cursors c ON c.ctid = k.cid
		CROSS JOIN LATERAL queen_log_tail_known(p.id, p.kept_next_offset,
			p.kept_last_created_at, u.kend,
			u.kend IS NOT NULL AND q.window_buffer <= 0
			AND q.delayed_processing <= 0) pl
		WHERE (p_queue IS NULL OR q.name = p_queue)
		  AND (p_group = '__QUEUE_MODE__'
		       OR EXISTS (SELECT 1 FROM queen_subscriptions s
				  WHERE s.group_name = p_group AND s.queue_id = q.id))
		  AND (p_partition IS NULL OR p.name = p_partition)
		  AND pl.next_offset - 1 > greatest(c.committed, p.log_start - 1)
		  AND (c.lease_expires_at IS NULL OR c.lease_expires_at <= now())
		  AND (q.window_buffer <= 0
		       OR pl.last_created_at <= now() - make_interval(
				secs => q.window_buffer))
		ORDER BY u.o
		LIMIT p_width
		FOR UPDATE OF c SKIP LOCKED
	), qt AS (
		SELECT cl.*,
		       least(greatest(cl.vend - cl.base, 0),
			     greatest(p_batch - coalesce(sum(greatest(cl.vend - cl.base, 0))
				OVER (ORDER BY cl.o ROWS BETWEEN UNBOUNDED PRECEDING
				      AND 1 PRECEDING)::bigint, 0), 0))
			AS take
		FROM cl
	), upd AS (
		UPDATE queen_cursors c SET
			committed = CASE WHEN p_auto THEN qt.base + qt.take
					 ELSE c.committed END,
			lease_id = CASE WHEN p_auto THEN NULL ELSE p_lease END,
			lease_expires_at = CASE WHEN p_auto THEN NULL
					   ELSE now() + make_interval(secs => qt.secs) END,
			batch_end = CASE WHEN p_auto THEN NULL ELSE qt.base + qt.take END,
			retry_count = CASE WHEN p_auto THEN 0 ELSE c.retry_count END,
			attempt_base = qt.base + 1,
			attempt_count = CASE WHEN c.attempt_base = qt.base + 1
					THEN c.attempt_count + 1 ELSE 1 END,
			updated_at = now()
		FROM qt
		WHERE qt.take > 0
		  AND c.ctid = qt.lid
		RETURNING qt.o, qt.pid, qt.pname, qt.qname, qt.base, qt.take, qt.lend,
			  c.committed AS cmt, c.attempt_count AS att,
			  c.lease_expires_at AS lexp
	)
	SELECT upd.pid, upd.pname, upd.qname, m.off, m.message_ids, m.txn_ids, m.trace_ids,
	       m.payloads, m.created_at, upd.att, upd.cmt, upd.lend, upd.lexp, m.producer_subs
	FROM upd
	CROSS JOIN LATERAL queen_segment_slice(upd.pid, upd.base, upd.base + upd.take) m;
END
$$;

-- Pop (SPEC.md 5).  Claims up to p_max_partitions partitions with deliverable data for the
-- group (cursor rows FOR UPDATE SKIP LOCKED: claims never wait), leases them under
-- p_lease_id (or commits at once when p_auto_ack) and returns up to p_batch messages, a row
-- for each slice of a segment (queen_segment_slice), unsorted: they come in claim order then
-- offset order but for a segment stored out of place, and the broker orders them
-- (pgbin_row_order, src/pgbin.c); a sort here copied every payload once more.  No row =
-- nothing deliverable.  p_held: the broker's index has seen a
-- cursor of the group on every one of p_candidates.  p_cand_ends: the last offset of each
-- candidate as the broker's index last saw it (NULL: unknown).  The index learns log ends
-- from committed pushes and from the database's answers, so one can lag the log but never be
-- past it; where nothing else needs the log's tail (its newest message's time), the claim
-- reads up to it instead of probing the segments' key for each candidate.
CREATE FUNCTION queen_pop(p_queue text, p_partition text, p_namespace text, p_task text,
			  p_group text, p_batch int, p_max_partitions int, p_lease_seconds int,
			  p_auto_ack bool, p_sub_mode text, p_sub_from timestamptz, p_lease_id uuid,
			  p_candidates uuid[], p_held bool, p_cand_ends bigint[] DEFAULT NULL)
RETURNS TABLE (partition_id uuid, partition_name text, queue_name text, off bigint,
	       message_ids uuid[], txn_ids text[], trace_ids text[], payloads text[],
	       created_at timestamptz, attempt int, committed bigint, log_end bigint,
	       lease_expires_at timestamptz, producer_subs text[])
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
	v_met bool;
	v_missing bigint := 0;
	v_round int;
	v_src int;
	v_big bool;
	v_seen uuid[];		-- what the scan of every partition read, for the broker to learn
	v_pos bigint[];
	v_end bigint[];
	v_lexp timestamptz[];
	v_has bool[];
BEGIN
	IF v_batch < 1 OR v_width < 1 THEN
		RETURN;
	END IF;

	-- The steady state of a consumer: the broker's index named the candidates and has seen
	-- the group's cursor on each of them.  Every plan node and expression of a statement is
	-- set up at each call whatever rows it reads, and the claim of cursors that exist, alone,
	-- costs half the statement below (which can also write first cursors) for a pop of 100
	-- messages from one partition.  Nothing claimed there (the index was stale, or other pops
	-- took them) goes on to the statement below, which finds out why.
	IF p_held AND p_candidates IS NOT NULL AND p_queue IS NOT NULL THEN
		RETURN QUERY
		SELECT * FROM queen_pop_held(p_queue, p_partition, v_group, v_batch, v_width,
					     p_lease_seconds, v_auto, v_lease, p_candidates,
					     p_cand_ends);
		IF FOUND THEN
			RETURN;
		END IF;
	END IF;

	-- First contact with some of the candidates, in one statement: the broker's index named
	-- the candidates and the group has met the queue.  Claim (SKIP LOCKED, the lease
	-- condition rechecked on the locked row version), lease and read the slices of the
	-- segments the leases cover.  A
	-- candidate the group has no cursor on yet (first contact: a cursor is implied by the
	-- subscription) is claimed in the same statement by inserting its cursor already leased,
	-- gated by a try-lock per (partition, group) as SKIP LOCKED gates a row: 10,000 small
	-- partitions met one pop at a time cost one statement per pop, not five.  Nothing
	-- claimed here (the group has not met the queue, or every candidate was taken meanwhile)
	-- leaves the rest of the function to find out why.
	IF p_candidates IS NOT NULL AND p_queue IS NOT NULL THEN
		RETURN QUERY
		WITH qs AS MATERIALIZED (
			-- The queue and the group's start on it, once (not once per candidate).
			SELECT q.id, q.name, q.window_buffer, q.delayed_processing AS delay,
			       coalesce(p_lease_seconds, nullif(q.lease_time, 0), 60) AS secs,
			       s.start_at
			FROM queen_queues q
			LEFT JOIN queen_subscriptions s ON s.group_name = v_group
				AND s.queue_id = q.id
			WHERE q.name = p_queue AND (v_qmode OR s.group_name IS NOT NULL)
		), cand AS (
			-- One probe of the cursors per candidate: the ctid of its row, or none.  The
			-- log's tail from the broker's index (queen_log_tail_known) where the queue
			-- holds nothing back and the cursor's start needs no time (the cursor
			-- exists, or the group reads from the start): about 1 ms of the 3.9 ms of a
			-- pop of 64 new one-message partitions went to the probes it spares.
			SELECT u.o, p.id AS pid, p.name AS pname, qs.name AS qname,
			       pl.next_offset - 1 AS lend, p.log_start, p.created_at AS pcreated,
			       pl.last_created_at AS plast, qs.delay, qs.secs, qs.start_at,
			       c.cid
			FROM qs
			CROSS JOIN unnest(p_candidates, p_cand_ends) WITH ORDINALITY
				AS u (pid, kend, o)
			JOIN queen_partitions p ON p.id = u.pid AND p.queue_id = qs.id
			LEFT JOIN LATERAL queen_cursor_row(p.id, v_group) c ON true
			CROSS JOIN LATERAL queen_log_tail_known(p.id, p.kept_next_offset,
				p.kept_last_created_at, u.kend,
				u.kend IS NOT NULL AND qs.window_buffer <= 0 AND qs.delay <= 0
				AND (c.cid IS NOT NULL OR qs.start_at IS NULL)) pl
			WHERE (p_partition IS NULL OR p.name = p_partition)
			  AND pl.next_offset > p.log_start
			  AND (qs.window_buffer <= 0
			       OR pl.last_created_at <= now() - make_interval(
					secs => qs.window_buffer))
		), held AS (
			-- Each claim carries its candidate's columns on: no join back to cand, which
			-- the planner (one row expected of each side) makes a nested loop, width x
			-- candidates row comparisons.  The row is fetched again by its ctid to be
			-- locked; the lease condition is rechecked on the locked row version.
			SELECT cand.*, greatest(c.committed, cand.log_start - 1) AS base,
			       c.ctid AS lid, false AS fresh
			FROM cand
			JOIN queen_cursors c ON c.ctid = cand.cid
			WHERE cand.cid IS NOT NULL
			  AND cand.lend > greatest(c.committed, cand.log_start - 1)
			  AND (c.lease_expires_at IS NULL OR c.lease_expires_at <= now())
			ORDER BY cand.o
			LIMIT v_width
			FOR UPDATE OF c SKIP LOCKED
		), fresh AS (
			-- The try-lock is taken after the limit: only on what may be claimed.
			SELECT n.*, NULL::tid AS lid, true AS fresh
			FROM (SELECT m.*
			      FROM (SELECT cand.*,
					   greatest(queen_cursor_start(cand.pid, cand.log_start,
								       cand.lend + 1, cand.pcreated,
								       cand.plast, cand.start_at),
						    cand.log_start - 1) AS base
				    FROM cand
				    WHERE cand.cid IS NULL
				    OFFSET 0) m
			      WHERE m.lend > m.base
			      ORDER BY m.o
			      LIMIT v_width) n
			WHERE pg_try_advisory_xact_lock(queen_cursor_lock_class(),
							hashtext(n.pid::text || v_group))
		), qt AS (
			SELECT x.*,
			       least(greatest(x.vend - x.base, 0),
				     greatest(v_batch - coalesce(sum(greatest(x.vend - x.base, 0))
					OVER (ORDER BY x.o ROWS BETWEEN UNBOUNDED PRECEDING
					      AND 1 PRECEDING)::bigint, 0), 0))
				AS take
			FROM (SELECT y.*,
				     CASE WHEN y.delay <= 0
					       OR y.plast <= now() - make_interval(secs => y.delay)
					  THEN y.lend
					  ELSE coalesce(queen_offset_at(y.pid, now() - make_interval(
						secs => y.delay), true), y.lend + 1) - 1
				     END AS vend
			      FROM (SELECT * FROM held UNION ALL SELECT * FROM fresh
				    ORDER BY o LIMIT v_width) y) x
		), upd AS (
			UPDATE queen_cursors c SET
				committed = CASE WHEN v_auto THEN qt.base + qt.take
						 ELSE c.committed END,
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
			WHERE NOT qt.fresh AND qt.take > 0
			  AND c.ctid = qt.lid
			RETURNING qt.o, qt.pid, qt.pname, qt.qname, qt.base, qt.take, qt.lend,
				  c.committed AS cmt, c.attempt_count AS att,
				  c.lease_expires_at AS lexp
		), ins AS (
			-- Another pop that wrote this cursor since the statement began (and
			-- released its try-lock by committing) wins: nothing is claimed here.
			INSERT INTO queen_cursors AS c (partition_id, group_name, committed,
				lease_id, lease_expires_at, batch_end, attempt_base, attempt_count)
			SELECT qt.pid, v_group,
			       CASE WHEN v_auto THEN qt.base + qt.take ELSE qt.base END,
			       CASE WHEN v_auto THEN NULL ELSE v_lease END,
			       CASE WHEN v_auto THEN NULL
				    ELSE now() + make_interval(secs => qt.secs) END,
			       CASE WHEN v_auto THEN NULL ELSE qt.base + qt.take END,
			       qt.base + 1, 1
			FROM qt
			WHERE qt.fresh AND qt.take > 0
			ORDER BY qt.pid
			ON CONFLICT DO NOTHING
			RETURNING c.partition_id
		), got AS (
			SELECT * FROM upd
			UNION ALL
			-- What an inserted cursor holds is what the insert above wrote: only which
			-- were inserted is asked of it (an array, not a join).
			SELECT qt.o, qt.pid, qt.pname, qt.qname, qt.base, qt.take, qt.lend,
			       CASE WHEN v_auto THEN qt.base + qt.take ELSE qt.base END, 1,
			       CASE WHEN v_auto THEN NULL
				    ELSE now() + make_interval(secs => qt.secs) END
			FROM qt
			WHERE qt.fresh AND qt.take > 0
			  AND qt.pid = ANY ((SELECT array_agg(ins.partition_id) FROM ins)::uuid[])
		)
		SELECT got.pid, got.pname, got.qname, m.off, m.message_ids, m.txn_ids, m.trace_ids,
		       m.payloads, m.created_at, got.att, got.cmt, got.lend, got.lexp,
		       m.producer_subs
		FROM got
		CROSS JOIN LATERAL queen_segment_slice(got.pid, got.base, got.base + got.take) m;
		IF FOUND THEN
			RETURN;
		END IF;
	END IF;

	-- The queues; whether the group has met them all yet; how many of the broker's
	-- candidates the group has no cursor on.  One statement: in the steady state (a known
	-- group, cursors on every candidate) the pop is this, the claim and the read.
	IF p_queue IS NOT NULL THEN
		SELECT array_agg(q.id),
		       bool_and(v_qmode OR EXISTS (SELECT 1 FROM queen_subscriptions s
						   WHERE s.group_name = v_group
						     AND s.queue_id = q.id)),
		       (SELECT count(*) FROM unnest(p_candidates) AS u (pid)
			WHERE NOT EXISTS (SELECT 1 FROM queen_cursors c
					  WHERE c.partition_id = u.pid
					    AND c.group_name = v_group))
		INTO v_queues, v_met, v_missing
		FROM queen_queues q WHERE q.name = p_queue;
	ELSE
		SELECT array_agg(q.id),
		       bool_and(v_qmode OR EXISTS (SELECT 1 FROM queen_subscriptions s
						   WHERE s.group_name = v_group
						     AND s.queue_id = q.id))
		INTO v_queues, v_met
		FROM queen_queues q
		WHERE (p_namespace IS NULL OR q.namespace = p_namespace)
		  AND (p_task IS NULL OR q.task = p_task);
	END IF;
	IF v_queues IS NULL THEN
		RETURN;
	END IF;

	-- First contact of a named group with a queue: decide and store where it starts.
	IF NOT v_met THEN
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

	-- Candidate partitions, in the order they are to be tried: first the broker's list (the
	-- claim below keeps those of the queues and partition asked for); when the broker has
	-- none, or named some that are not partitions of the queues, every partition holding
	-- data that has no cursor of the group or one with work and no live lease, least
	-- recently served first.  The index is a cache: a partition it does not know the
	-- group's state on (a cursor the group has not got yet) must not hide data elsewhere.
	v_claim := '{}';
	FOR v_src IN 1 .. 2 LOOP
		IF v_src = 1 THEN
			-- The statement at the top already tried them all when the group had
			-- met the queue and held a cursor on each.
			CONTINUE WHEN p_candidates IS NULL OR (v_met AND v_missing = 0);
			v_cand := p_candidates;
		ELSE
			-- None of the candidates the broker's index named could be claimed.  On a
			-- queue of over 1000 partitions, when each candidate is a partition of the
			-- queues (and the partition) asked for whose cursor of the group exists,
			-- or is being written by a concurrent pop (its try-lock is held), they are
			-- leased, taken or read already: the rows below say so, and the broker's
			-- next try is offered others.  The scan of every partition is for the
			-- rest: an index that knows nothing of the queues, names partitions that
			-- are gone (a queue deleted and created again) or has not seen the group
			-- where it has no cursor (first contact), and small queues, where it is
			-- cheap and finds what the index has wrong.  Over 100,000 partitions with
			-- nothing to deliver it reads 0.6 s.  A candidate's free try-lock is taken
			-- by the test (as the claim would take it) and held to this pop's commit.
			--
			-- Both statements that read the queues' partitions are planned for the
			-- queues at hand (EXECUTE): a plan cached for any queue costs a queue of
			-- 10 partitions what an average queue costs, and on a database of 180,000
			-- partitions that was a sequential scan of all of them, 48 ms for every pop
			-- of a drained small queue (t2009).
			v_big := false;
			IF p_candidates IS NOT NULL THEN
				EXECUTE 'SELECT count(*) > 1000 FROM (SELECT 1 FROM queen_partitions p
					 WHERE p.queue_id = ANY ($1) LIMIT 1001) x'
				INTO v_big USING v_queues;
			END IF;
			IF v_big THEN
				EXIT WHEN NOT EXISTS (
					SELECT 1 FROM unnest(p_candidates) AS u (pid)
					LEFT JOIN queen_partitions p ON p.id = u.pid
						AND p.queue_id = ANY (v_queues)
						AND (p_partition IS NULL OR p.name = p_partition)
					WHERE p.id IS NULL
					   OR CASE WHEN EXISTS (SELECT 1 FROM queen_cursors c
								WHERE c.partition_id = u.pid
								  AND c.group_name = v_group)
						   THEN false
						   ELSE pg_try_advisory_xact_lock(
							queen_cursor_lock_class(),
							hashtext(u.pid::text || v_group)) END);
			END IF;
			-- One pass over the partitions.  The candidates are those with something to
			-- deliver: a cursor with work and no live lease, or none and a start (implied
			-- by the subscription) that leaves work; a pop that names its partition pins
			-- a cursor there all the same.  Beside them, where the group stands on each
			-- partition read, which the broker learns when nothing is claimed.  A group
			-- that starts at the end of 1,000,000 partitions costs this one read (and
			-- their rows to the broker), not an insert and a claim over all of them, twice.
			v_cand := NULL;
			v_missing := 0;
			EXECUTE 'SELECT array_agg(p.id ORDER BY c.updated_at NULLS FIRST, p.id)
					FILTER (WHERE k.work),
				       count(*) FILTER (WHERE k.work AND c.partition_id IS NULL),
				       array_agg(p.id), array_agg(k.pos), array_agg(pl.next_offset - 1),
				       array_agg(c.lease_expires_at), array_agg(c.partition_id IS NOT NULL)
				FROM queen_partitions p
				CROSS JOIN LATERAL queen_log_tail(p.id, p.kept_next_offset,
								  p.kept_last_created_at) pl
				LEFT JOIN queen_cursors c ON c.partition_id = p.id
					AND c.group_name = $3
				LEFT JOIN queen_subscriptions s ON s.group_name = $3
					AND s.queue_id = p.queue_id
				CROSS JOIN LATERAL (
					SELECT x.pos, x.pos < pl.next_offset - 1
						      OR ($2::text IS NOT NULL AND c.partition_id IS NULL)
						      AS work
					FROM (SELECT CASE WHEN c.partition_id IS NOT NULL
							  THEN greatest(c.committed, p.log_start - 1)
							  ELSE greatest(queen_cursor_start(p.id,
								p.log_start, pl.next_offset, p.created_at,
								pl.last_created_at, s.start_at),
								p.log_start - 1)
						     END AS pos) x) k
				WHERE p.queue_id = ANY ($1)
				  AND ($2::text IS NULL OR p.name = $2)
				  AND pl.next_offset > p.log_start
				  AND (c.partition_id IS NULL
				       OR (pl.next_offset - 1 > greatest(c.committed, p.log_start - 1)
					   AND (c.lease_expires_at IS NULL
						OR c.lease_expires_at <= now())))'
			INTO v_cand, v_missing, v_seen, v_pos, v_end, v_lexp, v_has
			USING v_queues, p_partition, v_group;
		END IF;
		CONTINUE WHEN v_cand IS NULL;

		-- Claim, in candidate order, among the candidates the group has a cursor on; the lease
		-- condition is rechecked on the locked row version (EvalPlanQual).  A cursor the group
		-- has not got yet is implied by its subscription: it is written here, at the group's
		-- start, only for as many candidates as the pop may claim and only where that start
		-- leaves something to deliver (a group that starts at the end of 100,000 partitions
		-- writes nothing for them).  A cursor row inserted for a partition another pop is
		-- inserting too would make each wait for the other's commit (ON CONFLICT), so the
		-- insert is gated by a transaction advisory lock per (partition, group) taken with try:
		-- the pop that does not get it skips that partition, as SKIP LOCKED skips a row.  When
		-- the claim comes up short and more candidates lack a cursor, those get theirs and the
		-- claim runs once more.
		v_claim := '{}';
		FOR v_round IN 1 .. 2 LOOP
			IF v_missing > 0 THEN
				INSERT INTO queen_cursors (partition_id, group_name, committed)
				SELECT n.id, v_group, n.start
				FROM (SELECT m.id, m.start
				      FROM (SELECT p.id, u.o, pl.next_offset,
						   queen_cursor_start(p.id, p.log_start, pl.next_offset,
								      p.created_at, pl.last_created_at,
								      s.start_at) AS start
					    FROM unnest(v_cand) WITH ORDINALITY AS u (pid, o)
					    JOIN queen_partitions p ON p.id = u.pid
					    CROSS JOIN LATERAL queen_log_tail(p.id, p.kept_next_offset,
									      p.kept_last_created_at) pl
					    LEFT JOIN queen_subscriptions s ON s.group_name = v_group
						AND s.queue_id = p.queue_id
					    WHERE p.queue_id = ANY (v_queues)
					      AND (p_partition IS NULL OR p.name = p_partition)
					      AND (v_qmode OR s.group_name IS NOT NULL)
					      AND NOT EXISTS (SELECT 1 FROM queen_cursors c
							      WHERE c.partition_id = p.id
								AND c.group_name = v_group)
					    OFFSET 0) m
				      -- Only where the implied start leaves something to deliver: a
				      -- cursor that would say "nothing here" is what its absence says.
				      -- A pop that names its partition pins the start there all the same
				      -- (a later subscription change moves only partitions not touched).
				      WHERE (m.start < m.next_offset - 1 OR p_partition IS NOT NULL)
				      ORDER BY m.o
				      LIMIT v_width) n
				WHERE pg_try_advisory_xact_lock(queen_cursor_lock_class(),
								hashtext(n.id::text || v_group))
				ORDER BY n.id
				ON CONFLICT DO NOTHING;
			END IF;

			SELECT v_claim || coalesce(array_agg(x.pid ORDER BY x.o), '{}') INTO v_claim FROM (
				SELECT c.partition_id AS pid, u.o
				FROM unnest(v_cand) WITH ORDINALITY AS u (pid, o)
				JOIN queen_partitions p ON p.id = u.pid
				JOIN queen_queues q ON q.id = p.queue_id
				CROSS JOIN LATERAL queen_cursor_row(p.id, v_group) k
				JOIN queen_cursors c ON c.ctid = k.cid
				CROSS JOIN LATERAL queen_log_tail(p.id, p.kept_next_offset,
								  p.kept_last_created_at) pl
				WHERE p.queue_id = ANY (v_queues)
				  AND (p_partition IS NULL OR p.name = p_partition)
				  AND u.pid <> ALL (v_claim)
				  AND pl.next_offset - 1 > greatest(c.committed, p.log_start - 1)
				  AND (c.lease_expires_at IS NULL OR c.lease_expires_at <= now())
				  AND (q.window_buffer <= 0
				       OR pl.last_created_at <= now() - make_interval(
						secs => q.window_buffer))
				  AND (q.delayed_processing <= 0 OR EXISTS (
					SELECT 1 FROM queen_segments s
					WHERE s.partition_id = p.id
					  AND s.base_offset <= greatest(c.committed, p.log_start - 1) + 1
					  AND s.base_offset > greatest(c.committed, p.log_start - 1) + 1 - 1000
					  AND s.end_offset >= greatest(c.committed, p.log_start - 1) + 1
					  AND s.created_at <= now() - make_interval(
						secs => q.delayed_processing)))
				ORDER BY u.o
				LIMIT v_width - cardinality(v_claim)
				FOR UPDATE OF c SKIP LOCKED
			) x;
			EXIT WHEN cardinality(v_claim) >= v_width OR v_missing <= v_width;
		END LOOP;
		EXIT WHEN cardinality(v_claim) > 0;
	END LOOP;
	IF cardinality(v_claim) = 0 THEN
		-- Nothing to deliver.  Tell the broker what the group's cursor is, or would be
		-- from its start, on each partition looked at (one row each: no offset, attempt
		-- NULL where the cursor is only implied by the start, its lease), so that
		-- its index stops offering them until they change: first contact with 100,000
		-- partitions is read once, not once per pop.
		v_cand := coalesce(p_candidates, '{}');
		IF cardinality(v_cand) > 0 THEN
			RETURN QUERY
			SELECT p.id, NULL::text, NULL::text, NULL::bigint, NULL::uuid[], NULL::text[],
			       NULL::text[], NULL::text[], NULL::timestamptz,
			       CASE WHEN c.partition_id IS NOT NULL THEN 0 END,
			       coalesce(greatest(c.committed, p.log_start - 1),
					queen_cursor_start(p.id, p.log_start, pl.next_offset,
							   p.created_at, pl.last_created_at,
							   s.start_at)),
			       pl.next_offset - 1, c.lease_expires_at, NULL::text[]
			FROM (SELECT DISTINCT u.pid FROM unnest(v_cand) AS u (pid)) u
			JOIN queen_partitions p ON p.id = u.pid
			CROSS JOIN LATERAL queen_log_tail(p.id, p.kept_next_offset,
							  p.kept_last_created_at) pl
			LEFT JOIN queen_cursors c ON c.partition_id = p.id AND c.group_name = v_group
			LEFT JOIN queen_subscriptions s ON s.group_name = v_group
				AND s.queue_id = p.queue_id;
		END IF;
		-- The scan of every partition said it already, in the same columns.  A candidate
		-- read by both comes twice, with the same answer.
		RETURN QUERY
		SELECT u.pid, NULL::text, NULL::text, NULL::bigint, NULL::uuid[], NULL::text[],
		       NULL::text[], NULL::text[], NULL::timestamptz, CASE WHEN u.has THEN 0 END,
		       u.pos, u.lend, u.lexp, NULL::text[]
		FROM unnest(v_seen, v_pos, v_end, v_lexp, v_has) AS u (pid, pos, lend, lexp, has);
		RETURN;
	END IF;

	-- Lease and read what was claimed (the rows are locked by this transaction already).
	RETURN QUERY
	SELECT * FROM queen_pop_held(p_queue, p_partition, v_group, v_batch, v_width,
				     p_lease_seconds, v_auto, v_lease, v_claim);
END
$$;

-- The live leases of group p_group (NULL: queue mode) on queue p_queue: a pop whose
-- candidates SQL refused at every try, leased through another broker beyond where the
-- tries reached, learns them all at once and offers the others.  Read through the partial
-- index of leases held now (on any queue), not the queue's partitions: as many rows as
-- there are leases, whatever the queue's size.
CREATE FUNCTION queen_group_leases(p_queue text, p_group text)
RETURNS TABLE (partition_id uuid, committed bigint, lease_expires_at timestamptz)
LANGUAGE sql STABLE AS $$
	SELECT c.partition_id, greatest(c.committed, p.log_start - 1), c.lease_expires_at
	FROM queen_cursors c
	JOIN queen_partitions p ON p.id = c.partition_id
	JOIN queen_queues q ON q.id = p.queue_id
	WHERE c.lease_id IS NOT NULL AND c.lease_expires_at > now()
	  AND c.group_name = coalesce(p_group, '__QUEUE_MODE__') AND q.name = p_queue
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
