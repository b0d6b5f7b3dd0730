-- 010_retention_plans.sql: a retention round plans with sequential scans off.
--
-- The broker's sessions live long and plan generically (dbpool.c), so a round's statements
-- keep the plans of the first round of the session.  A broker started on an empty database
-- planned the purge of step 1 (tuple ids of released segments) as a sequential scan of a
-- table of ten rows; as queen_segments grew to millions of rows that scan made every round,
-- even an idle one, read the whole table (seconds per round at 10,000 partitions, and
-- retention fell behind the pushes).  Every statement of a round has an index or tuple-id
-- path, and a round's work is bounded by its batch, never by the size of a table: with
-- sequential scans off the planner takes those paths whatever the statistics said when it
-- planned.
ALTER FUNCTION queen_retention_round(int) SET enable_seqscan = off;
ALTER FUNCTION queen_retention_advance(uuid[], bigint[], bigint[]) SET enable_seqscan = off;
