/*
 * queen-bench phase "baseline": raw PostgreSQL, the yardstick of every rate.  The same
 * payloads inserted straight over libpq, 100 rows per INSERT, from 16 connections, for
 * --duration; once with 100 B and once with 1 KiB payloads.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "bench.h"

struct base_worker {
	pthread_t thread;
	PGconn *pg;
	const char *table;
	const struct payload *pl;
	int idx;
	long rows;
	char err[200];
};

static atomic_bool base_stop;

static void *baseline_worker(void *arg)
{
	struct base_worker *w = arg;
	const char *values[BASELINE_ROWS * 3];
	char ids[BASELINE_ROWS][37], parts[BASELINE_ROWS][8], *bodies[BASELINE_ROWS];
	uint64_t rng = 0x1234567ULL + (uint64_t)w->idx * 7919, seq = (uint64_t)w->idx * 100000000;
	struct buf sql = { 0 };
	PGresult *res;

	buf_addf(&sql, "INSERT INTO %s (id, partition, payload) VALUES ", w->table);
	for (int i = 0; i < BASELINE_ROWS; i++)
		buf_addf(&sql, "%s($%d::uuid, $%d, $%d::jsonb)", i ? ", " : "", 3 * i + 1, 3 * i + 2,
			 3 * i + 3);
	res = PQprepare(w->pg, "ins", sql.p, 0, NULL);
	buf_free(&sql);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		snprintf(w->err, sizeof(w->err), "%s", PQerrorMessage(w->pg));
		PQclear(res);
		return NULL;
	}
	PQclear(res);
	for (int i = 0; i < BASELINE_ROWS; i++) {
		bodies[i] = xrealloc(NULL, w->pl->len + 1);
		memcpy(bodies[i], w->pl->text, w->pl->len + 1);
		snprintf(parts[i], sizeof(parts[i]), "p%d", i % 10);
		values[3 * i] = ids[i];
		values[3 * i + 1] = parts[i];
		values[3 * i + 2] = bodies[i];
	}
	while (!atomic_load(&base_stop)) {
		for (int i = 0; i < BASELINE_ROWS; i++) {
			uuid7(ids[i], &rng);
			payload_stamp(bodies[i], w->pl, seq++);
		}
		res = PQexecPrepared(w->pg, "ins", BASELINE_ROWS * 3, values, NULL, NULL, 0);
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			snprintf(w->err, sizeof(w->err), "%s", PQerrorMessage(w->pg));
			PQclear(res);
			break;
		}
		PQclear(res);
		w->rows += BASELINE_ROWS;
	}
	for (int i = 0; i < BASELINE_ROWS; i++)
		free(bodies[i]);
	return NULL;
}

static void pg_exec(PGconn *pg, const char *sql)
{
	PGresult *res = PQexec(pg, sql);

	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		die("baseline: %s: %s", sql, PQerrorMessage(pg));
	PQclear(res);
}

/* Raw PostgreSQL: 100-row INSERTs of the same payloads from 16 connections, for --duration. */
void phase_baseline(const struct payload *pl)
{
	struct base_worker w[BASELINE_CONNS];
	struct failures fail = { 0 };
	char table[64], sql[256], label[64];
	PGconn *admin;
	long rows = 0;
	double t0, elapsed;

	snprintf(table, sizeof(table), "queen_bench_%s_%s", run_id, pl->tag);
	admin = PQconnectdb(opt.pg);
	if (PQstatus(admin) != CONNECTION_OK)
		die("baseline: cannot connect to \"%s\": %s", opt.pg, PQerrorMessage(admin));
	snprintf(sql, sizeof(sql),
		 "CREATE TABLE %s (id uuid PRIMARY KEY, partition text NOT NULL, "
		 "payload jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now())", table);
	pg_exec(admin, sql);

	memset(w, 0, sizeof(w));
	for (int i = 0; i < BASELINE_CONNS; i++) {
		w[i].pg = PQconnectdb(opt.pg);
		if (PQstatus(w[i].pg) != CONNECTION_OK)
			die("baseline: connection %d: %s", i, PQerrorMessage(w[i].pg));
		w[i].table = table;
		w[i].pl = pl;
		w[i].idx = i;
	}
	atomic_store(&base_stop, false);
	t0 = now();
	for (int i = 0; i < BASELINE_CONNS; i++)
		if (pthread_create(&w[i].thread, NULL, baseline_worker, &w[i]))
			die("pthread_create failed");
	usleep((useconds_t)(opt.duration * 1e6));
	atomic_store(&base_stop, true);
	for (int i = 0; i < BASELINE_CONNS; i++) {
		pthread_join(w[i].thread, NULL);
		rows += w[i].rows;
		if (w[i].err[0]) {
			tally_add(fail.items, "insert error", 12, 1);
			failures_note(&fail, "insert", w[i].err, strlen(w[i].err));
		}
		PQfinish(w[i].pg);
	}
	elapsed = now() - t0;
	snprintf(sql, sizeof(sql), "DROP TABLE %s", table);
	pg_exec(admin, sql);
	PQfinish(admin);

	base_rate[pl->base] = (double)rows / elapsed;
	snprintf(label, sizeof(label), "baseline insert %s", base_name[pl->base]);
	figure(label, base_rate[pl->base], "rows/s", -1, NULL);
	failures_print(label, &fail);
}
