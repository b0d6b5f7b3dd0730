/*
 * queen-bench phase "push", and the push driver the other phases fill their queues with:
 * batch 100 from 8 connections and batch 1 from 64, 100 B and 1 KiB payloads, over 10 and
 * over --many-partitions partitions, each for --duration.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

struct push_conn {
	long first, span;	/* its partitions: p{first}..p{first+span-1} */
	long cursor;
	int inflight;
	uint64_t seq0;		/* seq of the first item in flight */
	double next_at;		/* paced runs: when the next request may go */
};

static enum step push_next(struct engine *en, struct conn *c)
{
	struct push_run *ph = en->phase;
	struct push_conn *pc = c->sess;
	struct buf *b = &ph->body;
	int n = ph->batch;
	double stop_at;

	/* stop_at: the outage phase's control thread moves it once it knows the return */
	__atomic_load(&ph->stop_at, &stop_at, __ATOMIC_ACQUIRE);
	if (now() >= stop_at || ph->to_send == 0)
		return STEP_STOP;
	if (ph->once) {
		if (pc->cursor >= pc->span)
			return STEP_STOP;
		if (n > pc->span - pc->cursor)
			n = (int)(pc->span - pc->cursor);
	}
	if (ph->to_send > 0) {
		if (n > ph->to_send)
			n = (int)ph->to_send;
		ph->to_send -= n;
	}
	b->len = 0;
	buf_adds(b, "{\"items\":[");
	pc->seq0 = ph->seq;
	for (int i = 0; i < n; i++) {
		buf_addf(b, "%s{\"queue\":\"%s\",\"partition\":\"p%ld\",", i ? "," : "",
			 ph->queue, pc->first + pc->cursor++ % pc->span);
		if (ph->txn_ids)
			buf_addf(b, "\"transactionId\":\"%s-t%" PRIu64 "\",", run_id, ph->seq);
		buf_adds(b, "\"payload\":");
		buf_add_payload(b, ph->pl, ph->seq++);
		buf_adds(b, "}");
	}
	buf_adds(b, "]}");
	http_request(&c->out, "POST", "/api/v1/push", b->p, b->len);
	pc->inflight = n;
	ph->requests++;
	return STEP_SEND;
}

static void push_reply(struct engine *en, struct conn *c, const struct http_resp *r)
{
	struct push_run *ph = en->phase;
	struct push_conn *pc = c->sess;
	const char *e = r->body + r->body_len, *el;
	struct js_arr a;
	long got = 0;
	double t = now();

	samples_add(&ph->lat, t - c->t_sent);
	if (ph->rate_per_conn > 0) {
		pc->next_at = (pc->next_at > 0 ? pc->next_at : c->t_sent) +
			      pc->inflight / ph->rate_per_conn;
		c->not_before = pc->next_at;
	}
	if (r->status == 503 && ph->outage) {
		ph->refused += pc->inflight;
		c->not_before = now() + 0.01;
		return;
	}
	if (r->status != 201) {
		fail_http(&ph->fail, r);
		c->not_before = now() + 0.01;
		return;
	}
	if (!js_arr_open(&a, r->body, e)) {
		tally_add(ph->fail.items, "unparsable", 10, pc->inflight);
		failures_note(&ph->fail, "push answer", r->body, r->body_len);
		return;
	}
	while ((el = js_arr_next(&a))) {
		const char *v = js_get(el, e, "status"), *s = "?", *err;
		size_t n = 1, elen;

		uint64_t seq = pc->seq0 + (uint64_t)got++;
		bool queued = js_str_eq(v, e, "queued");

		if (queued || (ph->outage && js_str_eq(v, e, "buffered"))) {
			if (seq < ph->t_cap)
				ph->t_queued[seq] = t;
			if (ph->how && seq < ph->t_cap)
				ph->how[seq] = queued ? 1 : 2;
			if (queued)
				ph->queued++;
			else
				ph->buffered++;
			continue;
		}
		js_str(v, e, &s, &n);
		tally_add(ph->fail.items, s, n, 1);
		if (js_str(js_get(el, e, "error"), e, &err, &elen))
			failures_note(&ph->fail, "item error", err, elen);
		else
			failures_note(&ph->fail, "item", el, (size_t)(e - el));
	}
	if (got != pc->inflight) {
		tally_add(ph->fail.items, "missing", 7, labs(pc->inflight - got));
		failures_note(&ph->fail, "answer count mismatch", r->body, r->body_len);
	}
}

/* Pushes with `nconns` connections; returns queued messages per second. */
double push_run(struct push_run *ph, int nconns, double *elapsed)
{
	struct engine en = {
		.nconns = nconns, .next = push_next, .reply = push_reply,
		.phase = ph, .fail = &ph->fail,
	};
	struct push_conn *pcs = calloc((size_t)nconns, sizeof(*pcs));

	if (!pcs)
		die("out of memory");
	for (int i = 0; i < nconns; i++) {
		if (ph->sliced && ph->nparts >= nconns) {
			pcs[i].first = (long)i * ph->nparts / nconns;
			pcs[i].span = (long)(i + 1) * ph->nparts / nconns - pcs[i].first;
		} else {
			pcs[i].cursor = (long)i * ph->nparts / nconns;
			pcs[i].span = ph->nparts;
		}
	}
	engine_run(&en, pcs, sizeof(*pcs));
	free(pcs);
	buf_free(&ph->body);
	*elapsed = en.t_last - en.t_start;
	return *elapsed > 0 ? (double)ph->queued / *elapsed : 0;
}

long push_fill(const char *queue, int nparts, long count, const struct payload *pl,
	       const char *label, double *rate)
{
	struct push_run fill = { 0 };
	double elapsed;

	fill.queue = queue;
	fill.batch = PUSH_BIG_BATCH;
	fill.nparts = nparts;
	fill.pl = pl;
	fill.to_send = count;
	fill.stop_at = now() + 3600;
	*rate = push_run(&fill, PUSH_BIG_CONNS, &elapsed);
	printf("  %s: %ld queued in %.1f s (%.0f msg/s)\n", label, fill.queued, elapsed, *rate);
	failures_print(label, &fill.fail);
	free(fill.lat.v);
	return fill.queued;
}

double push_figure(int batch, int nconns, const struct payload *pl, int nparts, bool txn_ids,
		   const char *label, const char *target, struct push_run *out)
{
	struct push_run ph = { 0 };
	char queue[128], note[128];
	double rate, elapsed, cpu0 = cpu_seconds();

	/* The retention phase reuses the queue of push b100 100B over --many-partitions. */
	snprintf(queue, sizeof(queue), "bench-%s-push-b%d-%s-%dp", run_id, batch, pl->tag, nparts);
	if (nconns != (batch == 1 ? PUSH_SMALL_CONNS : PUSH_BIG_CONNS))
		snprintf(queue + strlen(queue), sizeof(queue) - strlen(queue), "-%dc", nconns);
	if (txn_ids)
		snprintf(queue + strlen(queue), sizeof(queue) - strlen(queue), "-txn");
	ph.queue = queue;
	ph.txn_ids = txn_ids;
	ph.batch = batch;
	ph.nparts = nparts;
	ph.pl = pl;
	ph.to_send = -1;
	ph.stop_at = now() + opt.duration;
	rate = push_run(&ph, nconns, &elapsed);
	snprintf(note, sizeof(note),
		 "[%d conns, %ld req, p50 %.1f ms, p99 %.1f ms, client cpu %.0f%%]%s%s", nconns, ph.requests, samples_pct(&ph.lat, 50) * 1e3,
		 samples_pct(&ph.lat, 99) * 1e3,
		 elapsed > 0 ? 100 * (cpu_seconds() - cpu0) / elapsed : 0, target ? " " : "",
		 target ? target : "");
	figure(label, rate, "msg/s", pl->base, note);
	failures_print(label, &ph.fail);
	if (out) {
		*out = ph;
		out->lat = (struct samples){ 0 };
	}
	free(ph.lat.v);
	return rate;
}

double push_capacity(double fig, int batch, int nconns, int nparts, const char *label)
{
	double d = opt.duration, c;

	if (fig > 0)
		return fig;
	opt.duration = d < 5 ? d : 5;
	c = push_figure(batch, nconns, &payloads[1], nparts, false, label, NULL, NULL);
	opt.duration = d;
	return c;
}

/* One push figure: `batch` items a request from `nconns` connections for --duration. */
void phase_push(int batch, int nconns, const struct payload *pl, int nparts)
{
	char label[64];

	snprintf(label, sizeof(label), "push b%d %s %dp", batch, base_name[pl->base], nparts);
	push_figure(batch, nconns, pl, nparts, false, label, NULL, NULL);
}
