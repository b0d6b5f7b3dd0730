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

#endif
