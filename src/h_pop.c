/* h_pop: GET /api/v1/pop/queue/:queue[/partition/:partition] and GET /api/v1/pop.
 *
 * The partition index chooses the candidate partitions (and, with autopilot, how many and
 * how large); queen_pop claims them with SKIP LOCKED and reads the messages in one round
 * trip. When nothing is deliverable and wait=true, the request parks in longpoll.c without a
 * connection and comes back here when woken. */
#include "h_pop.h"
#include "h_system.h"
#include "conf.h"
#include "dbpool.h"
#include "http.h"
#include "jsonio.h"
#include "longpoll.h"
#include "metrics.h"
#include "names.h"
#include "offmap.h"
#include "pcrypt.h"
#include "pgbin.h"
#include "pindex.h"
#include "qassert.h"
#include "router.h"
#include "uuid.h"
#include "workers.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BATCH 10000
/* Rows of cursors learned by one pop past which their memory is handed back at once. */
#define LEARN_TRIM_ROWS 100000
#define MAX_CANDIDATES 256

struct pop_job {
	const char *queue;		/* NULL on the discovery route */
	const char *partition;
	const char *ns, *task;
	const char *group;
	int64_t batch, partitions, lease_seconds;
	int batch_sent, partitions_sent, autopilot;
	int wait, auto_ack, lease_given;
	const char *sub_mode;
	char sub_from[32];		/* ISO, or "" */
	int64_t deadline_ms;
	uint64_t gh;
	int parked;			/* parked before: holds a long-poll slot */
	int unknown;			/* the index did not know the queue at the last try */
	int64_t recheck_gap;		/* ms between rechecks that found nothing */
};

static enum qe
bad(struct req *r, const char *what)
{
	return req_fail(r, QE_BAD_REQUEST, "%s", what);
}

static enum qe
query_int(struct req *r, const char *key, int64_t min, int64_t max, int64_t *out, int *sent)
{
	const char *v = req_query(r, key);

	if (sent)
		*sent = v != NULL;
	if (!v)
		return QE_OK;
	if (jio_parse_int(v, min, max, out) < 0)
		return req_fail(r, QE_BAD_REQUEST, "%s must be an integer in [%lld, %lld]", key,
				(long long)min, (long long)max);
	return QE_OK;
}

static enum qe
query_bool(struct req *r, const char *key, int *out)
{
	const char *v = req_query(r, key);

	if (v && jio_parse_bool(v, out) < 0)
		return req_fail(r, QE_BAD_REQUEST, "%s must be true or false", key);
	return QE_OK;
}

enum qe
h_pop_prepare(struct req *r)
{
	struct pop_job *j = calloc(1, sizeof(*j));
	const char *v;
	int64_t timeout = qconf.default_timeout;
	enum qe e;

	QASSERT(j != NULL);
	r->job = j;
	r->job_free = free;
	if (r->nparams >= 1)
		j->queue = req_param(r, 0);
	if (r->nparams >= 2)
		j->partition = req_param(r, 1);
	j->batch = 200;
	j->partitions = 1;
	if ((e = query_int(r, "batch", 1, MAX_BATCH, &j->batch, &j->batch_sent)) ||
	    (e = query_int(r, "partitions", 1, 1000, &j->partitions, &j->partitions_sent)) ||
	    (e = query_int(r, "timeout", 0, 3600000, &timeout, NULL)) ||
	    (e = query_int(r, "leaseSeconds", 1, 86400 * 7, &j->lease_seconds, &j->lease_given)) ||
	    (e = query_bool(r, "wait", &j->wait)) || (e = query_bool(r, "autoAck", &j->auto_ack)) ||
	    (e = query_bool(r, "autopilot", &j->autopilot)))
		return e;
	j->group = req_query(r, "consumerGroup");
	if (!j->group || !*j->group || strcmp(j->group, "null") == 0)
		j->group = QUEUE_MODE;
	if (jio_has_ctl(j->group))
		return bad(r, "consumerGroup must not hold control characters");
	j->gh = pidx_group_hash(j->group);
	v = req_query(r, "subscriptionMode");
	if (!v || !*v)
		v = qconf.default_subscription_mode;
	if (strcmp(v, "new") == 0 || strcmp(v, "new-only") == 0)
		j->sub_mode = "new";
	else if (strcmp(v, "all") == 0)
		j->sub_mode = "all";
	else
		return bad(r, "subscriptionMode must be new, new-only or all");
	v = req_query(r, "subscriptionFrom");
	if (v && *v) {
		int64_t ms;

		if (strcmp(v, "now") == 0)
			ms = wall_ms();
		else if (jio_parse_iso(v, &ms) < 0)
			return bad(r, "subscriptionFrom must be 'now' or an ISO-8601 timestamp");
		jio_format_iso(ms, j->sub_from, sizeof(j->sub_from));
	}
	if (!j->queue) {
		j->ns = req_query(r, "namespace");
		j->task = req_query(r, "task");
		if (j->ns && !*j->ns)
			j->ns = NULL;
		if (j->task && !*j->task)
			j->task = NULL;
		if (!j->ns && !j->task) {
			req_err_field(r, "success", json_false());
			req_err_field(r, "messages", json_array());
			return bad(r, "namespace or task is required");
		}
	}
	if (j->autopilot && qconf.pop_autopilot) {
		if (!j->batch_sent)
			j->batch = qconf.pop_autopilot_batch;
	} else {
		j->autopilot = 0;
	}
	j->deadline_ms = now_ms() + timeout;
	return QE_OK;
}

/* Autopilot width (SPEC 5): as many of the candidates, in the order SQL tries them, as it takes
 * for their backlogs (as last seen) to fill the batch; clamped to [1, 64]. Partitions holding
 * a message or two each give wide pops, a few deep partitions narrow ones: every partition
 * claimed costs a row lock and a lease. */
static int64_t
autopilot_width(const struct pidx_cand *c, int n, int64_t batch)
{
	int64_t sum = 0;
	int w = 0;

	while (w < n && w < 64 && sum < batch)
		sum += c[w++].backlog;
	return w < 1 ? 1 : w;
}

/* ,"key":"val" without a format string: it runs a dozen times per message delivered. */
static void
add_str_field(struct strbuf *sb, const char *key, const char *val)
{
	sb_add(sb, ",\"", 2);
	sb_adds(sb, key);
	sb_add(sb, "\":", 2);
	sb_add_jstr(sb, val);
}

/* queen_pop delivered nothing and said, per partition it looked at, where the group's cursor
 * is (attempt column set) or would start (attempt NULL: no cursor row, the start its
 * subscription implies) and its lease: the index learns it, so that it stops offering those
 * partitions until a push or a lapsed lease changes them. */
static void
learn_cursors(struct pop_job *j, PGresult *res, uint64_t mark)
{
	for (int i = 0; i < PQntuples(res); i++) {
		char pid[UUID_STR_LEN];

		if (PQgetisnull(res, i, 10))
			continue;
		pgbin_uuid(res, i, 0, pid);
		pidx_log_end(pid, pgbin_i64(res, i, 11));
		if (PQgetisnull(res, i, 9))
			pidx_cursor_implied(pid, j->gh, pgbin_i64(res, i, 10), mark);
		else
			pidx_cursor_snapshot(pid, j->gh, pgbin_i64(res, i, 10),
					     PQgetisnull(res, i, 12) ? 0
						: pgbin_ts_ms(res, i, 12), mark);
	}
}

/* The group's live leases on the queue, as the database has them now (one row a lease). */
static void
learn_leases(struct pop_job *j, struct wk *w)
{
	const char *params[2] = { j->queue, j->group };
	uint64_t mark = pidx_cursor_mark();
	PGresult *res;

	if (db_exec(w->db, SQL_GROUP_LEASES, params, &res) != QE_OK)
		return;
	for (int i = 0; i < PQntuples(res); i++) {
		char pid[UUID_STR_LEN];

		pgbin_uuid(res, i, 0, pid);
		pidx_cursor_snapshot(pid, j->gh, pgbin_i64(res, i, 1), pgbin_ts_ms(res, i, 2),
				     mark);
	}
	PQclear(res);
}

/* One message of a pop's rows, each row the slice of a segment: its row (the fields of its
 * partition and lease) and its elements of the row's arrays. */
struct pop_msg {
	int row;
	int64_t off;
	const uint8_t *id;			/* 16 bytes */
	const char *txn, *trace, *payload, *sub; /* NUL-terminated; NULL: SQL NULL */
	size_t payload_len;
};

/* The messages of a pop's rows in the order of the answer: the rows by partition in claim
 * order and by offset within (pgbin_row_order), then the elements of each. Their strings
 * are made in res (pgbin_elems_next). A message without a 16-byte id is left out (the
 * catalogue's types make that a bug): its lease lapses and it is delivered again. Returns
 * how many; *out is malloc'd. */
static int
pop_messages(PGresult *res, struct pop_msg **out)
{
	int rows = PQntuples(res), *ord = pgbin_row_order(res, 0, 3), n = 0;
	size_t cap = 0;
	struct pop_msg *m = NULL;

	for (int i = 0; i < rows; i++) {
		struct pgbin_elems ids, txn, trace, pay, sub;
		int row = ord[i], k = pgbin_elems_open(res, row, 4, &ids);
		int64_t first = pgbin_i64(res, row, 3);

		pgbin_elems_open(res, row, 5, &txn);
		pgbin_elems_open(res, row, 6, &trace);
		pgbin_elems_open(res, row, 7, &pay);
		pgbin_elems_open(res, row, 13, &sub);
		if ((size_t)n + (size_t)k > cap) {
			cap = cap * 2 > (size_t)n + (size_t)k ? cap * 2 : (size_t)n + (size_t)k;
			m = realloc(m, sizeof(*m) * cap);
			QASSERT(m != NULL);
		}
		for (int x = 0; x < k; x++) {
			struct pop_msg *g = &m[n];
			size_t len;

			g->row = row;
			g->off = first + x;
			g->id = (const uint8_t *)pgbin_elems_next(&ids, &len);
			if (len != 16)
				g->id = NULL;
			g->txn = pgbin_elems_next(&txn, &len);
			g->trace = pgbin_elems_next(&trace, &len);
			g->payload = pgbin_elems_next(&pay, &g->payload_len);
			g->sub = pgbin_elems_next(&sub, &len);
			if (g->id)
				n++;
		}
	}
	free(ord);
	*out = m;
	return n;
}

/* Renders the answer from queen_pop's rows and updates the index with what they tell. */
static void
render(struct req *r, struct pop_job *j, PGresult *res, const char *lease_id, int autop_w)
{
	struct strbuf sb, part, tail;
	const char *lease = j->auto_ack ? "" : lease_id;
	int claimed = 0, run = 0;
	char pid[UUID_STR_LEN], at[PGBIN_ISO_LEN];
	const uint8_t *raw;
	struct pop_msg *m;
	size_t bytes = 512, names = 0;
	int n, row, at_row = -1;
	size_t at_len = 0;
	const char **txns;
	int64_t *offs;
	int64_t now = wall_ms(), until = 0;

	for (int i = 0; i < PQntuples(res); i++) {
		size_t here = (size_t)PQgetlength(res, i, 1) + (size_t)PQgetlength(res, i, 2);

		for (int k = 0; k < PQnfields(res); k++)
			bytes += (size_t)PQgetlength(res, i, k);
		names = here > names ? here : names;
	}
	n = pop_messages(res, &m);
	txns = malloc(sizeof(*txns) * (size_t)(n ? n : 1));
	offs = malloc(sizeof(*offs) * (size_t)(n ? n : 1));
	QASSERT(txns != NULL && offs != NULL);
	/* In that order a partition's messages come together: each partition's are one span of
	 * the offset map, what an ack of this lease will name, so that it need not be looked
	 * up. */
	for (int i = 0; i <= n; i++) {
		if (i == n || i == 0 || !pgbin_same(res, 0, m[i].row, m[i - 1].row)) {
			if (run > 0)
				om_put_span(lease, pid, (size_t)run, txns, offs, until, now);
			run = 0;
			if (i == n)
				break;
			row = m[i].row;
			claimed++;
			pgbin_uuid(res, row, 0, pid);
			until = j->auto_ack || PQgetisnull(res, row, 12) ? 0
								  : pgbin_ts_ms(res, row, 12);
			if ((raw = pgbin_uuid_bytes(res, row, 0)) != NULL)
				pidx_claimed(raw, j->gh, pgbin_i64(res, row, 10), until,
					     pgbin_i64(res, row, 11));
		}
		if (until > 0 && m[i].txn) {
			txns[run] = m[i].txn;
			offs[run++] = m[i].off;
		}
	}
	free(txns);
	free(offs);
	sb_init(&sb);
	/* The answer is the rows' text and, for each message, about 330 bytes of field names,
	 * ids and times besides its partition's and queue's names and the group's: reserved
	 * once, exactly, not grown by doubling through a hundred kilobytes. */
	sb_reserve_exact(&sb, bytes + (size_t)n * (400 + names + strlen(j->group)));
	sb_adds(&sb, "{\"success\":true");
	add_str_field(&sb, "queue", j->queue ? j->queue : "");
	row = n ? m[0].row : 0;
	pgbin_uuid(res, row, 0, pid);
	add_str_field(&sb, "partition", PQgetvalue(res, row, 1));
	add_str_field(&sb, "partitionId", pid);
	add_str_field(&sb, "leaseId", lease);
	add_str_field(&sb, "consumerGroup", j->group);
	sb_addf(&sb, ",\"partitionsClaimed\":%d,\"messages\":[", claimed);
	/* What every message of the answer repeats is written once: the lease and group of
	 * the pop, and the partition, id and queue of each partition's run of rows. Only what
	 * a client wrote (transactionId, traceId, producerSub) is escaped per message; ids,
	 * offsets and times come in binary and are written here. */
	sb_init(&tail);
	add_str_field(&tail, "leaseId", lease);
	add_str_field(&tail, "consumerGroup", j->group);
	sb_init(&part);
	for (int i = 0; i < n; i++) {
		char id[UUID_STR_LEN];

		row = m[i].row;
		if (i == 0 || !pgbin_same(res, 0, row, m[i - 1].row)) {
			pgbin_uuid(res, row, 0, pid);
			sb_reset(&part);
			sb_adds(&part, ",\"partitionId\":\"");
			sb_adds(&part, pid);
			sb_addc(&part, '"');
			add_str_field(&part, "partition", PQgetvalue(res, row, 1));
			add_str_field(&part, "queue", PQgetvalue(res, row, 2));
			sb_adds(&part, ",\"offset\":");
		}
		sb_adds(&sb, i ? ",{\"id\":\"" : "{\"id\":\"");
		uuid_format(m[i].id, id);
		sb_add(&sb, id, UUID_STR_LEN - 1);
		sb_addc(&sb, '"');
		add_str_field(&sb, "transactionId", m[i].txn ? m[i].txn : "");
		add_str_field(&sb, "traceId", m[i].trace);
		sb_adds(&sb, ",\"data\":");
		if (!m[i].payload)
			sb_add(&sb, "null", 4);
		else
			pcrypt_reveal_sb(&sb, m[i].payload, m[i].payload_len);
		sb_adds(&sb, ",\"createdAt\":\"");
		if (row != at_row) {
			/* A row is a slice of one segment: its messages share their time. */
			at_len = pgbin_iso_ms(pgbin_ts_ms(res, row, 8), at);
			at_row = row;
		}
		sb_add(&sb, at, at_len);
		sb_addc(&sb, '"');
		sb_add(&sb, part.buf, part.len);
		sb_add_i64(&sb, m[i].off);
		sb_add(&sb, tail.buf, tail.len);
		if (m[i].sub)
			add_str_field(&sb, "producerSub", m[i].sub);
		sb_adds(&sb, ",\"deliveryAttempt\":");
		sb_add_i64(&sb, pgbin_i32(res, row, 9));
		sb_addc(&sb, '}');
	}
	sb_free(&part);
	sb_free(&tail);
	sb_addc(&sb, ']');
	if (j->autopilot && (!j->batch_sent || !j->partitions_sent))
		sb_addf(&sb, ",\"autopilot\":{\"partitions\":%d,\"batch\":%lld}", autop_w,
			(long long)j->batch);
	sb_addc(&sb, '}');
	free(m);
	metrics_popped((uint64_t)n);
	req_reply_sb(r, 200, &sb);
}

/* What one try of a pop found. */
struct pop_try {
	int delivered;		/* answered 200 */
	int had_candidates;	/* 0: the index knows of nothing deliverable */
	int refused;		/* SQL claimed none of the candidates the index named, and said
				 * where the group stands on each (learned); the index has more */
	int64_t recheck_wall;	/* when a lease seen live lapses, or 0 */
};

static enum qe
pop_once(struct req *r, struct pop_job *j, struct wk *w, struct pop_try *t)
{
	struct pidx_cand *cands = NULL;
	struct strbuf cand_sb, end_sb;
	char lease_id[UUID_STR_LEN], batch[24], width[24], lease_s[24];
	int n = -1, held = 0, more = 0, learned = 0;
	int64_t parts = j->partitions;
	int autop = j->autopilot && !j->partitions_sent;
	uint64_t mark;
	PGresult *res;
	enum qe e;

	memset(t, 0, sizeof(*t));
	t->had_candidates = 1;
	j->unknown = 0;
	sb_init(&cand_sb);
	sb_init(&end_sb);
	if (j->queue) {
		/* Autopilot may claim up to 64 partitions: look at enough to choose. */
		int64_t most = autop ? 64 : parts;
		int max = (int)(most * 4 > MAX_CANDIDATES ? MAX_CANDIDATES
				: (most * 4 < 8 ? 8 : most * 4));

		cands = malloc(sizeof(*cands) * (size_t)max);
		QASSERT(cands != NULL);
		n = pidx_candidates(j->queue, j->partition, j->gh, cands, max, &t->recheck_wall);
		j->unknown = n < 0;
		if (n == 0) {
			t->had_candidates = 0;
			free(cands);
			return QE_OK;
		}
		if (autop && n > 0)
			parts = autopilot_width(cands, n, j->batch);
		/* Offer SQL a quarter more partitions than it may claim (at least 7 more):
		 * some will be taken by other pops meanwhile (SKIP LOCKED), though
		 * concurrent pops are handed disjoint ranges. Every candidate costs SQL two
		 * index probes (about 15 us), a claimed one about 40 us more. */
		if (n > 0) {
			int offer = (int)parts + (parts / 4 > 7 ? (int)(parts / 4) : 7);

			if (offer > n)
				offer = n;
			more = n > offer;
			/* The group holds a cursor on each of the first candidates, as many as
			 * the pop may claim, as last seen: SQL tries the claim of cursors that
			 * exist alone first, a statement of half the cost of the one that also
			 * writes first cursors. */
			char id[UUID_STR_LEN];

			held = 1;
			sb_addc(&cand_sb, '{');
			sb_addc(&end_sb, '{');
			for (int i = 0; i < offer; i++) {
				if (i) {
					sb_addc(&cand_sb, ',');
					sb_addc(&end_sb, ',');
				}
				uuid_format(cands[i].id, id);
				sb_add(&cand_sb, id, UUID_STR_LEN - 1);
				sb_add_i64(&end_sb, cands[i].log_end);
				if (i < parts)
					held &= cands[i].held;
			}
			sb_addc(&cand_sb, '}');
			sb_addc(&end_sb, '}');
		}
		free(cands);
	} else if (autop) {
		parts = 1;
	}
	uuid_v7(lease_id);
	snprintf(batch, sizeof(batch), "%lld", (long long)j->batch);
	snprintf(width, sizeof(width), "%lld", (long long)parts);
	snprintf(lease_s, sizeof(lease_s), "%lld", (long long)j->lease_seconds);
	/* What the rows say of cursors is as old as the query: an ack landing meanwhile wins. */
	mark = pidx_cursor_mark();
	res = NULL;
	e = QE_OK;
	if (held) {
		/* The steady state: the claim of cursors that exist, alone, called straight (not
		 * through queen_pop, whose call and copy of the rows cost as much again). */
		const char *hp[10] = {
			j->queue, j->partition, j->group, batch, width,
			j->lease_given ? lease_s : NULL, j->auto_ack ? "true" : "false", lease_id,
			cand_sb.buf, end_sb.buf,
		};

		metrics_pop_query();
		e = db_exec(w->db, SQL_POP_HELD, hp, &res);
		if (e == QE_OK && PQntuples(res) == 0) {
			/* Stale, or taken meanwhile: queen_pop finds out why. */
			PQclear(res);
			res = NULL;
		}
	}
	if (e == QE_OK && !res) {
		const char *params[15] = {
			j->queue, j->partition, j->ns, j->task, j->group, batch, width,
			j->lease_given ? lease_s : NULL, j->auto_ack ? "true" : "false",
			j->sub_mode, j->sub_from[0] ? j->sub_from : NULL, lease_id,
			n > 0 ? cand_sb.buf : NULL, "false", n > 0 ? end_sb.buf : NULL,
		};

		metrics_pop_query();
		e = db_exec(w->db, SQL_POP, params, &res);
	}
	sb_free(&cand_sb);
	sb_free(&end_sb);
	if (e != QE_OK)
		return req_fail(r, e, "pop failed: database unavailable");
	if (PQntuples(res) > 0 && PQgetisnull(res, 0, 3)) {
		learn_cursors(j, res, mark);
		t->refused = more;
		learned = PQntuples(res);
	} else if (PQntuples(res) > 0) {
		render(r, j, res, lease_id, (int)parts);
		t->delivered = 1;
	}
	PQclear(res);
	/* A group's first contact with a million partitions is a result of a million rows, a
	 * few hundred MiB of libpq's small blocks: their pages go back to the system now. */
	if (learned >= LEARN_TRIM_ROWS)
		malloc_trim(0);
	return QE_OK;
}

/* Rechecks of a parked pop that pushes cannot announce (a visibility delay, an index that
 * saw work SQL would not hand out): the first after a second, each next one twice as late,
 * up to RECHECK_MAX_MS; a queue unknown to the index is looked at only every
 * RECHECK_UNKNOWN_MS (the push that creates it wakes the pop, so this is only a safety net).
 * Parked pops of a new group on an old backlog thus cost PostgreSQL a trickle, not one query
 * each every second. */
#define RECHECK_FIRST_MS 1000
#define RECHECK_MAX_MS 8000
#define RECHECK_UNKNOWN_MS 30000

/* Tries of one pop whose candidates SQL refused (each on candidates further on). */
#define POP_TRIES 3

enum qe
h_pop_run(struct req *r, struct wk *w)
{
	struct pop_job *j = r->job;
	uint64_t gen = lp_gen(j->queue, j->ns, j->task);
	struct pop_try t = { .had_candidates = 1 };
	struct lp_filter f;
	enum qe e = QE_OK;

	/* Pop maintenance (h_system.c): deliver nothing; a long-poll waits on, looking again at
	 * its rechecks, so it delivers soon after the switch is turned off.  SQL refuses
	 * candidates that concurrent pops took or whose state the index had not seen (a lease
	 * of another broker's pop): it has said where the group stands on them, and the index,
	 * having learned it, offers others, from further on, at the next try. */
	for (int tries = 0; !h_system_pops_paused() && tries < POP_TRIES; tries++) {
		e = pop_once(r, j, w, &t);
		if (e != QE_OK || t.delivered)
			return e;
		if (!t.refused)
			break;
	}
	if (t.refused && !h_system_pops_paused()) {
		/* Refused at every try, each further on: the group holds leases, taken through
		 * another broker, on more partitions than the tries reached (two brokers' indexes
		 * list a queue's partitions in the same order). Learn them all, then once more. */
		learn_leases(j, w);
		e = pop_once(r, j, w, &t);
		if (e != QE_OK || t.delivered)
			return e;
	}
	if (!j->wait || now_ms() >= j->deadline_ms) {
		req_reply(r, 204, NULL, 0);
		return QE_OK;
	}
	f.queue = j->queue;
	f.ns = j->ns;
	f.task = j->task;
	f.group_hash = j->gh;
	f.deadline_ms = j->deadline_ms;
	f.admitted = j->parked;
	if (t.recheck_wall) {
		/* A lease lapses then: exactly when it becomes claimable. */
		f.recheck_ms = now_ms() + (t.recheck_wall - wall_ms()) + 5;
	} else if (!t.had_candidates) {
		/* The index knows there is nothing: only a push (a wake) can change that. */
		f.recheck_ms = 0;
	} else {
		int unknown = j->queue && j->unknown;

		j->recheck_gap = unknown ? RECHECK_UNKNOWN_MS
			       : j->recheck_gap ? (j->recheck_gap * 2 > RECHECK_MAX_MS
						   ? RECHECK_MAX_MS : j->recheck_gap * 2)
						: RECHECK_FIRST_MS;
		f.recheck_ms = now_ms() + j->recheck_gap;
	}
	switch (lp_park(r, &f, gen)) {
	case LP_PARKED:
		j->parked = 1;
		return QE_PARKED;
	case LP_FULL:
		return req_fail(r, QE_BUSY, "too many parked long-polls (QUEEN_MAX_LONGPOLLS %lld)",
				(long long)qconf.max_longpolls);
	case LP_REFUSED:
		break;
	}
	req_reply(r, 204, NULL, 0);
	return QE_OK;
}
