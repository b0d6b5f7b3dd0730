/* sqlstmt: the SQL catalogue. Hot paths are one call of a PL/pgSQL function of schema/ each,
 * so a request is one round trip; the functions take parallel arrays (unnest on the server). */
#include "sqlstmt.h"
#include "qassert.h"

static const struct sql_stmt sql_table[SQL__COUNT] = {
	[SQL_PUSH] = { "push",
		"SELECT idx, status, message_id, queue_id, partition_id, off, log_end "
		"FROM queen_push($1::uuid[], $2::text[], $3::text[], $4::uuid[], $5::text[], "
		"$6::text[], $7::text[], $8::text[])", 8 },
	[SQL_POP] = { "pop",
		"SELECT partition_id, partition_name, queue_name, off, message_id, txn_id, trace_id, "
		"payload, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), "
		"attempt, committed, log_end, "
		"(extract(epoch FROM lease_expires_at) * 1000)::bigint "
		"FROM queen_pop($1, $2, $3, $4, $5, $6::int, $7::int, $8::int, $9::bool, $10, "
		"$11::timestamptz, $12::uuid, $13::uuid[])", 13 },
	[SQL_ACK] = { "ack",
		"SELECT idx, success, error, lease_released, dlq, noop, partition_id, committed "
		"FROM queen_ack($1::text[], $2::uuid[], $3::text[], $4::text[], $5::uuid[], "
		"$6::text[])", 6 },
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
	[SQL_INDEX_SNAPSHOT] = { "index_snapshot",
		"SELECT queue_id, queue_name, namespace, task, partition_id, partition_name, "
		"log_end, group_name, committed, "
		"(extract(epoch FROM lease_expires_at) * 1000)::bigint "
		"FROM queen_index_snapshot()", 0 },
	[SQL_STATS] = { "stats", "SELECT queen_stats()::text", 0 },
	[SQL_PING] = { "ping", "SELECT 1", 0 },
	[SQL_LISTEN] = { "listen", "LISTEN queen_push", 0 },
};

const struct sql_stmt *
sql_get(enum sql_id id)
{
	QASSERT(id >= 0 && id < SQL__COUNT);
	return &sql_table[id];
}
