-- 006_transaction.sql: the transaction route (SPEC.md 8, 21).
--
-- queen_txn applies bundles (acks, kv ops, timers, pushes) in the statement's own
-- transaction, in one round trip, by calling the functions the single routes use: queen_ack,
-- queen_kv_apply, queen_timers_apply, queen_push.  Nothing here repeats their rules.
--
-- Group commit: the broker may hand over several bundles of concurrent requests at once.
-- Their acks go to ONE queen_ack call and their push items to ONE queen_push call (that is
-- where the saving is); kv ops and timers run bundle by bundle, in order.  The call commits
-- only when every bundle may: the effect is that of the bundles run one after the other.
-- Anything that is refused fails the whole call, and the broker then runs each bundle alone,
-- so that one bad bundle cannot fail the others.  Bundles of one call must not depend on
-- each other's acks: two that ack on the same (partition, group) (the commit rule would
-- judge their acks together, not in turn), or one that requires a lease another acks by
-- (the ack may release it), make the call refuse itself with QT002 before it acks.
--
-- A call that must not commit RAISEs SQLSTATE QT001, which undoes everything the statement
-- did (no subtransaction is paid for on the way that commits).  The message says what went
-- wrong; DETAIL is a JSON object whose "reason" is the verdict, with fields naming the item:
--   {"reason":"ack_rejected","ackIndex":i,"ackError":"invalid or expired lease"}
--   {"reason":"ack_rejected","lease":"<id>"}                 (a required lease is not live)
--   {"reason":"duplicate","pushIndex":i,"messageId":"<id of the message it duplicates>"}
--   {"reason":"kv_precondition","bundle":b,"failedIndex":i,"kvReason",...}
--                                                    (queen_kv_apply's answer, and the bundle)
-- ackIndex and pushIndex count acks and push items from 0 over the whole call, in input
-- order; bundle counts bundles from 0.
--
-- Order of work, and so of locks: cursor rows (acks), kv rows, timer rows, partition rows
-- (pushes) last.  Partition rows are the most contended locks (every producer of a queue
-- takes them, and holds them to commit), so they are taken last and held the shortest.
-- Timer rows before partition rows is also the order of the timer sweeper, which claims
-- timers and then pushes them.  Within each kind the called function keeps its own order
-- (cursors and partitions sorted, over all the bundles of the call).
--
-- Plans: the broker's sessions run with plan_cache_mode = force_generic_plan (dbpool.c); the
-- statements here are index probes per item, which a generic plan serves as well as a
-- custom one planned for each call's arrays.

-- One row of queen_txn's answer.  kind 'p' (push item): idx, ok = queued, id = message id,
-- queue_id, partition_id, num = the partition's log end.  kind 'a' (ack): idx, ok, grp = the
-- group acked (resolved), error, released, dlq, noop, partition_id, num = committed offset.
-- kind 'k' (kv) and 't' (timers) of bundle number idx: body = their results as a JSON array,
-- each element with "index" (its position in the bundle's results), "type" and its position
-- in its own array ("kvIndex", "timerIndex").
CREATE TYPE queen_txn_row AS (
	kind		text,
	idx		int,
	ok		bool,
	id		uuid,
	queue_id	uuid,
	partition_id	uuid,
	num		bigint,
	grp		text,
	error		text,
	released	bool,
	dlq		bool,
	noop		bool,
	body		text
);

-- queen_txn itself is defined in 009_lean_paths.sql.
