/* sqlstmt: the SQL catalogue. Hot paths are one call of a PL/pgSQL function of schema/ each,
 * so a request is one round trip; the functions take parallel arrays (unnest on the server). */
#include "sqlstmt.h"
#include "qassert.h"

/* The columns of a pop's rows, in binary (h_pop.c reads them by position): the ids,
 * offsets and times of a hundred messages cost PostgreSQL no text and the broker no
 * parsing. */
#define POP_COLUMNS \
	"SELECT partition_id, partition_name, queue_name, off, message_ids, txn_ids, trace_ids, " \
	"payloads, created_at, attempt, committed, log_end, lease_expires_at, producer_subs "

static const struct sql_stmt sql_table[SQL__COUNT] = {
	[SQL_PUSH] = { "push",
		"SELECT idx, status, message_id, queue_id, partition_id, off, log_end "
		"FROM queen_push($1::uuid[], $2::text[], $3::text[], $4::uuid[], $5::text[], "
		"$6::text[], $7::text[], $8::text[])", 8 },
	[SQL_SPOOL_PUSH] = { "spool_push",
		"SELECT idx, status, message_id, queue_id, partition_id, off, log_end "
		"FROM queen_spool_push($1::uuid[], $2::text[], $3::text[], $4::uuid[], $5::text[], "
		"$6::text[], $7::text[], $8::text[])", 8 },
	[SQL_SPOOL_STORED] = { "spool_stored",
		"SELECT idx FROM queen_spool_stored($1::text[], $2::text[], $3::uuid[], $4::bigint)",
		4 },
	[SQL_POP] = { "pop",
		POP_COLUMNS
		"FROM queen_pop($1, $2, $3, $4, $5, $6::int, $7::int, $8::int, $9::bool, $10, "
		"$11::timestamptz, $12::uuid, $13::uuid[], $14::bool, $15::bigint[])", 15, 1 },
	[SQL_POP_HELD] = { "pop_held",
		POP_COLUMNS
		"FROM queen_pop_held($1, $2, $3, $4::int, $5::int, $6::int, $7::bool, $8::uuid, "
		"$9::uuid[], $10::bigint[])", 10, 1 },
	[SQL_ACK] = { "ack",
		"SELECT idx, success, error, lease_released, dlq, noop, partition_id, committed, 1 "
		"FROM queen_ack($1::text[], $2::uuid[], $3::text[], $4::text[], $5::uuid[], "
		"$6::text[])", 6 },
	[SQL_ACK_KNOWN] = { "ack_known",
		"SELECT idx, success, error, lease_released, dlq, noop, partition_id, committed, n "
		"FROM queen_ack_known($1::text[], $2::uuid[], $3::uuid[], $4::bigint[], "
		"$5::bigint[], $6::int[])", 6 },
	[SQL_GROUP_LEASES] = { "group_leases",
		"SELECT partition_id, committed, lease_expires_at FROM queen_group_leases($1, $2)",
		2, 1 },
	[SQL_EXTEND] = { "extend",
		"SELECT renewed, to_char(expires_at AT TIME ZONE 'UTC', "
		"'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') FROM queen_extend($1::uuid, $2::int)", 2 },
	[SQL_CONFIGURE] = { "configure",
		"SELECT queen_configure($1, $2, $3, $4::jsonb, $5::bool)::text", 5 },
	[SQL_QUEUE_DETAIL] = { "queue_detail", "SELECT queen_queue_detail($1)::text", 1 },
	[SQL_QUEUE_DEPTH] = { "queue_depth", "SELECT queen_queue_depth($1, $2)::text", 2 },
	[SQL_QUEUE_DELETE] = { "queue_delete", "SELECT queen_queue_delete($1)::text", 1 },
	[SQL_DLQ_LIST] = { "dlq_list",
		"SELECT queen_dlq_list($1, $2, $3::int, $4::int)::text", 4 },
	[SQL_ENCRYPTED_QUEUES] = { "encrypted_queues",
		"SELECT name FROM queen_queues WHERE encryption_enabled", 0 },
	/* The index snapshot (db_read_chunks: binary rows, one snapshot). */
	[SQL_INDEX_QUEUES] = { "index_queues",
		"SELECT id, name, namespace, task FROM queen_queues", 0 },
	[SQL_INDEX_PARTITIONS] = { "index_partitions",
		"SELECT queue_id, partition_id, partition_name, log_end, log_start "
		"FROM queen_snapshot_partitions($1::bigint, $2::bigint)", 2 },
	/* The same without the log-end probes: then the segments' ends come in a scan. */
	[SQL_INDEX_PARTITIONS_KEPT] = { "index_partitions_kept",
		"SELECT queue_id, partition_id, partition_name, log_end, log_start "
		"FROM queen_snapshot_partitions_kept($1::bigint, $2::bigint)", 2 },
	[SQL_INDEX_SEGMENT_ENDS] = { "index_segment_ends",
		"SELECT partition_id, end_offset FROM queen_snapshot_segment_ends()", 0 },
	[SQL_INDEX_CURSORS] = { "index_cursors",
		"SELECT partition_id, group_name, committed, lease_expires_at "
		"FROM queen_snapshot_cursors($1::bigint, $2::bigint)", 2 },
	[SQL_INDEX_PAGES] = { "index_pages",
		"SELECT queen_pages('queen_partitions'), queen_pages('queen_cursors'), "
		"queen_snapshot_scans_segments()", 0 },
	/* The planner's count, kept by autovacuum and by the broker's own analyses (-1 before
	 * the first): a sizing hint, never a promise. */
	[SQL_PARTITIONS_ESTIMATE] = { "partitions_estimate",
		"SELECT greatest(reltuples, 0)::bigint FROM pg_class "
		"WHERE oid = 'queen_partitions'::regclass", 0 },
	[SQL_SUBSCRIPTIONS_SUM] = { "subscriptions_sum",
		"SELECT queen_subscriptions_sum()", 0 },
	[SQL_INDEX_GROUPS] = { "index_groups",
		"SELECT q.name, s.group_name FROM queen_subscriptions s "
		"JOIN queen_queues q ON q.id = s.queue_id", 0 },
	[SQL_STATS] = { "stats", "SELECT queen_stats()::text", 0 },
	[SQL_PING] = { "ping", "SELECT 1", 0 },
	[SQL_LISTEN] = { "listen", "LISTEN queen_push", 0 },
	[SQL_NOTIFY] = { "notify", "SELECT pg_notify('queen_push', $1)", 1 },
	[SQL_STATS_REFRESH] = { "stats_refresh", "SELECT queen_stats_refresh()", 0 },
	[SQL_KV] = { "kv", "SELECT queen_kv($1::jsonb)::text", 1 },
	[SQL_KV_PRUNE] = { "kv_prune", "SELECT queen_kv_prune($1::int)", 1 },
	[SQL_TIMERS_APPLY] = { "timers_apply", "SELECT queen_timers_apply($1::jsonb)::text", 1 },
	[SQL_TIMERS_CANCEL] = { "timers_cancel",
		"SELECT (queen_timers_apply(jsonb_build_array(jsonb_build_object('op', 'cancel', "
		"'queue', $1::text, 'timerKey', $2::text)))->0)::text", 2 },
	[SQL_TIMERS_GET] = { "timers_get",
		"SELECT timer::text, payload FROM queen_timers_get($1, $2)", 2 },
	[SQL_TIMERS_LIST] = { "timers_list",
		"SELECT queen_timers_list($1, $2, $3::int)::text", 3 },
	[SQL_TIMERS_FIRE] = { "timers_fire",
		"SELECT queue_name, partition_name, queue_id, partition_id, log_end, queued, fired, "
		"failed, dead FROM queen_timers_fire($1::int)", 1 },
	[SQL_GROUPS_LIST] = { "groups_list", "SELECT queen_groups_list()::text", 0 },
	[SQL_GROUPS_LAGGING] = { "groups_lagging",
		"SELECT queen_groups_lagging($1::int)::text", 1 },
	[SQL_GROUP_DETAIL] = { "group_detail", "SELECT queen_group_detail($1)::text", 1 },
	[SQL_GROUP_DELETE] = { "group_delete",
		"SELECT queen_group_delete($1, $2, $3::bool)::text", 3 },
	[SQL_GROUP_SUBSCRIPTION] = { "group_subscription",
		"SELECT queen_group_subscription($1, $2::timestamptz)::text", 2 },
	[SQL_SEEK] = { "seek",
		"SELECT verdict, partition_id, partition_name, committed "
		"FROM queen_seek($1, $2, $3, $4::timestamptz)", 4 },
	[SQL_DLQ_PURGE] = { "dlq_purge", "SELECT queen_dlq_purge($1, $2)::text", 2 },
	[SQL_DLQ_REPLAY] = { "dlq_replay",
		"SELECT o_result, o_dlq_id, o_status, o_message_id, o_queue_id, o_partition_id, "
		"o_log_end, o_queue, o_partition, o_txn "
		"FROM queen_dlq_replay($1::uuid, $2::uuid, $3, $4, $5, $6::uuid)", 6 },
	[SQL_MESSAGES_LIST] = { "messages_list",
		"SELECT queen_messages_list($1, $2, $3, $4::timestamptz, $5::timestamptz, $6::int, "
		"$7::int)::text", 7 },
	[SQL_MESSAGE_GET] = { "message_get", "SELECT queen_message_get($1::uuid, $2)::text", 2 },
	[SQL_MESSAGE_DELETE] = { "message_delete",
		"SELECT queen_message_delete($1::uuid, $2)::text", 2 },
	[SQL_RETENTION_ROUND] = { "retention_round",
		"SELECT queen_retention_round($1::int)::text", 1 },
	[SQL_RETENTION_ADVANCE] = { "retention_advance",
		"SELECT queen_retention_advance($1::uuid[], $2::bigint[], $3::bigint[])::text", 3 },
	[SQL_RES_QUEUES] = { "res_queues", "SELECT queen_resources_queues()::text", 0 },
	[SQL_RES_OVERVIEW] = { "res_overview", "SELECT queen_resources_overview()::text", 0 },
	[SQL_RES_NAMESPACES] = { "res_namespaces",
		"SELECT queen_resources_namespaces()::text", 0 },
	[SQL_RES_TASKS] = { "res_tasks", "SELECT queen_resources_tasks()::text", 0 },
	[SQL_STATUS] = { "status", "SELECT queen_status()::text", 0 },
	[SQL_STATUS_QUEUES] = { "status_queues",
		"SELECT queen_status_queues($1, $2, $3::int, $4::int)::text", 4 },
	[SQL_TXN] = { "txn",
		"SELECT kind, idx, ok, id, queue_id, partition_id, num, grp, error, released, dlq, "
		"noop, body FROM queen_txn($1::uuid[], $2::text[], $3::text[], $4::uuid[], "
		"$5::text[], $6::text[], $7::text[], $8::text[], $9::uuid[], $10::text[], "
		"$11::text[], $12::uuid[], $13::text[], $14::int[], $15::uuid[], $16::int[], "
		"$17::jsonb, $18::jsonb, $19::int[], $20::text[])", 20 },
};

const struct sql_stmt *
sql_get(enum sql_id id)
{
	QASSERT(id >= 0 && id < SQL__COUNT);
	return &sql_table[id];
}
