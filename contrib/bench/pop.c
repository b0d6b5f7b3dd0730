/*
 * queen-bench phase "pop", and the pop+ack driver of the drain phases: --pop-messages
 * messages pre-pushed over 10 and over --many-partitions partitions, drained by 4 consumers
 * of one group (pop batch 100, wait=false, then one ack/batch of everything popped).
 */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static enum step pop_next(struct engine *en, struct conn *c)
{
	struct pop_conn *pc = c->sess;
	struct pop_run *ph = pc->run ? pc->run : en->phase;

	if (pc->ack_next) {
		pc->ack_next = false;
		pc->in_ack = true;
		ph->acks++;
		http_request(&c->out, "POST", "/api/v1/ack/batch", pc->ack.p, pc->ack.len);
		return STEP_SEND;
	}
	/* target: the outage phase's producer thread sets it once it knows it; a message
	 * redelivered and acked twice counts once where seqs are tracked */
	if ((ph->t_popped ? ph->distinct : ph->acked) >=
	    __atomic_load_n(&ph->target, __ATOMIC_ACQUIRE) ||
	    (ph->stop_at > 0 && now() >= ph->stop_at))
		return STEP_STOP;
	if (now() - ph->last_progress > POP_STALL_S) {
		ph->stalled = true;
		return STEP_STOP;
	}
	pc->in_ack = false;
	ph->pops++;
	http_request(&c->out, "GET", ph->path.p, NULL, 0);
	return STEP_SEND;
}

/* Records when the message at el (a bench payload) was popped, by its payload's seq. */
static void pop_note_seq(struct pop_run *ph, const char *el, const char *e)
{
	const char *s;
	size_t n;
	uint64_t seq = 0;

	if (!js_str(js_get(js_get(el, e, "data"), e, "seq"), e, &s, &n))
		return;
	for (size_t i = 0; i < n; i++)
		seq = seq * 10 + (uint64_t)(s[i] - '0');
	if (seq >= ph->t_cap)
		return;
	if (ph->t_popped[seq] == 0) {
		ph->t_popped[seq] = now();
		ph->distinct++;
	} else
		ph->repeated++;
}

/* Turns the messages of a pop answer into the body of one ack/batch; returns their count. */
int pop_build_ack(struct pop_run *ph, struct pop_conn *pc, const struct http_resp *r)
{
	const char *e = r->body + r->body_len, *el, *top_lease = NULL, *s;
	size_t top_len = 0, n;
	struct js_arr a;
	int count = 0;

	if (js_str(js_get(r->body, e, "leaseId"), e, &s, &n)) {
		top_lease = s;
		top_len = n;
	}
	if (!js_arr_open(&a, js_get(r->body, e, "messages"), e)) {
		tally_add(ph->fail.items, "unparsable pop", 14, 1);
		failures_note(&ph->fail, "pop answer", r->body, r->body_len);
		return 0;
	}
	pc->ack.len = 0;
	buf_addf(&pc->ack, "{\"consumerGroup\":\"%s\",\"acknowledgments\":[", ph->group);
	while ((el = js_arr_next(&a))) {
		const char *txn, *pid, *lease = top_lease;
		size_t tl, pl, ll = top_len;

		if (!js_str(js_get(el, e, "transactionId"), e, &txn, &tl) ||
		    !js_str(js_get(el, e, "partitionId"), e, &pid, &pl)) {
			tally_add(ph->fail.items, "message without ids", 19, 1);
			failures_note(&ph->fail, "message", el, (size_t)(e - el));
			continue;
		}
		js_str(js_get(el, e, "leaseId"), e, &lease, &ll);
		if (ph->t_popped)
			pop_note_seq(ph, el, e);
		buf_addf(&pc->ack, "%s{\"transactionId\":\"%.*s\",\"partitionId\":\"%.*s\","
			 "\"status\":\"completed\"", count ? "," : "", (int)tl, txn, (int)pl, pid);
		if (lease && ll)
			buf_addf(&pc->ack, ",\"leaseId\":\"%.*s\"", (int)ll, lease);
		buf_adds(&pc->ack, "}");
		count++;
	}
	buf_adds(&pc->ack, "]}");
	return count;
}

static void pop_reply_ack(struct pop_run *ph, struct pop_conn *pc, const struct http_resp *r)
{
	const char *e = r->body + r->body_len, *el;
	struct js_arr a;
	int got = 0;

	if (r->status == 503 && ph->outage) {
		ph->refused++;
		return;
	}
	if (r->status != 200) {
		fail_http(&ph->fail, r);
		return;
	}
	if (!js_arr_open(&a, r->body, e)) {
		tally_add(ph->fail.items, "unparsable ack", 14, 1);
		failures_note(&ph->fail, "ack answer", r->body, r->body_len);
		return;
	}
	while ((el = js_arr_next(&a))) {
		const char *err;
		size_t elen;

		got++;
		if (js_is(js_get(el, e, "success"), e, "true")) {
			if (js_is(js_get(el, e, "noop"), e, "true"))
				ph->noop++;
			else
				ph->acked++;
			ph->last_progress = now();
			continue;
		}
		if (ph->outage) {	/* e.g. its lease ran out while the database was away */
			ph->refused++;
			continue;
		}
		tally_add(ph->fail.items, "ack not successful", 18, 1);
		if (js_str(js_get(el, e, "error"), e, &err, &elen))
			failures_note(&ph->fail, "ack error", err, elen);
		else
			failures_note(&ph->fail, "ack", el, (size_t)(e - el));
	}
	if (got != pc->ack_items)
		tally_add(ph->fail.items, "ack answer count mismatch", 25, 1);
}

/* A pop that delivered nothing: count it, and let the connection wait 5 ms before the next. */
void pop_answer_empty(struct conn *c, long *empty)
{
	(*empty)++;
	c->not_before = now() + 0.005;
}

/* Whether a pop answer carries messages (200); a 204 or a failure is counted and the
 * connection backs off.  Shared by the pop+ack and the transaction phases. */
bool pop_answer_ok(struct conn *c, const struct http_resp *r, long *empty,
			  struct failures *f)
{
	if (r->status == 204) {
		pop_answer_empty(c, empty);
		return false;
	}
	if (r->status != 200) {
		fail_http(f, r);
		c->not_before = now() + 0.01;
		return false;
	}
	return true;
}

static void pop_reply(struct engine *en, struct conn *c, const struct http_resp *r)
{
	struct pop_conn *pc = c->sess;
	struct pop_run *ph = pc->run ? pc->run : en->phase;
	int n;

	if (pc->in_ack) {
		pop_reply_ack(ph, pc, r);
		return;
	}
	samples_add(&ph->lat, now() - c->t_sent);
	if (r->status == 503 && ph->outage) {
		ph->refused++;
		c->not_before = now() + 0.01;
		return;
	}
	if (!pop_answer_ok(c, r, &ph->empty, &ph->fail))
		return;
	n = pop_build_ack(ph, pc, r);
	if (n == 0) {
		pop_answer_empty(c, &ph->empty);
		return;
	}
	ph->popped += n;
	pc->ack_items = n;
	pc->ack_next = true;
}

void pop_path(struct buf *path, const char *queue, const char *group, bool autopilot)
{
	path->len = 0;
	buf_addf(path, "/api/v1/pop/queue/%s?batch=%d&wait=false&consumerGroup=%s"
		 "&subscriptionMode=all", queue, POP_BATCH, group);
	if (opt.pop_partitions > 0)
		buf_addf(path, "&partitions=%d", opt.pop_partitions);
	/* Pop autopilot (SPEC 5): the broker chooses how many partitions one pop claims from
	 * its index, so a batch of 100 fills up even when each partition holds a few
	 * messages. A client draining many partitions sends it; --no-autopilot does not. */
	if (autopilot)
		buf_addf(path, "&autopilot=true");
}

double pop_drain_many(struct pop_run *runs, int nruns, int conns_each, double *elapsed)
{
	int nconns = nruns * conns_each;
	struct pop_conn *pcs = calloc((size_t)nconns, sizeof(*pcs));
	struct failures fail = { 0 };
	struct engine en = {
		.nconns = nconns, .next = pop_next, .reply = pop_reply,
		.phase = runs, .fail = &fail,
	};
	long acked = 0;

	if (!pcs)
		die("out of memory");
	for (int i = 0; i < nconns; i++)
		pcs[i].run = &runs[i / conns_each];
	for (int g = 0; g < nruns; g++)
		runs[g].last_progress = now();
	engine_run(&en, pcs, sizeof(*pcs));
	for (int i = 0; i < nconns; i++)
		buf_free(&pcs[i].ack);
	free(pcs);
	*elapsed = en.t_last - en.t_start;
	for (int g = 0; g < nruns; g++) {
		struct pop_run *ph = &runs[g];

		acked += ph->acked;
		if (ph->stalled) {
			tally_add(ph->fail.items, "drain stalled", 13, ph->target - ph->acked);
			failures_note(&ph->fail, "stall", "no ack progress", 15);
		}
	}
	/* The engine's own transport failures and timeouts are the first group's. */
	runs[0].fail.transport += fail.transport;
	runs[0].fail.timeouts += fail.timeouts;
	if (!runs[0].fail.first[0] && fail.first[0])
		memcpy(runs[0].fail.first, fail.first, sizeof(fail.first));
	return *elapsed > 0 ? (double)acked / *elapsed : 0;
}

double pop_drain(struct pop_run *ph, int nconns, double *elapsed)
{
	return pop_drain_many(ph, 1, nconns, elapsed);
}

void pop_check_empty(struct pop_run *ph)
{
	struct hclient h = { .fd = -1 };
	struct http_resp r;

	if (hc_call(&h, "GET", ph->path.p, NULL, 0, &r) < 0)
		ph->fail.transport++;
	else if (r.status != 204) {
		tally_add(ph->fail.items, "left after drain", 16, 1);
		failures_note(&ph->fail, "pop after drain", r.body, r.body_len);
	}
	hc_free(&h);
}

/*
 * Pre-pushes --pop-messages 100-byte messages over `nparts` partitions, then 4 consumers of one
 * group drain them: pop batch 100 (wait=false), ack/batch of everything popped, repeat.
 */
void phase_pop(int nparts)
{
	struct pop_run ph = { 0 };
	struct cpu_mark m;
	char queue[128], group[64], label[64], note[96];
	double rate, elapsed;

	snprintf(queue, sizeof(queue), "bench-%s-pop-%dp", run_id, nparts);
	snprintf(group, sizeof(group), "bench-%s", run_id);
	snprintf(label, sizeof(label), "pop prefill %dp", nparts);
	ph.target = push_fill(queue, nparts, opt.pop_messages, &payloads[0], label, &rate);
	ph.queue = queue;
	ph.group = group;
	pop_path(&ph.path, queue, group, opt.pop_autopilot);
	cpu_mark(&m);
	rate = pop_drain(&ph, POP_CONSUMERS, &elapsed);

	snprintf(label, sizeof(label), "pop+ack b%d %dp", POP_BATCH, nparts);
	snprintf(note, sizeof(note), "[%ld acked in %.1f s, %ld pops, %ld empty, %ld redelivered]",
		 ph.acked, elapsed, ph.pops, ph.empty,
		 ph.popped > ph.acked ? ph.popped - ph.acked : 0);
	figure(label, rate, "msg/s", payloads[0].base, note);
	snprintf(label, sizeof(label), "broker cpu per popped+acked msg, pop b%d %dp", POP_BATCH,
		 nparts);
	figure_cpu(label, &m, ph.acked, NULL);
	/* The backlog must now be empty for the group. */
	pop_check_empty(&ph);
	failures_print(label, &ph.fail);
	buf_free(&ph.path);
	free(ph.lat.v);
}
