/*
 * queen-bench phase "latency": how long a parked long-poll pop takes to answer after a push
 * that concerns it.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

/* Pops everything deliverable (wait=false) and acks it, so the next sample starts clean. */
static void latency_drain(struct hclient *h, const char *queue)
{
	struct pop_run ph = { .group = "__QUEUE_MODE__" };
	struct pop_conn pc = { 0 };
	struct http_resp r;
	char path[256];

	snprintf(path, sizeof(path), "/api/v1/pop/queue/%s?batch=100&wait=false", queue);
	for (int i = 0; i < 100; i++) {
		if (hc_call(h, "GET", path, NULL, 0, &r) < 0 || r.status != 200)
			break;
		if (pop_build_ack(&ph, &pc, &r) == 0)
			break;
		if (hc_call(h, "POST", "/api/v1/ack/batch", pc.ack.p, pc.ack.len, &r) < 0)
			break;
	}
	buf_free(&pc.ack);
}

/* A 201 whose first element is `queued`. */
static bool push_first_queued(const struct http_resp *r)
{
	const char *e = r->body + r->body_len, *el;
	struct js_arr a;

	return r->status == 201 && js_arr_open(&a, r->body, e) && (el = js_arr_next(&a)) &&
	       js_str_eq(js_get(el, e, "status"), e, "queued");
}

/*
 * A consumer parks (wait=true) on a fresh queue; after a random 20-80 ms a producer pushes one
 * message.  Latency = push request sent -> pop response received.  The message is then acked
 * (untimed) so the partition's lease is released for the next sample.
 */
void phase_latency(void)
{
	struct hclient cons = { .fd = -1 }, prod = { .fd = -1 };
	struct samples lat = { 0 };
	struct failures fail = { 0 };
	struct buf body = { 0 }, ack = { 0 };
	char queue[128], path[256], txn[64], note[96], what[64];
	uint64_t rng = (uint64_t)getpid() * 2654435761ULL + 1;

	snprintf(queue, sizeof(queue), "bench-%s-latency", run_id);
	snprintf(path, sizeof(path), "/api/v1/pop/queue/%s?batch=1&wait=true&timeout=10000", queue);
	for (int i = 0; i < opt.lat_samples; i++) {
		struct http_resp r, pr;
		const char *e, *msg, *got_txn, *pid, *lease;
		size_t tl, pl, ll;
		struct js_arr a;
		double t0, t1;

		if (hc_send(&cons, "GET", path, NULL, 0) < 0) {
			fail.transport++;
			failures_note(&fail, "transport", "cannot send pop", 15);
			continue;
		}
		usleep((useconds_t)(20000 + rng_next(&rng) % 60001));
		snprintf(txn, sizeof(txn), "lat-%s-%d", run_id, i);
		body.len = 0;
		buf_addf(&body, "{\"items\":[{\"queue\":\"%s\",\"transactionId\":\"%s\",\"payload\":",
			 queue, txn);
		buf_add_payload(&body, &payloads[0], (uint64_t)i);
		buf_adds(&body, "}]}");
		t0 = now();
		if (hc_send(&prod, "POST", "/api/v1/push", body.p, body.len) < 0) {
			fail.transport++;
			failures_note(&fail, "transport", "cannot send push", 16);
			hc_free(&cons);
			continue;
		}
		if (hc_recv(&cons, &r) < 0) {
			fail.transport++;
			failures_note(&fail, "transport", "pop answer lost", 15);
			hc_recv(&prod, &pr);
			latency_drain(&prod, queue);
			continue;
		}
		t1 = now();
		/* Read the message out of the pop answer before the producer reuses its buffer. */
		e = r.body + r.body_len;
		msg = js_arr_open(&a, js_get(r.body, e, "messages"), e) ? js_arr_next(&a) : NULL;
		if (r.status != 200 || !msg ||
		    !js_str(js_get(msg, e, "transactionId"), e, &got_txn, &tl) ||
		    tl != strlen(txn) || memcmp(got_txn, txn, tl) != 0 ||
		    !js_str(js_get(msg, e, "partitionId"), e, &pid, &pl) ||
		    !js_str(js_get(msg, e, "leaseId"), e, &lease, &ll)) {
			snprintf(what, sizeof(what), "sample %d: pop answered %d", i, r.status);
			if (r.status != 200) {
				fail_http_as(&fail, &r, what);
			} else {
				tally_add(fail.items, "wrong or missing message", 24, 1);
				failures_note(&fail, what, r.body, r.body_len);
			}
			hc_recv(&prod, &pr);
			latency_drain(&prod, queue);
			continue;
		}
		ack.len = 0;
		buf_addf(&ack, "{\"acknowledgments\":[{\"transactionId\":\"%s\",\"partitionId\":"
			 "\"%.*s\",\"status\":\"completed\",\"leaseId\":\"%.*s\"}]}", txn, (int)pl,
			 pid, (int)ll, lease);
		if (hc_recv(&prod, &pr) < 0) {
			fail.transport++;
			failures_note(&fail, "transport", "push answer lost", 16);
		} else if (!push_first_queued(&pr)) {
			tally_add(fail.items, "push not queued", 15, 1);
			failures_note(&fail, "push", pr.body, pr.body_len);
		}
		samples_add(&lat, t1 - t0);
		if (hc_call(&prod, "POST", "/api/v1/ack/batch", ack.p, ack.len, &pr) < 0 ||
		    pr.status != 200 ||
		    !js_arr_open(&a, pr.body, pr.body + pr.body_len) || !(msg = js_arr_next(&a)) ||
		    !js_is(js_get(msg, pr.body + pr.body_len, "success"), pr.body + pr.body_len,
			   "true")) {
			tally_add(fail.items, "ack failed", 10, 1);
			failures_note(&fail, "ack", pr.body, pr.body_len);
			latency_drain(&prod, queue);
		}
	}
	snprintf(note, sizeof(note), "[%zu samples, max %.1f ms]", lat.n,
		 samples_pct(&lat, 100) * 1e3);
	figure("long-poll wake p50", samples_pct(&lat, 50) * 1e3, "ms", -1, NULL);
	figure("long-poll wake p99", samples_pct(&lat, 99) * 1e3, "ms", -1, note);
	failures_print("long-poll wake", &fail);
	free(lat.v);
	buf_free(&body);
	buf_free(&ack);
	hc_free(&cons);
	hc_free(&prod);
}
