-- 004_timers.sql: timers (SPEC.md 14).
--
-- A timer is one row keyed by (queue name, timer key); scheduling the same key again replaces
-- it.  When it falls due, the sweeper of every broker (queen_timers_fire, called by the
-- maintenance thread) claims it with FOR UPDATE SKIP LOCKED, pushes its payload through
-- queen_push (so dedup applies: transactionId = txn, message id = the id promised when it was
-- scheduled) and deletes it in the same transaction.  Invariant: a timer fires at most once
-- per schedule, whatever the number of brokers on the database; a replace or cancel racing the
-- sweeper either waits for it (and finds the timer gone) or wins (and the sweeper skips it).
--
-- A timer whose push fails is retried with a backoff of 0.2 s doubling; its 5th failure moves
-- it to queen_dlq with the last error as reason (group "__TIMERS__").
--
-- Names, not ids: a timer may name a queue that does not exist yet (the push creates it).

CREATE TABLE queen_timers (
	queue_name			text NOT NULL,
	timer_key			text NOT NULL,
	partition_name			text NOT NULL DEFAULT 'Default',
	deliver_at			timestamptz NOT NULL,	-- when it (next) fires
	txn				text NOT NULL,	-- transactionId of the delivered message
	message_id			uuid NOT NULL,	-- promised when scheduled
	payload				text NOT NULL,	-- JSON text, never parsed on the hot path
	attempts			integer NOT NULL DEFAULT 0,	-- failed deliveries so far
	last_error			text,
	created_at			timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (queue_name, timer_key)
);
-- The sweeper's probe: due timers, oldest first.
CREATE INDEX queen_timers_due ON queen_timers (deliver_at);
