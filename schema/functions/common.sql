-- common.sql: helpers every area uses (timestamps, dedup keys, labels, offset search).
--
-- How the functions of schema/functions/ are kept: each function has one current definition,
-- in the file of its area; the broker re-creates them all when the text of these files changes
-- (src/migrate.c).  The numbered migrations beside this directory hold tables and indexes only.
--
-- The broker generates message and lease ids (UUIDv7) and passes them in; it caches ids, log
-- ends and cursors (the partition index), but every decision is taken here, under row locks:
--   * push allocates offsets under the partition row lock (partitions locked in id order),
--     claims dedup keys and writes one segment per partition with set-based SQL;
--   * pop claims cursor rows with FOR UPDATE SKIP LOCKED, so claims never wait;
--   * ack locks the cursor rows it moves (in (partition, group) order) and applies the commit
--     rule of SPEC.md 6 / 21.
-- A statement in PL/pgSQL takes a fresh snapshot, so whatever is read after a lock statement
-- sees every transaction that committed before the lock was granted.

-- ISO-8601 UTC with milliseconds, the one timestamp format of the API.
CREATE FUNCTION queen_ts(p timestamptz) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT to_char(p AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

-- A new partition's id: a UUID of version 7 (RFC 9562), the Unix time in milliseconds in its
-- first 48 bits and 70 random bits (the 4 bits beside the version are 0).  Partitions created
-- together sit together in every index keyed by partition id (queen_partitions, queen_segments,
-- queen_cursors): a push creating 100 partitions appends to the right of those indexes where
-- random ids (gen_random_uuid, the column's default) touched a random page for each, and
-- took 15-20% longer (pgbench, queen_push of 100 new partitions a call, 1 and 4 clients:
-- 7.7-9.6 ms -> 6.4-7.4 ms a call, 152-171 -> 180-190 calls/s).  One expression, inlined
-- into the calling statement.
CREATE FUNCTION queen_uuid_v7() RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
	SELECT encode(overlay(overlay(uuid_send(gen_random_uuid())
				      PLACING substring(int8send(floor(extract(epoch FROM
						clock_timestamp()) * 1000)::bigint) FROM 3)
				      FROM 1 FOR 6)
			      PLACING '\x70'::bytea FROM 7 FOR 1), 'hex')::uuid
$$;

-- Dedup key of a transactionId (queen_dedup.txn_id): itself when it fits an index entry
-- comfortably, else chr(1) || hex SHA-256 (a transactionId holds no control character).
CREATE FUNCTION queen_txn_key(p text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
	SELECT CASE WHEN octet_length(p) <= 512 THEN p
		ELSE chr(1) || encode(sha256(convert_to(p, 'UTF8')), 'hex') END COLLATE "C"
$$;

-- The text of JSON object p_obj (as text) with one more member p_key whose value is the JSON text
-- p_raw (a stored payload; NULL = null), spliced in as text: a payload may hold \u0000,
-- which jsonb refuses, so a payload is never cast to jsonb on its way out.
CREATE FUNCTION queen_json_splice(p_obj text, p_key text, p_raw text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT left(p_obj, -1)
		|| CASE WHEN p_obj = '{}' THEN '' ELSE ', ' END
		|| to_json(p_key)::text || ': ' || coalesce(p_raw, 'null') || '}'
$$;

-- Labels of a queue created from its name: billing.invoice.v2 -> (billing, invoice); a
-- name without a dot is its own namespace: orders -> (orders, '') (SPEC 21; src/names.c
-- holds the same rule for the index).
CREATE FUNCTION queen_name_namespace(p text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT split_part(p, '.', 1)
$$;

CREATE FUNCTION queen_name_task(p text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT split_part(p, '.', 2)
$$;

-- The log end of partition p_pid: the next offset a push takes and the created_at of its
-- newest message, from its newest segment (one backward probe of the primary key), or what
-- the partition row keeps (p_next_kept, p_last_kept: as of its creation or of the retention
-- round that last moved its log start, which may release every segment), whichever is
-- greater.  A push writes no version of the partition row (022_log_end_from_segments.sql).
-- One row always; inlined by the planner (a SQL function returning a table), so that a
-- lateral call costs the probe alone.
CREATE FUNCTION queen_log_tail(p_pid uuid, p_next_kept bigint, p_last_kept timestamptz)
RETURNS TABLE (next_offset bigint, last_created_at timestamptz)
LANGUAGE sql STABLE AS $$
	SELECT greatest(p_next_kept, max(s.end_offset) + 1),
	       greatest(p_last_kept, max(s.created_at))
	FROM (SELECT s.end_offset, s.created_at FROM queen_segments s
	      WHERE s.partition_id = p_pid
	      ORDER BY s.base_offset DESC LIMIT 1) s
$$;

-- The log end of partition p_pid as queen_log_tail gives it, or, when p_known (never NULL),
-- from p_kend, the last offset the broker's index holds for it, without the probe: the index
-- learns log ends from committed pushes and the database's answers, so p_kend may lag the
-- log but is never past it, and a claim that reads up to it delivers less, never more.  The
-- newest message's time is then NULL: a caller passes p_known only where it needs no time
-- (no windowBuffer, no delayedProcessing).  Inlined, p_known becomes a one-time filter of
-- each branch, so the probe is not run where it is not needed (12 us each on segments not
-- yet vacuumed, where the index-only probe fetches its heap page).  Both pop claims read
-- their candidates' tails through it.
CREATE FUNCTION queen_log_tail_known(p_pid uuid, p_next_kept bigint, p_last_kept timestamptz,
				     p_kend bigint, p_known bool)
RETURNS TABLE (next_offset bigint, last_created_at timestamptz)
LANGUAGE sql STABLE AS $$
	SELECT greatest(p_kend + 1, p_next_kept), NULL::timestamptz
	WHERE p_known
	UNION ALL
	SELECT t.next_offset, t.last_created_at
	FROM queen_log_tail(p_pid, p_next_kept, p_last_kept) t
	WHERE NOT p_known
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
	v_next bigint;
	mid bigint;
	s record;
BEGIN
	SELECT p.log_start, pl.next_offset INTO lo, v_next
	FROM queen_partitions p
	CROSS JOIN LATERAL queen_log_tail(p.id, p.kept_next_offset, p.kept_last_created_at) pl
	WHERE p.id = p_pid;
	IF NOT FOUND OR lo >= v_next THEN
		RETURN NULL;
	END IF;
	hi := v_next;
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
	RETURN CASE WHEN lo < v_next THEN lo END;
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
