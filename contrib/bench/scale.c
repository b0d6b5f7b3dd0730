/*
 * queen-bench phase "scale" (run only with --scale or when --only names it; it is long): one
 * 1 KiB message in each of --scale-partitions new partitions (a million by default), each
 * with a transactionId so that every push probes dedup.  Figures: the fill rate against push
 * b100 16c 10p of this run, the broker's RSS after the fill, the time a restarted broker
 * takes to answer /health and its RSS then, and the drain (4 consumers, autopilot) against
 * the 10-partition drain of this run.  The restart needs --restart-cmd (bench.sh passes one).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define SCALE_READY_WAIT_S	300.0

/* Runs --restart-cmd; returns the new broker's pid, or -1. */
static long scale_restart(void)
{
	char line[64];
	long pid = -1;
	FILE *p = popen(opt.restart_cmd, "r");

	if (!p)
		return -1;
	if (fgets(line, sizeof(line), p))
		pid = strtol(line, NULL, 10);
	if (pclose(p) != 0)
		return -1;
	return pid > 0 ? pid : -1;
}

/* Seconds until GET /health answers 200, or -1 after SCALE_READY_WAIT_S. */
static double scale_wait_ready(double t0)
{
	while (now() - t0 < SCALE_READY_WAIT_S) {
		struct hclient h = { .fd = -1 };
		struct http_resp r;
		bool up = hc_call(&h, "GET", "/health", NULL, 0, &r) == 0 && r.status == 200;

		hc_free(&h);
		if (up)
			return now() - t0;
		usleep(20000);
	}
	return -1;
}

static void figure_rss(const char *label, const char *note)
{
	long kib = opt.queend_pid > 0 ? proc_status_kib(opt.queend_pid, "VmRSS") : -1;

	if (kib < 0)
		printf("%s: not measured (%s)\n", label,
		       opt.queend_pid > 0 ? "/proc unreadable" : "no --queend-pid");
	else
		figure(label, (double)kib / 1024, "MiB", -1, note);
}

void phase_scale(void)
{
	struct pop_run ph = { 0 };
	struct failures fail = { 0 };
	char queue[128], group[96], label[96], note[128];
	double fill, p99, rate, elapsed, t0, ready;
	long n, pid;

	snprintf(queue, sizeof(queue), "bench-%s-scale-%ldp", run_id, opt.scale_partitions);
	n = fill_one_each(queue, opt.scale_partitions, true, &fill, &p99);
	snprintf(label, sizeof(label), "scale fill %ld partitions x 1 msg", opt.scale_partitions);
	snprintf(note, sizeof(note), "[%ld queued, dedup on, push p99 %.1f ms]", n, p99);
	figure(label, fill, "msg/s", payloads[1].base, note);
	if (fig_push_b100 > 0)
		figure_ratio("scale fill vs push b100 16c 10p", fill, fig_push_b100,
			     "(target >= 0.5)");
	figure_rss("scale broker RSS after fill", "(target <= 256)");

	if (!opt.restart_cmd) {
		printf("scale restart: skipped (no --restart-cmd)\n");
	} else {
		t0 = now();
		pid = scale_restart();
		if (pid < 0) {
			tally_add(fail.items, "restart failed", 14, 1);
			failures_note(&fail, "restart", opt.restart_cmd, strlen(opt.restart_cmd));
		} else {
			opt.queend_pid = pid;
			ready = scale_wait_ready(t0);
			if (ready < 0) {
				tally_add(fail.items, "not ready", 9, 1);
				failures_note(&fail, "restart", "no /health 200 within 300 s", 27);
			} else {
				figure("scale ready after restart", ready, "s", -1, "(target <= 5)");
				figure_rss("scale broker RSS after restart", "(target <= 256)");
			}
		}
	}
	failures_print("scale restart", &fail);

	snprintf(group, sizeof(group), "bench-%s-scale", run_id);
	ph.queue = queue;
	ph.group = group;
	ph.target = n;
	pop_path(&ph.path, queue, group, true);
	rate = pop_drain(&ph, POP_CONSUMERS, &elapsed);
	snprintf(note, sizeof(note), "[%ld acked in %.1f s, %ld pops, pop p99 %.1f ms]", ph.acked,
		 elapsed, ph.pops, samples_pct(&ph.lat, 99) * 1e3);
	snprintf(label, sizeof(label), "scale drain %ldp x 1 msg", opt.scale_partitions);
	figure(label, rate, "msg/s", payloads[1].base, note);
	if (fig_drain_10p > 0)
		figure_ratio("scale drain vs drain 10p", rate, fig_drain_10p, "(target >= 0.3)");
	figure_rss("scale broker RSS after drain", NULL);
	pop_check_empty(&ph);
	failures_print(label, &ph.fail);
	buf_free(&ph.path);
	free(ph.lat.v);
}
