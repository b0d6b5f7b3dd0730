-- 005_groups_dlq_messages.sql: consumer groups and seek (SPEC.md 10), dead-letter purge and
-- replay (SPEC.md 11), the message browser (SPEC.md 12).
--
-- None of this is a hot path; every function is still one round trip.  What a group is:
-- a name that holds a cursor on some partition of a queue or a stored start on it
-- (queen_subscriptions).  On a queue where a group is known, a partition it has no cursor on
-- yet counts from where the group would start there (queen_cursor_start), so lag is right
-- before the first pop.
--
-- Changes to core tables: two indexes on queen_dlq (below).

-- Dead letters by message address: the message browser's status probe (partition, offset)
-- and replay/delete by (partitionId, transactionId).  A transactionId can be 64 KiB, more
-- than a btree entry holds, so that one is a hash index (it stores only the hash).
CREATE INDEX queen_dlq_addr ON queen_dlq (partition_id, off);
CREATE INDEX queen_dlq_txn ON queen_dlq USING hash (txn_id);
