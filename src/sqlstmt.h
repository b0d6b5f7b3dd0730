/* sqlstmt: every SQL text of the broker, in one catalogue, prepared once per connection.
 * Parameters are always bound; statements are named after their enum. */
#ifndef QUEEN_SQLSTMT_H
#define QUEEN_SQLSTMT_H

enum sql_id {
	SQL_PUSH,
	SQL_POP,
	SQL_POP_HELD,
	SQL_ACK,
	SQL_ACK_KNOWN,
	SQL_GROUP_LEASES,
	SQL_EXTEND,
	SQL_CONFIGURE,
	SQL_QUEUE_DETAIL,
	SQL_QUEUE_DEPTH,
	SQL_QUEUE_DELETE,
	SQL_DLQ_LIST,
	SQL_INDEX_QUEUES,
	SQL_INDEX_PARTITIONS,
	SQL_INDEX_PARTITIONS_KEPT,
	SQL_INDEX_SEGMENT_ENDS,
	SQL_INDEX_CURSORS,
	SQL_INDEX_PAGES,
	SQL_PARTITIONS_ESTIMATE,
	SQL_SUBSCRIPTIONS_SUM,
	SQL_INDEX_GROUPS,
	SQL_STATS,
	SQL_PING,
	SQL_LISTEN,
	SQL_STATS_REFRESH,
	SQL_NOTIFY,
	SQL_KV,
	SQL_KV_PRUNE,
	SQL_TIMERS_APPLY,
	SQL_TIMERS_CANCEL,
	SQL_TIMERS_GET,
	SQL_TIMERS_LIST,
	SQL_TIMERS_FIRE,
	/* consumer groups, seek, dead letters, messages (schema/functions/groups.sql, dlq_messages.sql) */
	SQL_GROUPS_LIST,
	SQL_GROUPS_LAGGING,
	SQL_GROUP_DETAIL,
	SQL_GROUP_DELETE,
	SQL_GROUP_SUBSCRIPTION,
	SQL_SEEK,
	SQL_DLQ_PURGE,
	SQL_DLQ_REPLAY,
	SQL_MESSAGES_LIST,
	SQL_MESSAGE_GET,
	SQL_MESSAGE_DELETE,
	/* retention and the operator reads (schema/functions/retention.sql, status.sql) */
	SQL_RETENTION_ROUND,
	SQL_RETENTION_ADVANCE,
	SQL_RES_QUEUES,
	SQL_RES_OVERVIEW,
	SQL_RES_NAMESPACES,
	SQL_RES_TASKS,
	SQL_STATUS,
	SQL_STATUS_QUEUES,
	/* transaction (schema/functions/transaction.sql) */
	SQL_TXN,
	/* spool replay (schema/functions/push.sql, spool.sql) */
	SQL_SPOOL_PUSH,
	SQL_SPOOL_STORED,
	/* payload encryption: the queues with encryptionEnabled (pcrypt.c) */
	SQL_ENCRYPTED_QUEUES,
	SQL__COUNT
};

struct sql_stmt {
	const char *name;
	const char *text;
	int nparams;
	int binary_result;	/* 1: every column comes in binary (pgbin.h reads them) */
};

const struct sql_stmt *sql_get(enum sql_id id);

#endif
