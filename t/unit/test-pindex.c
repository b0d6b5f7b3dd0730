/* Unit tests of pindex: the pop candidates (which partitions a pop is offered: work past the
 * group's cursor, no live lease), whether the group holds a cursor row there, the rotor
 * that brings every partition first in turn; and the resync's sweep, which keeps what its
 * snapshot holds and drops the rest. */
#include "pindex.h"
#include "tap.h"
#include "uuid.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define QID "0190f5c2-0000-7000-8000-0000000000aa"
#define NPARTS 10

static char pids[NPARTS][UUID_STR_LEN];

/* The text form of a candidate's id (a static buffer). */
static const char *
cid(const struct pidx_cand *c)
{
	static char s[UUID_STR_LEN];

	uuid_format(c->id, s);
	return s;
}

static int
find(const struct pidx_cand *c, int n, const char *pid)
{
	for (int i = 0; i < n; i++)
		if (strcmp(cid(&c[i]), pid) == 0)
			return i;
	return -1;
}

static int64_t
wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int
group_known(void *arg, const char *queue, uint64_t group_hash)
{
	(void)arg;
	(void)queue;
	(void)group_hash;
	return 1;
}

/* One resync's rows: the partitions of q but those from `skip` on, labelled (ns, task), and
 * partition "pnew" under id NEW. */
#define NEW "5a1b2c3d-0000-4000-8000-0000000000ff"

static void
sweep_rows(int skip, const char *ns, const char *task)
{
	struct pidx_sweep sw = pidx_sweep_begin(0);
	uint8_t id[16];
	char name[16];

	for (int i = 0; i <= skip && i <= NPARTS; i++) {
		struct pidx_part_row row = { .queue_id = QID, .queue = "q", .ns = ns,
					     .task = task, .pid = id, .log_end = 4 };

		snprintf(name, sizeof(name), "p%d", i);
		row.partition = i < skip ? name : "pnew";
		if (uuid_parse(i < skip ? pids[i] : NEW, id) != 0)
			abort();
		pidx_sweep_partition(&sw, &row);
	}
	pidx_sweep_end(&sw, group_known, NULL);
}

/* A resync keeps what its snapshot holds, new, relabelled by a configure or unchanged, and
 * drops what it does not (learned before it began). */
static void
sweeps(void)
{
	long nq, np, ng, nb;
	char ns[32], task[32];

	sweep_rows(NPARTS, "billing", "invoices");
	pidx_size(&nq, &np, &ng, &nb);
	is_int(np, NPARTS + 1, "a sweep that relabels the queue keeps its partitions, adds one");
	ok(pidx_queue_labels("q", ns, sizeof(ns), task, sizeof(task)) != 0 &&
	   strcmp(ns, "billing") == 0 && strcmp(task, "invoices") == 0, "labels %s/%s", ns, task);
	sweep_rows(NPARTS, "billing", "invoices");
	pidx_size(&nq, &np, &ng, &nb);
	is_int(np, NPARTS + 1, "the next sweep, labels unchanged: all kept");
	sweep_rows(NPARTS - 3, "billing", "invoices");
	pidx_size(&nq, &np, &ng, &nb);
	is_int(np, NPARTS - 2, "three partitions gone from the snapshot: dropped");
}

/* A start-up load into the empty index (no lookups before the adds) holds what a load that
 * looks first holds; a second load with the index full looks first and adds nothing twice;
 * a load of nothing empties it again. */
static void
start_up_load(void)
{
	char pid[UUID_STR_LEN], name[16], found[UUID_STR_LEN];
	struct pidx_cand c[16];
	long nq, np, ng, nb;
	int64_t recheck;
	uint8_t id[16];
	uint64_t gh = pidx_group_hash("loaders");
	int round, n, held;

	for (round = 0; round < 2; round++) {
		struct pidx_sweep sw = pidx_sweep_begin(1);

		ok(sw.fill == (round == 0), "round %d: %s", round,
		   round == 0 ? "an empty index is filled" : "a full one is looked up");
		for (int i = 0; i < NPARTS; i++) {
			struct pidx_part_row row = { .queue_id = QID, .queue = "f", .ns = "",
						     .task = "", .partition = name, .pid = id,
						     .log_end = 9 };

			snprintf(name, sizeof(name), "f%d", i);
			snprintf(pid, sizeof(pid), "5a1b2c3d-0000-4000-8000-0000000001%02d", i);
			if (uuid_parse(pid, id) != 0)
				abort();
			pidx_sweep_partition(&sw, &row);
			if (i < 3) {
				struct pidx_cursor_row cur = { .group = "loaders", .pid = id,
							       .committed = 9 };

				pidx_sweep_cursor(&sw, &cur);
			}
		}
		pidx_sweep_end(&sw, group_known, NULL);
		pidx_size(&nq, &np, &ng, &nb);
		ok(np == NPARTS, "round %d: every partition once (%ld)", round, np);
		ok(pidx_lookup("f", "f7", found) && strcmp(found,
		   "5a1b2c3d-0000-4000-8000-000000000107") == 0, "round %d: found by name", round);
		n = pidx_candidates("f", NULL, gh, c, 16, &recheck);
		held = 0;
		for (int i = 0; i < n; i++)
			held += c[i].held;
		ok(n == NPARTS - 3 && held == 0,
		   "round %d: the three read to the end are not offered (%d, %d held)", round, n,
		   held);
	}
	pidx_sweep_end((struct pidx_sweep[]){ pidx_sweep_begin(1) }, group_known, NULL);
	pidx_size(&nq, &np, &ng, &nb);
	is_int(np, 0, "a load of nothing empties the index");
}

/* Partitions loaded without their log ends (-1), which a scan of the segments then raises,
 * each to the greatest end read: a lower one, or one of a partition not in the index,
 * changes nothing. */
static void
log_ends_after_partitions(void)
{
	struct pidx_sweep sw = pidx_sweep_begin(1);
	struct pidx_cand c[4];
	uint8_t id[2][16], stranger[16];
	int64_t recheck;
	long nq, np, ng, nb;
	int n;

	for (int i = 0; i < 2; i++) {
		char pid[UUID_STR_LEN], name[8];
		struct pidx_part_row row = { .queue_id = QID, .queue = "s", .ns = "", .task = "",
					     .partition = name, .pid = id[i], .log_end = -1 };

		snprintf(pid, sizeof(pid), "5a1b2c3d-0000-4000-8000-0000000002%02d", i);
		snprintf(name, sizeof(name), "s%d", i);
		if (uuid_parse(pid, id[i]) != 0)
			abort();
		pidx_sweep_partition(&sw, &row);
	}
	if (uuid_parse("5a1b2c3d-0000-4000-8000-0000000002ff", stranger) != 0)
		abort();
	is_int(pidx_sweep_log_end(id[0], 2), 1, "a segment's end raises its partition's log end");
	is_int(pidx_sweep_log_end(id[0], 4), 1, "a later segment's end raises it again");
	is_int(pidx_sweep_log_end(id[0], 3), 0, "an earlier one leaves it");
	is_int(pidx_sweep_log_end(stranger, 7), 0, "one of a partition not in the index is left");
	pidx_sweep_end(&sw, group_known, NULL);
	n = pidx_candidates("s", NULL, pidx_group_hash("scanners"), c, 4, &recheck);
	ok(n == 1 && memcmp(c[0].id, id[0], 16) == 0 && c[0].backlog == 5,
	   "only the partition with segments is offered, its 5 offsets to read (%d)", n);
	pidx_sweep_end((struct pidx_sweep[]){ pidx_sweep_begin(1) }, group_known, NULL);
	pidx_size(&nq, &np, &ng, &nb);
	is_int(np, 0, "emptied again");
}

int
main(void)
{
	struct pidx_cand c[16];
	uint64_t gh, other;
	int64_t recheck;
	int n, i, k, first[NPARTS] = { 0 }, distinct = 0;

	pidx_init();
	pidx_thread_online();
	start_up_load();
	log_ends_after_partitions();
	gh = pidx_group_hash("workers");
	other = pidx_group_hash("auditors");
	for (i = 0; i < NPARTS; i++) {
		char name[16];

		snprintf(pids[i], sizeof(pids[i]), "5a1b2c3d-0000-4000-8000-0000000000%02d", i);
		snprintf(name, sizeof(name), "p%d", i);
		pidx_learn(QID, "q", NULL, NULL, pids[i], name, 4);	/* offsets 0 .. 4 */
	}

	n = pidx_candidates("q", NULL, gh, c, 16, &recheck);
	is_int(n, NPARTS, "a group never seen is offered every partition");
	for (i = k = 0; i < n; i++)
		k += c[i].held == 0 && c[i].backlog == 5;
	is_int(k, NPARTS, "held by none, the whole log to read");
	is_int(pidx_candidates("nope", NULL, gh, c, 16, &recheck), -1, "an unknown queue: -1");

	pidx_cursor(pids[0], gh, 1, 0);		/* acked through offset 1 */
	pidx_cursor(pids[1], gh, 4, 0);		/* read to the end */
	pidx_cursor(pids[2], gh, 0, wall_ms() + 60000);	/* leased for a minute */
	pidx_cursor_implied(pids[3], gh, 2, pidx_cursor_mark());	/* no row: would start at 2 */
	n = pidx_candidates("q", NULL, gh, c, 16, &recheck);
	is_int(n, NPARTS - 2, "neither the partition read to the end nor the leased one");
	ok(find(c, n, pids[1]) < 0 && find(c, n, pids[2]) < 0, "those two are left out");
	ok(recheck > wall_ms() + 50000, "the recheck is when the lease lapses");
	k = find(c, n, pids[0]);
	ok(k >= 0 && c[k].held == 1 && c[k].backlog == 3, "a cursor seen: held, 3 offsets left");
	k = find(c, n, pids[3]);
	ok(k >= 0 && c[k].held == 0 && c[k].backlog == 2, "an implied cursor is not held");

	n = pidx_candidates("q", NULL, other, c, 16, &recheck);
	for (i = k = 0; i < n; i++)
		k += c[i].held;
	ok(n == NPARTS && k == 0, "another group's cursors are its own");

	n = pidx_candidates("q", "p0", gh, c, 16, &recheck);
	ok(n == 1 && strcmp(cid(&c[0]), pids[0]) == 0 && c[0].held, "a named partition");
	n = pidx_candidates("q", "p1", gh, c, 16, &recheck);
	is_int(n, 0, "a named partition read to the end: none");

	/* Pops of one partition claim the first candidate: over ten pops offered 8 candidates
	 * each, the first comes to at least 8 of the 10 partitions (a step of 8 over 10
	 * partitions alone would start at every other one: 5). */
	for (i = 0; i < NPARTS; i++)
		pidx_cursor(pids[i], gh, 0, 0);
	for (i = 0; i < 10; i++) {
		n = pidx_candidates("q", NULL, gh, c, 8, &recheck);
		if (n > 0 && (k = (int)strtol(cid(&c[0]) + 34, NULL, 10)) >= 0 && k < NPARTS)
			distinct += first[k]++ == 0;
	}
	ok(distinct >= 8, "ten pops start at %d of 10 partitions", distinct);

	sweeps();
	pidx_thread_offline();
	printf("1..%d\n", tap_n);
	return tap_failed != 0;
}
