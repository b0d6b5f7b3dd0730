/* migrate: schema versioning under pg_advisory_lock. */
#include "migrate.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIGRATE_LOCK_KEY 7305271834L /* arbitrary, constant: "queen" schema lock */

static int
exec_ok(PGconn *pg, const char *sql, const char *what)
{
	PGresult *res = PQexec(pg, sql);
	ExecStatusType st = PQresultStatus(res);
	int ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;

	if (!ok)
		log_error("schema %s failed: %s", what, PQresultErrorMessage(res));
	PQclear(res);
	return ok ? 0 : -1;
}

static int
applied(PGconn *pg, int version)
{
	char v[16];
	const char *params[1] = { v };
	PGresult *res;
	int found;

	snprintf(v, sizeof(v), "%d", version);
	res = PQexecParams(pg, "SELECT 1 FROM queen_schema_version WHERE version = $1::int", 1,
			   NULL, params, NULL, NULL, 0);
	found = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1;
	PQclear(res);
	return found;
}

int
migrate_apply(PGconn *pg)
{
	char sql[160];
	int rc = 0;

	snprintf(sql, sizeof(sql), "SELECT pg_advisory_lock(%ld)", MIGRATE_LOCK_KEY);
	if (exec_ok(pg, sql, "lock") < 0)
		return -1;
	if (exec_ok(pg, "CREATE TABLE IF NOT EXISTS queen_schema_version ("
			"version int PRIMARY KEY, name text NOT NULL, "
			"applied_at timestamptz NOT NULL DEFAULT now())", "version table") < 0) {
		rc = -1;
		goto out;
	}
	for (const struct migration *m = migrations; m->name; m++) {
		char v[16];
		const char *params[2] = { v, m->name };
		PGresult *res;

		if (applied(pg, m->version))
			continue;
		if (exec_ok(pg, "BEGIN", "begin") < 0 || exec_ok(pg, m->sql, m->name) < 0) {
			exec_ok(pg, "ROLLBACK", "rollback");
			rc = -1;
			goto out;
		}
		snprintf(v, sizeof(v), "%d", m->version);
		res = PQexecParams(pg, "INSERT INTO queen_schema_version (version, name) "
				       "VALUES ($1::int, $2)", 2, NULL, params, NULL, NULL, 0);
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			log_error("schema %s: cannot record version: %s", m->name,
				  PQresultErrorMessage(res));
			PQclear(res);
			exec_ok(pg, "ROLLBACK", "rollback");
			rc = -1;
			goto out;
		}
		PQclear(res);
		if (exec_ok(pg, "COMMIT", "commit") < 0) {
			rc = -1;
			goto out;
		}
		log_info("schema migration %s applied", m->name);
	}
out:
	snprintf(sql, sizeof(sql), "SELECT pg_advisory_unlock(%ld)", MIGRATE_LOCK_KEY);
	exec_ok(pg, sql, "unlock");
	return rc;
}
