/* migrate: applies the numbered migrations of schema/ (compiled in by embed-schema.sh) at
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

/* Terminated by an entry with name NULL. */
extern const struct migration migrations[];

/* Returns 0, or -1 with the failing migration and PostgreSQL's message logged. */
int migrate_apply(PGconn *pg);

#endif
