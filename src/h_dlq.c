/* h_dlq: dead letters. Listing and purge are plain SQL; replay is a move done in one
 * transaction by queen_dlq_replay (push again through queen_push, delete the row), after
 * which this file does what h_push does for a stored push: teach the partition index the
 * partition and its new log end, and wake the pops parked on the queue. */
#include "h_dlq.h"
#include "dbpool.h"
#include "h_util.h"
#include "http.h"
#include "jsonio.h"
#include "names.h"
#include "longpoll.h"
#include "metrics.h"
#include "pindex.h"
#include "qassert.h"
#include "uuid.h"
#include "workers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum qe
h_dlq_list(struct req *r, struct wk *w)
{
	struct h_paging pg;
	const char *params[4] = { req_query_set(r, "queue"), req_query_set(r, "consumerGroup"),
				  pg.limit, pg.offset };
	enum qe e = h_paging(r, 100, &pg);

	if (e != QE_OK)
		return e;
	return h_reply_sql_json(r, w, SQL_DLQ_LIST, params, "not found");
}

enum qe
h_dlq_purge(struct req *r, struct wk *w)
{
	const char *q = req_query(r, "queue"), *g = req_query(r, "consumerGroup");
	const char *params[2] = { q, g && *g ? g : NULL };

	if (!q || !*q)
		return req_fail(r, QE_BAD_REQUEST, "queue is required");
	return h_reply_sql_json(r, w, SQL_DLQ_PURGE, params, "not found");
}

/* Where a replay goes: NULL = the dead letter's own queue and partition. */
struct replay_job {
	const char *queue, *partition;	/* borrowed from the request's JSON */
};

/* A redirect target must be a name push would accept. */
static enum qe
target_name(struct req *r, const char *key, const char **out)
{
	char err[128];
	const char *why;
	json_t *v;

	if (jio_field(r->json, key, JIO_STRING, &v, err, sizeof(err)) < 0)
		return req_fail(r, QE_BAD_BODY, "%s", err);
	*out = NULL;
	if (!v)
		return QE_OK;
	if ((why = names_invalid(json_string_value(v), json_string_length(v))) != NULL)
		return req_fail(r, QE_BAD_BODY, "%s %s", key, why);
	*out = json_string_value(v);
	return QE_OK;
}

enum qe
h_dlq_replay_prepare(struct req *r)
{
	struct replay_job *j = calloc(1, sizeof(*j));
	enum qe e;

	QASSERT(j != NULL);
	r->job = j;
	r->job_free = free;
	if (!r->json)
		return QE_OK;
	if (!json_is_object(r->json))
		return req_fail(r, QE_BAD_BODY, "expected an object");
	if ((e = target_name(r, "queue", &j->queue)) != QE_OK ||
	    (e = target_name(r, "partition", &j->partition)) != QE_OK)
		return e;
	return QE_OK;
}

/* The 404 of a replay: the row is not there (any more). */
static enum qe
gone(struct req *r)
{
	req_err_field(r, "success", json_false());
	req_err_field(r, "result", json_string("gone"));
	req_err_field(r, "dlqRowRemoved", json_false());
	return req_fail(r, QE_NO_RESOURCE, "Dead letter not found");
}

/* Replays the row with id, or the newest row at (pid, txn). */
static enum qe
replay(struct req *r, struct wk *w, const char *id, const char *pid, const char *txn)
{
	struct replay_job *j = r->job;
	struct pidx_pushes pushes = PIDX_PUSHES_INIT;
	char mid[UUID_STR_LEN];
	const char *params[6] = { id, pid, txn, j->queue, j->partition, mid };
	PGresult *res;
	json_t *o;
	int moved;
	enum qe e;

	uuid_v7(mid);
	if ((e = db_exec(w->db, SQL_DLQ_REPLAY, params, &res)) != QE_OK)
		return req_fail(r, e, "replay not applied: database unavailable");
	if (PQntuples(res) != 1 || strcmp(PQgetvalue(res, 0, 0), "gone") == 0) {
		PQclear(res);
		return gone(r);
	}
	/* Columns: result, dlq id, status, message id, queue id, partition id, log end,
	 * queue, partition, transactionId. */
	moved = strcmp(PQgetvalue(res, 0, 0), "moved") == 0;
	o = json_pack("{s:b,s:s,s:s,s:{s:i,s:s,s:s,s:s,s:s},s:b}", "success", 1,
		      "result", PQgetvalue(res, 0, 0), "dlqId", PQgetvalue(res, 0, 1),
		      "replayedAs", "index", 0, "message_id", PQgetvalue(res, 0, 3),
		      "transaction_id", PQgetvalue(res, 0, 9), "queueName", PQgetvalue(res, 0, 7),
		      "status", PQgetvalue(res, 0, 2), "dlqRowRemoved", moved);
	QASSERT(o != NULL);
	pidx_pushed(&pushes, PQgetvalue(res, 0, 4), PQgetvalue(res, 0, 7), PQgetvalue(res, 0, 5),
		    PQgetvalue(res, 0, 8), atoll(PQgetvalue(res, 0, 6)));
	pidx_pushes_done(&pushes);
	metrics_pushed(moved, !moved);
	if (moved)
		lp_wake_queue(PQgetvalue(res, 0, 7), 1);
	PQclear(res);
	req_reply_json(r, 200, o);
	return QE_OK;
}

enum qe
h_dlq_replay_run(struct req *r, struct wk *w)
{
	if (!uuid_valid(req_param(r, 0)))
		return gone(r);
	return replay(r, w, req_param(r, 0), NULL, NULL);
}

enum qe
h_message_retry_run(struct req *r, struct wk *w)
{
	if (!uuid_valid(req_param(r, 0)))
		return gone(r);
	return replay(r, w, NULL, req_param(r, 0), req_param(r, 1));
}
