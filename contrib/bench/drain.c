/*
 * queen-bench phase "drain": how fast 4 consumers of one group (pop batch 100 + ack/batch)
 * empty a backlog of 1 KiB messages, and how the partition count changes it:
 * --drain-messages over 10 partitions (against the raw INSERT and against push b100 of the
 * push-load phase), the same over --many-partitions partitions with autopilot=true, and one
 * message in each of --drain-messages partitions (fill rate too).  Each prints its pop p50
 * and p99, and the broker's and the database's CPU per message popped and acked.
 */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

double fig_drain_10p;

/* Drains `queue` (holding `count`) by a fresh group; prints the drain and pop latency
 * figures under `label` and returns msg/s. */
static double drain_figures(const char *queue, long count, const char *label, bool autopilot,
			    const char *cpu_label)
{
	struct pop_run ph = { 0 };
	struct cpu_mark m;
	char group[96], note[128], lab[96];
	double rate, elapsed;

	snprintf(group, sizeof(group), "bench-%s-%s", run_id, queue + strlen("bench-") +
		 strlen(run_id) + 1);
	ph.queue = queue;
	ph.group = group;
	ph.target = count;
	pop_path(&ph.path, queue, group, autopilot);
	cpu_mark(&m);
	rate = pop_drain(&ph, POP_CONSUMERS, &elapsed);
	snprintf(note, sizeof(note), "[%ld acked in %.1f s, %ld pops, %.1f msg/pop, %ld empty, "
		 "%ld redelivered]", ph.acked, elapsed, ph.pops,
		 ph.pops > ph.empty ? (double)ph.popped / (double)(ph.pops - ph.empty) : 0,
		 ph.empty, ph.popped > ph.acked ? ph.popped - ph.acked : 0);
	figure(label, rate, "msg/s", payloads[1].base, note);
	if (cpu_label)
		figure_cpu(cpu_label, &m, ph.acked, "(target <= 5)");
	snprintf(lab, sizeof(lab), "%s: pop p50", label);
	figure(lab, samples_pct(&ph.lat, 50) * 1e3, "ms", -1, NULL);
	snprintf(lab, sizeof(lab), "%s: pop p99", label);
	figure(lab, samples_pct(&ph.lat, 99) * 1e3, "ms", -1, "(target < 20)");
	pop_check_empty(&ph);
	failures_print(label, &ph.fail);
	buf_free(&ph.path);
	free(ph.lat.v);
	return rate;
}

/* A queue holding one 1 KiB message in each of `nparts` new partitions; returns how many. */
long fill_one_each(const char *queue, long nparts, bool txn_ids, double *rate, double *p99)
{
	struct push_run ph = { 0 };
	double elapsed;

	ph.queue = queue;
	ph.batch = PUSH_BIG_BATCH;
	ph.nparts = (int)nparts;
	ph.sliced = true;
	ph.once = true;
	ph.txn_ids = txn_ids;
	ph.pl = &payloads[1];
	ph.to_send = -1;
	ph.stop_at = now() + 7200;
	*rate = push_run(&ph, PUSH_BIG_CONNS, &elapsed);
	*p99 = samples_pct(&ph.lat, 99) * 1e3;
	failures_print(queue, &ph.fail);
	free(ph.lat.v);
	return ph.queued;
}

void phase_drain(void)
{
	char queue[128], label[96], note[128], cpu[96];
	double rate, fill, p99;
	long n;

	snprintf(queue, sizeof(queue), "bench-%s-drain-10p", run_id);
	n = push_fill(queue, 10, opt.drain_messages, &payloads[1], "drain prefill 10p", &fill);
	fig_drain_10p = drain_figures(queue, n, "drain b100 4c 10p", opt.pop_autopilot,
				      "broker cpu per popped+acked msg");
	if (fig_push_b100 > 0)
		figure_ratio("drain 10p vs push b100 16c", fig_drain_10p, fig_push_b100,
			     "(target >= 1.0)");

	snprintf(queue, sizeof(queue), "bench-%s-drain-%dp", run_id, opt.many_partitions);
	snprintf(label, sizeof(label), "drain prefill %dp", opt.many_partitions);
	n = push_fill(queue, opt.many_partitions, opt.drain_messages, &payloads[1], label, &fill);
	snprintf(label, sizeof(label), "drain b100 4c %dp autopilot", opt.many_partitions);
	snprintf(cpu, sizeof(cpu), "broker cpu per popped+acked msg, %dp", opt.many_partitions);
	rate = drain_figures(queue, n, label, true, cpu);
	snprintf(label, sizeof(label), "drain %dp vs 10p", opt.many_partitions);
	figure_ratio(label, rate, fig_drain_10p, "(target >= 0.8)");

	snprintf(queue, sizeof(queue), "bench-%s-drain-1each-%ldp", run_id, opt.drain_messages);
	n = fill_one_each(queue, opt.drain_messages, false, &fill, &p99);
	snprintf(label, sizeof(label), "fill %ld partitions x 1 msg", opt.drain_messages);
	snprintf(note, sizeof(note), "[%ld queued, push p99 %.1f ms]", n, p99);
	figure(label, fill, "msg/s", payloads[1].base, note);
	snprintf(label, sizeof(label), "drain %ldp x 1 msg autopilot", opt.drain_messages);
	snprintf(cpu, sizeof(cpu), "broker cpu per popped+acked msg, %ldp x 1", opt.drain_messages);
	rate = drain_figures(queue, n, label, true, cpu);
	snprintf(label, sizeof(label), "drain %ldp x 1 vs 10p", opt.drain_messages);
	figure_ratio(label, rate, fig_drain_10p, "(target >= 0.5)");
}
