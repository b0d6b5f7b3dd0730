/* h_push: validates push items in the HTTP thread, then stores the items of every push
 * request waiting for a worker in ONE call of queen_push (one transaction, one round trip):
 * group commit. Each item still gets its own verdict, in its request's input order.
 *
 * A batch that writes to many partitions is cut by partition into QUEEN_PUSH_LANES shards,
 * stored at once by as many workers, one transaction each: the partition row locks of one
 * shard never meet another's, so the shards run in parallel where a single transaction (or
 * two lanes locking the same partitions) would run one at a time. A partition is always in
 * the same shard, so its items keep their order; a request is answered once all its shards
 * are stored.
 *
 * If the combined call fails, each request is retried alone, so one bad request cannot fail
 * the others it was coalesced with. When PostgreSQL cannot be reached (the connection is
 * down, not a refused statement), or while the spool is not empty, the items go to the
 * on-disk spool instead and answer "buffered" (spool.c). */
#include "h_push.h"
#include "conf.h"
#include "dbpool.h"
#include "h_util.h"
#include "http.h"
#include "jscan.h"
#include "jsonio.h"
#include "lanes.h"
#include "log.h"
#include "longpoll.h"
#include "metrics.h"
#include "names.h"
#include "pace.h"
#include "pcrypt.h"
#include "pindex.h"
#include "pushsplit.h"
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
	char *arena;		/* decoded strings and payload texts of the items */
	char **sealed;		/* envelopes of the items of encrypted queues */
	size_t nsealed;
};

static void
push_job_free(void *p)
{
	struct push_job *j = p;

	if (!j)
		return;
	free(j->items);
	free(j->arena);
	for (size_t i = 0; i < j->nsealed; i++)
		free(j->sealed[i]);
	free(j->sealed);
	free(j);
}

/* The rules of SPEC 4 on an item's extracted fields, whichever parser extracted them. The
 * lengths are the decoded string lengths, so a NUL inside (\u0000) is caught. */
static enum qe
check_item(struct req *r, const char *list, size_t i, const struct push_item *it, size_t qlen,
	   size_t plen, size_t tlen, size_t trlen)
{
	const char *why;

	if (!it->queue || qlen == 0)
		return req_fail(r, QE_BAD_BODY, "%s[%zu]: queue is required", list, i);
	if (plen == 0)
		return req_fail(r, QE_BAD_BODY, "%s[%zu]: partition must not be empty", list, i);
	if ((why = names_invalid(it->queue, qlen)) != NULL)
		return req_fail(r, QE_BAD_BODY, "%s[%zu]: queue %s", list, i, why);
	if ((why = names_invalid(it->partition, plen)) != NULL)
		return req_fail(r, QE_BAD_BODY, "%s[%zu]: partition %s", list, i, why);
	if (it->txn && (jio_has_ctl(it->txn) || strlen(it->txn) != tlen))
		return req_fail(r, QE_BAD_BODY, "%s[%zu]: control characters in transactionId",
				list, i);
	if (it->txn && (tlen == 0 || tlen > TXN_MAX))
		return req_fail(r, QE_BAD_BODY, "%s[%zu]: transactionId must be 1 to %d bytes", list,
				i, TXN_MAX);
	if (it->trace && strlen(it->trace) != trlen)
		return req_fail(r, QE_BAD_BODY, "%s[%zu]: traceId holds a NUL character", list, i);
	return QE_OK;
}

/* Seals the payload of an item bound for an encrypted queue (SPEC 17), before anything can
 * store it. keep == NULL: the payload is malloc'd and replaced; else the envelope is added to
 * keep's list and the arena payload left alone. */
static enum qe
seal(struct req *r, struct push_item *it, struct push_job *keep)
{
	char *env;
	enum qe e = pcrypt_seal_for(it->queue, it->payload, strlen(it->payload), &env);

	if (e != QE_OK) {
		if (!keep) {
			free(it->payload);
			it->payload = NULL;
		}
		return req_fail(r, e, "%s", e == QE_NO_KEY ? "encryption key not configured"
							   : "payload encryption failed");
	}
	if (!env)
		return QE_OK;
	if (keep) {
		keep->sealed = realloc(keep->sealed, (keep->nsealed + 1) * sizeof(char *));
		QASSERT(keep->sealed != NULL);
		keep->sealed[keep->nsealed++] = env;
	} else {
		free(it->payload);
	}
	it->payload = env;
	return QE_OK;
}

enum qe
h_push_parse_item(struct req *r, const char *list, size_t i, json_t *it, struct push_item *out)
{
	char err[128];
	json_t *q, *p, *t, *tr, *payload;
	enum qe e;

	out->payload = NULL;
	if (!json_is_object(it))
		return req_fail(r, QE_BAD_BODY, "%s[%zu] must be an object", list, i);
	if (jio_field(it, "queue", JIO_STRING, &q, err, sizeof(err)) < 0 ||
	    jio_field(it, "partition", JIO_STRING, &p, err, sizeof(err)) < 0 ||
	    jio_field(it, "transactionId", JIO_STRING, &t, err, sizeof(err)) < 0 ||
	    jio_field(it, "traceId", JIO_STRING, &tr, err, sizeof(err)) < 0)
		return req_fail(r, QE_BAD_BODY, "%s[%zu]: %s", list, i, err);
	out->queue = q ? json_string_value(q) : NULL;
	out->partition = p ? json_string_value(p) : "Default";
	out->txn = t ? json_string_value(t) : NULL;
	out->trace = tr ? json_string_value(tr) : NULL;
	out->sub = r->auth.sub;	/* a producerSub in the body is ignored (SPEC 17) */
	e = check_item(r, list, i, out, q ? json_string_length(q) : 0,
		       p ? json_string_length(p) : 7, t ? json_string_length(t) : 0,
		       tr ? json_string_length(tr) : 0);
	if (e != QE_OK)
		return e;
	payload = json_object_get(it, "payload");
	if (!payload)
		payload = json_object_get(it, "data");
	out->payload = payload ? json_dumps(payload, JSON_COMPACT | JSON_ENCODE_ANY)
			       : strdup("null");
	QASSERT(out->payload != NULL);
	return seal(r, out, NULL);
}

/* Decodes the string (or null) member value at the scanner into the arena. */
static int
scan_opt_string(struct jscan *s, char **arena, const char **out, size_t *len)
{
	enum js_type t = js_peek(s);

	if (t == JS_NULL) {
		*out = NULL;
		*len = 0;
		return js_skip(s, NULL, NULL) < 0 ? -1 : 0;
	}
	if (t != JS_STRING)
		return 1;
	if (js_string(s, *arena, len) < 0)
		return -1;
	*out = *arena;
	*arena += *len + 1;
	return 0;
}

/* Scans one item object of the push body into it, strings decoded into the arena and the
 * payload copied there as the client wrote it (valid JSON text, checked by the scanner). */
static enum qe
scan_item(struct req *r, struct jscan *s, size_t i, char **arena, struct push_item *it)
{
	static const char *const names[] = { "queue", "partition", "transactionId", "traceId" };
	const char **fields[] = { &it->queue, &it->partition, &it->txn, &it->trace };
	size_t lens[4] = { 0, 7, 0, 0 }, klen, plen = 0;
	const char *payload = NULL, *data = NULL, *span;
	size_t dlen = 0, len;
	char key[24];
	int first = 1, rc;

	memset(it, 0, sizeof(*it));
	it->partition = "Default";
	it->sub = r->auth.sub;	/* a producerSub in the body is ignored (SPEC 17) */
	if (js_peek(s) != JS_OBJECT)
		return req_fail(r, QE_BAD_BODY, "items[%zu] must be an object", i);
	js_begin(s, '{');
	while ((rc = js_next(s, '}', &first, key, sizeof(key), &klen)) == 1) {
		int k;

		/* js_key_is: "queue\u0000x" is not "queue" */
		for (k = 0; k < 4 && !js_key_is(key, klen, names[k]); k++)
			;
		if (k < 4) {
			int bad = scan_opt_string(s, arena, fields[k], &lens[k]);

			if (bad < 0)
				return QE_BAD_BODY;
			if (bad > 0)
				return req_fail(r, QE_BAD_BODY, "items[%zu]: %s must be a string", i,
						names[k]);
			if (k == 1 && !it->partition) {
				it->partition = "Default";
				lens[1] = 7;
			}
			continue;
		}
		if (js_skip(s, &span, &len) < 0)
			return QE_BAD_BODY;
		if (js_key_is(key, klen, "payload")) {
			payload = span;
			plen = len;
		} else if (js_key_is(key, klen, "data")) {
			data = span;
			dlen = len;
		}
	}
	if (rc < 0)
		return QE_BAD_BODY;
	if (!payload) {
		payload = data ? data : "null";
		plen = data ? dlen : 4;
	}
	memcpy(*arena, payload, plen);
	(*arena)[plen] = '\0';
	it->payload = *arena;
	*arena += plen + 1;
	return check_item(r, "items", i, it, lens[0], lens[1], lens[2], lens[3]);
}

static enum qe
scan_items(struct req *r, struct jscan *s, struct push_job *j)
{
	size_t cap = 16;
	char *arena = j->arena;
	int first = 1, rc;

	j->items = calloc(cap, sizeof(*j->items));
	QASSERT(j->items != NULL);
	js_begin(s, '[');
	while ((rc = js_next(s, ']', &first, NULL, 0, NULL)) == 1) {
		enum qe e;

		if ((e = h_items_limit(r, j->n + 1)) != QE_OK)
			return e;
		if (j->n == cap) {
			cap *= 2;
			j->items = realloc(j->items, cap * sizeof(*j->items));
			QASSERT(j->items != NULL);
		}
		e = scan_item(r, s, j->n, &arena, &j->items[j->n]);
		if (e == QE_OK)
			e = seal(r, &j->items[j->n], j);
		if (e != QE_OK)
			return e;
		j->n++;
	}
	return rc < 0 ? QE_BAD_BODY : QE_OK;
}

enum qe
h_push_prepare(struct req *r)
{
	struct push_job *j = calloc(1, sizeof(*j));
	struct jscan s;
	char key[16];
	size_t klen;
	int first = 1, found = 0, rc = 0;
	enum qe e = QE_OK;

	QASSERT(j != NULL);
	r->job = j;
	r->job_free = push_job_free;
	/* Every decoded string and payload copy is at most as long as its text in the body,
	 * and they do not overlap: twice the body is room for them and their NULs. */
	j->arena = malloc(2 * r->body.len + 16);
	QASSERT(j->arena != NULL);
	mem_advise_huge(j->arena, 2 * r->body.len + 16);
	js_init(&s, r->body.buf ? r->body.buf : "", r->body.len);
	if (js_peek(&s) != JS_OBJECT)
		e = req_fail(r, QE_BAD_BODY, "expected an object with an items array");
	else
		js_begin(&s, '{');
	while (e == QE_OK && (rc = js_next(&s, '}', &first, key, sizeof(key), &klen)) == 1) {
		if (!js_key_is(key, klen, "items") || found) {
			if (js_skip(&s, NULL, NULL) < 0)
				e = QE_BAD_BODY;
			continue;
		}
		found = 1;
		if (js_peek(&s) != JS_ARRAY)
			e = req_fail(r, QE_BAD_BODY, "items must be an array");
		else
			e = scan_items(r, &s, j);
	}
	if (e == QE_OK && (rc < 0 || js_end(&s) < 0))
		e = QE_BAD_BODY;
	if (e == QE_OK && !found)
		e = req_fail(r, QE_BAD_BODY, "items must be an array");
	if (e == QE_BAD_BODY && s.err && !r->err_msg)
		req_fail(r, QE_BAD_BODY, "%s at byte %zu", s.err, s.err_at);
	if (e != QE_OK)
		return e;
	r->weight = j->n ? j->n : 1;
	return QE_OK;
}

/* The parameters of queen_push, all in binary: no escaping of every quote of every payload
 * here and no unescaping in PostgreSQL (a tenth of its work), and no uuid parsed from text
 * (array_in and uuid_in were 6% of a push's database CPU). */
#define PUSH_PAYLOADS 6

void
h_push_params_begin(struct strbuf *const sb[PUSH_PARAMS], size_t n, size_t payload_bytes)
{
	for (int k = 0; k < PUSH_PARAMS; k++)
		sb_pgbin_array(sb[k], n, k == 0 || k == 3 ? PG_UUIDOID : PG_TEXTOID);
	/* The payload array at its final size at once. Grown by doubling, it was copied at
	 * every step and rounded up to a power of two: a call of 140 KB of payloads (100
	 * sealed ones) took 256 KiB, the mmap threshold, so every call mapped and faulted in
	 * fresh pages. */
	sb_reserve(sb[PUSH_PAYLOADS], payload_bytes + 4 * n);
}

void
h_push_params_add(struct strbuf *const sb[PUSH_PARAMS], const struct push_item *it)
{
	char pid[UUID_STR_LEN];
	int known = pidx_lookup(it->queue, it->partition, pid);

	QASSERT(it->id[0] != '\0');
	sb_pgbin_uuid_elem(sb[0], known ? pid : NULL);
	sb_pgbin_text_elem(sb[1], it->queue);
	sb_pgbin_text_elem(sb[2], it->partition);
	sb_pgbin_uuid_elem(sb[3], it->id);
	sb_pgbin_text_elem(sb[4], it->txn);
	sb_pgbin_text_elem(sb[5], it->trace);
	sb_pgbin_text_elem(sb[PUSH_PAYLOADS], it->payload);
	sb_pgbin_text_elem(sb[7], it->sub);
}

/* The bytes of the items' payloads. */
static size_t
payload_bytes(struct push_item *const *items, size_t n)
{
	size_t bytes = 0;

	for (size_t i = 0; i < n; i++)
		bytes += strlen(items[i]->payload);
	return bytes;
}

/* Builds the parameter arrays of queen_push for the items in sb, emptied first (the passes of
 * a large push reuse one set: buffers of megabytes allocated afresh for every pass were
 * faulted in afresh, page by page, every time). */
static void
build_params(struct push_item *const *items, size_t n, struct strbuf sb[PUSH_PARAMS])
{
	struct strbuf *arr[PUSH_PARAMS];

	for (int k = 0; k < PUSH_PARAMS; k++) {
		sb_reset(&sb[k]);
		arr[k] = &sb[k];
	}
	h_push_params_begin(arr, n, payload_bytes(items, n));
	for (size_t i = 0; i < n; i++)
		h_push_params_add(arr, items[i]);
}

/* What a push learnt, gathered over the statements of its transaction and acted on once it
 * has committed: the partitions it wrote, the counts, the parked pops to wake. */
struct push_note {
	struct lp_wakes wakes;
	struct pidx_pushes pushes;
	uint64_t queued, dup;
};

/* Reads the verdicts of the items of one queen_push call into them. */
static void
note_rows(struct push_note *nt, PGresult *res, struct push_item *const *items, size_t n)
{
	for (int row = 0; row < PQntuples(res); row++) {
		long g = atol(PQgetvalue(res, row, 0));
		struct push_item *it = g >= 0 && (size_t)g < n ? items[g] : NULL;
		const char *status = PQgetvalue(res, row, 1);

		QASSERT(it != NULL);
		it->status = strcmp(status, "queued") == 0 ? "queued" : "duplicate";
		memcpy(it->message_id, PQgetvalue(res, row, 2), UUID_STR_LEN - 1);
		it->message_id[UUID_STR_LEN - 1] = '\0';
		if (it->status[0] == 'q')
			nt->queued++;
		else
			nt->dup++;
		pidx_pushed(&nt->pushes, PQgetvalue(res, row, 3), it->queue,
			    PQgetvalue(res, row, 4), it->partition, atoll(PQgetvalue(res, row, 6)));
		if (it->status[0] == 'q')
			lp_wakes_add(&nt->wakes, it->queue, 1);
	}
}

/* After the commit: the counts, and the parked pops of every queue woken once. */
static void
note_commit(struct push_note *nt)
{
	metrics_pushed(nt->queued, nt->dup);
	metrics_push_commit();
	pidx_pushes_done(&nt->pushes);
	lp_wakes_fire(&nt->wakes);
}

/* One call of queen_push (or of the spool's replay) for the items, its parameters built in
 * sb (PUSH_PARAMS buffers of the caller's). */
static enum qe
push_call(struct dbconn *db, enum sql_id id, struct push_item *const *items, size_t n,
	  struct strbuf *sb, PGresult **res)
{
	const char *params[PUSH_PARAMS];
	int lengths[PUSH_PARAMS], formats[PUSH_PARAMS];

	build_params(items, n, sb);
	for (int k = 0; k < PUSH_PARAMS; k++) {
		params[k] = sb[k].buf;
		lengths[k] = (int)sb[k].len;
		formats[k] = 1;
	}
	return db_exec_fmt(db, id, params, lengths, formats, res, NULL);
}

static void
params_init(struct strbuf sb[PUSH_PARAMS])
{
	for (int k = 0; k < PUSH_PARAMS; k++)
		sb_init(&sb[k]);
}

static void
params_free(struct strbuf sb[PUSH_PARAMS])
{
	for (int k = 0; k < PUSH_PARAMS; k++)
		sb_free(&sb[k]);
}

/* queen_push stores at most this many items a pass; a call with more loops over slices of
 * its arrays, and every slice of a plpgsql array parameter copies the whole array first: a
 * 64 MiB push spent a third of its database time copying its payloads ten times over. So
 * past PUSH_SLICE_BYTES of payloads the broker cuts the call into passes itself, run in one
 * transaction: stored whole or not at all, its offsets dense and in input order, a key
 * repeated in a later pass its duplicate, as in one call. */
#define PUSH_PASS 1000
#define PUSH_SLICE_BYTES (1024 * 1024)
#define PUSH_PASS_BYTES (2 * 1024 * 1024)

/* The end of the pass that starts at items[from]: at most PUSH_PASS items and, past its
 * first item, at most max_bytes of payloads (PUSH_PASS_BYTES, or PACE_PASS_BYTES while
 * other requests run: short passes with pauses between them, pace.h). */
static size_t
pass_end(struct push_item *const *items, size_t n, size_t from, size_t max_bytes)
{
	size_t to = from, bytes = 0;

	while (to < n && to - from < PUSH_PASS) {
		bytes += strlen(items[to]->payload);
		if (to > from && bytes > max_bytes)
			break;
		to++;
	}
	return to;
}

/* The passes of a large push in one transaction, their verdicts noted once it committed. */
static enum qe
push_passes(struct dbconn *db, struct push_item *const *items, size_t n, struct push_note *nt)
{
	struct pass {
		size_t from, to;
		PGresult *res;
	} *p = NULL;
	size_t np = 0, cap = 0;
	struct strbuf sb[PUSH_PARAMS];
	enum qe e = db_begin(db);
	int begun = e == QE_OK;
	uint64_t mark = pace_mark();

	params_init(sb);
	for (size_t from = 0; e == QE_OK && from < n; from = p[np++].to) {
		uint64_t t0 = now_us(), pause;
		/* Others ran beside the last pass: this one is short, and a pause follows. */
		int paced = pace_contended(mark);

		if (np == cap) {
			cap = cap ? 2 * cap : 16;
			p = realloc(p, cap * sizeof(*p));
			QASSERT(p != NULL);
		}
		mark = pace_mark();
		p[np].from = from;
		p[np].to = pass_end(items, n, from, paced ? PACE_PASS_BYTES : PUSH_PASS_BYTES);
		p[np].res = NULL;
		e = push_call(db, SQL_PUSH, items + from, p[np].to - from, sb, &p[np].res);
		/* Others run beside it: the cores are theirs for a while (pace.h). */
		if (e == QE_OK && p[np].to < n && (pause = pace_pause_us(mark, now_us() - t0)) > 0)
			pace_sleep(pause);
	}
	params_free(sb);
	if (e == QE_OK)
		e = db_commit(db);
	else if (begun)
		db_rollback(db);
	for (size_t k = 0; k < np; k++) {
		if (e == QE_OK)
			note_rows(nt, p[k].res, items + p[k].from, p[k].to - p[k].from);
		PQclear(p[k].res);
	}
	free(p);
	return e;
}

enum qe
h_push_store(struct dbconn *db, struct push_item *const *items, size_t n, int maybe_stored)
{
	struct push_note nt = { LP_WAKES_INIT, PIDX_PUSHES_INIT, 0, 0 };
	PGresult *res;
	enum qe e;

	if (!maybe_stored && n > PUSH_PASS && payload_bytes(items, n) > PUSH_SLICE_BYTES) {
		e = push_passes(db, items, n, &nt);
	} else {
		struct strbuf sb[PUSH_PARAMS];

		params_init(sb);
		e = push_call(db, maybe_stored ? SQL_SPOOL_PUSH : SQL_PUSH, items, n, sb, &res);
		params_free(sb);
		if (e == QE_OK) {
			note_rows(&nt, res, items, n);
			PQclear(res);
		}
	}
	if (e == QE_OK)
		note_commit(&nt);
	return e;
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

		/* No printf here: this runs for every item of every push. */
		sb_adds(&sb, i ? ",{\"index\":" : "{\"index\":");
		sb_add_i64(&sb, (int64_t)i);
		sb_adds(&sb, ",\"message_id\":\"");
		sb_adds(&sb, it->message_id);
		sb_adds(&sb, "\",\"transaction_id\":");
		sb_add_jstr(&sb, it->txn ? it->txn : it->id);
		sb_adds(&sb, ",\"queueName\":");
		sb_add_jstr(&sb, it->queue);
		sb_adds(&sb, ",\"status\":\"");
		sb_adds(&sb, it->status);
		sb_addc(&sb, '"');
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

static const char push_refused[] = "not stored: the database refused it";

#define PUSH_SHARDS_MAX 64

/* A shard of a push batch (its items' requests in owner) or of a spool replay (no owner). */
struct push_shard {
	struct push_item **items;
	size_t *owner;			/* the request of each item (index into rs), or NULL */
	size_t n;
	enum qe e;
	int refused;			/* replay: the database answered and refused it */
	int maybe_stored;		/* replay: some item may be stored already */
	struct wk_call call;
};

/* Cuts n items into nshards shards by partition (push_split: each partition whole, in input
 * order, the shards about even); owner (may be NULL) gives each item's request, copied
 * along. Returns how many shards are not empty; the caller frees each shard's items and
 * owner. */
static unsigned
shard_split(struct push_item *const *items, const size_t *owner, size_t n, unsigned nshards,
	    struct push_shard *sh)
{
	unsigned *of = malloc((n ? n : 1) * sizeof(*of)), used;
	size_t load[PUSH_SHARDS_MAX];

	QASSERT(of != NULL);
	memset(sh, 0, nshards * sizeof(sh[0]));
	used = push_split(items, n, nshards, of, load);
	for (unsigned s = 0; s < nshards; s++) {
		size_t m = load[s] ? load[s] : 1;

		sh[s].items = malloc(m * sizeof(*sh[s].items));
		sh[s].owner = owner ? malloc(m * sizeof(*sh[s].owner)) : NULL;
		QASSERT(sh[s].items && (!owner || sh[s].owner));
	}
	for (size_t i = 0; i < n; i++) {
		struct push_shard *t = &sh[of[i]];

		if (owner)
			t->owner[t->n] = owner[i];
		t->items[t->n++] = items[i];
	}
	free(of);
	return used;
}

/* Stores a shard of a spool replay on a lane's connection. */
static void
replay_store(struct dbconn *db, void *arg)
{
	struct push_shard *s = arg;

	s->e = h_push_store(db, s->items, s->n, s->maybe_stored);
	s->refused = s->e != QE_OK && db_ok(db);
}

enum qe
h_push_replay(struct dbconn *db, struct push_item *const *items, size_t n, int maybe_stored,
	      int *refused)
{
	struct push_shard sh[PUSH_SHARDS_MAX];
	struct lane_job jobs[PUSH_SHARDS_MAX];
	unsigned nshards = (unsigned)lanes_count(), used = 0;
	enum qe e = QE_OK;

	if (nshards > PUSH_SHARDS_MAX)
		nshards = PUSH_SHARDS_MAX;
	if (n < WK_SPLIT_MIN_ITEMS)
		nshards = 1;
	shard_split(items, NULL, n, nshards, sh);
	for (unsigned s = 0; s < nshards; s++)
		if (sh[s].n) {
			sh[s].maybe_stored = maybe_stored;
			jobs[used].fn = replay_store;
			jobs[used++].arg = &sh[s];
		}
	lanes_run(db, jobs, (int)used);
	*refused = 0;
	for (unsigned s = 0; s < nshards; s++) {
		if (sh[s].n && sh[s].e != QE_OK) {
			e = sh[s].e;
			*refused |= sh[s].refused;
		}
		free(sh[s].items);
	}
	return e;
}

/* Stores one shard; items of an unreachable database go to the spool (worker context). */
static void
shard_store(struct wk *w, void *arg)
{
	struct push_shard *s = arg;

	s->e = h_push_store(w->db, s->items, s->n, 0);
	if (s->e != QE_OK && !db_ok(w->db))
		s->e = spool_append(s->items, s->n, 1);	/* sent: it may have committed */
}

/* A shard the database refused: each request's part of it alone, so that one bad request
 * does not fail the others; a part refused alone is failed item by item. */
static void
shard_retry(struct push_shard *s, struct wk *w)
{
	struct push_item **part = malloc(s->n * sizeof(*part));
	size_t i = 0;

	QASSERT(part != NULL);
	while (i < s->n) {
		size_t m = 0, own = s->owner[i];
		enum qe e;

		for (; i < s->n && s->owner[i] == own; i++)
			part[m++] = s->items[i];
		e = h_push_store(w->db, part, m, 0);
		if (e != QE_OK && !db_ok(w->db))
			e = spool_append(part, m, 1) == QE_OK ? QE_OK : e;
		for (size_t k = 0; k < m && e != QE_OK; k++) {
			part[k]->status = "failed";
			part[k]->error = push_refused;
		}
	}
	free(part);
}

/* Stores the items in shards on several workers at once. Returns 0 (nothing done) when they
 * fall in fewer than two shards, or the request is heavy. */
static int
push_sharded(struct req **rs, size_t n, struct push_item **flat, size_t items, struct wk *w,
	     enum qe *rcs)
{
	unsigned nshards = qconf.push_lanes < PUSH_SHARDS_MAX ? (unsigned)qconf.push_lanes
							       : PUSH_SHARDS_MAX;
	struct push_shard sh[PUSH_SHARDS_MAX];
	unsigned used, mine = nshards;
	size_t k = 0, *own;

	/* A heavy request (it runs alone: rs[0]) is not cut: it is one transaction on its own
	 * lane's connection, so that one client's 64 MiB takes one backend's time, not every
	 * core's (with the shards on both cores of a two-core machine, the batch-1 pushes of
	 * other clients had a p99 2.4-3.4 times their own alone, against 2.0-2.3 times stored
	 * whole: limits-load.sh fairness), and is stored whole or not at all. */
	if (nshards < 2 || items < WK_SPLIT_MIN_ITEMS || wk_heavy(rs[0]))
		return 0;
	own = malloc(items * sizeof(*own));
	QASSERT(own != NULL);
	for (size_t i = 0; i < n; i++)
		for (size_t m = 0; m < ((struct push_job *)rs[i]->job)->n; m++)
			own[k++] = i;
	used = shard_split(flat, own, items, nshards, sh);
	free(own);
	if (used < 2) {
		for (unsigned s = 0; s < nshards; s++) {
			free(sh[s].items);
			free(sh[s].owner);
		}
		return 0;
	}
	/* The others to idle workers, one here; then wait for (or run) the rest. */
	for (unsigned s = 0; s < nshards; s++) {
		if (!sh[s].n)
			continue;
		if (mine == nshards) {
			mine = s;
			continue;
		}
		sh[s].call.fn = shard_store;
		sh[s].call.arg = &sh[s];
		wk_call_submit(&sh[s].call);
	}
	shard_store(w, &sh[mine]);
	for (unsigned s = 0; s < nshards; s++)
		if (sh[s].n && s != mine)
			wk_call_wait(w, &sh[s].call);
	for (unsigned s = 0; s < nshards; s++) {
		if (sh[s].n && sh[s].e != QE_OK)
			shard_retry(&sh[s], w);
		free(sh[s].items);
		free(sh[s].owner);
	}
	/* A request whose every item was refused fails as a whole, as an unsharded one does. */
	k = 0;
	for (size_t i = 0; i < n; i++) {
		struct push_job *j = rs[i]->job;
		size_t failed = 0;

		for (size_t m = 0; m < j->n; m++, k++)
			failed += flat[k]->error == push_refused;
		rcs[i] = failed == j->n ? QE_DB : QE_OK;
		if (rcs[i] == QE_OK)
			render(rs[i]);
		else
			req_fail(rs[i], rcs[i], "push not stored: the database refused it");
	}
	return 1;
}

/* How long a push waits for the drainer to empty the spool, the database being reachable,
 * before it joins the spool: a second, and at most half the statement timeout (no request
 * waits longer than QUEEN_STMT_TIMEOUT_MS). */
static int64_t
push_wait_ms(void)
{
	int64_t ms = qconf.stmt_timeout_ms > 0 ? qconf.stmt_timeout_ms / 2 : 1000;

	return ms < 1000 ? ms : 1000;
}

void
h_push_run_many(struct req **rs, size_t n, struct wk *w, enum qe *rcs)
{
	size_t items;
	struct push_item **flat = flatten(rs, n, &items);
	enum qe e = QE_OK;
	int sent;

	if (items == 0) {
		free(flat);
		for (size_t i = 0; i < n; i++) {
			req_reply_text(rs[i], 201, "[]");
			rcs[i] = QE_OK;
		}
		return;
	}
	/* While the spool holds anything (or maintenance diverts pushes) new pushes queue up
	 * behind it, so a partition keeps its order; with the database reachable they first
	 * wait a moment for the drainer to empty it, so that it empties under load instead of
	 * growing. When the database cannot be reached the items go to the spool (marked sent
	 * when the statement went out: it may have committed); a statement the database
	 * refuses stays a failure. */
	if (spool_diverting() && !spool_maintenance() && db_ensure(w->db) == QE_OK)
		spool_wait_drained(push_wait_ms());
	if (!spool_diverting() && push_sharded(rs, n, flat, items, w, rcs)) {
		free(flat);
		return;
	}
	sent = !spool_diverting();
	if (sent)
		e = h_push_store(w->db, flat, items, 0);
	if (!sent || (e != QE_OK && !db_ok(w->db))) {
		e = spool_append(flat, items, sent);
		if (e != QE_OK) {
			/* Neither stored nor spooled (the disk is full or failing): 503. */
			free(flat);
			for (size_t i = 0; i < n; i++)
				rcs[i] = req_fail(rs[i], QE_DB, "push not stored: the database is "
						  "unreachable and the spool cannot write");
			return;
		}
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
