/* h_push: validates push items in the HTTP thread, then stores the items of every push
 * request waiting for a worker in ONE call of queen_push (one transaction, one round trip):
 * group commit. Each item still gets its own verdict, in its request's input order.
 *
 * If the combined call fails, each request is retried alone, so one bad request cannot fail
 * the others it was coalesced with. When PostgreSQL cannot be reached (the connection is
 * down, not a refused statement), or while the spool is not empty, the items go to the
 * on-disk spool instead and answer "buffered" (spool.c). */
#include "h_push.h"
#include "dbpool.h"
#include "http.h"
#include "jsonio.h"
#include "log.h"
#include "longpoll.h"
#include "metrics.h"
#include "pindex.h"
#include "qassert.h"
#include "spool.h"
#include "uuid.h"
#include "workers.h"

#include <stdlib.h>
#include <string.h>

#define TXN_MAX 65535

struct push_job {
	size_t n;
	struct push_item *items;
};

static void
push_job_free(void *p)
{
	struct push_job *j = p;

	if (!j)
		return;
	for (size_t i = 0; i < j->n; i++)
		free(j->items[i].payload);
	free(j->items);
	free(j);
}

enum qe
h_push_parse_item(struct req *r, const char *list, size_t i, json_t *it, struct push_item *out)
{
	char err[128];
	json_t *q, *p, *t, *tr, *payload;

	if (!json_is_object(it))
		return req_fail(r, QE_BAD_BODY, "%s[%zu] must be an object", list, i);
	if (jio_field(it, "queue", JIO_STRING, &q, err, sizeof(err)) < 0 ||
	    jio_field(it, "partition", JIO_STRING, &p, err, sizeof(err)) < 0 ||
	    jio_field(it, "transactionId", JIO_STRING, &t, err, sizeof(err)) < 0 ||
	    jio_field(it, "traceId", JIO_STRING, &tr, err, sizeof(err)) < 0)
		return req_fail(r, QE_BAD_BODY, "%s[%zu]: %s", list, i, err);
	if (!q || json_string_length(q) == 0)
		return req_fail(r, QE_BAD_BODY, "%s[%zu]: queue is required", list, i);
	out->queue = json_string_value(q);
	out->partition = p ? json_string_value(p) : "Default";
	if (p && json_string_length(p) == 0)
		return req_fail(r, QE_BAD_BODY, "%s[%zu]: partition must not be empty", list, i);
	out->txn = t ? json_string_value(t) : NULL;
	out->trace = tr ? json_string_value(tr) : NULL;
	if (jio_has_ctl(out->queue) || jio_has_ctl(out->partition) ||
	    (out->txn && jio_has_ctl(out->txn)) || strlen(out->queue) != json_string_length(q) ||
	    (p && strlen(out->partition) != json_string_length(p)))
		return req_fail(r, QE_BAD_BODY,
				"%s[%zu]: control characters in queue, partition or transactionId",
				list, i);
	if (t && (json_string_length(t) == 0 || json_string_length(t) > TXN_MAX ||
		  strlen(out->txn) != json_string_length(t)))
		return req_fail(r, QE_BAD_BODY,
				"%s[%zu]: transactionId must be 1 to %d bytes", list, i, TXN_MAX);
	if (out->trace && strlen(out->trace) != json_string_length(tr))
		return req_fail(r, QE_BAD_BODY, "%s[%zu]: traceId holds a NUL character", list, i);
	payload = json_object_get(it, "payload");
	if (!payload)
		payload = json_object_get(it, "data");
	out->payload = payload ? json_dumps(payload, JSON_COMPACT | JSON_ENCODE_ANY)
			       : strdup("null");
	QASSERT(out->payload != NULL);
	return QE_OK;
}

enum qe
h_push_prepare(struct req *r)
{
	json_t *items = json_is_object(r->json) ? json_object_get(r->json, "items") : NULL;
	struct push_job *j;

	if (!json_is_object(r->json))
		return req_fail(r, QE_BAD_BODY, "expected an object with an items array");
	if (!json_is_array(items))
		return req_fail(r, QE_BAD_BODY, "items must be an array");
	j = calloc(1, sizeof(*j));
	QASSERT(j != NULL);
	r->job = j;
	r->job_free = push_job_free;
	j->items = calloc(json_array_size(items) + 1, sizeof(*j->items));
	QASSERT(j->items != NULL);
	for (size_t i = 0; i < json_array_size(items); i++) {
		enum qe e = h_push_parse_item(r, "items", i, json_array_get(items, i),
					      &j->items[j->n]);

		if (e != QE_OK)
			return e;
		j->n++;
	}
	r->weight = j->n ? j->n : 1;
	return QE_OK;
}

/* Builds the parameter arrays of queen_push for the items. keyed: every item carries a dedup
 * key, its transactionId or else its message id (spool replays). */
static void
build_params(struct push_item *const *items, size_t n, int keyed, struct strbuf sb[8])
{
	for (int k = 0; k < 8; k++) {
		sb_init(&sb[k]);
		sb_addc(&sb[k], '{');
	}
	for (size_t i = 0; i < n; i++) {
		const struct push_item *it = items[i];
		char pid[UUID_STR_LEN];
		int known = pidx_lookup(it->queue, it->partition, pid);

		QASSERT(it->id[0] != '\0');
		if (i)
			for (int m = 0; m < 8; m++)
				sb_addc(&sb[m], ',');
		sb_add_pgelem(&sb[0], known ? pid : NULL);
		sb_add_pgelem(&sb[1], it->queue);
		sb_add_pgelem(&sb[2], it->partition);
		sb_add_pgelem(&sb[3], it->id);
		sb_add_pgelem(&sb[4], it->txn ? it->txn : keyed ? it->id : NULL);
		sb_add_pgelem(&sb[5], it->trace);
		sb_add_pgelem(&sb[6], it->payload);
		sb_add_pgelem(&sb[7], NULL);
	}
	for (int k = 0; k < 8; k++)
		sb_addc(&sb[k], '}');
}

/* Learns the partitions the push touched and wakes the parked pops of each queue once. */
static void
note_result(PGresult *res, struct push_item *const *items, size_t n)
{
	const char *woken[64];
	int nwoken = 0;
	uint64_t queued = 0, dup = 0;

	for (int row = 0; row < PQntuples(res); row++) {
		long g = atol(PQgetvalue(res, row, 0));
		struct push_item *it = g >= 0 && (size_t)g < n ? items[g] : NULL;
		const char *status = PQgetvalue(res, row, 1);
		int seen = 0;

		QASSERT(it != NULL);
		it->status = strcmp(status, "queued") == 0 ? "queued" : "duplicate";
		snprintf(it->message_id, sizeof(it->message_id), "%s", PQgetvalue(res, row, 2));
		if (it->status[0] == 'q')
			queued++;
		else
			dup++;
		pidx_learn(PQgetvalue(res, row, 3), it->queue, NULL, NULL, PQgetvalue(res, row, 4),
			   it->partition, atoll(PQgetvalue(res, row, 6)));
		if (it->status[0] != 'q')
			continue;
		for (int k = 0; k < nwoken && !seen; k++)
			seen = strcmp(woken[k], it->queue) == 0;
		if (!seen && nwoken < (int)ARRAY_LEN(woken))
			woken[nwoken++] = it->queue;
	}
	metrics_pushed(queued, dup);
	metrics_push_commit();
	for (int k = 0; k < nwoken; k++)
		lp_wake_queue(woken[k], PQntuples(res));
}

enum qe
h_push_store(struct dbconn *db, struct push_item *const *items, size_t n, int keyed)
{
	struct strbuf sb[8];
	const char *params[8];
	PGresult *res;
	enum qe e;

	build_params(items, n, keyed, sb);
	for (int k = 0; k < 8; k++)
		params[k] = sb[k].buf;
	e = db_exec(db, keyed ? SQL_SPOOL_PUSH : SQL_PUSH, params, &res);
	for (int k = 0; k < 8; k++)
		sb_free(&sb[k]);
	if (e != QE_OK)
		return e;
	note_result(res, items, n);
	PQclear(res);
	return QE_OK;
}

static void
render(struct req *r)
{
	struct push_job *j = r->job;
	struct strbuf sb;

	sb_init(&sb);
	sb_addc(&sb, '[');
	for (size_t i = 0; i < j->n; i++) {
		struct push_item *it = &j->items[i];

		sb_addf(&sb, "%s{\"index\":%zu,\"message_id\":\"%s\",\"transaction_id\":",
			i ? "," : "", i, it->message_id);
		sb_add_jstr(&sb, it->txn ? it->txn : it->id);
		sb_adds(&sb, ",\"queueName\":");
		sb_add_jstr(&sb, it->queue);
		sb_addf(&sb, ",\"status\":\"%s\"", it->status);
		if (it->error) {
			sb_adds(&sb, ",\"error\":");
			sb_add_jstr(&sb, it->error);
		}
		sb_addc(&sb, '}');
	}
	sb_addc(&sb, ']');
	req_reply_sb(r, 201, &sb);
}

/* Every item of the requests, in order, with its message id assigned. The caller frees. */
static struct push_item **
flatten(struct req **rs, size_t n, size_t *count)
{
	struct push_item **flat;
	size_t total = 0, k = 0;

	for (size_t i = 0; i < n; i++)
		total += ((struct push_job *)rs[i]->job)->n;
	flat = calloc(total ? total : 1, sizeof(*flat));
	QASSERT(flat != NULL);
	for (size_t i = 0; i < n; i++) {
		struct push_job *j = rs[i]->job;

		for (size_t m = 0; m < j->n; m++, k++) {
			flat[k] = &j->items[m];
			if (!flat[k]->id[0])
				uuid_v7(flat[k]->id);
		}
	}
	*count = total;
	return flat;
}

void
h_push_run_many(struct req **rs, size_t n, struct wk *w, enum qe *rcs)
{
	size_t items;
	struct push_item **flat = flatten(rs, n, &items);
	enum qe e = QE_OK;

	if (items == 0) {
		free(flat);
		for (size_t i = 0; i < n; i++) {
			req_reply_text(rs[i], 201, "[]");
			rcs[i] = QE_OK;
		}
		return;
	}
	/* While the spool holds anything (or maintenance diverts pushes) new pushes queue up
	 * behind it, so a partition keeps its order. When the database cannot be reached the
	 * items go to the spool; a statement the database refuses stays a failure. */
	if (spool_diverting() || ((e = h_push_store(w->db, flat, items, 0)) != QE_OK &&
				  !db_ok(w->db))) {
		spool_append(flat, items);
		e = QE_OK;
	}
	free(flat);
	if (e != QE_OK && n > 1) {
		for (size_t i = 0; i < n; i++)
			rcs[i] = h_push_run(rs[i], w);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		rcs[i] = e;
		if (e == QE_OK)
			render(rs[i]);
		else
			req_fail(rs[i], e, "push not stored: the database refused it");
	}
}

enum qe
h_push_run(struct req *r, struct wk *w)
{
	enum qe e;

	h_push_run_many(&r, 1, w, &e);
	return e;
}
