/* resync: the partition index reloaded from a snapshot of the database (at start-up, then
 * now and then, and when another broker names a partition this one does not know): the
 * queues, every partition with its log end, every cursor, read in one snapshot and swept
 * into the index, which then drops what the database no longer has. */
#include "resync.h"
#include "http.h"
#include "log.h"
#include "names.h"
#include "pcrypt.h"
#include "pgbin.h"
#include "pindex.h"
#include "qassert.h"
#include "sqlstmt.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Forgets the cursors the index inferred from the groups' stored starts when those changed
 * since the last resync (a subscription moved, a group was deleted, on any broker). */
static void
resync_subscriptions(struct dbconn *db)
{
	static char last[40];
	PGresult *res;

	if (db_exec(db, SQL_SUBSCRIPTIONS_SUM, NULL, &res) != QE_OK)
		return;
	if (PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), last) != 0) {
		if (last[0])
			pidx_forget_implied(0);
		snprintf(last, sizeof(last), "%s", PQgetvalue(res, 0, 0));
	}
	PQclear(res);
}

/* The (queue, group) pairs with a stored start, as sorted hash pairs, for the index sweep:
 * a group known on a queue keeps its slots there even without a cursor row (first contact
 * writes none). */
struct known_groups {
	uint64_t (*pair)[2];
	int n;
};

static int
pair_cmp(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : x[1] < y[1] ? -1 : x[1] > y[1];
}

static int
group_known(void *arg, const char *queue, uint64_t gh)
{
	struct known_groups *k = arg;
	uint64_t key[2] = { pidx_group_hash(queue), gh };

	/* Queue mode has no stored start: its slots go only with their partitions. */
	return gh == pidx_group_hash(QUEUE_MODE) ||
	       bsearch(key, k->pair, (size_t)k->n, sizeof(k->pair[0]), pair_cmp) != NULL;
}

/* Rows kept while the snapshot loads, each beginning with the 16 bytes of its id: added as
 * read, sorted once at the first lookup (every add comes before it), found by bsearch. */
struct id_table {
	void *v;
	size_t n, cap, size;
	int sorted;
};

static int
id_cmp(const void *a, const void *b)
{
	return memcmp(a, b, 16);
}

/* A new row of t, its id set to id. */
static void *
id_add(struct id_table *t, const uint8_t *id)
{
	void *e;

	QASSERT(!t->sorted);
	if (t->n == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 64;
		t->v = realloc(t->v, t->cap * t->size);
		QASSERT(t->v != NULL);
	}
	e = (char *)t->v + t->n++ * t->size;
	memcpy(e, id, 16);
	return e;
}

static void *
id_find(struct id_table *t, const uint8_t *id)
{
	if (t->n == 0)
		return NULL;
	if (!t->sorted) {
		qsort(t->v, t->n, t->size, id_cmp);
		t->sorted = 1;
	}
	return bsearch(id, t->v, t->n, t->size, id_cmp);
}

/* The queues of the snapshot, by id: a partition's row names its queue by id only. */
struct snap_queue {
	uint8_t id[16];
	char id_text[UUID_STR_LEN];
	char *name, *ns, *task;
};

/* A partition whose log start is past 0 (retention deleted its first segments): a cursor
 * below it counts as at it. */
struct snap_start {
	uint8_t pid[16];
	int64_t log_start;
};

struct snapshot_load {
	struct pidx_sweep sw;
	const _Atomic int *stop;
	const struct db_chunked *st;	/* the snapshot's statements, by db_read_chunks' which */
	int advanced;
	struct id_table queues;		/* struct snap_queue */
	struct id_table starts;		/* struct snap_start: with the partitions, for the cursors */
};

static char *
dup(const char *s)
{
	char *d = strdup(s);

	QASSERT(d != NULL);
	return d;
}

static void
load_queues(struct snapshot_load *ld, const PGresult *res)
{
	for (int i = 0; i < PQntuples(res); i++) {
		const uint8_t *id = pgbin_uuid_bytes(res, i, 0);
		struct snap_queue *q;

		if (!id)
			continue;
		q = id_add(&ld->queues, id);
		uuid_format(id, q->id_text);
		q->name = dup(PQgetvalue(res, i, 1));
		q->ns = dup(PQgetvalue(res, i, 2));
		q->task = dup(PQgetvalue(res, i, 3));
	}
}

/* A row of the partitions' read: its queue by id in column 0, then id, name, log end and
 * log start. */
static void
load_partition(struct snapshot_load *ld, const PGresult *res, int i)
{
	const uint8_t *qid = pgbin_uuid_bytes(res, i, 0), *pid = pgbin_uuid_bytes(res, i, 1);
	/* NULL cannot be: the snapshot has every queue its partitions name. */
	const struct snap_queue *q = qid ? id_find(&ld->queues, qid) : NULL;
	int64_t log_start = pgbin_i64(res, i, 4);
	struct pidx_part_row p;

	if (!q || !pid)
		return;
	p = (struct pidx_part_row){
		.queue_id = q->id_text, .queue = q->name, .ns = q->ns, .task = q->task,
		.partition = PQgetvalue(res, i, 2), .pid = pid, .log_end = pgbin_i64(res, i, 3),
	};
	ld->advanced += pidx_sweep_partition(&ld->sw, &p);
	if (log_start > 0)
		((struct snap_start *)id_add(&ld->starts, pid))->log_start = log_start;
}

/* A row of the segments' read: partition id, the segment's last offset. */
static void
load_segment_end(struct snapshot_load *ld, const PGresult *res, int i)
{
	const uint8_t *pid = pgbin_uuid_bytes(res, i, 0);

	if (pid)
		ld->advanced += pidx_sweep_log_end(pid, pgbin_i64(res, i, 1));
}

/* A row of the cursors' read: partition id, group, committed, lease expiry. */
static void
load_cursor(struct snapshot_load *ld, const PGresult *res, int i)
{
	const uint8_t *pid = pgbin_uuid_bytes(res, i, 0);
	const struct snap_start *st;
	struct pidx_cursor_row c;

	if (!pid)
		return;
	c = (struct pidx_cursor_row){
		.group = PQgetvalue(res, i, 1), .pid = pid, .committed = pgbin_i64(res, i, 2),
		.lease_until = PQgetisnull(res, i, 3) ? 0 : pgbin_ts_ms(res, i, 3),
	};
	st = id_find(&ld->starts, pid);
	if (st && c.committed < st->log_start - 1)
		c.committed = st->log_start - 1;
	pidx_sweep_cursor(&ld->sw, &c);
}

/* One chunk of the snapshot into the index; then the tables grow to the partitions known,
 * should the estimate they were sized for be short. A broker that is stopping stops here:
 * the rest of a reload is of no use to it. */
static int
load_rows(void *arg, int which, const PGresult *res)
{
	struct snapshot_load *ld = arg;
	enum sql_id id = ld->st[which].id;

	if (id == SQL_INDEX_QUEUES)
		load_queues(ld, res);
	else
		for (int i = 0; i < PQntuples(res); i++) {
			if (id == SQL_INDEX_PARTITIONS || id == SQL_INDEX_PARTITIONS_KEPT)
				load_partition(ld, res, i);
			else if (id == SQL_INDEX_SEGMENT_ENDS)
				load_segment_end(ld, res, i);
			else
				load_cursor(ld, res, i);
		}
	pidx_fit(0);
	return !atomic_load(ld->stop);
}

/* The bounds of the parts of table `col` of SQL_INDEX_PAGES, read on `parts` connections:
 * as many of its pages each, the last to the end (pages added since included). */
static void
cut_pages(struct db_chunked *st, int parts, const PGresult *pages, int col,
	  char bounds[][24])
{
	long long n = pages ? atoll(PQgetvalue(pages, 0, col)) : 0;

	for (int k = 0; k < parts; k++) {
		snprintf(bounds[k], 24, "%lld", n * k / parts);
		st->bounds[k] = bounds[k];
	}
}

/* 1 when SQL_INDEX_PAGES chose to read the log ends in a scan of the segments. */
static int
scans_segments(const PGresult *pages)
{
	return pages && !PQgetisnull(pages, 0, 2) && PQgetvalue(pages, 0, 2)[0] == 't';
}

int
resync_run(struct dbconn *db, struct dbconn *helper, int alone, const _Atomic int *stop)
{
	struct db_chunked snapshot[4];
	struct dbconn *conns[2] = { db, helper };
	int nconns = helper && db_ensure(helper) == QE_OK ? 2 : 1, n = 0, scan;
	char bounds[2][2][24];
	PGresult *res, *pages = NULL;
	struct snapshot_load ld = {
		.sw = pidx_sweep_begin(alone), .stop = stop, .st = snapshot,
		.queues = { .size = sizeof(struct snap_queue) },
		.starts = { .size = sizeof(struct snap_start) },
	};
	struct snap_queue *q;
	struct known_groups known;
	uint64_t t0;
	long nq, np, ng, nb;
	enum qe e;

	resync_subscriptions(db);
	/* Tables sized for what is about to load: grown in steps during the load, they were
	 * rehashed four times over on the way to a million partitions. */
	if (db_exec(db, SQL_PARTITIONS_ESTIMATE, NULL, &res) == QE_OK) {
		pidx_fit(atoll(PQgetvalue(res, 0, 0)));
		PQclear(res);
	}
	/* With a helper, each table is read in halves side by side, cut by its size now: any
	 * cut covers every row, the size only balances the halves. (Eight parts, each taken
	 * by whichever connection was free, started a million just-filled partitions in
	 * 7.0-9.0 s against 6.6-7.2 s for halves, alternate runs.) The log ends come with the
	 * partitions, a probe of each one's newest segment, or, at start-up, after them in one
	 * sequential scan of the segments where that reads fewer pages
	 * (queen_snapshot_scans_segments): whole, on one connection, because a scan of part of
	 * the pages (a TID range scan) goes through shared_buffers and writes out their dirty
	 * pages to make room, where a sequential scan of a large table recycles a small ring of
	 * its own. Just after a fill of a million partitions, half the segments took 4.2 s that
	 * way, all of them 2.1 s. Not in the reloads that follow: every QUEEN_INDEX_RESYNC_MS
	 * beside the traffic, the index already knows the ends the probes confirm, and a scan
	 * would read every segment (and the broker look up each) again and again until VACUUM
	 * has been through them. */
	if ((alone || nconns > 1) && db_exec(db, SQL_INDEX_PAGES, NULL, &pages) != QE_OK)
		pages = NULL;
	scan = alone && scans_segments(pages);
	snapshot[n++] = (struct db_chunked){ SQL_INDEX_QUEUES, { NULL } };
	snapshot[n] = (struct db_chunked){ scan ? SQL_INDEX_PARTITIONS_KEPT : SQL_INDEX_PARTITIONS,
					   { NULL } };
	cut_pages(&snapshot[n++], nconns, pages, 0, bounds[0]);
	if (scan)
		snapshot[n++] = (struct db_chunked){ SQL_INDEX_SEGMENT_ENDS, { NULL } };
	snapshot[n] = (struct db_chunked){ SQL_INDEX_CURSORS, { NULL } };
	cut_pages(&snapshot[n++], nconns, pages, 1, bounds[1]);
	PQclear(pages);
	e = db_read_chunks(conns, nconns, snapshot, n, load_rows, &ld);
	for (size_t i = 0; i < ld.queues.n; i++) {
		q = (struct snap_queue *)ld.queues.v + i;
		free(q->name);
		free(q->ns);
		free(q->task);
	}
	free(ld.queues.v);
	free(ld.starts.v);
	if (e != QE_OK)
		return -1;
	/* After the snapshot: a group that got its stored start meanwhile is known too. */
	if (db_exec(db, SQL_INDEX_GROUPS, NULL, &res) == QE_OK) {
		known.n = PQntuples(res);
		known.pair = malloc(((size_t)known.n + 1) * sizeof(known.pair[0]));
		QASSERT(known.pair != NULL);
		for (int i = 0; i < known.n; i++) {
			known.pair[i][0] = pidx_group_hash(PQgetvalue(res, i, 0));
			known.pair[i][1] = pidx_group_hash(PQgetvalue(res, i, 1));
		}
		PQclear(res);
		qsort(known.pair, (size_t)known.n, sizeof(known.pair[0]), pair_cmp);
		t0 = now_us();
		pidx_sweep_end(&ld.sw, group_known, &known);
		pidx_size(&nq, &np, &ng, &nb);
		log_debug("index sweep: %lld us, read on %d connection%s, log ends by %s, %ld "
			  "queues, %ld partitions, %ld group slots in %ld more blocks left",
			  (long long)(now_us() - t0), nconns, nconns > 1 ? "s" : "",
			  scan ? "a scan of the segments" : "probes", nq, np, ng, nb);
		free(known.pair);
	}
	/* Configures on other brokers reach the encrypted-queue cache here too (after the
	 * index: nothing waits on this one). */
	pcrypt_refresh(db);
	return ld.advanced;
}
