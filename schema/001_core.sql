-- 001_core.sql: the core store of queend (SPEC.md 1, DESIGN.md "Store").
--
-- The log of a partition is a run of immutable segments, one row per (commit, partition,
-- chunk of at most 1000 messages) holding parallel arrays.  A partition is one row (offset
-- allocator and log bounds), a (partition, group) cursor is one row.  Nothing per message is
-- stored for consumption.
--
-- Invariants the functions of 002 rely on:
--   * offsets are dense: next_offset is allocated under the partition row lock, a segment
--     covers [base_offset, end_offset] with end_offset - base_offset < 1000;
--   * created_at never decreases along the offsets of a partition;
--   * the log of a partition is [log_start, next_offset - 1]; log end = next_offset - 1;
--     (since 022 next_offset and last_created_at are read from the newest segment, the row
--     keeping them only for a partition retention emptied: queen_log_tail)
--   * every hot table is keyed by partition id first, so it can be distributed by that key.
--
-- Names and keys compare bytewise (COLLATE "C"): exact, and several times cheaper than a
-- linguistic collation in every index probe.
--
-- Hot tables carry no foreign keys (one less lock and probe per write); deleting a queue
-- removes its rows explicitly (queen_queue_delete).

CREATE TABLE queen_queues (
	id				uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	name				text COLLATE "C" NOT NULL UNIQUE,
	namespace			text NOT NULL DEFAULT '',
	task				text NOT NULL DEFAULT '',
	-- options, SPEC.md 9 (camelCase name in the comment)
	lease_time			integer NOT NULL DEFAULT 300,	-- leaseTime (60 when a push creates it)
	retry_limit			integer NOT NULL DEFAULT 3,	-- retryLimit
	dead_letter_queue		boolean NOT NULL DEFAULT true,	-- deadLetterQueue
	dlq_after_max_retries		boolean NOT NULL DEFAULT true,	-- dlqAfterMaxRetries
	dedup_window_seconds		integer NOT NULL DEFAULT 3600,	-- dedupWindowSeconds
	retention_enabled		boolean NOT NULL DEFAULT false,	-- retentionEnabled
	retention_seconds		integer NOT NULL DEFAULT 0,	-- retentionSeconds
	completed_retention_seconds	integer NOT NULL DEFAULT 0,	-- completedRetentionSeconds
	max_wait_time_seconds		integer NOT NULL DEFAULT 0,	-- maxWaitTimeSeconds
	delayed_processing		integer NOT NULL DEFAULT 0,	-- delayedProcessing
	window_buffer			integer NOT NULL DEFAULT 0,	-- windowBuffer
	encryption_enabled		boolean NOT NULL DEFAULT false,	-- encryptionEnabled
	priority			integer NOT NULL DEFAULT 0,	-- priority
	max_size			bigint NOT NULL DEFAULT 0,	-- maxSize
	ttl				integer NOT NULL DEFAULT 3600,	-- ttl
	retry_delay			integer NOT NULL DEFAULT 1000,	-- retryDelay
	created_at			timestamptz NOT NULL DEFAULT now(),
	updated_at			timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE queen_partitions (
	id				uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	queue_id			uuid NOT NULL REFERENCES queen_queues (id) ON DELETE CASCADE,
	name				text COLLATE "C" NOT NULL,
	next_offset			bigint NOT NULL DEFAULT 0,
	log_start			bigint NOT NULL DEFAULT 0,
	last_created_at			timestamptz,	-- created_at of the newest segment
	created_at			timestamptz NOT NULL DEFAULT now(),
	UNIQUE (queue_id, name)
);

CREATE TABLE queen_segments (
	partition_id			uuid NOT NULL,
	base_offset			bigint NOT NULL,
	end_offset			bigint NOT NULL,
	created_at			timestamptz NOT NULL,
	ids				uuid[] NOT NULL,
	txn_ids				text[] NOT NULL,
	trace_ids			text[],		-- NULL array = every element NULL
	payloads			text[] NOT NULL,	-- JSON texts, never parsed here
	producer_subs			text[],		-- NULL array = every element NULL
	PRIMARY KEY (partition_id, base_offset)
);
-- No index on created_at: it is monotone along offsets, so a time is found by binary search
-- over the primary key (queen_offset_at), and every push spares a random index insert.

CREATE TABLE queen_cursors (
	partition_id			uuid NOT NULL,
	group_name			text COLLATE "C" NOT NULL,
	committed			bigint NOT NULL DEFAULT -1,	-- -1 = nothing acknowledged
	lease_id			uuid,
	lease_expires_at		timestamptz,
	batch_end			bigint,		-- last offset delivered under the lease
	retry_count			integer NOT NULL DEFAULT 0,	-- retry budget spent
	attempt_base			bigint,		-- first offset of the last delivered batch
	attempt_count			integer NOT NULL DEFAULT 0,	-- deliveries of a batch starting there
	updated_at			timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (partition_id, group_name)
);
-- Lease extend finds every partition of one pop by lease id.
CREATE INDEX queen_cursors_lease ON queen_cursors (lease_id) WHERE lease_id IS NOT NULL;

CREATE TABLE queen_subscriptions (
	group_name			text COLLATE "C" NOT NULL,
	queue_id			uuid NOT NULL,
	mode				text NOT NULL,	-- all | new | timestamp
	start_at			timestamptz,	-- NULL = everything retained
	created_at			timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (group_name, queue_id)
);

-- Client-supplied transactionIds only.  txn_id is the dedup key of queen_txn_key(): the
-- transactionId itself, or for a long one (an index entry cannot hold 64 KiB) chr(1) and its
-- SHA-256 (control characters are rejected in transactionIds, so the two forms never meet).
CREATE TABLE queen_dedup (
	partition_id			uuid NOT NULL,
	txn_id				text COLLATE "C" NOT NULL,
	message_id			uuid NOT NULL,
	off				bigint NOT NULL,
	created_at			timestamptz NOT NULL,
	PRIMARY KEY (partition_id, txn_id)
);

-- Dead letters survive retention: no cascade from segments, names copied in.
CREATE TABLE queen_dlq (
	id				uuid PRIMARY KEY DEFAULT gen_random_uuid(),
	queue_id			uuid,
	partition_id			uuid,
	queue_name			text COLLATE "C" NOT NULL,
	partition_name			text NOT NULL,
	group_name			text NOT NULL,
	off				bigint,
	message_id			uuid,
	txn_id				text,
	trace_id			text,
	payload				text,
	error_message			text,
	retry_count			integer NOT NULL DEFAULT 0,
	created_at			timestamptz,	-- the message's
	failed_at			timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX queen_dlq_queue ON queen_dlq (queue_name, failed_at);
CREATE INDEX queen_dlq_failed ON queen_dlq (failed_at);

-- Payload arrays of large segments go to TOAST: lz4 compresses several times faster than
-- pglz.  Only where the server was built with it.
DO $$
BEGIN
	IF EXISTS (SELECT 1 FROM pg_settings
		   WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
		ALTER TABLE queen_segments ALTER COLUMN payloads SET COMPRESSION lz4;
		ALTER TABLE queen_segments ALTER COLUMN txn_ids SET COMPRESSION lz4;
	END IF;
END
$$;
