/* h_ack: acknowledgements are offset commits, decided by queen_ack under the cursor row lock
 * (the commit rule of SPEC 6). This file validates items, normalises statuses, calls the
 * function once per request and renders one element per item, in order. */
#include "h_ack.h"
#include "dbpool.h"
#include "h_util.h"
#include "http.h"
#include "jscan.h"
#include "jsonio.h"
#include "names.h"
#include "longpoll.h"
#include "metrics.h"
#include "offmap.h"
#include "pindex.h"
#include "qassert.h"
#include "strbuf.h"
#include "uuid.h"
#include "workers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ack_job {
	size_t n;
	struct ack_item *items;
	char *arena;		/* the strings of a scanned body */
};

static void
ack_job_free(void *p)
{
	struct ack_job *j = p;

	if (!j)
		return;
	for (size_t i = 0; i < j->n; i++)
		free(j->items[i].err);
	free(j->items);
	free(j->arena);
	free(j);
}

/* Maps the accepted spellings onto the four statuses queen_ack knows; NULL when unknown. */
static const char *
normalise_status(const char *s)
{
	static const struct { const char *in, *out; } map[] = {
		{ "completed", "completed" }, { "success", "completed" }, { "acked", "completed" },
		{ "ok", "completed" }, { "failed", "failed" }, { "retry", "retry" },
		{ "dlq", "dlq" },
	};
	for (size_t i = 0; i < ARRAY_LEN(map); i++)
		if (strcmp(s, map[i].in) == 0)
			return map[i].out;
	return NULL;
}

/* The rules of SPEC 6 on one item's fields (NULL = absent or null; glen and llen the lengths
 * of group and lease), shared by the tree and the scanner. */
static enum qe
set_item(struct req *r, const char *list, size_t i, const char *txn, const char *pid,
	 const char *status, const char *g, size_t glen, const char *lease, size_t llen,
	 const char *error, const char *group, struct ack_item *it)
{
	const char *why;

	if (g && glen && (why = names_invalid(g, glen)) != NULL)
		return req_fail(r, QE_BAD_BODY, "%s[%zu]: consumerGroup %s", list, i, why);
	it->txn = txn;
	it->pid = pid;
	it->group = g && glen ? g : group;
	it->lease = lease && llen ? lease : NULL;
	it->error = error;
	it->status = normalise_status(status ? status : "completed");
	if (!it->status)
		it->fail = "invalid status: expected completed, failed, retry or dlq";
	else if (!it->txn)
		it->fail = "transactionId is required";
	else if (!it->pid)
		it->fail = "partitionId is required";
	else if (!uuid_valid(it->pid))
		it->fail = "partition not found";
	else if (it->lease && !uuid_valid(it->lease))
		it->fail = "invalid or expired lease";
	return QE_OK;
}

static const char *
str_or_null(json_t *v)
{
	return v ? json_string_value(v) : NULL;
}

enum qe
h_ack_parse_item(struct req *r, const char *list, size_t i, json_t *o, const char *group,
		 struct ack_item *it)
{
	char err[128];
	json_t *t, *p, *s, *g, *l, *e;

	if (!json_is_object(o))
		return req_fail(r, QE_BAD_BODY, "%s[%zu] must be an object", list, i);
	if (jio_field(o, "transactionId", JIO_STRING, &t, err, sizeof(err)) < 0 ||
	    jio_field(o, "partitionId", JIO_STRING, &p, err, sizeof(err)) < 0 ||
	    jio_field(o, "status", JIO_STRING, &s, err, sizeof(err)) < 0 ||
	    jio_field(o, "consumerGroup", JIO_STRING, &g, err, sizeof(err)) < 0 ||
	    jio_field(o, "leaseId", JIO_STRING, &l, err, sizeof(err)) < 0 ||
	    jio_field(o, "error", JIO_STRING, &e, err, sizeof(err)) < 0)
		return req_fail(r, QE_BAD_BODY, "%s[%zu]: %s", list, i, err);
	return set_item(r, list, i, str_or_null(t), str_or_null(p), str_or_null(s),
			str_or_null(g), g ? json_string_length(g) : 0, str_or_null(l),
			l ? json_string_length(l) : 0, str_or_null(e), group, it);
}

/* The item fields the scanner reads, in the order of struct scan_fields. */
static const char *const scan_keys[] = {
	"transactionId", "partitionId", "status", "consumerGroup", "leaseId", "error",
};

struct scan_fields {
	const char *v[6];
};

/* Decodes a string or null at the scanner into the arena; 0, or -1 for anything else (another
 * type, a NUL inside, a syntax error): the caller then leaves the body to the tree. */
static int
scan_str(struct jscan *s, char **arena, const char **out)
{
	const char *p0;
	size_t len;

	if (js_peek(s) == JS_NULL) {
		*out = NULL;
		return js_skip(s, NULL, NULL);
	}
	if (js_peek(s) != JS_STRING)
		return -1;
	p0 = s->p;
	/* A NUL comes only from a \u0000 escape: only a string with escapes (its text longer
	 * than it decodes to, quotes aside) is searched for one. */
	if (js_string(s, *arena, &len) < 0 ||
	    ((size_t)(s->p - p0) != len + 2 && strlen(*arena) != len))
		return -1;
	*out = *arena;
	*arena += len + 1;
	return 0;
}

/* Scans one item object into f; 0, or -1 (see scan_str; a repeated key too). */
static int
scan_fields(struct jscan *s, char **arena, struct scan_fields *f)
{
	char key[24];
	size_t klen;
	int first = 1, rc, seen = 0;

	memset(f, 0, sizeof(*f));
	if (js_peek(s) != JS_OBJECT)
		return -1;
	js_begin(s, '{');
	while ((rc = js_next(s, '}', &first, key, sizeof(key), &klen)) == 1) {
		size_t k;

		for (k = 0; k < ARRAY_LEN(scan_keys); k++)
			if (js_key_is(key, klen, scan_keys[k]))
				break;
		if (k == ARRAY_LEN(scan_keys)) {
			if (js_skip(s, NULL, NULL) < 0)
				return -1;
			continue;
		}
		if ((seen & (1 << k)) || scan_str(s, arena, &f->v[k]) < 0)
			return -1;
		seen |= 1 << k;
	}
	return rc < 0 ? -1 : 0;
}

/* The body of /ack/batch read by the scanner into the job, without a jansson tree (a batch of
 * hundreds of items, one per message popped, is the hot path of every consumer). 1 when it
 * took the body; 0 when the body is anything but the plain shape (a syntax error, a field of
 * another type, a repeated key, a NUL in a string): then the tree reads it, and every rule
 * and error message is the tree's. */
static int
scan_batch(struct req *r, struct ack_job *j, struct scan_fields **out, const char **group)
{
	struct scan_fields *f = NULL;
	struct jscan s;
	char key[24], *arena;
	size_t klen, cap = 0;
	int first = 1, rc, found = 0, has_group = 0;

	j->arena = arena = malloc(r->body.len + 16);
	QASSERT(arena != NULL);
	js_init(&s, r->body.buf ? r->body.buf : "", r->body.len);
	if (r->body.len == 0 || js_peek(&s) != JS_OBJECT)
		goto no;
	js_begin(&s, '{');
	while ((rc = js_next(&s, '}', &first, key, sizeof(key), &klen)) == 1) {
		if (js_key_is(key, klen, "consumerGroup")) {
			if (has_group++ || scan_str(&s, &arena, group) < 0)
				goto no;
			continue;
		}
		if (!js_key_is(key, klen, "acknowledgments")) {
			if (js_skip(&s, NULL, NULL) < 0)
				goto no;
			continue;
		}
		if (found++ || js_peek(&s) != JS_ARRAY)
			goto no;
		int afirst = 1;

		js_begin(&s, '[');
		while ((rc = js_next(&s, ']', &afirst, NULL, 0, NULL)) == 1) {
			if (j->n == cap) {
				cap = cap ? 2 * cap : 64;
				f = realloc(f, cap * sizeof(*f));
				QASSERT(f != NULL);
			}
			if (scan_fields(&s, &arena, &f[j->n]) < 0)
				goto no;
			j->n++;
		}
		if (rc < 0)
			goto no;
	}
	if (rc < 0 || js_end(&s) < 0 || !found)
		goto no;
	*out = f;
	return 1;
no:
	free(f);
	free(j->arena);
	j->arena = NULL;
	j->n = 0;
	*group = NULL;
	return 0;
}

enum qe
h_ack_prepare(struct req *r)
{
	int batch = strstr(r->path, "/batch") != NULL;
	json_t *arr, *g;
	const char *group = QUEUE_MODE, *sgroup = NULL;
	struct scan_fields *f = NULL;
	struct ack_job *j;
	char err[128];
	size_t n;
	enum qe e;

	j = calloc(1, sizeof(*j));
	QASSERT(j != NULL);
	r->job = j;
	r->job_free = ack_job_free;
	if (batch && scan_batch(r, j, &f, &sgroup)) {
		const char *why;

		n = j->n;
		j->n = 0;
		if (sgroup && *sgroup) {
			if ((why = names_invalid(sgroup, strlen(sgroup))) != NULL)
				e = req_fail(r, QE_BAD_BODY, "consumerGroup %s", why);
			else
				e = QE_OK;
			group = sgroup;
		} else {
			e = QE_OK;
		}
		if (e == QE_OK)
			e = h_items_limit(r, n);
		if (e == QE_OK) {
			j->items = calloc(n + 1, sizeof(*j->items));
			QASSERT(j->items != NULL);
		}
		for (size_t i = 0; e == QE_OK && i < n; i++) {
			const char *const *v = f[i].v;

			e = set_item(r, "acknowledgments", i, v[0], v[1], v[2], v[3],
				     v[3] ? strlen(v[3]) : 0, v[4], v[4] ? strlen(v[4]) : 0, v[5],
				     group, &j->items[i]);
			if (e == QE_OK)
				j->n++;
		}
		free(f);
		return e;
	}
	if (batch && (e = req_json_body(r)) != QE_OK)
		return e;
	if (!json_is_object(r->json))
		return req_fail(r, QE_BAD_BODY, "expected an object");
	if (jio_field(r->json, "consumerGroup", JIO_STRING, &g, err, sizeof(err)) < 0)
		return req_fail(r, QE_BAD_BODY, "%s", err);
	if (g && json_string_length(g)) {
		const char *why = names_invalid(json_string_value(g), json_string_length(g));

		if (why)
			return req_fail(r, QE_BAD_BODY, "consumerGroup %s", why);
		group = json_string_value(g);
	}
	arr = NULL;
	if (batch) {
		if (jio_field(r->json, "acknowledgments", JIO_ARRAY, &arr, err, sizeof(err)) < 0)
			return req_fail(r, QE_BAD_BODY, "%s", err);
		if (!arr)
			return req_fail(r, QE_BAD_BODY, "acknowledgments must be an array");
	}
	n = batch ? json_array_size(arr) : 1;
	if ((e = h_items_limit(r, n)) != QE_OK)
		return e;
	j->items = calloc(n + 1, sizeof(*j->items));
	QASSERT(j->items != NULL);
	for (size_t i = 0; i < n; i++) {
		e = h_ack_parse_item(r, "acknowledgments", i,
				     batch ? json_array_get(arr, i) : r->json, group, &j->items[i]);
		if (e != QE_OK)
			return e;
		j->n++;
	}
	return QE_OK;
}

static void
render(struct req *r, struct ack_job *j)
{
	struct strbuf sb;

	sb_init(&sb);
	sb_addc(&sb, '[');
	for (size_t i = 0; i < j->n; i++) {
		struct ack_item *it = &j->items[i];

		/* No format strings: this runs once per item, hundreds per request. */
		sb_adds(&sb, i ? ",{\"index\":" : "{\"index\":");
		sb_add_i64(&sb, (int64_t)i);
		sb_adds(&sb, ",\"transactionId\":");
		sb_add_jstr(&sb, it->txn);
		sb_adds(&sb, it->success ? ",\"success\":true,\"error\":"
					 : ",\"success\":false,\"error\":");
		sb_add_jstr(&sb, it->fail ? it->fail : it->err);
		sb_adds(&sb, it->released ? ",\"leaseReleased\":true" : ",\"leaseReleased\":false");
		sb_adds(&sb, it->dlq ? ",\"dlq\":true" : ",\"dlq\":false");
		sb_adds(&sb, it->noop ? ",\"noop\":true}" : ",\"noop\":false}");
	}
	sb_addc(&sb, ']');
	req_reply_sb(r, 200, &sb);
}

void
h_ack_note_cursor(struct lp_wakes *wakes, const char *pid, const char *group, int64_t committed,
		  int released)
{
	char queue[NAMES_BUF];

	if (!released)
		pidx_cursor(pid, pidx_group_hash(group), committed, -1);
	else if (pidx_cursor_queue(pid, pidx_group_hash(group), committed, 0, queue,
				   sizeof(queue)))
		lp_wakes_add_copy(wakes, queue, 1);
}

/* The end of the run of items from i on that name the lease, partition and group item i
 * names: one span of the offset map, one cursor. An item failed before SQL ends it. */
static size_t
span_end(const struct ack_job *j, size_t i)
{
	const struct ack_item *a = &j->items[i];
	size_t k = i + 1;

	while (k < j->n && !j->items[k].fail && j->items[k].lease &&
	       strcmp(j->items[k].lease, a->lease) == 0 && strcmp(j->items[k].pid, a->pid) == 0 &&
	       strcmp(j->items[k].group, a->group) == 0)
		k++;
	return k;
}

/* 1 when the ack can take the keyed path (queen_ack_known): every item bound for SQL is a
 * completed ack naming its lease, of a message this broker's own pop delivered under it;
 * offs[i] is then its offset. txns: room for n pointers. */
static int
known_offsets(const struct ack_job *j, const char **txns, int64_t *offs)
{
	for (size_t i = 0, end; i < j->n; i = end) {
		const struct ack_item *it = &j->items[i];

		if (it->fail) {
			end = i + 1;
			continue;
		}
		if (!it->lease)
			return 0;
		end = span_end(j, i);
		for (size_t k = i; k < end; k++) {
			if (strcmp(j->items[k].status, "completed") != 0)
				return 0;
			txns[k - i] = j->items[k].txn;
		}
		if (om_get_run(it->lease, it->pid, end - i, txns, offs + i) != end - i)
			return 0;
	}
	return 1;
}

/* The offset map forgets what was acked, a span's run at a time. */
static void
forget_acked(const struct ack_job *j, const char **txns)
{
	for (size_t i = 0, end; i < j->n; i = end) {
		size_t m = 0;

		if (j->items[i].fail || !j->items[i].lease) {
			end = i + 1;
			continue;
		}
		end = span_end(j, i);
		for (size_t k = i; k < end; k++)
			if (j->items[k].success)
				txns[m++] = j->items[k].txn;
		if (m)
			om_del_run(j->items[i].lease, j->items[i].pid, m, txns);
	}
}

void
h_ack_item_elems(struct strbuf *sb, const struct ack_item *it)
{
	sb_add_pgnext(&sb[0], it->group);
	sb_add_pgnext(&sb[1], it->pid);
	sb_add_pgnext(&sb[2], it->txn);
	sb_add_pgnext(&sb[3], it->status);
	sb_add_pgnext(&sb[4], it->lease);
	sb_add_pgnext(&sb[5], it->error);
}

/* The arrays of queen_ack: one element per item of sel. */
static void
item_arrays(const struct ack_job *j, const size_t *sel, size_t nsel, struct strbuf *sb)
{
	for (size_t s = 0; s < nsel; s++)
		h_ack_item_elems(sb, &j->items[sel[s]]);
}

/* The arrays of queen_ack_known: one element per run of items of one (partition, group,
 * lease): group, partition, lease, lowest and highest offset, items. */
static void
run_arrays(const struct ack_job *j, const int64_t *offs, struct strbuf *sb)
{
	char n[24];

	for (size_t i = 0, end; i < j->n; i = end) {
		const struct ack_item *it = &j->items[i];
		int64_t lo = offs[i], hi = offs[i];

		if (it->fail) {
			end = i + 1;
			continue;
		}
		end = span_end(j, i);
		for (size_t k = i; k < end; k++) {
			lo = offs[k] < lo ? offs[k] : lo;
			hi = offs[k] > hi ? offs[k] : hi;
		}
		sb_add_pgnext(&sb[0], it->group);
		sb_add_pgnext(&sb[1], it->pid);
		sb_add_pgnext(&sb[2], it->lease);
		snprintf(n, sizeof(n), "%lld", (long long)lo);
		sb_add_pgnext(&sb[3], n);
		snprintf(n, sizeof(n), "%lld", (long long)hi);
		sb_add_pgnext(&sb[4], n);
		snprintf(n, sizeof(n), "%zu", end - i);
		sb_add_pgnext(&sb[5], n);
	}
}

#define ACK_PARAMS 6

struct ack_tally {
	uint64_t ok, nack, dlq;
};

/* Runs the ack statement id over the array literals sb (built by fill, closed here) and gives
 * each item a row answers its verdict: sel[s] is the item of the s-th element the arrays
 * describe, and a row answers n of them from its idx on. answered[i] is set for each. */
static enum qe
ack_exec(struct wk *w, struct ack_job *j, enum sql_id id, struct strbuf *sb, const size_t *sel,
	 size_t nsel, unsigned char *answered, struct ack_tally *t)
{
	const char *params[ACK_PARAMS];
	const char *last_pid = "", *last_cmt = "", *last_group = "";
	int last_released = -1;
	struct lp_wakes wakes = LP_WAKES_INIT;
	PGresult *res;
	enum qe e;

	for (int k = 0; k < ACK_PARAMS; k++) {
		sb_addc(&sb[k], '}');
		params[k] = sb[k].buf;
	}
	e = db_exec(w->db, id, params, &res);
	if (e != QE_OK)
		return e;
	for (int row = 0; row < PQntuples(res); row++) {
		size_t idx = (size_t)atol(PQgetvalue(res, row, 0));
		size_t n = (size_t)atol(PQgetvalue(res, row, 8));
		struct ack_item *it = NULL;

		QASSERT(n >= 1 && idx < nsel && n <= nsel - idx);
		for (size_t k = 0; k < n; k++) {
			it = &j->items[sel[idx + k]];
			answered[sel[idx + k]] = 1;
			it->success = PQgetvalue(res, row, 1)[0] == 't';
			if (!PQgetisnull(res, row, 2))
				it->err = strdup(PQgetvalue(res, row, 2));
			it->released = PQgetvalue(res, row, 3)[0] == 't';
			it->dlq = PQgetvalue(res, row, 4)[0] == 't';
			it->noop = PQgetvalue(res, row, 5)[0] == 't';
			if (it->success && it->status[0] == 'c')
				t->ok++;
			else if (it->success)
				t->nack++;
			t->dlq += (uint64_t)it->dlq;
		}
		/* Rows of one partition come together and say the same of its cursor: tell
		 * the index once per partition. */
		if (!PQgetisnull(res, row, 6) && !PQgetisnull(res, row, 7) &&
		    (strcmp(PQgetvalue(res, row, 6), last_pid) != 0 ||
		     strcmp(PQgetvalue(res, row, 7), last_cmt) != 0 ||
		     strcmp(it->group, last_group) != 0 || it->released != last_released)) {
			last_pid = PQgetvalue(res, row, 6);
			last_group = it->group;
			last_cmt = PQgetvalue(res, row, 7);
			last_released = it->released;
			h_ack_note_cursor(&wakes, last_pid, it->group, atoll(last_cmt),
					  it->released);
		}
	}
	lp_wakes_fire(&wakes);
	PQclear(res);
	return e;
}

static void
arrays_open(struct strbuf *sb)
{
	for (int k = 0; k < ACK_PARAMS; k++) {
		sb_reset(&sb[k]);
		sb_addc(&sb[k], '{');
	}
}

enum qe
h_ack_run(struct req *r, struct wk *w)
{
	struct ack_job *j = r->job;
	struct strbuf sb[ACK_PARAMS];
	struct ack_tally t = { 0, 0, 0 };
	size_t n = j->n ? j->n : 1, nsel = 0;
	const char **txns = malloc(sizeof(*txns) * n);
	int64_t *offs = malloc(sizeof(*offs) * n);
	size_t *sel = malloc(sizeof(*sel) * n);
	unsigned char *answered = calloc(n, 1);
	enum qe e = QE_OK;

	QASSERT(txns != NULL && offs != NULL && sel != NULL && answered != NULL);
	for (int k = 0; k < ACK_PARAMS; k++)
		sb_init(&sb[k]);
	/* Every item a completed ack of what this broker delivered: one keyed update per
	 * (partition, group), no segment read, a row per run it wrote. */
	if (known_offsets(j, txns, offs)) {
		for (size_t i = 0; i < j->n; i++)
			if (!j->items[i].fail)
				sel[nsel++] = i;
		if (nsel) {
			arrays_open(sb);
			run_arrays(j, offs, sb);
			e = ack_exec(w, j, SQL_ACK_KNOWN, sb, sel, nsel, answered, &t);
		}
	}
	/* Every item the keyed path did not take (a lease expired or held by another, a
	 * re-ack, or the path could not be used): queen_ack, a verdict per item. */
	nsel = 0;
	for (size_t i = 0; i < j->n && e == QE_OK; i++)
		if (!j->items[i].fail && !answered[i])
			sel[nsel++] = i;
	if (nsel) {
		arrays_open(sb);
		item_arrays(j, sel, nsel, sb);
		e = ack_exec(w, j, SQL_ACK, sb, sel, nsel, answered, &t);
	}
	if (e == QE_OK)
		forget_acked(j, txns);
	for (int k = 0; k < ACK_PARAMS; k++)
		sb_free(&sb[k]);
	free(txns);
	free(offs);
	free(sel);
	free(answered);
	/* The keyed statement commits on its own: when the second one fails, what the first
	 * took is acked (counted, and acked again it is a success that changes nothing). */
	metrics_acked(t.ok, t.nack, t.dlq);
	if (e != QE_OK)
		return req_fail(r, e, t.ok + t.nack + t.dlq > 0
				? "ack partly applied: database unavailable (acking again is safe)"
				: "ack not applied: database unavailable");
	render(r, j);
	return QE_OK;
}

struct extend_job {
	char lease[UUID_STR_LEN];
	int64_t seconds;
};

enum qe
h_extend_prepare(struct req *r)
{
	struct extend_job *j = calloc(1, sizeof(*j));
	json_t *s = NULL;
	char err[128];

	QASSERT(j != NULL);
	r->job = j;
	r->job_free = free;
	j->seconds = 60;
	if (r->json && !json_is_object(r->json))
		return req_fail(r, QE_BAD_BODY, "expected an object");
	if (r->json && jio_field(r->json, "seconds", JIO_INT, &s, err, sizeof(err)) < 0)
		return req_fail(r, QE_BAD_BODY, "%s", err);
	if (s) {
		j->seconds = json_integer_value(s);
		if (j->seconds < 1 || j->seconds > 86400 * 7)
			return req_fail(r, QE_BAD_BODY, "seconds must be in [1, 604800]");
	}
	snprintf(j->lease, sizeof(j->lease), "%s", req_param(r, 0));
	return QE_OK;
}

enum qe
h_extend_run(struct req *r, struct wk *w)
{
	struct extend_job *j = r->job;
	char secs[24];
	const char *params[2] = { j->lease, secs };
	PGresult *res = NULL;
	int renewed = 0;
	const char *at = NULL;
	struct strbuf sb;
	enum qe e = QE_OK;

	snprintf(secs, sizeof(secs), "%lld", (long long)j->seconds);
	if (uuid_valid(j->lease)) {
		e = db_exec(w->db, SQL_EXTEND, params, &res);
		if (e != QE_OK)
			return req_fail(r, e, "lease not extended: database unavailable");
		if (PQntuples(res) == 1) {
			renewed = atoi(PQgetvalue(res, 0, 0));
			at = PQgetisnull(res, 0, 1) ? NULL : PQgetvalue(res, 0, 1);
		}
	}
	sb_init(&sb);
	sb_adds(&sb, "{\"leaseId\":");
	sb_add_jstr(&sb, j->lease);
	sb_addf(&sb, ",\"success\":%s,\"renewed\":%d", renewed ? "true" : "false", renewed);
	sb_adds(&sb, ",\"expiresAt\":");
	sb_add_jstr(&sb, renewed ? at : NULL);
	sb_adds(&sb, ",\"newExpiresAt\":");
	sb_add_jstr(&sb, renewed ? at : NULL);
	sb_adds(&sb, ",\"lease_expires_at\":");
	sb_add_jstr(&sb, renewed ? at : NULL);
	sb_addc(&sb, '}');
	PQclear(res);
	req_reply_sb(r, 200, &sb);
	return QE_OK;
}
