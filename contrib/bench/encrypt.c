/*
 * queen-bench phase "encrypt": what payload encryption costs a batch-100 push (SPEC 17
 * target: sealing 100 payloads costs the push at most 10% of its rate).  The same pushes
 * (1 KiB payloads, 10 partitions, 8 connections) go to a queue with encryptionEnabled and to
 * a plain one, in alternating slices so that both see the same machine.  The figure is the
 * encrypted rate; the note gives the plain rate, their ratio and the broker's CPU per message
 * for each, which tells the broker's sealing from what PostgreSQL pays to store ciphertext
 * (which, unlike these payloads, does not compress).  bench.sh gives the broker a
 * QUEEN_ENCRYPTION_KEY.
 */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define ENC_SLICES 4

static bool encrypt_configure(const char *queue, struct failures *f)
{
	struct hclient h = { .fd = -1 };
	struct http_resp r;
	struct buf body = { 0 };
	int rc;

	buf_addf(&body, "{\"queue\":\"%s\",\"options\":{\"encryptionEnabled\":true}}", queue);
	rc = hc_call(&h, "POST", "/api/v1/configure", body.p, body.len, &r);
	buf_free(&body);
	if (rc < 0) {
		f->transport++;
		failures_note(f, "transport", "configure call lost", 19);
	} else if (r.status != 200) {
		fail_http(f, &r);
	}
	hc_free(&h);
	return rc >= 0 && r.status == 200;
}

void phase_encrypt(void)
{
	struct failures fail = { 0 };
	char queue[2][128], note[192];
	double secs[2] = { 0, 0 }, cpu[2] = { 0, 0 }, rate[2], us[2];
	long queued[2] = { 0, 0 };
	bool cpu_ok = true;

	for (int k = 0; k < 2; k++)
		snprintf(queue[k], sizeof(queue[k]), "bench-%s-%s-b%d", run_id,
			 k ? "encrypted" : "plain", PUSH_BIG_BATCH);
	if (!encrypt_configure(queue[1], &fail)) {
		failures_print("push b100 encrypted", &fail);
		return;
	}
	for (int s = 0; s < 2 * ENC_SLICES; s++) {
		struct push_run ph = { 0 };
		struct cpu_mark m;
		double elapsed, us_slice;
		int k = s % 2;

		ph.queue = queue[k];
		ph.batch = PUSH_BIG_BATCH;
		ph.nparts = 10;
		ph.pl = &payloads[1];
		ph.to_send = -1;
		ph.stop_at = now() + opt.duration / ENC_SLICES;
		cpu_mark(&m);
		push_run(&ph, PUSH_BIG_CONNS, &elapsed);
		us_slice = cpu_us_per_msg(&m, ph.queued);
		queued[k] += ph.queued;
		secs[k] += elapsed;
		if (us_slice < 0)
			cpu_ok = false;
		else
			cpu[k] += us_slice * (double)ph.queued;
		failures_print(k ? "push b100 encrypted" : "push b100 plain (encrypt phase)",
			       &ph.fail);
		free(ph.lat.v);
	}
	for (int k = 0; k < 2; k++) {
		rate[k] = secs[k] > 0 ? (double)queued[k] / secs[k] : 0;
		us[k] = queued[k] > 0 ? cpu[k] / (double)queued[k] : 0;
	}
	if (cpu_ok)
		snprintf(note, sizeof(note), "[plain %.0f msg/s in the same slices: %.2fx; broker "
			 "cpu %.1f vs %.1f us/msg; target >= 0.90x]", rate[0],
			 rate[0] > 0 ? rate[1] / rate[0] : 0, us[1], us[0]);
	else
		snprintf(note, sizeof(note), "[plain %.0f msg/s in the same slices: %.2fx; "
			 "target >= 0.90x]", rate[0], rate[0] > 0 ? rate[1] / rate[0] : 0);
	figure("push b100 1k encrypted 10p", rate[1], "msg/s", payloads[1].base, note);
}
