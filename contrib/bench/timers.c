/*
 * queen-bench phase "timers": 10,000 timers due in the same second; how long after it the
 * last of them can be popped.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define TIMER_COUNT		10000
#define TIMER_OPS		250	/* ops per /timers call (SPEC 14 allows 256) */
#define TIMER_POLL_MS		50
#define TIMER_WAIT_S		60.0	/* after the due second, then the missing ones are failures */

static long timers_count_ok(const struct http_resp *r, struct failures *f)
{
	const char *e = r->body + r->body_len, *el;
	struct js_arr a;
	long ok = 0;

	if (!js_arr_open(&a, js_get(r->body, e, "results"), e)) {
		tally_add(f->items, "unparsable", 10, 1);
		failures_note(f, "timers answer", r->body, r->body_len);
		return 0;
	}
	while ((el = js_arr_next(&a))) {
		if (js_is(js_get(el, e, "ok"), e, "true")) {
			ok++;
			continue;
		}
		tally_add(f->items, "not scheduled", 13, 1);
		failures_note(f, "timer", el, (size_t)(e - el));
	}
	return ok;
}

/* The number of messages one pop answered (0 for 204), or -1 on failure. */
static long pop_count(struct hclient *h, const char *path, struct failures *f)
{
	const char *e;
	struct http_resp r;
	struct js_arr a;
	long n = 0;

	if (hc_call(h, "GET", path, NULL, 0, &r) < 0) {
		f->transport++;
		failures_note(f, "transport", "pop answer lost", 15);
		return -1;
	}
	if (r.status == 204)
		return 0;
	if (r.status != 200) {
		fail_http(f, &r);
		return -1;
	}
	e = r.body + r.body_len;
	if (!js_arr_open(&a, js_get(r.body, e, "messages"), e))
		return 0;
	while (js_arr_next(&a))
		n++;
	return n;
}

/* Schedules TIMER_COUNT timers on `queue`, all due at wall-clock `due_ms`; returns how many. */
static long timers_schedule(struct hclient *h, const char *queue, int64_t due_ms,
			    struct failures *f)
{
	struct buf body = { 0 };
	struct http_resp r;
	long scheduled = 0;

	for (int i = 0; i < TIMER_COUNT; i += TIMER_OPS) {
		body.len = 0;
		buf_adds(&body, "{\"operations\":[");
		for (int k = i; k < i + TIMER_OPS && k < TIMER_COUNT; k++) {
			/* Per op, so the time the calls take does not spread the due moment. */
			int64_t delay = due_ms - wall_ms();

			buf_addf(&body, "%s{\"op\":\"schedule\",\"queue\":\"%s\",\"timerKey\":\"k%d\","
				 "\"delayMs\":%" PRId64 ",\"txn\":\"t%d\",\"payload\":{\"i\":%d}}",
				 k > i ? "," : "", queue, k, delay > 0 ? delay : 0, k, k);
		}
		buf_adds(&body, "]}");
		if (hc_call(h, "POST", "/api/v1/timers", body.p, body.len, &r) < 0) {
			f->transport++;
			failures_note(f, "transport", "timers call lost", 16);
		} else if (r.status != 200) {
			fail_http(f, &r);
		} else {
			scheduled += timers_count_ok(&r, f);
		}
	}
	buf_free(&body);
	return scheduled;
}

/*
 * TIMER_COUNT timers all due at the same wall-clock second about 5 s ahead; the figure is how
 * long after that second the last of them has been popped as a message (SPEC target: within
 * 2 s).
 */
void phase_timers(void)
{
	struct hclient h = { .fd = -1 };
	struct failures fail = { 0 };
	char queue[128], note[96], path[256];
	int64_t due_ms, deadline_ms, done_ms = -1;
	long scheduled, stored = 0;

	snprintf(queue, sizeof(queue), "bench-%s-timers", run_id);
	due_ms = (wall_ms() / 1000 + 6) * 1000;	/* the whole second 5-6 s ahead */
	scheduled = timers_schedule(&h, queue, due_ms, &fail);
	if (wall_ms() >= due_ms) {
		tally_add(fail.items, "scheduling too slow", 19, 1);
		failures_note(&fail, "timers", "scheduling ran past the due second", 34);
	}
	/* A consumer's view of "fired": the messages it can pop.  Popping (autoAck) costs one
	 * partition's read, where reading the queue's detail costs more the larger the
	 * database the earlier phases left, and would slow the sweeper it measures. */
	deadline_ms = due_ms + (int64_t)(TIMER_WAIT_S * 1000);
	snprintf(path, sizeof(path), "/api/v1/pop/queue/%s?batch=1000&wait=false&autoAck=true",
		 queue);
	while (wall_ms() < deadline_ms) {
		long n = pop_count(&h, path, &fail);

		stored += n > 0 ? n : 0;
		if (stored >= TIMER_COUNT) {
			done_ms = wall_ms();
			break;
		}
		if (n <= 0)
			usleep(TIMER_POLL_MS * 1000);
	}
	snprintf(note, sizeof(note), "[%ld scheduled, %ld popped, SPEC target <= 2 s]", scheduled,
		 stored);
	if (done_ms < 0) {
		tally_add(fail.items, "not fired in time", 17, TIMER_COUNT - stored);
		failures_note(&fail, "timers", "not all popped within 60 s of the due second", 44);
		figure("timers 10000 due together: fired in", TIMER_WAIT_S, "s", -1, note);
	} else {
		figure("timers 10000 due together: fired in",
		       done_ms > due_ms ? (double)(done_ms - due_ms) / 1000 : 0, "s", -1, note);
	}
	failures_print("timers", &fail);
	hc_free(&h);
}
