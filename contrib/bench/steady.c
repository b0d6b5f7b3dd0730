/*
 * queen-bench phase "steady": a queue under sustained load, and the timed load it shares
 * with the outage phase (load_init).  Producers push batch 100 of
 * 1 KiB over 10 partitions from 16 connections, paced to half the push capacity measured in
 * this run (push b100 16c 10p of the push-load phase, or a short measurement of it here),
 * while 4 consumers of one group long-poll pop batch 100 and ack, for --steady seconds.
 * Figures: the backlog left when the producers stop, in seconds of production (a queue whose
 * consumers keep up leaves less than one), and the end-to-end latency of each message from
 * its push being answered to its pop being answered (p50, p99).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define STEADY_PRODUCERS	16
#define STEADY_PARTITIONS	10

static void *steady_producer(void *arg)
{
	struct push_run *ph = arg;
	double elapsed;

	push_run(ph, STEADY_PRODUCERS, &elapsed);
	return NULL;
}

void phase_steady(void)
{
	struct push_run prod = { 0 };
	struct pop_run cons = { 0 };
	struct samples e2e = { 0 };
	char queue[128], group[96], note[160];
	double capacity, target, elapsed, t0, t_prod, backlog_s;
	pthread_t thread;
	uint64_t cap;

	snprintf(queue, sizeof(queue), "bench-%s-steady", run_id);
	snprintf(group, sizeof(group), "bench-%s-steady", run_id);
	capacity = push_capacity(fig_push_b100, PUSH_BIG_BATCH, STEADY_PRODUCERS,
				 STEADY_PARTITIONS, "steady: push capacity");
	if (capacity <= 0) {
		printf("steady: skipped (no push capacity measured)\n");
		return;
	}
	target = capacity / 2;
	cap = (uint64_t)(target * opt.steady_seconds * 1.5) + 10000;
	load_init(&prod, &cons, queue, group, PUSH_BIG_BATCH, STEADY_PARTITIONS, target,
		  STEADY_PRODUCERS, cap);
	t0 = now();
	prod.stop_at = t0 + opt.steady_seconds;
	cons.target = (long)cap;	/* never reached: the clock ends the run */
	cons.stop_at = prod.stop_at;
	if (pthread_create(&thread, NULL, steady_producer, &prod) != 0)
		die("pthread_create failed");
	pop_drain(&cons, POP_CONSUMERS, &elapsed);
	pthread_join(thread, NULL);
	t_prod = now() - t0;

	for (uint64_t s = 0; s < prod.seq && s < cap; s++)
		if (prod.t_queued[s] > 0 && cons.t_popped[s] > 0)
			samples_add(&e2e, cons.t_popped[s] > prod.t_queued[s]
				    ? cons.t_popped[s] - prod.t_queued[s] : 0);
	/* The production rate, not the target: a broker that cannot even take the target
	 * rate is seen in the pushed figure, not hidden in the backlog one. */
	backlog_s = prod.queued > 0 ? (double)(prod.queued - cons.acked) /
				      ((double)prod.queued / t_prod) : 0;
	snprintf(note, sizeof(note), "[target %.0f msg/s = capacity / 2, %ld pushed in %.1f s, "
		 "push p99 %.1f ms]", target, prod.queued, t_prod, samples_pct(&prod.lat, 99) * 1e3);
	figure("steady pushed", (double)prod.queued / t_prod, "msg/s", payloads[1].base, note);
	snprintf(note, sizeof(note), "[%ld acked, %ld left, %ld pops, %ld empty]", cons.acked,
		 prod.queued - cons.acked, cons.pops, cons.empty);
	figure("steady consumed", (double)cons.acked / t_prod, "msg/s", payloads[1].base, note);
	figure("steady backlog at end", backlog_s, "s", -1, "(of production; target < 1)");
	snprintf(note, sizeof(note), "[%zu messages, max %.1f ms]", e2e.n,
		 samples_pct(&e2e, 100) * 1e3);
	figure("steady end-to-end p50", samples_pct(&e2e, 50) * 1e3, "ms", -1, NULL);
	figure("steady end-to-end p99", samples_pct(&e2e, 99) * 1e3, "ms", -1, note);
	failures_print("steady push", &prod.fail);
	failures_print("steady pop", &cons.fail);
	load_free(&prod, &cons);
	free(e2e.v);
}

void load_init(struct push_run *prod, struct pop_run *cons, const char *queue,
	       const char *group, int batch, int nparts, double rate, int producers,
	       uint64_t cap)
{
	prod->t_queued = calloc(cap, sizeof(double));
	cons->t_popped = calloc(cap, sizeof(double));
	if (!prod->t_queued || !cons->t_popped)
		die("out of memory");
	prod->t_cap = cons->t_cap = cap;
	prod->queue = queue;
	prod->batch = batch;
	prod->nparts = nparts;
	prod->pl = &payloads[1];
	prod->to_send = -1;
	prod->rate_per_conn = rate / producers;
	cons->queue = queue;
	cons->group = group;
	buf_addf(&cons->path, "/api/v1/pop/queue/%s?batch=%d&wait=true&timeout=500&"
		 "consumerGroup=%s&subscriptionMode=all", queue, POP_BATCH, group);
}

void load_free(struct push_run *prod, struct pop_run *cons)
{
	free(prod->t_queued);
	free(prod->how);
	free(cons->t_popped);
	free(prod->lat.v);
	free(cons->lat.v);
	buf_free(&cons->path);
}
