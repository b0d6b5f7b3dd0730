/*
 * queen-bench phase "outage": PostgreSQL stops under load and comes back (SPEC 15, 19).
 * Producers push 1 KiB items over 10 partitions from 16 connections while 4 consumers of one
 * group long-poll pop and ack, as in the steady phase; after 3 s PostgreSQL is stopped
 * (`--pg-cmd CMD`: `CMD stop` stops it, `CMD start` starts it and waits) for
 * --outage seconds, then the load goes on for 10 s more and the consumers take everything
 * that was acknowledged (they give up after 90 s without progress).  Three runs: pushes of
 * one item paced to half of what 16 connections reach with them (push b1 16c), pushes of 100
 * paced to half of push b100 16c, and pushes of 100 unpaced (full load).  A thread of its own
 * runs the outage and polls GET /api/v1/status/buffers every 50 ms.
 *
 * Figures: items acknowledged (queued or buffered) and how many were buffered; the most the
 * spool held and how long after the database's return it was empty (target 5 s at half load;
 * at full load it must empty at all); the first push answered "queued" and the first pop
 * that delivered after the return (target 2 s); how long pushes made after the return took
 * to reach a consumer (p50, p95; target 1 s); the longest push; acknowledged items never
 * delivered (target 0) and deliveries repeated (leases that ran out while acks could not be
 * stored).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define OUTAGE_PRODUCERS	16
#define OUTAGE_PARTITIONS	10
#define OUTAGE_LEAD_S		3.0	/* load before the stop */
#define OUTAGE_AFTER_S		10.0	/* load after the return */
#define OUTAGE_LEASE_S		5	/* leaseTime of the queue: redeliveries come soon */

struct outage_ctl {
	struct push_run *prod;
	struct pop_run *cons;
	double t_down, t_back, t_empty;	/* t_empty: first empty spool after t_back, 0 = never */
	long spool_most;
	long spool_at[64];		/* the spool each second after the return, -1 = unread */
	bool pg_failed;
	bool done;			/* the consumers are done (atomic) */
};

static long spool_pending_now(struct hclient *h)
{
	struct http_resp r;

	if (hc_call(h, "GET", "/api/v1/status/buffers", NULL, 0, &r) < 0 || r.status != 200)
		return -1;
	return js_ll(r.body, r.body + r.body_len, "pendingCount");
}

static bool pg_cmd(const char *verb)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "%s %s >/dev/null 2>&1", opt.pg_cmd, verb);
	return system(cmd) == 0;
}

/* The producers, then the consumers' target: everything acknowledged. */
static void *outage_producers(void *arg)
{
	struct outage_ctl *ctl = arg;
	double elapsed;

	push_run(ctl->prod, OUTAGE_PRODUCERS, &elapsed);
	__atomic_store_n(&ctl->cons->target, ctl->prod->queued + ctl->prod->buffered,
			 __ATOMIC_RELEASE);
	return NULL;
}

/* The outage, and the spool's size every 50 ms until the consumers are done. */
static void *outage_control(void *arg)
{
	struct outage_ctl *ctl = arg;
	struct hclient h = { .fd = -1 };
	double t0 = now(), end;

	while (now() - t0 < OUTAGE_LEAD_S)
		usleep(50000);
	ctl->t_down = now();
	if (!pg_cmd("stop"))
		ctl->pg_failed = true;
	while (now() - ctl->t_down < opt.outage_seconds) {
		long n = spool_pending_now(&h);

		if (n > ctl->spool_most)
			ctl->spool_most = n;
		usleep(50000);
	}
	if (!pg_cmd("start"))
		ctl->pg_failed = true;
	ctl->t_back = now();
	end = ctl->t_back + OUTAGE_AFTER_S;
	__atomic_store(&ctl->prod->stop_at, &end, __ATOMIC_RELEASE);
	for (int i = 0; i < 64; i++)
		ctl->spool_at[i] = -1;
	while (!__atomic_load_n(&ctl->done, __ATOMIC_ACQUIRE)) {
		long n = spool_pending_now(&h);
		int sec = (int)(now() - ctl->t_back);

		if (n > ctl->spool_most)
			ctl->spool_most = n;
		if (sec < 64 && ctl->spool_at[sec] < 0)
			ctl->spool_at[sec] = n;
		if (n == 0 && ctl->t_empty == 0)
			ctl->t_empty = now();
		usleep(50000);
	}
	hc_free(&h);
	return NULL;
}

static void outage_configure(const char *queue)
{
	struct hclient h = { .fd = -1 };
	struct http_resp r;
	char body[256];

	snprintf(body, sizeof(body), "{\"queue\":\"%s\",\"options\":{\"leaseTime\":%d}}", queue,
		 OUTAGE_LEASE_S);
	if (hc_call(&h, "POST", "/api/v1/configure", body, strlen(body), &r) < 0 ||
	    r.status / 100 != 2)
		die("outage: configuring %s failed", queue);
	hc_free(&h);
}

/* The figures of one run: what was acknowledged, lost, delayed after the return. */
static void outage_report(const char *label, struct outage_ctl *ctl, double target_rate)
{
	struct push_run *prod = ctl->prod;
	struct pop_run *cons = ctl->cons;
	struct samples after = { 0 };
	double first_queued = 0, first_pop = 0;
	long lost = 0, acked = prod->queued + prod->buffered;
	char missing[160] = "";
	size_t mlen = 0;
	char l[96], note[200];

	for (uint64_t s = 0; s < prod->seq && s < prod->t_cap; s++) {
		double tq = prod->t_queued[s], tp = cons->t_popped[s];

		if (prod->how[s] == 0)
			continue;
		if (tp == 0 && lost++ < 4 && mlen < sizeof(missing) - 40)
			mlen += (size_t)snprintf(missing + mlen, sizeof(missing) - mlen,
						 " seq %llu %s at %+.2f s", (unsigned long long)s,
						 prod->how[s] == 1 ? "queued" : "buffered",
						 tq - ctl->t_down);
		if (prod->how[s] == 1 && tq >= ctl->t_back && (first_queued == 0 || tq < first_queued))
			first_queued = tq;
		if (tp >= ctl->t_back && (first_pop == 0 || tp < first_pop))
			first_pop = tp;
		if (tq >= ctl->t_back && tp > 0)	/* queued or buffered after the return */
			samples_add(&after, tp > tq ? tp - tq : 0);
	}
	if (target_rate > 0)
		snprintf(note, sizeof(note), "[batch %d paced to %.0f msg/s = capacity / 2; %ld "
			 "buffered, %ld refused]", prod->batch, target_rate, prod->buffered,
			 prod->refused);
	else
		snprintf(note, sizeof(note), "[batch %d unpaced; %ld buffered, %ld refused]",
			 prod->batch, prod->buffered, prod->refused);
	snprintf(l, sizeof(l), "%s acknowledged", label);
	figure(l, (double)acked, "items", -1, note);
	snprintf(note, sizeof(note), "[outage %.1f s, spool held at most %ld, load went on for "
		 "%.1f s after the return]", ctl->t_back - ctl->t_down, ctl->spool_most,
		 prod->stop_at - ctl->t_back);
	snprintf(l, sizeof(l), "%s spool empty after return", label);
	figure(l, ctl->t_empty > 0 ? ctl->t_empty - ctl->t_back : -1, "s", -1,
	       target_rate > 0 ? "(target <= 5; -1 = never)"
			       : "(target: it empties while the load goes on; -1 = never)");
	printf("  %s; each second after the return:", note);
	for (int i = 0; i < 64 && ctl->spool_at[i] >= 0; i++)
		printf(" %ld", ctl->spool_at[i]);
	printf("\n");
	snprintf(l, sizeof(l), "%s first queued push after return", label);
	figure(l, first_queued > 0 ? first_queued - ctl->t_back : -1, "s", -1, "(target < 2)");
	snprintf(l, sizeof(l), "%s first delivery after return", label);
	figure(l, first_pop > 0 ? first_pop - ctl->t_back : -1, "s", -1, "(target < 2)");
	snprintf(note, sizeof(note), "[%zu items answered after the return, queued or buffered; "
		 "max %.2f s] (target p95 < 1)", after.n, samples_pct(&after, 100));
	snprintf(l, sizeof(l), "%s delay after return p50", label);
	figure(l, samples_pct(&after, 50), "s", -1, NULL);
	snprintf(l, sizeof(l), "%s delay after return p95", label);
	figure(l, samples_pct(&after, 95), "s", -1, note);
	snprintf(l, sizeof(l), "%s longest push", label);
	figure(l, samples_pct(&prod->lat, 100), "s", -1, NULL);
	snprintf(note, sizeof(note), "[%ld deliveries repeated, %ld pop/ack refusals%s] (target 0)",
		 cons->repeated, cons->refused, cons->stalled ? "; consumers gave up" : "");
	snprintf(l, sizeof(l), "%s not delivered", label);
	figure(l, (double)lost, "items", -1, note);
	if (lost > 0)
		printf("  not delivered (time from the stop):%s\n", missing);
	if (lost > 0)
		grand_failures++;
	free(after.v);
}

/* One run: batch items a push, paced to `rate` msg/s in all (0 = unpaced, at most about
 * `capacity`). */
static void outage_run(const char *label, const char *tag, int batch, double rate,
		       double capacity)
{
	struct push_run prod = { 0 };
	struct pop_run cons = { 0 };
	struct outage_ctl ctl = { .prod = &prod, .cons = &cons };
	char queue[128], group[96];
	double window = OUTAGE_LEAD_S + opt.outage_seconds + OUTAGE_AFTER_S, elapsed;
	/* the producers' end until the return is known, when it becomes return + after */
	double far = 3600;
	pthread_t producers, control;
	uint64_t cap = (uint64_t)((rate > 0 ? rate : capacity) * 4 * (window + 30)) + 100000;

	snprintf(queue, sizeof(queue), "bench-%s-outage-%s", run_id, tag);
	snprintf(group, sizeof(group), "bench-%s-outage", run_id);
	outage_configure(queue);
	load_init(&prod, &cons, queue, group, batch, OUTAGE_PARTITIONS, rate, OUTAGE_PRODUCERS,
		  cap);
	prod.how = calloc(cap, 1);
	if (!prod.how)
		die("out of memory");
	prod.outage = cons.outage = true;
	prod.stop_at = now() + far;
	/* Until the producers stop, no target; then everything they got acknowledged. */
	cons.target = (long)cap * 2;
	if (pthread_create(&producers, NULL, outage_producers, &ctl) != 0 ||
	    pthread_create(&control, NULL, outage_control, &ctl) != 0)
		die("pthread_create failed");
	pop_drain(&cons, POP_CONSUMERS, &elapsed);
	__atomic_store_n(&ctl.done, true, __ATOMIC_RELEASE);
	pthread_join(producers, NULL);
	pthread_join(control, NULL);
	if (ctl.pg_failed) {
		printf("%s: `%s stop|start` failed; figures left out\n", label, opt.pg_cmd);
		grand_failures++;
	} else {
		outage_report(label, &ctl, rate);
	}
	failures_print(label, &prod.fail);
	failures_print(label, &cons.fail);
	load_free(&prod, &cons);
}

void phase_outage(void)
{
	double b1, b100;

	if (!opt.pg_cmd) {
		printf("outage: skipped (no --pg-cmd)\n");
		return;
	}
	b1 = push_capacity(fig_push_b1, 1, OUTAGE_PRODUCERS, OUTAGE_PARTITIONS,
			   "outage: push capacity b1 16c");
	b100 = push_capacity(fig_push_b100, PUSH_BIG_BATCH, OUTAGE_PRODUCERS, OUTAGE_PARTITIONS,
			     "outage: push capacity b100 16c");
	if (b1 <= 0 || b100 <= 0) {
		printf("outage: skipped (no push capacity measured)\n");
		return;
	}
	outage_run("outage b1 half load", "b1-half", 1, b1 / 2, b1);
	outage_run("outage b100 half load", "b100-half", PUSH_BIG_BATCH, b100 / 2, b100);
	outage_run("outage b100 full load", "b100-full", PUSH_BIG_BATCH, 0, b100);
}
