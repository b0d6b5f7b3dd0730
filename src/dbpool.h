/* dbpool: libpq connections, one per worker thread (never shared), plus the helpers every
 * handler uses to run a catalogued statement in one round trip.
 *
 * A lost connection is reconnected lazily with exponential backoff (50 to 400 ms); while it
 * is down, db_exec answers QE_DB at once so requests get a 503 instead of a hang. Only a
 * read-write server is connected to (target_session_attrs, the primary of a PG_HOST list),
 * and a server that refuses a statement because it is read-only, shutting down or starting
 * up counts as unreachable, like a lost connection (db_ok false). */
#ifndef QUEEN_DBPOOL_H
#define QUEEN_DBPOOL_H

#include "errors.h"
#include "sqlstmt.h"

#include <libpq-fe.h>

struct dbconn;

struct dbconn *db_new(int id);
void db_free(struct dbconn *c);
/* Connects (and prepares the catalogue) when the connection is down and the backoff allows. */
enum qe db_ensure(struct dbconn *c);
int db_ok(const struct dbconn *c);
/* 1 when the database answers a trivial statement on this connection now, else 0. */
int db_ping(struct dbconn *c);
/* Backend pid of the connection, 0 when down. */
int db_backend_pid(const struct dbconn *c);

/* Runs catalogued statement id with text parameters (NULL = SQL NULL). On QE_OK *out holds a
 * result with status TUPLES_OK or COMMAND_OK, which the caller clears. On error nothing is
 * returned; the error is logged (primary message and SQLSTATE only, never parameters). */
enum qe db_exec(struct dbconn *c, enum sql_id id, const char *const *params, PGresult **out);
/* Like db_exec, but a statement the server refused (the connection is fine) comes back as
 * QE_DB with *err holding its error result (SQLSTATE, message, detail) for the caller to
 * read, log as it sees fit and clear; *err stays NULL when the database is unreachable. */
enum qe db_exec_err(struct dbconn *c, enum sql_id id, const char *const *params,
		    PGresult **out, PGresult **err);
/* Like db_exec_err, with some parameters in binary: lengths[k] and formats[k] (1 = binary)
 * for each parameter, as PQexecPrepared takes them (NULL arrays: every parameter text). */
enum qe db_exec_fmt(struct dbconn *c, enum sql_id id, const char *const *params,
		    const int *lengths, const int *formats, PGresult **out, PGresult **err);
/* A transaction of several statements on the connection: db_begin, the statements
 * (db_exec_fmt and the others, which never reconnect inside it: once the connection is lost
 * or a refusal rolled the transaction back, every later statement fails with QE_DB), then
 * db_commit, or db_rollback after a failure. COMMIT's failure is QE_DB, logged. */
enum qe db_begin(struct dbconn *c);
enum qe db_commit(struct dbconn *c);
void db_rollback(struct dbconn *c);
/* Same for a statement whose single row, single column is a json value: returns its text
 * (malloc'd) or NULL in *json when the value is SQL NULL. */
enum qe db_exec_json(struct dbconn *c, enum sql_id id, const char *const *params, char **json);

/* Rows a FETCH of db_read_chunks brings at once: the broker holds one such chunk (about a
 * MiB, which the socket buffers hold while the one before is loaded), not a million
 * partitions' rows. */
#define DB_CHUNK_ROWS 5000

/* The most connections db_read_chunks reads with. */
#define DB_MAX_CONNS 4

/* A statement of db_read_chunks. One without parameters is read on the first connection.
 * One that takes two is read in as many parts as there are connections, part k on
 * connection k with parameters bounds[k] and bounds[k + 1] (text; the last part's second is
 * NULL, for none), so that the parts cover its rows between them. */
struct db_chunked {
	enum sql_id id;
	const char *bounds[DB_MAX_CONNS];
};

/* Runs statements st[0..n), in that order, through cursors in read-only transactions on
 * conns[0..nconns) that share one snapshot, and calls fn with each chunk of up to
 * DB_CHUNK_ROWS rows as it comes, `which` the index in st of the statement it is from (the
 * chunks of a statement's parts come in turn). Rows are in binary format (PQfformat 1:
 * uuid 16 bytes, bigint 8 bytes in network order, text as is). Each FETCH is a statement of
 * its own under the statement timeout. fn returns 1 to go on, 0 to stop there
 * (QE_SHUTDOWN). QE_OK once every row was seen; on QE_DB (logged) fn may have seen only the
 * first chunks. */
enum qe db_read_chunks(struct dbconn *const *conns, int nconns, const struct db_chunked *st,
		       int n, int (*fn)(void *arg, int which, const PGresult *rows), void *arg);

/* The libpq connection, or NULL when down (for LISTEN and PQsocket). */
PGconn *db_pg(struct dbconn *c);
/* Changes each time the connection is (re)opened: session state such as LISTEN is lost. */
unsigned db_serial(const struct dbconn *c);

/* Marks every connection as presumed dead (the server went away): each is reopened before
 * its next use. */
void db_invalidate_all(void);

/* Backend pids of every worker connection, for telling our own notifications apart. */
int db_is_own_backend(int pid);

/* One-shot connection for start-up work (migrations) and the maintenance thread. */
PGconn *db_connect_raw(void);

#endif
