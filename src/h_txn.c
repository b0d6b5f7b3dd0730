/* h_txn: the transaction route. The bundle is validated in the HTTP thread with the parsers of
 * the single routes (h_push_parse_item, h_ack_parse_item, h_kv_validate_ops,
 * h_timers_validate_ops), so what reaches the database is well formed; the worker then makes
 * one call of queen_txn (schema/functions/transaction.sql): one statement, one transaction.
 *
 * Group commit, as for pushes: a worker takes the bundles of every transaction request
 * waiting and sends them in ONE call, whose acks and pushes queen_txn merges into one
 * queen_ack and one queen_push. That call commits only if every bundle may; if it does not
 * (one bundle is refused, or two depend on each other's acks), each bundle is run again alone
 * and gets its own verdict. A refusal is rare in a healthy pipeline, so most bundles cost a
 * share of one round trip and one commit. The effect is that of the bundles run one after the
 * other, in arrival order.
 *
 * A verdict that undoes the bundle (duplicate push, rejected ack, lost kv precondition) is
 * raised by SQL as SQLSTATE QT001 with a JSON detail. That is an answer, not a database
 * failure, so this module runs its one statement itself rather than through db_exec (which
 * would log it, count it and drop the detail), and keeps db_exec's handling of real failures:
 * a lost connection is a 503 and makes every worker reconnect; a statement that failed on a
 * live connection is a 200 with reason db_error (a deadlock is first tried once more).
 *
 * Key invariant: the partition index and the parked pops hear of a bundle only after
 * PostgreSQL committed it; a bundle rolled back leaves no trace outside the database. */
#include "h_txn.h"
#include "dbpool.h"
#include "h_ack.h"
#include "h_kv.h"
#include "h_push.h"
#include "h_timers.h"
#include "h_util.h"
#include "http.h"
#include "jsonio.h"
#include "log.h"
#include "longpoll.h"
#include "names.h"
#include "metrics.h"
#include "pindex.h"
#include "qassert.h"
#include "spool.h"
#include "uuid.h"
#include "workers.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TXN_VERDICT_STATE "QT001"	/* transaction.sql: the call must not commit */
#define TXN_REGROUP_STATE "QT002"	/* transaction.sql: bundles of one call depend on each other */
#define TXN_PARAMS 20			/* parameters of queen_txn */
#define TXN_TRIES 2			/* a deadlock or serialization failure: once more */

/* One result of the operations part, in body order: a push item or an ack. */
struct txn_slot {
	int is_ack;
	size_t k;		/* index into push[] or ack[] */
	size_t op;		/* operations[op] */
	long sub;		/* operations[op].items[sub]; -1 for a flat push and an ack */
};

/* Why the bundle did not commit; reason NULL while nothing went wrong. */
struct txn_verdict {
	const char *reason;	/* duplicate | ack_rejected | kv_precondition | db_error */
	char *error;		/* the answer's "error" */
	json_t *fields;		/* machine fields naming the culprit, or NULL */
};

struct txn_job {
	size_t np, na, nslots, nreq;
	struct push_item *push;
	struct ack_item *ack;
	char **group;		/* per ack: the group SQL acked for (its own or resolved) */
	struct txn_slot *slot;
	const char **required;	/* lease ids, borrowed from the request's JSON */
	char *kv, *timers;	/* compact JSON arrays for queen_txn, NULL = none */
	char *kv_results, *timer_results;	/* JSON arrays from queen_txn */
	struct txn_verdict v;
	char id[UUID_STR_LEN];	/* the bundle's transactionId */
	size_t poff, aoff;	/* where its push items and acks start in a call's arrays */
};

static void
txn_job_free(void *p)
{
	struct txn_job *j = p;

	if (!j)
		return;
	for (size_t i = 0; j->push && i < j->np; i++)
		free(j->push[i].payload);
	for (size_t i = 0; j->ack && i < j->na; i++) {
		free(j->ack[i].err);
		free(j->group[i]);
	}
	free(j->push);
	free(j->ack);
	free(j->group);
	free(j->slot);
	free(j->required);
	free(j->kv);
	free(j->timers);
	free(j->kv_results);
	free(j->timer_results);
	free(j->v.error);
	json_decref(j->v.fields);
	free(j);
}

/* Records the verdict; the first one stands. Takes error (malloc'd) and fields. */
static void
verdict(struct txn_job *j, const char *reason, char *error, json_t *fields)
{
	if (j->v.reason) {
		free(error);
		json_decref(fields);
		return;
	}
	QASSERT(error != NULL);
	j->v.reason = reason;
	j->v.error = error;
	j->v.fields = fields;
}

static char * __attribute__((format(printf, 1, 2)))
xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	QASSERT(n >= 0);
	return s;
}

/* Position in results of push item k or ack k. */
static size_t
slot_of(const struct txn_job *j, int is_ack, size_t k)
{
	for (size_t s = 0; s < j->nslots; s++)
		if (j->slot[s].is_ack == is_ack && j->slot[s].k == k)
			return s;
	QASSERT(!"no slot for a push item or ack");
	return 0;
}

static void
verdict_ack(struct txn_job *j, size_t k, const char *why)
{
	size_t s = slot_of(j, 1, k);
	const char *txn = j->ack[k].txn;

	verdict(j, "ack_rejected",
		xasprintf("operations[%zu]: ack of transactionId \"%s\" rejected: %s",
			  j->slot[s].op, txn ? txn : "", why),
		json_pack("{sIss}", "failedIndex", (json_int_t)s, "ackError", why));
}

static void
verdict_duplicate(struct txn_job *j, size_t k, const char *original)
{
	size_t s = slot_of(j, 0, k);
	const struct push_item *it = &j->push[k];
	char where[64];

	if (j->slot[s].sub >= 0)
		snprintf(where, sizeof(where), "operations[%zu].items[%ld]", j->slot[s].op,
			 j->slot[s].sub);
	else
		snprintf(where, sizeof(where), "operations[%zu]", j->slot[s].op);
	verdict(j, "duplicate",
		xasprintf("%s: transactionId \"%s\" is already in queue \"%s\" partition \"%s\" "
			  "(message %s)", where, it->txn ? it->txn : it->id, it->queue,
			  it->partition, original),
		json_pack("{sIss}", "failedIndex", (json_int_t)s, "messageId", original));
}

/* First pass: sizes, op types, 400 for what is not an operation. */
static enum qe
count_ops(struct req *r, json_t *ops, struct txn_job *j)
{
	char err[128];
	json_t *op, *type, *items;
	size_t i;

	json_array_foreach(ops, i, op) {
		if (!json_is_object(op))
			return req_fail(r, QE_BAD_BODY, "operations[%zu] must be an object", i);
		if (jio_field(op, "type", JIO_STRING, &type, err, sizeof(err)) < 0)
			return req_fail(r, QE_BAD_BODY, "operations[%zu]: %s", i, err);
		if (!type)
			return req_fail(r, QE_BAD_BODY,
					"operations[%zu]: type is required: push or ack", i);
		if (strcmp(json_string_value(type), "ack") == 0) {
			j->na++;
			continue;
		}
		if (strcmp(json_string_value(type), "push") != 0)
			return req_fail(r, QE_BAD_BODY,
					"operations[%zu]: unknown type: expected push or ack", i);
		if (jio_field(op, "items", JIO_ARRAY, &items, err, sizeof(err)) < 0)
			return req_fail(r, QE_BAD_BODY, "operations[%zu]: %s", i, err);
		j->np += items ? json_array_size(items) : 1;
	}
	j->nslots = j->np + j->na;
	return h_items_limit(r, j->nslots);
}

/* Second pass: every push item and ack, with the single routes' parsers. */
static enum qe
parse_ops(struct req *r, json_t *ops, struct txn_job *j)
{
	size_t i, k, p = 0, a = 0, s = 0;
	json_t *op, *items, *it;
	char list[64];
	enum qe e;

	json_array_foreach(ops, i, op) {
		if (json_string_value(json_object_get(op, "type"))[0] == 'a') {
			e = h_ack_parse_item(r, "operations", i, op, NULL, &j->ack[a]);
			if (e != QE_OK)
				return e;
			j->slot[s++] = (struct txn_slot){ 1, a++, i, -1 };
			continue;
		}
		items = json_object_get(op, "items");
		if (!items || json_is_null(items)) {
			e = h_push_parse_item(r, "operations", i, op, &j->push[p]);
			if (e != QE_OK)
				return e;
			j->slot[s++] = (struct txn_slot){ 0, p++, i, -1 };
			continue;
		}
		snprintf(list, sizeof(list), "operations[%zu].items", i);
		json_array_foreach(items, k, it) {
			e = h_push_parse_item(r, list, k, it, &j->push[p]);
			if (e != QE_OK)
				return e;
			j->slot[s++] = (struct txn_slot){ 0, p++, i, (long)k };
		}
	}
	QASSERT(p == j->np && a == j->na && s == j->nslots);
	return QE_OK;
}

/* requiredLeases: strings; "" and null mean nothing. A string that is not a lease id cannot
 * be live: the bundle is rejected without asking the database. */
static enum qe
parse_required(struct req *r, json_t *req, struct txn_job *j)
{
	json_t *l;
	size_t i;

	j->required = calloc(json_array_size(req) + 1, sizeof(*j->required));
	QASSERT(j->required != NULL);
	json_array_foreach(req, i, l) {
		if (json_is_null(l))
			continue;
		if (!json_is_string(l))
			return req_fail(r, QE_BAD_BODY, "requiredLeases[%zu] must be a string", i);
		if (json_string_length(l) == 0)
			continue;
		if (!uuid_valid(json_string_value(l))) {
			verdict(j, "ack_rejected",
				xasprintf("requiredLeases[%zu] is not a lease id", i),
				json_pack("{sO}", "lease", l));
			continue;
		}
		j->required[j->nreq++] = json_string_value(l);
	}
	return QE_OK;
}

enum qe
h_txn_prepare(struct req *r)
{
	json_t *ops, *kv, *timers, *req, *norm;
	struct txn_job *j;
	char err[128];
	enum qe e;

	if (!json_is_object(r->json))
		return req_fail(r, QE_BAD_BODY, "expected an object with an operations array");
	if (jio_field(r->json, "operations", JIO_ARRAY, &ops, err, sizeof(err)) < 0 ||
	    jio_field(r->json, "kv", JIO_ARRAY, &kv, err, sizeof(err)) < 0 ||
	    jio_field(r->json, "timers", JIO_ARRAY, &timers, err, sizeof(err)) < 0 ||
	    jio_field(r->json, "requiredLeases", JIO_ARRAY, &req, err, sizeof(err)) < 0)
		return req_fail(r, QE_BAD_BODY, "%s", err);
	if (!ops && !kv && !timers)
		return req_fail(r, QE_BAD_BODY, "operations must be an array");

	j = calloc(1, sizeof(*j));
	QASSERT(j != NULL);
	r->job = j;
	r->job_free = txn_job_free;
	if (ops && (e = count_ops(r, ops, j)) != QE_OK)
		return e;
	j->push = calloc(j->np + 1, sizeof(*j->push));
	j->ack = calloc(j->na + 1, sizeof(*j->ack));
	j->group = calloc(j->na + 1, sizeof(*j->group));
	j->slot = calloc(j->nslots + 1, sizeof(*j->slot));
	QASSERT(j->push && j->ack && j->group && j->slot);
	if (ops && (e = parse_ops(r, ops, j)) != QE_OK)
		return e;

	if (kv && (e = h_kv_validate_ops(r, kv, 0)) != QE_OK)
		return e;
	if (kv && json_array_size(kv) > 0) {
		j->kv = json_dumps(kv, JSON_COMPACT);
		QASSERT(j->kv != NULL);
	}
	if (timers) {
		if ((e = h_timers_validate_ops(r, timers, &norm)) != QE_OK)
			return e;
		if (json_array_size(norm) > 0) {
			j->timers = json_dumps(norm, JSON_COMPACT);
			QASSERT(j->timers != NULL);
		}
		json_decref(norm);
	}

	/* Verdicts known before the database is asked: an ack /ack would fail at once. */
	for (size_t a = 0; a < j->na; a++)
		if (j->ack[a].fail) {
			verdict_ack(j, a, j->ack[a].fail);
			break;
		}
	if (req && (e = parse_required(r, req, j)) != QE_OK)
		return e;
	/* group commit sizing: what the call has to write */
	r->weight = j->nslots + (kv ? json_array_size(kv) : 0) +
		    (timers ? json_array_size(timers) : 0);
	if (r->weight == 0)
		r->weight = 1;
	return QE_OK;
}

/* The parameters of queen_txn that carry the push items: the eight arrays of queen_push
 * (h_push_params_add), in binary. */
static const int txn_push_param[PUSH_PARAMS] = { 0, 1, 2, 3, 4, 5, 6, 19 };

static int
txn_push_binary(int m)
{
	for (int k = 0; k < PUSH_PARAMS; k++)
		if (txn_push_param[k] == m)
			return 1;
	return 0;
}

/* The parameters of queen_txn for bundles jobs[0..n-1]: push items (8 arrays, binary), acks
 * (7), the required leases (2), kv and timers (one element per bundle), the bases of the kv
 * results. Sets each job's offsets in the merged push and ack arrays. */
static void
build_params(struct txn_job **jobs, size_t n, struct strbuf sb[TXN_PARAMS], int *has_kv,
	     int *has_timers)
{
	struct strbuf *push[PUSH_PARAMS];
	size_t np = 0, na = 0, items = 0, bytes = 0;

	for (int m = 0; m < TXN_PARAMS; m++) {
		sb_init(&sb[m]);
		if (!txn_push_binary(m))
			sb_addc(&sb[m], m == 16 || m == 17 ? '[' : '{');
	}
	for (size_t b = 0; b < n; b++)
		for (size_t i = 0; i < jobs[b]->np; i++, items++)
			bytes += strlen(jobs[b]->push[i].payload);
	for (int k = 0; k < PUSH_PARAMS; k++)
		push[k] = &sb[txn_push_param[k]];
	h_push_params_begin(push, items, bytes);
	*has_kv = *has_timers = 0;
	for (size_t b = 0; b < n; b++) {
		struct txn_job *j = jobs[b];
		char bundle[24];

		snprintf(bundle, sizeof(bundle), "%zu", b + 1);
		j->poff = np;
		j->aoff = na;
		for (size_t i = 0; i < j->np; i++, np++) {
			uuid_v7(j->push[i].id);
			h_push_params_add(push, &j->push[i]);
		}
		for (size_t i = 0; i < j->na; i++, na++) {
			struct ack_item *it = &j->ack[i];

			h_ack_item_elems(&sb[7], it);
			sb_add_pgnext(&sb[13], bundle);
		}
		for (size_t i = 0; i < j->nreq; i++) {
			sb_add_pgnext(&sb[14], j->required[i]);
			sb_add_pgnext(&sb[15], bundle);
		}
		sb_adds(&sb[16], b ? "," : "");
		sb_adds(&sb[16], j->kv ? j->kv : "null");
		sb_adds(&sb[17], b ? "," : "");
		sb_adds(&sb[17], j->timers ? j->timers : "null");
		*has_kv |= j->kv != NULL;
		*has_timers |= j->timers != NULL;
		sb_addf(&sb[18], "%s%zu", b ? "," : "", j->nslots);
	}
	for (int m = 0; m < TXN_PARAMS; m++)
		if (!txn_push_binary(m))
			sb_addc(&sb[m], m == 16 || m == 17 ? ']' : '}');
}

/* Turns the QT001 error of a one-bundle call into the verdict (schema/functions/transaction.sql has the detail). */
static void
verdict_from_sql(struct txn_job *j, const PGresult *res)
{
	const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
	json_t *d = detail ? json_loads(detail, JSON_DECODE_ANY, NULL) : NULL;
	const char *reason = json_string_value(json_object_get(d, "reason"));
	json_t *k;

	msg = msg ? msg : "transaction rolled back";
	if (reason && strcmp(reason, "ack_rejected") == 0 &&
	    json_is_integer(k = json_object_get(d, "ackIndex")) &&
	    (size_t)json_integer_value(k) < j->na) {
		const char *why = json_string_value(json_object_get(d, "ackError"));

		verdict_ack(j, (size_t)json_integer_value(k), why ? why : "rejected");
	} else if (reason && strcmp(reason, "duplicate") == 0 &&
		   json_is_integer(k = json_object_get(d, "pushIndex")) &&
		   (size_t)json_integer_value(k) < j->np) {
		const char *mid = json_string_value(json_object_get(d, "messageId"));

		verdict_duplicate(j, (size_t)json_integer_value(k), mid ? mid : "");
	} else {
		/* kv_precondition, ack_rejected for a required lease, anything newer than this */
		const char *why = !reason ? "db_error" :
				  strcmp(reason, "kv_precondition") == 0 ? "kv_precondition" :
				  strcmp(reason, "ack_rejected") == 0 ? "ack_rejected" : "db_error";

		json_object_del(d, "reason");
		json_object_del(d, "bundle");
		verdict(j, why, xasprintf("%s", msg), json_incref(d));
	}
	json_decref(d);
}

enum txn_outcome {
	TXN_COMMITTED,	/* *res: the rows */
	TXN_REFUSED,	/* *res: the QT001/QT002 error; nothing was written */
	TXN_FAILED,	/* *res: the error of a statement that failed on a live connection */
	TXN_DOWN,	/* the database is unreachable: nothing is known */
};

static int
transient(const char *state)
{
	return state && (strcmp(state, "40P01") == 0 || strcmp(state, "40001") == 0);
}

/* Runs queen_txn once over bundles jobs[0..n-1] (a deadlock or serialization failure is tried
 * once more). Failures are logged when n is 1; a group that fails is run again bundle by
 * bundle, which logs what is worth it. */
static enum txn_outcome
txn_exec(struct txn_job **jobs, size_t n, struct wk *w, PGresult **out)
{
	struct strbuf sb[TXN_PARAMS];
	const char *params[TXN_PARAMS];
	int lengths[TXN_PARAMS], formats[TXN_PARAMS];
	enum txn_outcome o = TXN_DOWN;
	int has_kv, has_timers;

	*out = NULL;
	build_params(jobs, n, sb, &has_kv, &has_timers);
	for (int m = 0; m < TXN_PARAMS; m++) {
		params[m] = sb[m].buf;
		formats[m] = txn_push_binary(m);
		lengths[m] = formats[m] ? (int)sb[m].len : 0;
	}
	params[16] = has_kv ? params[16] : NULL;
	params[17] = has_timers ? params[17] : NULL;
	for (int t = 1; t <= TXN_TRIES; t++) {
		PGresult *res, *err;
		const char *state, *msg;

		if (db_exec_fmt(w->db, SQL_TXN, params, lengths, formats, &res, &err) == QE_OK) {
			*out = res;
			o = TXN_COMMITTED;
			break;
		}
		if (!err)
			break;		/* unreachable: db_exec_fmt logged it */
		state = PQresultErrorField(err, PG_DIAG_SQLSTATE);
		msg = PQresultErrorField(err, PG_DIAG_MESSAGE_PRIMARY);
		if (state && (strcmp(state, TXN_VERDICT_STATE) == 0 ||
			      strcmp(state, TXN_REGROUP_STATE) == 0)) {
			*out = err;
			o = TXN_REFUSED;
			break;
		}
		if (t < TXN_TRIES && transient(state)) {
			log_info("transaction %s: %s, trying again", jobs[0]->id, msg);
			PQclear(err);
			continue;
		}
		if (n == 1) {
			metrics_db_error();
			log_warn("transaction %s failed: %s (SQLSTATE %s)", jobs[0]->id,
				 msg ? msg : "no message", state ? state : "none");
		}
		*out = err;
		o = TXN_FAILED;
		break;
	}
	for (int m = 0; m < TXN_PARAMS; m++)
		sb_free(&sb[m]);
	return o;
}

/* The bundle of merged push item (or ack) idx. */
static struct txn_job *
job_of(struct txn_job **jobs, size_t n, size_t idx, int is_ack)
{
	size_t lo = 0, hi = n;

	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;

		if ((is_ack ? jobs[mid]->aoff : jobs[mid]->poff) <= idx)
			lo = mid;
		else
			hi = mid;
	}
	return jobs[lo];
}

/* The call committed: record every bundle's results, teach the index, wake parked pops. */
static void
note_rows(struct txn_job **jobs, size_t n, PGresult *res)
{
	struct lp_wakes wakes = LP_WAKES_INIT;
	struct pidx_pushes pushes = PIDX_PUSHES_INIT;
	uint64_t queued = 0, ok = 0, nack = 0, dlq = 0;

	for (int row = 0; row < PQntuples(res); row++) {
		char kind = PQgetvalue(res, row, 0)[0];
		size_t idx = (size_t)atol(PQgetvalue(res, row, 1));
		const char *pid = PQgetvalue(res, row, 5);

		if (kind == 'k' || kind == 't') {
			struct txn_job *j;
			char **dst;

			QASSERT(idx < n);
			j = jobs[idx];
			dst = kind == 'k' ? &j->kv_results : &j->timer_results;
			if (!PQgetisnull(res, row, 12)) {
				*dst = strdup(PQgetvalue(res, row, 12));
				QASSERT(*dst != NULL);
			}
		} else if (kind == 'p') {
			struct txn_job *j = job_of(jobs, n, idx, 0);
			struct push_item *it;

			QASSERT(idx >= j->poff && idx - j->poff < j->np);
			it = &j->push[idx - j->poff];
			it->status = "queued";
			snprintf(it->message_id, sizeof(it->message_id), "%s",
				 PQgetvalue(res, row, 3));
			pidx_pushed(&pushes, PQgetvalue(res, row, 4), it->queue, pid,
				   it->partition, atoll(PQgetvalue(res, row, 6)));
			queued++;
			lp_wakes_add(&wakes, it->queue, 1);
		} else if (kind == 'a') {
			struct txn_job *j = job_of(jobs, n, idx, 1);
			struct ack_item *it;
			size_t k;

			QASSERT(idx >= j->aoff && idx - j->aoff < j->na);
			k = idx - j->aoff;
			it = &j->ack[k];
			it->success = PQgetvalue(res, row, 2)[0] == 't';
			j->group[k] = strdup(PQgetvalue(res, row, 7));
			QASSERT(j->group[k] != NULL);
			it->released = PQgetvalue(res, row, 9)[0] == 't';
			it->dlq = PQgetvalue(res, row, 10)[0] == 't';
			it->noop = PQgetvalue(res, row, 11)[0] == 't';
			if (!PQgetisnull(res, row, 5) && !PQgetisnull(res, row, 6))
				h_ack_note_cursor(&wakes, pid, j->group[k],
						  atoll(PQgetvalue(res, row, 6)), it->released);
			if (it->status[0] == 'c')
				ok++;
			else
				nack++;
			dlq += (uint64_t)it->dlq;
		}
	}
	if (queued)
		metrics_pushed(queued, 0);
	if (ok + nack)
		metrics_acked(ok, nack, dlq);
	pidx_pushes_done(&pushes);
	lp_wakes_fire(&wakes);
}

/* One bundle alone: every outcome becomes its verdict, except an unreachable database. */
static enum qe
run_one(struct txn_job *j, struct wk *w)
{
	PGresult *res;

	switch (txn_exec(&j, 1, w, &res)) {
	case TXN_COMMITTED:
		note_rows(&j, 1, res);
		break;
	case TXN_REFUSED:
		verdict_from_sql(j, res);
		break;
	case TXN_FAILED:
		/* PostgreSQL's own text stays in the log (txn_exec wrote it, with the request
		 * id): it may quote the client's data or the schema, and is no contract. */
		verdict(j, "db_error", xasprintf("database error"), NULL);
		break;
	case TXN_DOWN:
		return QE_DB;
	}
	PQclear(res);
	return QE_OK;
}

/* Appends the elements of the JSON array text arr (from SQL) to an array being built. */
static void
add_elements(struct strbuf *sb, const char *arr, int *first)
{
	size_t n = arr ? strlen(arr) : 0;

	if (n <= 2)
		return;
	if (!*first)
		sb_addc(sb, ',');
	sb_add(sb, arr + 1, n - 2);
	*first = 0;
}

static void
render_success(struct req *r, struct txn_job *j)
{
	struct strbuf sb;
	int first = 1;

	sb_init(&sb);
	sb_adds(&sb, "{\"transactionId\":\"");
	sb_adds(&sb, j->id);
	sb_adds(&sb, "\",\"success\":true,\"results\":[");
	for (size_t s = 0; s < j->nslots; s++, first = 0) {
		const struct txn_slot *sl = &j->slot[s];

		sb_addf(&sb, "%s{\"index\":%zu,", first ? "" : ",", s);
		if (!sl->is_ack) {
			const struct push_item *it = &j->push[sl->k];

			sb_adds(&sb, "\"type\":\"push\",\"success\":true,\"transactionId\":");
			sb_add_jstr(&sb, it->txn ? it->txn : it->id);
			sb_addf(&sb, ",\"messageId\":\"%s\",\"queueName\":", it->message_id);
			sb_add_jstr(&sb, it->queue);
		} else {
			const struct ack_item *it = &j->ack[sl->k];

			sb_addf(&sb, "\"type\":\"ack\",\"success\":%s,\"transactionId\":",
				it->success ? "true" : "false");
			sb_add_jstr(&sb, it->txn);
			sb_adds(&sb, ",\"partitionId\":");
			sb_add_jstr(&sb, it->pid);
			sb_adds(&sb, ",\"consumerGroup\":");
			sb_add_jstr(&sb, j->group[sl->k]);
			sb_adds(&sb, ",\"error\":");
			sb_add_jstr(&sb, it->err);
			sb_addf(&sb, ",\"leaseReleased\":%s,\"dlq\":%s,\"noop\":%s",
				it->released ? "true" : "false", it->dlq ? "true" : "false",
				it->noop ? "true" : "false");
		}
		sb_addc(&sb, '}');
	}
	add_elements(&sb, j->kv_results, &first);
	add_elements(&sb, j->timer_results, &first);
	sb_adds(&sb, "]}");
	req_reply_sb(r, 200, &sb);
}

static void
render_failure(struct req *r, struct txn_job *j)
{
	json_t *o = json_object();

	json_object_set_new(o, "transactionId", json_string(j->id));
	json_object_set_new(o, "success", json_false());
	json_object_set_new(o, "error", json_string(j->v.error));
	json_object_set_new(o, "reason", json_string(j->v.reason));
	if (j->v.fields)
		json_object_update_missing(o, j->v.fields);
	json_object_set_new(o, "results", json_array());
	req_reply_json(r, 200, o);
}

void
h_txn_run_many(struct req **rs, size_t n, struct wk *w, enum qe *rcs)
{
	struct txn_job **jobs = calloc(n + 1, sizeof(*jobs));
	size_t *who = calloc(n + 1, sizeof(*who));
	size_t m = 0;
	PGresult *res;
	enum txn_outcome o;

	QASSERT(jobs && who);
	for (size_t i = 0; i < n; i++) {
		struct txn_job *j = rs[i]->job;

		uuid_v7(j->id);
		rcs[i] = QE_OK;
		if (!j->v.reason && j->np && spool_diverting()) {
			/* Pushes go to the spool now (maintenance mode, or a spool draining):
			 * storing these around it would reorder partitions, and a bundle cannot
			 * be spooled (its acks need the database). */
			rcs[i] = req_fail(rs[i], QE_DB, "transaction not applied: pushes are "
					  "being spooled (maintenance mode or recovery), try again "
					  "later");
			continue;
		}
		if (!j->v.reason && (j->nslots || j->kv || j->timers || j->nreq)) {
			who[m] = i;
			jobs[m++] = j;
		}
	}
	if (m > 1) {
		o = txn_exec(jobs, m, w, &res);
		if (o == TXN_COMMITTED)
			note_rows(jobs, m, res);
		else
			log_debug("transaction group of %zu not committed (%s): each alone", m,
				  res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : "down");
		PQclear(res);
		if (o == TXN_COMMITTED)
			m = 0;
	}
	for (size_t k = 0; k < m; k++)
		rcs[who[k]] = run_one(jobs[k], w);
	for (size_t i = 0; i < n; i++) {
		struct txn_job *j = rs[i]->job;

		if (rcs[i] != QE_OK && !rs[i]->err_msg)
			rcs[i] = req_fail(rs[i], rcs[i],
					  "transaction not applied: database unavailable");
		else if (rcs[i] != QE_OK)
			continue;
		else if (j->v.reason)
			render_failure(rs[i], j);
		else
			render_success(rs[i], j);
	}
	free(jobs);
	free(who);
}

enum qe
h_txn_run(struct req *r, struct wk *w)
{
	enum qe rc;

	h_txn_run_many(&r, 1, w, &rc);
	return rc;
}
