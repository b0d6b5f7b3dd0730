/* migrate: schema versioning under pg_advisory_lock.
 *
 * Two kinds of schema text are compiled in.  The numbered migrations (tables, indexes) are
 * applied once each, in order, and recorded in queen_schema_version; a released one is never
 * edited.  The function files hold the one current definition of every function: when the
 * digest of their whole text differs from the one recorded in queen_schema_functions, every
 * queen_* function and composite type is dropped and the files are run again, in one
 * transaction, so a reader of schema/functions/ reads exactly what runs. */
#include "migrate.h"
#include "log.h"
#include "strbuf.h"

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

/* Drops every function and composite type of ours, so that a definition removed or renamed
 * in the files does not linger (and a changed signature or return type is not refused). */
static const char drop_functions_sql[] =
	"DO $$ DECLARE r record; BEGIN "
	"FOR r IN SELECT p.oid::regprocedure AS f FROM pg_proc p "
	"  JOIN pg_namespace n ON n.oid = p.pronamespace "
	"  WHERE n.nspname = current_schema() AND p.proname LIKE 'queen\\_%' LOOP "
	"  EXECUTE 'DROP FUNCTION ' || r.f || ' CASCADE'; END LOOP; "
	"FOR r IN SELECT t.oid::regtype AS t FROM pg_type t "
	"  JOIN pg_class c ON c.oid = t.typrelid AND c.relkind = 'c' "
	"  JOIN pg_namespace n ON n.oid = t.typnamespace "
	"  WHERE n.nspname = current_schema() AND t.typname LIKE 'queen\\_%' LOOP "
	"  EXECUTE 'DROP TYPE ' || r.t || ' CASCADE'; END LOOP; END $$";

/* Re-creates the functions when their text changed (see the top of this file). */
static int
apply_functions(PGconn *pg)
{
	struct strbuf all;
	const char *params[1];
	PGresult *res;
	char digest[33] = "";
	int same, rc = -1;

	sb_init(&all);
	for (const struct migration *m = schema_functions; m->name; m++) {
		sb_adds(&all, m->name);
		sb_addc(&all, '\n');
		sb_adds(&all, m->sql);
	}
	params[0] = all.buf;
	if (exec_ok(pg, "CREATE TABLE IF NOT EXISTS queen_schema_functions ("
			"id bool PRIMARY KEY DEFAULT true CHECK (id), digest text NOT NULL, "
			"applied_at timestamptz NOT NULL DEFAULT now())", "functions table") < 0)
		goto out;
	res = PQexecParams(pg, "SELECT md5($1), md5($1) IS NOT DISTINCT FROM "
			       "(SELECT digest FROM queen_schema_functions)", 1, NULL, params,
			   NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		log_error("schema functions: cannot read their digest: %s",
			  PQresultErrorMessage(res));
		PQclear(res);
		goto out;
	}
	snprintf(digest, sizeof(digest), "%s", PQgetvalue(res, 0, 0));
	same = PQgetvalue(res, 0, 1)[0] == 't';
	PQclear(res);
	if (same) {
		rc = 0;
		goto out;
	}
	/* Bodies are checked when they first run, not now: files may then come in any order. */
	if (exec_ok(pg, "BEGIN", "begin") < 0)
		goto out;
	if (exec_ok(pg, "SET LOCAL check_function_bodies = off", "functions") < 0 ||
	    exec_ok(pg, drop_functions_sql, "drop of old functions") < 0)
		goto rollback;
	for (const struct migration *m = schema_functions; m->name; m++)
		if (exec_ok(pg, m->sql, m->name) < 0)
			goto rollback;
	params[0] = digest;
	res = PQexecParams(pg, "INSERT INTO queen_schema_functions (digest) VALUES ($1) "
			       "ON CONFLICT (id) DO UPDATE SET digest = EXCLUDED.digest, "
			       "applied_at = now()", 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		log_error("schema functions: cannot record their digest: %s",
			  PQresultErrorMessage(res));
		PQclear(res);
		goto rollback;
	}
	PQclear(res);
	if (exec_ok(pg, "COMMIT", "commit") < 0)
		goto out;
	log_info("schema functions applied (digest %s)", digest);
	rc = 0;
	goto out;
rollback:
	exec_ok(pg, "ROLLBACK", "rollback");
out:
	sb_free(&all);
	return rc;
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
	rc = apply_functions(pg);
out:
	snprintf(sql, sizeof(sql), "SELECT pg_advisory_unlock(%ld)", MIGRATE_LOCK_KEY);
	exec_ok(pg, sql, "unlock");
	return rc;
}

int
migrate_server_ok(PGconn *pg)
{
	PGresult *res;
	int ok;

	if (PQstatus(pg) != CONNECTION_OK)
		return 0;
	res = PQexec(pg, "SELECT NOT pg_is_in_recovery() AND "
			 "current_setting('transaction_read_only') = 'off'");
	ok = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
	     PQgetvalue(res, 0, 0)[0] == 't';
	PQclear(res);
	return ok;
}
