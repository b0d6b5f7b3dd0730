/* migrate: applies the numbered migrations and the function files of schema/ (compiled in by embed-schema.sh) at
 * start-up, each in its own transaction, under an advisory lock so brokers starting together
 * are safe. Applied versions are recorded in queen_schema_version. */
#ifndef QUEEN_MIGRATE_H
#define QUEEN_MIGRATE_H

#include <libpq-fe.h>

struct migration {
	int version;
	const char *name;
	const char *sql;
};

/* Terminated by an entry with name NULL.  migrations[]: the numbered files of schema/, applied
 * once each; schema_functions[]: the files of schema/functions/ (version 0), re-applied
 * together whenever their text changes. */
extern const struct migration migrations[];
extern const struct migration schema_functions[];

/* Returns 0, or -1 with the failing migration and PostgreSQL's message logged. */
int migrate_apply(PGconn *pg);
/* After a failed migrate_apply: 1 when pg is still a live connection to a read-write server
 * (the failure is the schema's: stop), 0 when the connection was lost or the server is in
 * recovery or read-only (a failover: connect again and retry). */
int migrate_server_ok(PGconn *pg);

#endif
