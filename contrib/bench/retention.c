/*
 * queen-bench phase "retention": batch pushes over --many-partitions partitions while the
 * broker's retention rounds delete their aged segments; lock stalls behind a round.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "bench.h"

#define RET_SECONDS		1	/* retentionSeconds of the retention phase's queue */
#define RET_PREFILL_SEGMENTS	4	/* segments each partition holds before the window */
#define RET_STALL_MS		50	/* SPEC target: no push stalled longer by a round */

/* The retention counters of GET /api/v1/status: cumulative since the broker started. */
struct ret_counters {
	long long interval_ms, rounds, skipped, failed, segments;
	int64_t last_run_ms;	/* wall ms the last round started, 0 = none yet */
};

/* Wall ms of a time as the broker writes it (2026-01-31T12:00:00.123Z), or 0. */
static int64_t iso_ms(const char *s, size_t n)
{
	struct tm tm = { 0 };
	char text[32];
	const char *rest;

	if (n >= sizeof(text))
		return 0;
	memcpy(text, s, n);
	text[n] = '\0';
	rest = strptime(text, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!rest || rest[0] != '.')
		return 0;
	return (int64_t)timegm(&tm) * 1000 + strtol(rest + 1, NULL, 10);
}

/* Reads the counters; a failed or unexpected status answer is counted in f. */
static bool retention_counters(struct hclient *h, struct ret_counters *rc, struct failures *f)
{
	const char *e, *ret, *last;
	struct http_resp r;
	size_t n;

	if (hc_call(h, "GET", "/api/v1/status", NULL, 0, &r) < 0) {
		f->transport++;
		failures_note(f, "transport", "status call lost", 16);
		return false;
	}
	if (r.status != 200) {
		fail_http(f, &r);
		return false;
	}
	e = r.body + r.body_len;
	ret = js_get(r.body, e, "retention");
	rc->interval_ms = js_ll(ret, e, "intervalMs");
	rc->rounds = js_ll(ret, e, "rounds");
	rc->skipped = js_ll(ret, e, "skipped");
	rc->failed = js_ll(ret, e, "failed");
	rc->segments = js_ll(ret, e, "segmentsDeleted");
	rc->last_run_ms = 0;
	if (js_str(js_get(ret, e, "lastRunAt"), e, &last, &n))
		rc->last_run_ms = iso_ms(last, n);
	if (rc->rounds < 0 || rc->skipped < 0 || rc->failed < 0 || rc->segments < 0) {
		tally_add(f->items, "no retention counters", 21, 1);
		failures_note(f, "status", r.body, r.body_len);
		return false;
	}
	return true;
}

/* Creates `queue` keeping RET_SECONDS of messages, consumed or not. */
static bool retention_configure(struct hclient *h, const char *queue, struct failures *f)
{
	struct http_resp r;
	struct buf body = { 0 };
	int rc;

	buf_addf(&body, "{\"queue\":\"%s\",\"options\":{\"retentionEnabled\":true,"
		 "\"retentionSeconds\":%d}}", queue, RET_SECONDS);
	rc = hc_call(h, "POST", "/api/v1/configure", body.p, body.len, &r);
	buf_free(&body);
	if (rc < 0) {
		f->transport++;
		failures_note(f, "transport", "configure call lost", 19);
		return false;
	}
	if (r.status != 200) {
		fail_http(f, &r);
		return false;
	}
	if (!js_is(js_get(r.body, r.body + r.body_len, "configured"), r.body + r.body_len,
		   "true")) {
		tally_add(f->items, "not configured", 14, 1);
		failures_note(f, "configure", r.body, r.body_len);
		return false;
	}
	return true;
}

/*
 * SPEC target: a retention round over 10,000 partitions holds no lock that stalls pushes for
 * more than 50 ms.  A queue keeping RET_SECONDS of messages is prefilled with about
 * RET_PREFILL_SEGMENTS segments in each of --many-partitions partitions (a batch-100 push
 * writes one segment in each of the 100 partitions it touches); once the first of them are
 * due, batch-100 pushes from PUSH_BIG_CONNS connections go on over the same partitions for
 * --duration while the broker's rounds move log starts (partition row locks, the only lock of
 * a round a push can wait for) and delete the segments that aged out.  Each connection keeps
 * to its own slice of the partitions, so pushes never wait for each other's row locks: a wait
 * for a queen_partitions row that PostgreSQL logs in this phase (bench.sh turns log_lock_waits
 * on) is a round's.  The
 * figures are the push latencies of the window, the max against the target (a request's
 * latency also holds CPU contention and group commit, so it is an upper bound of the stall),
 * and the rounds and deletions the status counters saw in it: a window in which no round
 * started or nothing was deleted measured nothing, so it is a failure.
 */
/*
 * The direct measure of the retention target: while the window runs, a second connection
 * asks PostgreSQL every RET_SAMPLE_MS which backends wait for a lock held by a retention
 * round (pg_blocking_pids) and since when their statement runs; the longest such wait seen
 * is the stall.  Push latency alone cannot tell a lock from a busy CPU on a shared machine.
 */
#define RET_SAMPLE_MS		5

struct stall_probe {
	PGconn *pg;
	atomic_bool stop;
	double worst_ms;	/* longest wait behind a round seen */
	long samples, waits;	/* polls made; polls that saw a push wait behind a round */
	char err[256];
};

static void *stall_probe_main(void *arg)
{
	static const char *sql =
		"SELECT coalesce(max(extract(epoch FROM clock_timestamp() - w.query_start)) "
		"* 1000, -1) FROM pg_stat_activity w "
		"WHERE w.wait_event_type = 'Lock' AND EXISTS ("
		"  SELECT 1 FROM pg_stat_activity b "
		"  WHERE b.pid = ANY (pg_blocking_pids(w.pid)) AND b.query LIKE '%queen_retention%')";
	struct stall_probe *sp = arg;
	PGresult *res;

	while (!atomic_load(&sp->stop)) {
		res = PQexec(sp->pg, sql);
		if (PQresultStatus(res) != PGRES_TUPLES_OK) {
			snprintf(sp->err, sizeof(sp->err), "%s", PQerrorMessage(sp->pg));
			PQclear(res);
			return NULL;
		}
		double ms = atof(PQgetvalue(res, 0, 0));

		PQclear(res);
		sp->samples++;
		if (ms >= 0) {
			sp->waits++;
			if (ms > sp->worst_ms)
				sp->worst_ms = ms;
		}
		usleep(RET_SAMPLE_MS * 1000);
	}
	return NULL;
}

void phase_retention(void)
{
	struct push_run fill = { 0 }, ph = { 0 };
	struct hclient h = { .fd = -1 };
	struct ret_counters c0, c1;
	char queue[128], label[64], note[96], target[96], why[160];
	long long rounds = 0, failed = 0, segments = 0;
	double t_fill, wait, rate, elapsed;
	int64_t end_ms;
	bool counted;
	struct stall_probe probe = { 0 };
	pthread_t probe_thread;

	/* The push phase's queue over as many partitions (created here when that phase did not
	 * run): a queue of its own would add --many-partitions partitions to the broker's index
	 * and to the run's peak RSS, itself a figure.  Its old segments are due at once. */
	snprintf(queue, sizeof(queue), "bench-%s-push-b%d-%s-%dp", run_id, PUSH_BIG_BATCH,
		 payloads[0].tag, opt.many_partitions);
	snprintf(label, sizeof(label), "retention push %dp", opt.many_partitions);
	/* Before the first push: a queue that a push creates keeps everything. */
	if (!retention_configure(&h, queue, &ph.fail)) {
		failures_print(label, &ph.fail);
		hc_free(&h);
		return;
	}
	fill.queue = queue;
	fill.batch = PUSH_BIG_BATCH;
	fill.nparts = opt.many_partitions;
	fill.sliced = true;
	fill.pl = &payloads[0];
	fill.to_send = (long)opt.many_partitions * RET_PREFILL_SEGMENTS;
	fill.stop_at = now() + 3600;
	t_fill = now();
	rate = push_run(&fill, PUSH_BIG_CONNS, &elapsed);
	printf("  retention prefill %dp: %ld queued in %.1f s (%.0f msg/s)\n",
	       opt.many_partitions, fill.queued, elapsed, rate);
	failures_print("retention prefill", &fill.fail);
	free(fill.lat.v);

	/* A small prefill (--quick) is done before anything in it is due: wait until its first
	 * segments are, and a little more, so the rounds of the window have work from its start. */
	wait = t_fill + RET_SECONDS + 0.5 - now();
	if (wait > 0)
		usleep((useconds_t)(wait * 1e6));

	counted = retention_counters(&h, &c0, &ph.fail);
	if (opt.pg) {
		probe.pg = PQconnectdb(opt.pg);
		if (PQstatus(probe.pg) != CONNECTION_OK ||
		    pthread_create(&probe_thread, NULL, stall_probe_main, &probe) != 0) {
			snprintf(probe.err, sizeof(probe.err), "%s", PQerrorMessage(probe.pg));
			PQfinish(probe.pg);
			probe.pg = NULL;
		}
	}
	ph.queue = queue;
	ph.batch = PUSH_BIG_BATCH;
	ph.nparts = opt.many_partitions;
	ph.sliced = true;
	ph.pl = &payloads[0];
	ph.to_send = -1;
	ph.stop_at = now() + opt.duration;
	rate = push_run(&ph, PUSH_BIG_CONNS, &elapsed);
	end_ms = wall_ms();
	if (probe.pg) {
		atomic_store(&probe.stop, true);
		pthread_join(probe_thread, NULL);
		PQfinish(probe.pg);
	}
	counted = retention_counters(&h, &c1, &ph.fail) && counted;

	if (counted) {
		/* `rounds` counts skipped and failed rounds too (src/retention.h). */
		failed = c1.failed - c0.failed;
		rounds = c1.rounds - c0.rounds - (c1.skipped - c0.skipped) - failed;
		segments = c1.segments - c0.segments;
		if (failed > 0) {
			tally_add(ph.fail.items, "round failed", 12, failed);
			failures_note(&ph.fail, "retention", "a round's statement failed (queend log)",
				      39);
		}
		/* The counters move when a round starts (rounds, lastRunAt) and ends (segments):
		 * none started means one round outlasted the window or the maintenance thread
		 * was busy with something else all along; say how long ago the last began. */
		if (rounds <= 0) {
			if (c1.last_run_ms > 0)
				snprintf(why, sizeof(why), "no round started in the window; the last "
					 "one started %.1f s before it ended (RETENTION_INTERVAL "
					 "%lld ms)", (double)(end_ms - c1.last_run_ms) / 1000,
					 c1.interval_ms);
			else
				snprintf(why, sizeof(why), "no round has run yet (RETENTION_INTERVAL "
					 "%lld ms)", c1.interval_ms);
			tally_add(ph.fail.items, "no round started", 16, 1);
			failures_note(&ph.fail, "retention", why, strlen(why));
		} else if (segments <= 0) {
			tally_add(ph.fail.items, "nothing deleted", 15, 1);
			failures_note(&ph.fail, "retention", "rounds ran but deleted no segment", 33);
		}
	}
	snprintf(note, sizeof(note), "[p50 %.1f ms, p99 %.1f ms, max %.1f ms; %lld rounds, "
		 "%lld segments deleted]", samples_pct(&ph.lat, 50) * 1e3,
		 samples_pct(&ph.lat, 99) * 1e3, samples_pct(&ph.lat, 100) * 1e3, rounds, segments);
	figure(label, rate, "msg/s", payloads[0].base, note);
	if (probe.samples > 0 && !probe.err[0]) {
		snprintf(target, sizeof(target), "[%ld polls, %ld saw a wait] (SPEC target <= %d)",
			 probe.samples, probe.waits, RET_STALL_MS);
		figure("retention lock stall max", probe.worst_ms, "ms", -1, target);
	} else {
		printf("retention lock stall max: not measured (%s)\n",
		       probe.err[0] ? probe.err : "no --pg");
	}
	failures_print(label, &ph.fail);
	free(ph.lat.v);
	hc_free(&h);
}
