/*
 * queen-bench phase "txn": a pipeline stage (pop, then one transaction per message that acks
 * it and pushes its successor) against batch-1 pushes from as many connections.
 */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define TXN_MESSAGES_PER_S	5000	/* input backlog per second of --duration, more than consumed */
#define TXN_PARTITIONS		1000
#define TXN_CONNS		16
#define TXN_POP_BATCH		100	/* messages a stage pops at once, one transaction each */
#define TXN_SLICES		4	/* alternations of the transaction loop and the yardstick */

/*
 * A pipeline stage: pop a batch of TXN_POP_BATCH messages (own group), then one transaction per
 * message that acks it and pushes its successor to an output queue's partition of the same
 * name.  This is the shape SPEC 8 exists for, so its rate (transactions per second, the pops
 * included in the time) is compared with plain batch-1 pushes from as many connections.
 */
struct txn_run {
	const char *out_queue;
	const char *group;
	double stop_at;		/* no new pop after this; a popped message is still committed */
	long pops, empty, txns, rolled_back;
	uint64_t seq;
	struct buf path;
	struct samples lat;	/* transaction request latency */
	struct failures fail;
};

struct txn_conn {
	struct buf bodies;			/* the transactions for the last pop, end to end */
	size_t end[TXN_POP_BATCH];		/* where each body ends in bodies */
	int n, next;				/* bodies built, next to send */
	bool in_commit;				/* the request in flight is a transaction */
};

static enum step txn_next(struct engine *en, struct conn *c)
{
	struct txn_run *ph = en->phase;
	struct txn_conn *tc = c->sess;

	if (tc->next < tc->n) {
		size_t from = tc->next ? tc->end[tc->next - 1] : 0;

		tc->in_commit = true;
		http_request(&c->out, "POST", "/api/v1/transaction", tc->bodies.p + from,
			     tc->end[tc->next] - from);
		tc->next++;
		return STEP_SEND;
	}
	if (now() >= ph->stop_at)
		return STEP_STOP;
	tc->in_commit = false;
	ph->pops++;
	http_request(&c->out, "GET", ph->path.p, NULL, 0);
	return STEP_SEND;
}

/* Builds one ack+push transaction per message of a pop answer; returns how many. */
static int txn_build(struct txn_run *ph, struct txn_conn *tc, const struct http_resp *r)
{
	const char *e = r->body + r->body_len, *el, *txn, *pid, *lease, *part;
	size_t tl, pl, ll, nl;
	struct js_arr a;

	tc->bodies.len = 0;
	tc->n = tc->next = 0;
	if (!js_arr_open(&a, js_get(r->body, e, "messages"), e))
		return 0;
	while (tc->n < TXN_POP_BATCH && (el = js_arr_next(&a))) {
		if (!js_str(js_get(el, e, "transactionId"), e, &txn, &tl) ||
		    !js_str(js_get(el, e, "partitionId"), e, &pid, &pl) ||
		    !js_str(js_get(el, e, "leaseId"), e, &lease, &ll) ||
		    !js_str(js_get(el, e, "partition"), e, &part, &nl)) {
			tally_add(ph->fail.items, "message without ids", 19, 1);
			failures_note(&ph->fail, "message", el, (size_t)(e - el));
			continue;
		}
		buf_addf(&tc->bodies, "{\"operations\":[{\"type\":\"ack\",\"transactionId\":"
			 "\"%.*s\",\"partitionId\":\"%.*s\",\"status\":\"completed\","
			 "\"consumerGroup\":\"%s\",\"leaseId\":\"%.*s\"},{\"type\":\"push\","
			 "\"items\":[{\"queue\":\"%s\",\"partition\":\"%.*s\",\"payload\":",
			 (int)tl, txn, (int)pl, pid, ph->group, (int)ll, lease, ph->out_queue,
			 (int)nl, part);
		buf_add_payload(&tc->bodies, &payloads[0], ph->seq++);
		buf_adds(&tc->bodies, "}]}]}");
		tc->end[tc->n++] = tc->bodies.len;
	}
	return tc->n;
}

static void txn_reply_commit(struct txn_run *ph, const struct http_resp *r, double lat)
{
	const char *e = r->body + r->body_len, *why;
	size_t n;

	samples_add(&ph->lat, lat);
	if (r->status != 200) {
		fail_http(&ph->fail, r);
		return;
	}
	if (js_is(js_get(r->body, e, "success"), e, "true")) {
		ph->txns++;
		return;
	}
	/* success:false is still 200 (SPEC 8): tally by its reason. */
	ph->rolled_back++;
	if (js_str(js_get(r->body, e, "reason"), e, &why, &n))
		tally_add(ph->fail.items, why, n, 1);
	else
		tally_add(ph->fail.items, "txn not successful", 18, 1);
	failures_note(&ph->fail, "transaction", r->body, r->body_len);
}

static void txn_reply(struct engine *en, struct conn *c, const struct http_resp *r)
{
	struct txn_run *ph = en->phase;
	struct txn_conn *tc = c->sess;

	if (tc->in_commit) {
		txn_reply_commit(ph, r, now() - c->t_sent);
		return;
	}
	if (pop_answer_ok(c, r, &ph->empty, &ph->fail) && txn_build(ph, tc, r) == 0)
		pop_answer_empty(c, &ph->empty);
}

/*
 * Pre-pushes TXN_MESSAGES_PER_S per second of --duration (at least 20,000) over TXN_PARTITIONS
 * partitions, then for --duration in all runs the pop -> ack+push loop and plain batch-1
 * pushes (the yardstick) on TXN_CONNS connections, in TXN_SLICES alternating slices of each:
 * the machine is shared, and a ratio of two figures taken one after the other is also a
 * ratio of whatever else ran then.
 */
void phase_txn(void)
{
	struct push_run fill = { 0 }, push = { 0 };
	struct txn_run ph = { 0 };
	struct txn_conn tcs[TXN_CONNS];
	struct engine en = {
		.nconns = TXN_CONNS, .next = txn_next, .reply = txn_reply,
		.phase = &ph, .fail = &ph.fail,
	};
	char in_queue[128], out_queue[128], push_queue[128], group[64], note[128];
	double rate, push_rate, elapsed, t_txn = 0, t_push = 0;
	long pushed = 0;

	snprintf(in_queue, sizeof(in_queue), "bench-%s-txn-in", run_id);
	snprintf(out_queue, sizeof(out_queue), "bench-%s-txn-out", run_id);
	snprintf(group, sizeof(group), "bench-%s-txn", run_id);
	fill.queue = in_queue;
	fill.batch = PUSH_BIG_BATCH;
	fill.nparts = TXN_PARTITIONS;
	fill.pl = &payloads[0];
	fill.to_send = opt.duration * TXN_MESSAGES_PER_S > 20000
		       ? (long)(opt.duration * TXN_MESSAGES_PER_S) : 20000;
	fill.stop_at = now() + 3600;
	rate = push_run(&fill, PUSH_BIG_CONNS, &elapsed);
	printf("  txn prefill %dp: %ld queued in %.1f s (%.0f msg/s)\n", TXN_PARTITIONS,
	       fill.queued, elapsed, rate);
	failures_print("txn prefill", &fill.fail);
	free(fill.lat.v);

	ph.out_queue = out_queue;
	ph.group = group;
	buf_addf(&ph.path, "/api/v1/pop/queue/%s?batch=%d&wait=false&consumerGroup=%s"
		 "&subscriptionMode=all", in_queue, TXN_POP_BATCH, group);
	snprintf(push_queue, sizeof(push_queue), "bench-%s-txn-push", run_id);
	push.queue = push_queue;
	push.batch = 1;
	push.nparts = TXN_PARTITIONS;
	push.pl = &payloads[0];
	push.to_send = -1;
	for (int k = 0; k < TXN_SLICES; k++) {
		long before = push.queued;

		ph.stop_at = now() + opt.duration / TXN_SLICES;
		memset(tcs, 0, sizeof(tcs));
		engine_run(&en, tcs, sizeof(tcs[0]));
		t_txn += en.t_last - en.t_start;
		for (int i = 0; i < TXN_CONNS; i++)
			buf_free(&tcs[i].bodies);
		push.stop_at = now() + opt.duration / TXN_SLICES;
		push_run(&push, TXN_CONNS, &elapsed);
		t_push += elapsed;
		pushed += push.queued - before;
	}
	rate = t_txn > 0 ? (double)ph.txns / t_txn : 0;
	snprintf(note, sizeof(note), "[%ld txn in %.1f s, %ld pops, %ld empty, p50 %.1f ms, "
		 "p99 %.1f ms]", ph.txns, t_txn, ph.pops, ph.empty,
		 samples_pct(&ph.lat, 50) * 1e3, samples_pct(&ph.lat, 99) * 1e3);
	figure("txn ack+push 16c", rate, "txn/s", -1, note);
	failures_print("txn ack+push 16c", &ph.fail);
	push_rate = t_push > 0 ? (double)pushed / t_push : 0;
	snprintf(note, sizeof(note), "[%ld req in %.1f s, p50 %.1f ms, p99 %.1f ms]",
		 push.requests, t_push, samples_pct(&push.lat, 50) * 1e3,
		 samples_pct(&push.lat, 99) * 1e3);
	figure("push b1 100B 16c", push_rate, "msg/s", payloads[0].base, note);
	failures_print("push b1 100B 16c", &push.fail);
	figure("txn vs push b1 16c", push_rate > 0 ? rate / push_rate : 0, "x", -1,
	       "(SPEC target >= 0.40)");
	buf_free(&ph.path);
	free(ph.lat.v);
	free(push.lat.v);
}
