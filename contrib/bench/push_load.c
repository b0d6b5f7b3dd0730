/*
 * queen-bench phase "push-load": the push figures of issue 7's targets, 1 KiB payloads.
 * Batch 100 from 16 connections over 10 and over --many-partitions partitions (the first is
 * the yardstick of the drain and steady phases, with the broker's CPU per message; the first
 * again with a transactionId on every item, as Queen's clients send them), batch 1
 * from 16 and from 64 connections over 10 partitions (group commit), and the fill of
 * --many-partitions partitions that do not exist yet, one message each, with its push p99.
 */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define LOAD_CONNS	16
#define LOAD_MANY_CONNS	64

double fig_push_b100;
double fig_push_b1;

void phase_push_load(void)
{
	const struct payload *pl = &payloads[1];
	struct push_run ph = { 0 };
	struct cpu_mark m;
	char label[64], queue[128], note[128];
	double b1_64, elapsed, rate;

	cpu_mark(&m);
	fig_push_b100 = push_figure(PUSH_BIG_BATCH, LOAD_CONNS, pl, 10, false, "push b100 1KiB 16c 10p",
				    "(target >= 1.0x)", &ph);
	figure_cpu("broker cpu per pushed msg", &m, ph.queued, "(target <= 10)");
	/* What a Queen client sends: a transactionId with every item, each claimed in the
	 * partition's dedup window. */
	cpu_mark(&m);
	push_figure(PUSH_BIG_BATCH, LOAD_CONNS, pl, 10, true, "push b100 1KiB 16c 10p txn", NULL,
		    &ph);
	figure_cpu("broker cpu per pushed msg, txn", &m, ph.queued, NULL);
	snprintf(label, sizeof(label), "push b100 1KiB 16c %dp", opt.many_partitions);
	push_figure(PUSH_BIG_BATCH, LOAD_CONNS, pl, opt.many_partitions, false, label, NULL,
		    NULL);
	fig_push_b1 = push_figure(1, LOAD_CONNS, pl, 10, false, "push b1 1KiB 16c 10p",
				  "(target >= 0.12x)", NULL);
	b1_64 = push_figure(1, LOAD_MANY_CONNS, pl, 10, false, "push b1 1KiB 64c 10p", NULL,
			     NULL);
	figure_ratio("push b1 64c vs b100 16c", b1_64, fig_push_b100, "(target >= 0.30)");

	/* Every push of this fill creates the partitions it names: each connection writes
	 * one message to each of its own share of them. */
	memset(&ph, 0, sizeof(ph));
	snprintf(queue, sizeof(queue), "bench-%s-newparts-%dp", run_id, opt.many_partitions);
	ph.queue = queue;
	ph.batch = PUSH_BIG_BATCH;
	ph.nparts = opt.many_partitions;
	ph.sliced = true;
	ph.once = true;
	ph.pl = pl;
	ph.to_send = -1;
	ph.stop_at = now() + 3600;
	rate = push_run(&ph, LOAD_CONNS, &elapsed);
	snprintf(label, sizeof(label), "fill %d new partitions", opt.many_partitions);
	snprintf(note, sizeof(note), "[%ld queued in %.1f s, p50 %.1f ms]", ph.queued, elapsed,
		 samples_pct(&ph.lat, 50) * 1e3);
	figure(label, rate, "msg/s", pl->base, note);
	snprintf(label, sizeof(label), "fill %d new partitions: push p99", opt.many_partitions);
	figure(label, samples_pct(&ph.lat, 99) * 1e3, "ms", -1, "(target < 100)");
	failures_print(label, &ph.fail);
	free(ph.lat.v);
}
