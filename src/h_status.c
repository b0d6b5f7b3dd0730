/* h_status: the operator views. The resource views are answered exactly as their SQL function
 * returns them; /api/v1/status wraps the database summary with the broker's own counters, so
 * it still answers (degraded) when PostgreSQL does not. */
#include "h_status.h"
#include "conf.h"
#include "dbpool.h"
#include "h_util.h"
#include "http.h"
#include "jsonio.h"
#include "longpoll.h"
#include "metrics.h"
#include "retention.h"
#include "workers.h"

#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Appends wall time ms as an ISO-8601 JSON string, or null for 0. */
static void
add_iso(struct strbuf *sb, int64_t ms)
{
	char buf[32];

	if (ms <= 0) {
		sb_adds(sb, "null");
		return;
	}
	jio_format_iso(ms, buf, sizeof(buf));
	sb_addc(sb, '"');
	sb_adds(sb, buf);
	sb_addc(sb, '"');
}

static long
http_threads(void)
{
	long n = qconf.num_workers;

	if (n == 0)
		n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? n : 2;
}

enum qe
h_status(struct req *r, struct wk *w)
{
	struct metrics_snapshot m;
	struct retention_stats rs;
	struct strbuf sb;
	char *db = NULL;
	int db_ok = db_exec_json(w->db, SQL_STATUS, NULL, &db) == QE_OK && db;

	metrics_read(&m);
	retention_stats_read(&rs);
	sb_init(&sb);
	sb_addf(&sb, "{\"status\":\"%s\",\"version\":\"%s\",\"uptimeSeconds\":%lld,\"time\":",
		db_ok ? "healthy" : "degraded", PACKAGE_VERSION, (long long)metrics_uptime_s());
	add_iso(&sb, wall_ms());
	sb_addf(&sb, ",\"broker\":{\"pid\":%ld,\"port\":%lld,\"httpThreads\":%ld,"
		"\"dbPoolSize\":%lld,\"queuedJobs\":%ld,\"parkedPops\":%ld,"
		"\"requests\":{\"total\":%llu,\"2xx\":%llu,\"4xx\":%llu,\"5xx\":%llu},"
		"\"messages\":{\"pushed\":%llu,\"duplicates\":%llu,\"popped\":%llu,"
		"\"acked\":%llu,\"nacked\":%llu,\"deadLettered\":%llu},"
		"\"pushCommits\":%llu,\"dbErrors\":%llu}",
		(long)getpid(), (long long)qconf.port, http_threads(),
		(long long)qconf.db_pool_size, wk_queued(), lp_parked(),
		(unsigned long long)m.requests, (unsigned long long)m.req_2xx,
		(unsigned long long)m.req_4xx, (unsigned long long)m.req_5xx,
		(unsigned long long)m.pushed, (unsigned long long)m.duplicates,
		(unsigned long long)m.popped, (unsigned long long)m.acked,
		(unsigned long long)m.nacked, (unsigned long long)m.dead_lettered,
		(unsigned long long)m.push_commits, (unsigned long long)m.db_errors);
	sb_addf(&sb, ",\"retention\":{\"intervalMs\":%lld,\"batchSize\":%lld,\"rounds\":%llu,"
		"\"skipped\":%llu,\"failed\":%llu,\"segmentsDeleted\":%llu,"
		"\"partitionsAdvanced\":%llu,\"dedupKeysExpired\":%llu,"
		"\"lastSegmentsDeleted\":%lld,\"lastRunAt\":",
		(long long)qconf.retention_interval, (long long)qconf.retention_batch_size,
		(unsigned long long)rs.rounds, (unsigned long long)rs.skipped,
		(unsigned long long)rs.failed, (unsigned long long)rs.segments_deleted,
		(unsigned long long)rs.partitions_advanced, (unsigned long long)rs.dedup_expired,
		(long long)rs.last_segments_deleted);
	add_iso(&sb, rs.last_run_ms);
	sb_adds(&sb, "},\"database\":");
	sb_adds(&sb, db_ok ? db : "{\"connected\":false}");
	sb_addc(&sb, '}');
	free(db);
	req_reply_sb(r, 200, &sb);
	return QE_OK;
}

enum qe
h_status_queues(struct req *r, struct wk *w)
{
	struct h_paging pg;
	const char *params[4] = { req_query_set(r, "namespace"), req_query_set(r, "task"),
				  pg.limit, pg.offset };
	enum qe e = h_paging(r, 100, &pg);

	if (e != QE_OK)
		return e;
	return h_reply_sql_json(r, w, SQL_STATUS_QUEUES, params, "not found");
}
