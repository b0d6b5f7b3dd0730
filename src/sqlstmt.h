/* sqlstmt: every SQL text of the broker, in one catalogue, prepared once per connection.
 * Parameters are always bound; statements are named after their enum. */
#ifndef QUEEN_SQLSTMT_H
#define QUEEN_SQLSTMT_H

enum sql_id {
	SQL_PUSH,
	SQL_POP,
	SQL_ACK,
	SQL_EXTEND,
	SQL_CONFIGURE,
	SQL_QUEUE_DETAIL,
	SQL_QUEUE_DEPTH,
	SQL_QUEUE_DELETE,
	SQL_DLQ_LIST,
	SQL_INDEX_SNAPSHOT,
	SQL_STATS,
	SQL_PING,
	SQL_LISTEN,
	SQL__COUNT
};

struct sql_stmt {
	const char *name;
	const char *text;
	int nparams;
};

const struct sql_stmt *sql_get(enum sql_id id);

#endif
