/* h_ops: health and metrics. Metrics come from process counters (metrics.c), the worker
 * queue, the long-poll list and one statistics query, whose answer serves a while;
 * /metrics/prometheus renders the same snapshot, from the partition index instead of that
 * query, in the text exposition format. */
#include "h_ops.h"
#include "auth.h"
#include "conf.h"
#include "dbpool.h"
#include "http.h"
#include "longpoll.h"
#include "metrics.h"
#include "pindex.h"
#include "qassert.h"
#include "spool.h"
#include "workers.h"

#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum qe
h_health(struct req *r, struct wk *w)
{
	int ok = db_ping(w->db);
	struct strbuf sb;

	sb_init(&sb);
	sb_addf(&sb, "{\"status\":\"%s\",\"database\":\"%s\",\"version\":\"%s\","
		"\"uptimeSeconds\":%lld}", ok ? "healthy" : "unhealthy",
		ok ? "connected" : "disconnected", PACKAGE_VERSION,
		(long long)metrics_uptime_s());
	req_reply_sb(r, ok ? 200 : 503, &sb);
	return QE_OK;
}

/* The database's counts are read again only when the last read is older than this, or than
 * STATS_REUSE times what that read took: queen_stats reads the log tail of every partition
 * (0.26 s of the database's time at 414,000 partitions), and a monitor polling /metrics
 * every second would have kept a connection of the pool busy a quarter of the time. */
#define STATS_MIN_AGE_US 1000000
#define STATS_REUSE 20

static pthread_mutex_t stats_mu = PTHREAD_MUTEX_INITIALIZER;
static char *stats_json;		/* the last counts read, or NULL */
static uint64_t stats_at_us, stats_took_us;
static int stats_reading;		/* a worker reads them now: the others take the last */

/* A copy of the last counts when they may serve now; NULL when they are to be read (and
 * then the caller reads them). Called with stats_mu held. */
static char *
stats_reuse(uint64_t now)
{
	uint64_t serves = stats_took_us * STATS_REUSE;
	char *copy;

	if (!stats_json)
		return NULL;
	if (serves < STATS_MIN_AGE_US)
		serves = STATS_MIN_AGE_US;
	if (!stats_reading && now - stats_at_us >= serves)
		return NULL;
	copy = strdup(stats_json);
	QASSERT(copy != NULL);
	return copy;
}

/* Database-side counts (queues, partitions, messages, dead letters), or "null". */
static char *
db_stats(struct wk *w)
{
	char *json = NULL;
	uint64_t t0 = now_us();
	enum qe e;

	pthread_mutex_lock(&stats_mu);
	/* The clock read under the lock: a read that ended after t0 is not in its future. */
	json = stats_reuse(now_us());
	if (!json)
		stats_reading = 1;
	pthread_mutex_unlock(&stats_mu);
	if (json)
		return json;
	e = db_exec_json(w->db, SQL_STATS, NULL, &json);
	pthread_mutex_lock(&stats_mu);
	stats_reading = 0;
	free(stats_json);
	stats_json = NULL;
	if (e == QE_OK && json) {
		stats_json = strdup(json);
		QASSERT(stats_json != NULL);
		stats_at_us = now_us();
		stats_took_us = stats_at_us - t0;
	}
	pthread_mutex_unlock(&stats_mu);
	if (e != QE_OK || !json) {
		free(json);
		json = strdup("null");
	}
	return json;
}

enum qe
h_metrics(struct req *r, struct wk *w)
{
	struct metrics_snapshot m;
	struct strbuf sb;
	char *stats = db_stats(w);
	uint64_t refused[AUTH_REFUSAL__COUNT];
	long iq, ip, ig, ib;

	metrics_read(&m);
	auth_counts(refused);
	pidx_size(&iq, &ip, &ig, &ib);
	sb_init(&sb);
	sb_addf(&sb, "{\"uptimeSeconds\":%lld,\"requests\":{\"total\":%llu,\"2xx\":%llu,"
		"\"4xx\":%llu,\"5xx\":%llu},\"messages\":{\"pushed\":%llu,\"duplicates\":%llu,"
		"\"popped\":%llu,\"acked\":%llu,\"nacked\":%llu,\"deadLettered\":%llu},"
		"\"pushCommits\":%llu,\"pool\":{\"size\":%lld,\"queuedJobs\":%ld,"
		"\"dbErrors\":%llu},\"longPoll\":{\"parked\":%ld,\"wakeups\":%llu,"
		"\"refused\":%llu,\"abandoned\":%llu,\"popQueries\":%llu},"
		"\"largeWork\":{\"pauses\":%llu,\"pausedMs\":%llu},"
		"\"spool\":{\"pendingCount\":%ld,\"failedCount\":%ld},"
		"\"authRefused\":{\"missing\":%llu,\"invalid\":%llu,\"expired\":%llu,"
		"\"forbidden\":%llu,\"protected\":%llu},\"index\":{\"queues\":%ld,"
		"\"partitions\":%ld,\"groupSlots\":%ld,\"slotBlocks\":%ld},\"database\":%s}",
		(long long)metrics_uptime_s(), (unsigned long long)m.requests,
		(unsigned long long)m.req_2xx, (unsigned long long)m.req_4xx,
		(unsigned long long)m.req_5xx, (unsigned long long)m.pushed,
		(unsigned long long)m.duplicates, (unsigned long long)m.popped,
		(unsigned long long)m.acked, (unsigned long long)m.nacked,
		(unsigned long long)m.dead_lettered, (unsigned long long)m.push_commits,
		(long long)qconf.db_pool_size, wk_queued(), (unsigned long long)m.db_errors,
		lp_parked(), (unsigned long long)m.wakeups, (unsigned long long)m.lp_refused,
		(unsigned long long)m.abandoned, (unsigned long long)m.pop_queries,
		(unsigned long long)m.pauses, (unsigned long long)(m.paused_us / 1000),
		spool_pending(), spool_failed(), (unsigned long long)refused[AUTH_MISSING],
		(unsigned long long)refused[AUTH_INVALID], (unsigned long long)refused[AUTH_EXPIRED],
		(unsigned long long)refused[AUTH_FORBIDDEN],
		(unsigned long long)refused[AUTH_PROTECTED], iq, ip, ig, ib, stats);
	free(stats);
	req_reply_sb(r, 200, &sb);
	return QE_OK;
}

static void
prom(struct strbuf *sb, const char *name, const char *type, const char *help,
     unsigned long long v)
{
	sb_addf(sb, "# HELP queen_%s %s\n# TYPE queen_%s %s\nqueen_%s %llu\n", name, help, name,
		type, name, v);
}

/* Escapes a label value of the exposition format (backslash, quote, newline). */
static void
prom_label(struct strbuf *sb, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			sb_addc(sb, '\\');
		if (*v == '\n') {
			sb_adds(sb, "\\n");
			continue;
		}
		sb_addc(sb, *v);
	}
}

struct prom_queues {
	struct strbuf parts, msgs;
};

static void
prom_queue(void *arg, const char *queue, long partitions, int64_t messages)
{
	struct prom_queues *p = arg;

	sb_adds(&p->parts, "queen_queue_partitions{queue=\"");
	prom_label(&p->parts, queue);
	sb_addf(&p->parts, "\"} %ld\n", partitions);
	sb_adds(&p->msgs, "queen_queue_messages_stored_total{queue=\"");
	prom_label(&p->msgs, queue);
	sb_addf(&p->msgs, "\"} %lld\n", (long long)messages);
}

enum qe
h_prometheus(struct req *r, struct wk *w)
{
	struct metrics_snapshot m;
	struct strbuf sb;

	metrics_read(&m);
	sb_init(&sb);
	prom(&sb, "uptime_seconds", "gauge", "Seconds since the broker started.",
	     (unsigned long long)metrics_uptime_s());
	prom(&sb, "http_requests_total", "counter", "HTTP requests answered.", m.requests);
	prom(&sb, "http_errors_4xx_total", "counter", "Requests answered 4xx.", m.req_4xx);
	prom(&sb, "http_errors_5xx_total", "counter", "Requests answered 5xx.", m.req_5xx);
	prom(&sb, "messages_pushed_total", "counter", "Messages stored.", m.pushed);
	prom(&sb, "messages_duplicate_total", "counter", "Push items refused as duplicates.",
	     m.duplicates);
	prom(&sb, "messages_popped_total", "counter", "Messages delivered.", m.popped);
	prom(&sb, "messages_acked_total", "counter", "Messages acknowledged completed.", m.acked);
	prom(&sb, "messages_nacked_total", "counter", "Acknowledgements failed, retry or dlq.",
	     m.nacked);
	prom(&sb, "messages_dead_lettered_total", "counter", "Messages moved to dead letters.",
	     m.dead_lettered);
	prom(&sb, "push_commits_total", "counter", "Push transactions (group commits).",
	     m.push_commits);
	prom(&sb, "db_errors_total", "counter", "Failed database statements.", m.db_errors);
	prom(&sb, "jobs_queued", "gauge", "Requests waiting for a worker.",
	     (unsigned long long)wk_queued());
	prom(&sb, "pops_parked", "gauge", "Long-polls waiting for data.",
	     (unsigned long long)lp_parked());
	prom(&sb, "pops_refused_total", "counter",
	     "Long-polls refused with 429 at QUEEN_MAX_LONGPOLLS.", m.lp_refused);
	prom(&sb, "pops_abandoned_total", "counter",
	     "Parked long-polls released because their client went away.", m.abandoned);
	prom(&sb, "pop_queries_total", "counter", "Pop queries run (first tries, wakes, rechecks).",
	     m.pop_queries);
	prom(&sb, "large_work_pauses_total", "counter",
	     "Pauses of large pushes for the requests beside them.", m.pauses);
	prom(&sb, "large_work_paused_ms_total", "counter",
	     "Milliseconds large pushes paused for the requests beside them.", m.paused_us / 1000);
	prom(&sb, "pool_size", "gauge", "Worker connections to PostgreSQL.",
	     (unsigned long long)qconf.db_pool_size);
	prom(&sb, "spool_pending", "gauge", "Pushes waiting in the on-disk spool.",
	     (unsigned long long)spool_pending());
	prom(&sb, "spool_failed", "gauge", "Spooled pushes set aside after refused replays.",
	     (unsigned long long)spool_failed());
	long iq, ip, ig, ib;

	pidx_size(&iq, &ip, &ig, &ib);
	prom(&sb, "index_queues", "gauge", "Queues in the partition index.",
	     (unsigned long long)iq);
	prom(&sb, "index_partitions", "gauge", "Partitions in the partition index.",
	     (unsigned long long)ip);
	prom(&sb, "index_group_slots", "gauge",
	     "Consumer group cursors held by the partition index.", (unsigned long long)ig);
	prom(&sb, "index_slot_blocks", "gauge",
	     "Blocks of 4 cursor slots beyond the first slot of each partition.",
	     (unsigned long long)ib);
	/* Refusals of authentication and protected mode, by reason (SPEC 17). */
	uint64_t refused[AUTH_REFUSAL__COUNT];

	auth_counts(refused);
	sb_adds(&sb, "# HELP queen_auth_refused_total Requests refused by authentication, by "
		     "reason.\n# TYPE queen_auth_refused_total counter\n");
	for (int i = AUTH_PASS + 1; i < AUTH_REFUSAL__COUNT; i++)
		sb_addf(&sb, "queen_auth_refused_total{reason=\"%s\"} %llu\n",
			auth_refusal_name((enum auth_refusal)i), (unsigned long long)refused[i]);
	/* Per queue, from the partition index (no query): partitions and offsets allocated. */
	struct prom_queues pq;

	sb_init(&pq.parts);
	sb_init(&pq.msgs);
	pidx_foreach_queue(prom_queue, &pq);
	sb_adds(&sb, "# HELP queen_queue_partitions Partitions of the queue.\n"
		     "# TYPE queen_queue_partitions gauge\n");
	if (pq.parts.len)
		sb_add(&sb, pq.parts.buf, pq.parts.len);
	sb_adds(&sb, "# HELP queen_queue_messages_stored_total Messages ever stored in the queue "
		     "(offsets allocated).\n# TYPE queen_queue_messages_stored_total counter\n");
	if (pq.msgs.len)
		sb_add(&sb, pq.msgs.buf, pq.msgs.len);
	sb_free(&pq.parts);
	sb_free(&pq.msgs);
	r->content_type = "text/plain; version=0.0.4";
	req_reply_sb(r, 200, &sb);
	return QE_OK;
}
