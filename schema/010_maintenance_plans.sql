-- 010_maintenance_plans.sql: the maintenance rounds plan with sequential scans off.
--
-- The broker's sessions live long and plan generically (dbpool.c), so a round's statements
-- keep the plans of the first round of the session.  A broker started on an empty database
-- planned the deletes and reads by tuple id of its rounds (released segments, expired dedup
-- keys, claimed timers) as sequential scans of tables of ten rows; as those tables grew to
-- millions of rows, every round read them whole: retention fell behind the pushes (seconds
-- per round at 10,000 partitions) and 10,000 timers due together took more than the 2 s they
-- may.  Every statement of these functions has an index or tuple-id path, and a round's work
-- is bounded by its batch, never by the size of a table: with sequential scans off the
-- planner takes those paths whatever the statistics said when it planned.
ALTER FUNCTION queen_retention_round(int) SET enable_seqscan = off;
ALTER FUNCTION queen_retention_advance(uuid[], bigint[], bigint[]) SET enable_seqscan = off;
ALTER FUNCTION queen_timers_fire(int) SET enable_seqscan = off;
ALTER FUNCTION queen_timers_deliver(queen_timer_due[]) SET enable_seqscan = off;
