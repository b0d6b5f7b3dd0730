/* dbpool: one libpq connection per worker, prepared statements, reconnect with backoff.
 *
 * Key invariant: a connection is only used by the worker that owns it, so no locking here.
 * After any error that leaves the connection in a bad state it is closed and reopened on the
 * next request, after the backoff. */
#include "dbpool.h"
#include "conf.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "qassert.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DB_MAX_OWN 1024
/* Reconnect attempts of one connection while the server is away: 50 ms doubling to this. An
 * attempt on a server that is down costs a refused TCP connect; a long backoff would only
 * keep the broker away for that long once the server is back: measured after a restart
 * under load, the drainer's first batch waited up to 350 ms for its next attempt at 400. */
#define DB_BACKOFF_MAX_MS 100

struct dbconn {
	int id;
	unsigned epoch;		/* db_epoch when connected */
	unsigned serial;	/* counts successful connects */
	PGconn *pg;
	int backoff_ms;
	int64_t next_try_ms;
	unsigned failed_at;	/* db_connects when its last attempt failed */
	int txn;		/* inside db_begin .. db_commit or db_rollback */
	int recycle;		/* a large statement ran: reopen once idle (DB_RECYCLE_BYTES) */
};

static _Atomic int db_own_pids[DB_MAX_OWN];
/* Bumped whenever some connection finds the server gone: every other connection is then
 * presumed dead too (a restarted server leaves them all broken, which libpq only notices on
 * their next use) and is reopened before it is used, instead of failing one request each. */
static _Atomic unsigned db_epoch;
/* Successful connects of every connection: one made since a connection's last failed attempt
 * says the server is back, and that connection tries again at once rather than at the end of
 * its backoff.  Otherwise a request handed to a worker still backing off when the server
 * returns was refused though the server answered (an ack refused so leaves its lease to run
 * out, and its partition waits that long). */
static _Atomic unsigned db_connects;

void
db_invalidate_all(void)
{
	atomic_fetch_add(&db_epoch, 1);
}

struct dbconn *
db_new(int id)
{
	struct dbconn *c = calloc(1, sizeof(*c));

	QASSERT(c != NULL);
	c->id = id;
	return c;
}

static void
db_close(struct dbconn *c)
{
	if (c->pg)
		PQfinish(c->pg);
	c->pg = NULL;
	c->recycle = 0;		/* the next connection starts with small buffers */
	if (c->id >= 0 && c->id < DB_MAX_OWN)
		atomic_store(&db_own_pids[c->id], 0);
}

void
db_free(struct dbconn *c)
{
	if (!c)
		return;
	db_close(c);
	free(c);
}

/* Server notices (NOTICE: relation exists, skipping ...) are debug chatter, not errors. */
static void
db_notice(void *arg, const char *msg)
{
	log_debug("postgres: %.*s", (int)strcspn(msg, "\n"), msg);
}

PGconn *
db_connect_raw(void)
{
	char *ci = conf_conninfo(&qconf);
	PGconn *pg = PQconnectdb(ci);

	free(ci);
	PQsetNoticeProcessor(pg, db_notice, NULL);
	if (PQstatus(pg) != CONNECTION_OK) {
		char msg[256];

		snprintf(msg, sizeof(msg), "%s", PQerrorMessage(pg));
		msg[strcspn(msg, "\n")] = '\0';
		log_warn("database connection failed: %s", msg);
		PQfinish(pg);
		return NULL;
	}
	return pg;
}

/* Prepares the whole catalogue in one round trip (a pipeline): after an outage every
 * connection of the broker reconnects at once, and one round trip per statement was most of
 * what a reconnect cost the server while the spool waited for it. 0, or -1 logged. */
static int
db_prepare_all(PGconn *pg)
{
	int sent = 0, rc = 0;
	PGresult *res;

	if (!PQenterPipelineMode(pg))
		return -1;
	for (; sent < SQL__COUNT; sent++) {
		const struct sql_stmt *s = sql_get((enum sql_id)sent);

		if (!PQsendPrepare(pg, s->name, s->text, s->nparams, NULL))
			break;
	}
	if (sent < SQL__COUNT || !PQpipelineSync(pg))
		return -1;	/* the connection is gone: the caller closes it */
	/* One result per statement, each followed by a NULL, then the sync's. A statement
	 * after a failed one comes back PIPELINE_ABORTED. */
	for (int i = 0; i < sent; i++) {
		res = PQgetResult(pg);
		if (!res)
			return -1;
		if (PQresultStatus(res) != PGRES_COMMAND_OK && rc == 0) {
			log_error("cannot prepare statement %s: %s", sql_get((enum sql_id)i)->name,
				  PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ?
					  PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) :
					  PQerrorMessage(pg));
			rc = -1;
		}
		PQclear(res);
		while ((res = PQgetResult(pg)) != NULL)
			PQclear(res);
	}
	res = PQgetResult(pg);
	if (!res || PQresultStatus(res) != PGRES_PIPELINE_SYNC)
		rc = -1;
	PQclear(res);
	if (!PQexitPipelineMode(pg))
		rc = -1;
	return rc;
}

static int
db_setup(struct dbconn *c)
{
	char sql[256];
	PGresult *res;

	/* Pushes do not NOTIFY inside their transaction (a NOTIFY takes a database-wide lock
	 * until commit, which would serialise every push): the maintenance thread sends one
	 * notification for many pushes after they committed (maint.c).
	 * Generic plans: the PL/pgSQL functions take arrays whose sizes the planner cannot see,
	 * so "auto" keeps making custom plans and replans every statement of every call, which
	 * costs more than running them (measured: a one-item push 1.05 ms -> 0.43 ms). The
	 * statistics task of maint.c keeps the generic plans' estimates honest.
	 * No JIT: a generic plan's estimates can be millions of rows where the call touches one,
	 * and then PostgreSQL compiles the statement before running it (measured: a queue
	 * detail of one partition, 700 ms of compilation for 0.3 ms of work). */
	snprintf(sql, sizeof(sql), "SET statement_timeout = %lld; SET queen.push_notify = off; "
		 "SET plan_cache_mode = force_generic_plan; SET jit = off",
		 (long long)qconf.stmt_timeout_ms);
	res = PQexec(c->pg, sql);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		PQclear(res);
		return -1;
	}
	PQclear(res);
	return db_prepare_all(c->pg);
}

enum qe
db_ensure(struct dbconn *c)
{
	int64_t now = now_ms();

	if (c->pg && PQstatus(c->pg) == CONNECTION_OK && c->epoch == atomic_load(&db_epoch))
		return QE_OK;
	db_close(c);
	if (now < c->next_try_ms && atomic_load(&db_connects) == c->failed_at)
		return QE_DB;
	c->pg = db_connect_raw();
	if (!c->pg || db_setup(c) < 0) {
		db_close(c);
		c->backoff_ms = c->backoff_ms ? c->backoff_ms * 2 : 50;
		if (c->backoff_ms > DB_BACKOFF_MAX_MS)
			c->backoff_ms = DB_BACKOFF_MAX_MS;
		c->next_try_ms = now + c->backoff_ms;
		c->failed_at = atomic_load(&db_connects);
		return QE_DB;
	}
	atomic_fetch_add(&db_connects, 1);
	c->backoff_ms = 0;
	c->next_try_ms = 0;
	c->epoch = atomic_load(&db_epoch);
	c->serial++;
	if (c->id >= 0 && c->id < DB_MAX_OWN)
		atomic_store(&db_own_pids[c->id], PQbackendPID(c->pg));
	log_debug("worker %d connected to PostgreSQL", c->id);
	return QE_OK;
}

int
db_ok(const struct dbconn *c)
{
	return c->pg && PQstatus(c->pg) == CONNECTION_OK;
}

int
db_ping(struct dbconn *c)
{
	PGresult *res;

	if (db_exec(c, SQL_PING, NULL, &res) != QE_OK)
		return 0;
	PQclear(res);
	return 1;
}

int
db_backend_pid(const struct dbconn *c)
{
	return db_ok(c) ? PQbackendPID(c->pg) : 0;
}

unsigned
db_serial(const struct dbconn *c)
{
	return c->serial;
}

PGconn *
db_pg(struct dbconn *c)
{
	return db_ok(c) ? c->pg : NULL;
}

int
db_is_own_backend(int pid)
{
	for (int i = 0; i < DB_MAX_OWN; i++)
		if (pid != 0 && atomic_load(&db_own_pids[i]) == pid)
			return 1;
	return 0;
}

/* Whether a refusal says the server cannot take writes from us at all, rather than that this
 * statement is wrong: it is shutting down or starting up (57P01-57P03), or it is (or has
 * become) read-only, a standby in recovery (25006). Such a server is treated as unreachable:
 * the connection is dropped and reopened on whichever host is the primary now, pushes go to
 * the spool and the spool keeps its records for later, never setting them aside as refused. */
static int
server_gone(const PGresult *res)
{
	const char *st = PQresultErrorField(res, PG_DIAG_SQLSTATE);

	return st && (strcmp(st, "25006") == 0 || strcmp(st, "57P01") == 0 ||
		      strcmp(st, "57P02") == 0 || strcmp(st, "57P03") == 0 ||
		      strncmp(st, "08", 2) == 0);
}

enum qe
db_exec_err(struct dbconn *c, enum sql_id id, const char *const *params, PGresult **out,
	    PGresult **err)
{
	return db_exec_fmt(c, id, params, NULL, NULL, out, err);
}

/* What a statement's result means: QE_OK with the result in *out, or QE_DB. A refusal is
 * handed to the caller in *err when it asked for it (err not NULL), else logged and cleared;
 * a lost server closes the connection (and marks the others presumed dead). */
static enum qe
settle(struct dbconn *c, const char *name, PGresult *res, PGresult **out, PGresult **err)
{
	ExecStatusType st = PQresultStatus(res);

	if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
		*out = res;
		return QE_OK;
	}
	if (PQstatus(c->pg) != CONNECTION_OK || server_gone(res)) {
		metrics_db_error();
		log_warn("statement %s failed: %.*s", name,
			 (int)strcspn(PQerrorMessage(c->pg), "\n"), PQerrorMessage(c->pg));
		PQclear(res);
		db_close(c);
		db_invalidate_all();
		return QE_DB;
	}
	if (PQtransactionStatus(c->pg) != PQTRANS_IDLE)
		PQclear(PQexec(c->pg, "ROLLBACK"));
	if (err) {
		/* The caller wanted the refusal: it reads, logs and clears it. */
		*err = res;
		return QE_DB;
	}
	metrics_db_error();
	log_warn("statement %s failed: %s (SQLSTATE %s)", name,
		 PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ?
			 PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : "no message",
		 PQresultErrorField(res, PG_DIAG_SQLSTATE) ?
			 PQresultErrorField(res, PG_DIAG_SQLSTATE) : "none");
	PQclear(res);
	return QE_DB;
}

/* libpq never shrinks a connection's buffers: each stays at the largest message it ever held,
 * for as long as the connection lives. One 60 MB push left 60 MB resident in its lane's
 * connection for good, and every worker can meet one. A statement that sent or received more
 * than this has its connection closed once it is idle again, and reopened: a reconnect
 * (15-20 ms) is small beside a statement of this size (140 ms for 5 MB), and a group commit of
 * small pushes (QUEEN_GROUP_COMMIT_ITEMS 1 KiB items) stays well below it. */
#define DB_RECYCLE_BYTES (4 * 1024 * 1024)

static size_t
params_bytes(int n, const char *const *params, const int *lengths, const int *formats)
{
	size_t bytes = 0;

	for (int i = 0; params && i < n; i++)
		if (params[i])
			bytes += formats && formats[i] && lengths ? (size_t)lengths[i]
								   : strlen(params[i]);
	return bytes;
}

static int in_txn(struct dbconn *c);
static void recycle_if_idle(struct dbconn *c, const char *name);

enum qe
db_exec_fmt(struct dbconn *c, enum sql_id id, const char *const *params, const int *lengths,
	    const int *formats, PGresult **out, PGresult **err)
{
	const struct sql_stmt *s = sql_get(id);
	enum qe e;

	*out = NULL;
	if (err)
		*err = NULL;
	if (c->txn ? !in_txn(c) : db_ensure(c) != QE_OK)
		return QE_DB;
	e = settle(c, s->name,
		   PQexecPrepared(c->pg, s->name, s->nparams, params, lengths, formats,
				  s->binary_result),
		   out, err);
	if ((*out && PQresultMemorySize(*out) > DB_RECYCLE_BYTES) ||
	    params_bytes(s->nparams, params, lengths, formats) > DB_RECYCLE_BYTES)
		c->recycle = 1;
	recycle_if_idle(c, s->name);
	return e;
}

/* 1 when the transaction db_begin opened is still open: never so after the connection was
 * lost (a reconnect would run the next statements outside it) or a refusal rolled it back. */
static int
in_txn(struct dbconn *c)
{
	return c->pg && PQstatus(c->pg) == CONNECTION_OK &&
	       PQtransactionStatus(c->pg) == PQTRANS_INTRANS;
}

static void
recycle_if_idle(struct dbconn *c, const char *name)
{
	if (!c->recycle || !c->pg || PQtransactionStatus(c->pg) != PQTRANS_IDLE)
		return;
	log_debug("worker %d: reopening its connection after a %s of over %d bytes", c->id,
		  name, DB_RECYCLE_BYTES);
	c->recycle = 0;
	db_close(c);
	/* At once: the large request waits for it, not the small one that comes next. */
	(void)db_ensure(c);
}

enum qe
db_begin(struct dbconn *c)
{
	PGresult *res = NULL;

	QASSERT(!c->txn);
	if (db_ensure(c) != QE_OK || settle(c, "BEGIN", PQexec(c->pg, "BEGIN"), &res, NULL) !=
	    QE_OK)
		return QE_DB;
	PQclear(res);
	c->txn = 1;
	return QE_OK;
}

enum qe
db_commit(struct dbconn *c)
{
	PGresult *res = NULL;
	enum qe e = QE_DB;

	QASSERT(c->txn);
	c->txn = 0;
	if (in_txn(c) && (e = settle(c, "COMMIT", PQexec(c->pg, "COMMIT"), &res, NULL)) ==
	    QE_OK)
		PQclear(res);
	recycle_if_idle(c, "transaction");
	return e;
}

void
db_rollback(struct dbconn *c)
{
	QASSERT(c->txn);
	c->txn = 0;
	if (c->pg && PQstatus(c->pg) == CONNECTION_OK &&
	    PQtransactionStatus(c->pg) != PQTRANS_IDLE)
		PQclear(PQexec(c->pg, "ROLLBACK"));
	recycle_if_idle(c, "transaction");
}

/* The result of a statement sent with PQsendQuery: the last one it gave, or its error. */
static PGresult *
sent_result(PGconn *pg)
{
	PGresult *last = NULL, *r;

	while ((r = PQgetResult(pg)) != NULL) {
		if (last && PQresultStatus(last) == PGRES_FATAL_ERROR) {
			PQclear(r);
			continue;
		}
		PQclear(last);
		last = r;
	}
	return last;
}

/* One statement of db_read_chunks, its result cleared unless wanted. */
static enum qe
chunk_step(struct dbconn *c, const char *name, const char *sql, PGresult **out)
{
	PGresult *res = NULL;
	enum qe e = settle(c, name, PQexec(c->pg, sql), &res, NULL);

	if (e == QE_OK && out)
		*out = res;
	else if (e == QE_OK)
		PQclear(res);
	return e;
}

/* A connection's cursor on its part of a statement of db_read_chunks. */
struct chunk_part {
	struct dbconn *c;
	int sent;	/* a FETCH is in flight */
	int open;	/* rows of the part may remain (else the cursor is closed) */
};

/* Declares the cursor of part k of st (of `parts`) on p->c and sends its first FETCH. */
static enum qe
chunk_open(struct chunk_part *p, const struct db_chunked *st, int k, int parts,
	   const char *fetch)
{
	const struct sql_stmt *s = sql_get(st->id);
	const char *params[2] = { st->bounds[k], k + 1 < parts ? st->bounds[k + 1] : NULL };
	PGresult *res;
	char *declare;
	enum qe e;

	QASSERT(s->nparams == 0 || s->nparams == 2);
	QASSERT(asprintf(&declare, "DECLARE queen_chunks BINARY NO SCROLL CURSOR FOR %s",
			 s->text) > 0);
	res = s->nparams ? PQexecParams(p->c->pg, declare, s->nparams, NULL, params, NULL, NULL, 0)
			 : PQexec(p->c->pg, declare);
	free(declare);
	e = settle(p->c, s->name, res, &res, NULL);
	if (e == QE_OK)
		PQclear(res);
	p->open = e == QE_OK;
	p->sent = p->open && PQsendQuery(p->c->pg, fetch);
	return e;
}

/* The next chunk of part p into fn: QE_OK while rows remain or once its cursor is closed. */
static enum qe
chunk_next(struct chunk_part *p, const struct sql_stmt *s, int which, const char *fetch,
	   int (*fn)(void *arg, int which, const PGresult *rows), void *arg)
{
	PGresult *rows = NULL;
	enum qe e = settle(p->c, s->name, p->sent ? sent_result(p->c->pg) : NULL, &rows, NULL);
	int n, go;

	p->sent = 0;
	if (e != QE_OK)
		return e;	/* settle rolled back a refused step */
	n = PQntuples(rows);
	/* The server computes the next chunk while this one is handed over: the two work side
	 * by side, not in turns. */
	p->sent = n == DB_CHUNK_ROWS && PQsendQuery(p->c->pg, fetch);
	go = n == 0 || fn(arg, which, rows);
	PQclear(rows);
	if (!go)
		return QE_SHUTDOWN;	/* the caller has seen enough (the broker is stopping) */
	if (n < DB_CHUNK_ROWS) {
		p->open = 0;
		return chunk_step(p->c, s->name, "CLOSE queen_chunks", NULL);
	}
	return QE_OK;
}

/* Every row of statement `which` of db_read_chunks, chunk by chunk through a cursor on each
 * connection that reads a part of it, their chunks taken in turn: each server computes its
 * next chunk while the others' are handed over. */
static enum qe
chunk_read(struct dbconn *const *conns, int nconns, const struct db_chunked *st, int which,
	   int (*fn)(void *arg, int which, const PGresult *rows), void *arg)
{
	struct chunk_part part[DB_MAX_CONNS];
	int parts = sql_get(st->id)->nparams ? nconns : 1, open;
	char fetch[64];
	enum qe e = QE_OK;

	snprintf(fetch, sizeof(fetch), "FETCH FORWARD %d FROM queen_chunks", DB_CHUNK_ROWS);
	for (int k = 0; k < parts; k++)
		part[k] = (struct chunk_part){ .c = conns[k] };
	for (int k = 0; k < parts && e == QE_OK; k++)
		e = chunk_open(&part[k], st, k, parts, fetch);
	do {
		open = 0;
		for (int k = 0; k < parts && e == QE_OK; k++) {
			if (part[k].open)
				e = chunk_next(&part[k], sql_get(st->id), which, fetch, fn, arg);
			open += part[k].open;
		}
	} while (e == QE_OK && open > 0);
	/* A part that failed or stopped leaves the others' FETCHes in flight. */
	for (int k = 0; k < parts; k++)
		if (part[k].sent)
			PQclear(sent_result(part[k].c->pg));
	return e;
}

/* The snapshot of db_read_chunks: a read-only repeatable-read transaction on conns[0], the
 * others joined to its snapshot. */
static enum qe
chunk_begin(struct dbconn *const *conns, int nconns, const char *name)
{
	/* Every row will be read: plan for all of them (hash joins over sequential scans), not
	 * for the first tenth as a cursor is planned by default (index order, random reads).
	 * Give the hash joins room for a million partitions' rows, which spill to temporary
	 * files in batches at the default 4 MB, and leave out JIT compilation, whose cost the
	 * planner's estimate of a million index probes always calls for and never repays here
	 * (both: 8.8 s against 5.3 s for a million partitions, cursor rows included). */
	static const char settings[] = "SET LOCAL cursor_tuple_fraction = 1; "
		"SET LOCAL work_mem = '64MB'; SET LOCAL jit = off";
	PGresult *res;
	char *sql, *id;
	enum qe e;

	QASSERT(asprintf(&sql, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY; %s%s",
			 settings, nconns > 1 ? "; SELECT pg_export_snapshot()" : "") > 0);
	e = chunk_step(conns[0], name, sql, nconns > 1 ? &res : NULL);
	free(sql);
	if (e != QE_OK || nconns == 1)
		return e;
	id = PQescapeLiteral(conns[0]->pg, PQgetvalue(res, 0, 0), strlen(PQgetvalue(res, 0, 0)));
	PQclear(res);
	QASSERT(id != NULL);
	for (int k = 1; k < nconns && e == QE_OK; k++) {
		QASSERT(asprintf(&sql, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY; "
				 "SET TRANSACTION SNAPSHOT %s; %s", id, settings) > 0);
		e = chunk_step(conns[k], name, sql, NULL);
		free(sql);
	}
	PQfreemem(id);
	return e;
}

enum qe
db_read_chunks(struct dbconn *const *conns, int nconns, const struct db_chunked *st, int n,
	       int (*fn)(void *arg, int which, const PGresult *rows), void *arg)
{
	const char *name = sql_get(st[0].id)->name;
	enum qe e = QE_OK;

	QASSERT(nconns >= 1 && nconns <= DB_MAX_CONNS);
	for (int k = 0; k < nconns && e == QE_OK; k++)
		e = db_ensure(conns[k]) == QE_OK ? QE_OK : QE_DB;
	if (e == QE_OK)
		e = chunk_begin(conns, nconns, name);
	for (int i = 0; i < n && e == QE_OK; i++)
		e = chunk_read(conns, nconns, &st[i], i, fn, arg);
	/* The others first: the snapshot was exported by conns[0]'s transaction. */
	for (int k = nconns - 1; k >= 0; k--) {
		PGconn *pg = conns[k]->pg;

		if (e == QE_OK)
			e = chunk_step(conns[k], name, "COMMIT", NULL);
		else if (pg && PQstatus(pg) == CONNECTION_OK &&
			 PQtransactionStatus(pg) != PQTRANS_IDLE)
			PQclear(PQexec(pg, "ROLLBACK"));
	}
	/* settle rolled back a refused step; a lost connection has no transaction left. */
	return e;
}

enum qe
db_exec(struct dbconn *c, enum sql_id id, const char *const *params, PGresult **out)
{
	return db_exec_err(c, id, params, out, NULL);
}

enum qe
db_exec_json(struct dbconn *c, enum sql_id id, const char *const *params, char **json)
{
	PGresult *res;
	enum qe e = db_exec(c, id, params, &res);

	*json = NULL;
	if (e != QE_OK)
		return e;
	if (PQntuples(res) == 1 && !PQgetisnull(res, 0, 0)) {
		*json = strdup(PQgetvalue(res, 0, 0));
		QASSERT(*json != NULL);
	}
	PQclear(res);
	return QE_OK;
}
