/*
 * queen-bench phase "groups": several consumer groups each reading the same messages.  One
 * queue holds --drain-messages 1 KiB messages over 10 partitions; a lone group drains it
 * (4 consumers), then 4 groups at once, then 16 groups at once (4 consumers each, one
 * engine).  The figure is the messages all groups together acked per second against the lone
 * group's: the segments are read once into cache, only the cursors differ, so more groups
 * should not mean a slower sum.
 */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define GROUPS_CONNS_EACH	4

/* Runs `ngroups` fresh groups over `queue` at once; returns their summed acks per second. */
static double groups_round(const char *queue, long count, int ngroups, const char *label)
{
	struct pop_run *runs = calloc((size_t)ngroups, sizeof(*runs));
	char (*names)[96] = calloc((size_t)ngroups, sizeof(*names));
	char note[128];
	double rate, elapsed;
	long acked = 0, pops = 0;

	if (!runs || !names)
		die("out of memory");
	for (int g = 0; g < ngroups; g++) {
		snprintf(names[g], sizeof(names[g]), "bench-%s-g%d-%d", run_id, ngroups, g);
		runs[g].queue = queue;
		runs[g].group = names[g];
		runs[g].target = count;
		pop_path(&runs[g].path, queue, names[g], opt.pop_autopilot);
	}
	rate = pop_drain_many(runs, ngroups, GROUPS_CONNS_EACH, &elapsed);
	for (int g = 0; g < ngroups; g++) {
		acked += runs[g].acked;
		pops += runs[g].pops;
	}
	snprintf(note, sizeof(note), "[%d groups x %ld, %ld acked in %.1f s, %ld pops, pop p99 "
		 "%.1f ms]", ngroups, count, acked, elapsed, pops,
		 samples_pct(&runs[0].lat, 99) * 1e3);
	figure(label, rate, "msg/s", payloads[1].base, note);
	for (int g = 0; g < ngroups; g++) {
		pop_check_empty(&runs[g]);
		failures_print(label, &runs[g].fail);
		buf_free(&runs[g].path);
		free(runs[g].lat.v);
	}
	free(runs);
	free(names);
	return rate;
}

void phase_groups(void)
{
	char queue[128], label[64];
	double fill, lone, rate;
	long n;
	static const int counts[] = { 4, 16 };

	snprintf(queue, sizeof(queue), "bench-%s-groups-10p", run_id);
	n = push_fill(queue, 10, opt.drain_messages, &payloads[1], "groups prefill 10p", &fill);
	lone = groups_round(queue, n, 1, "groups lone drain");
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		snprintf(label, sizeof(label), "groups %d together", counts[i]);
		rate = groups_round(queue, n, counts[i], label);
		snprintf(label, sizeof(label), "groups %d vs lone", counts[i]);
		figure_ratio(label, rate, lone, "(target >= 1.0)");
	}
}
