-- 020_producer_sub.sql: the producer's identity (SPEC.md 17 producerSub), the sub claim of the
-- token that pushed a message, kept where a message waits outside its segment: a scheduled
-- timer (delivered later, by the broker) and a dead letter (a copy that outlives retention).
-- Segments have held it since 001 (producer_subs).  NULL: pushed without a token.
ALTER TABLE queen_timers ADD COLUMN producer_sub text;
ALTER TABLE queen_dlq ADD COLUMN producer_sub text;
