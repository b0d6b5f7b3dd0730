/* maint: LISTEN/NOTIFY and index resync. Notifications from this broker's own workers are
 * skipped (they were applied when the push committed); a notification naming a partition
 * the index does not know triggers an early resync. */
#include "maint.h"
#include "conf.h"
#include "dbpool.h"
#include "h_kv.h"
#include "http.h"
#include "lanes.h"
#include "log.h"
#include "longpoll.h"
#include "pindex.h"
#include "qassert.h"
#include "resync.h"
#include "retention.h"
#include "spool.h"
#include "strbuf.h"
#include "timers.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Periodic jobs of the maintenance thread, each bounded per round. A task module exposes
 * one function taking the maintenance connection; add it here with its interval. */
struct maint_task {
	const char *name;
	int64_t (*interval_ms)(void);
	void (*run)(struct dbconn *db);
	int64_t next_ms;
};

/* Planner statistics of the small, fast-growing tables (schema/functions/planner.sql): the
 * database analyses each table whose rows have doubled since its last ANALYZE, so that the
 * cached plans of the hot functions stay right as a deployment grows. */
static int64_t
stats_interval_ms(void)
{
	return 500;
}

static void
stats_refresh(struct dbconn *db)
{
	PGresult *res;

	if (db_exec(db, SQL_STATS_REFRESH, NULL, &res) != QE_OK)
		return;
	if (!PQgetisnull(res, 0, 0))
		log_debug("planner statistics refreshed: %s", PQgetvalue(res, 0, 0));
	PQclear(res);
}

/* In the order they run when several are due: the spool first, since pushes wait for it
 * once the database is back (spool_wait_drained). */
static struct maint_task maint_tasks[] = {
	{ "spool", spool_drain_interval_ms, spool_drain, 0 },
	{ "stats", stats_interval_ms, stats_refresh, 0 },
	{ "kv_prune", kv_prune_interval_ms, kv_prune, 0 },
	{ "timers", timers_interval_ms, timers_sweep, 0 },
	{ "retention", retention_interval_ms, retention_run, 0 },
	{ NULL, NULL, NULL, 0 },
};

/* Pushes this broker committed, for the other brokers: (partition, log end) pairs handed
 * over by the index's push hook from any worker, a commit's all at once (so that no flush
 * sends part of a commit), deduplicated in a small open-addressing table, and sent by this
 * thread as NOTIFY payloads "pid:end,..." of at most ~7000 bytes. When the table fills up
 * between two flushes, one "*" (resync) is sent instead. An eventfd wakes the thread when
 * the table stops being empty. */
#define NTF_SLOTS 2048
/* At most one flush per NTF_GAP_MS: under load every commit would otherwise cost the
 * database one more NOTIFY transaction (and every listening broker a wakeup); the pushes of
 * a gap travel together, and an idle broker still sends at once. */
#define NTF_GAP_MS 5

static pthread_mutex_t ntf_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ntf_entry {
	char pid[UUID_STR_LEN];
	int64_t end;
} ntf_tab[NTF_SLOTS];
static int ntf_count, ntf_overflow;
static int ntf_efd = -1;
static int64_t ntf_last_ms;	/* maint thread only */

/* Adds (pid, end) to the table. Called with ntf_mu held. */
static void
ntf_add(const char *pid, int64_t end)
{
	unsigned h = (unsigned)strtoul(pid, NULL, 16) % NTF_SLOTS;

	for (int i = 0; i < NTF_SLOTS; i++, h = (h + 1) % NTF_SLOTS) {
		struct ntf_entry *e = &ntf_tab[h];

		if (e->pid[0] == '\0') {
			if (ntf_count >= NTF_SLOTS * 3 / 4) {
				ntf_overflow = 1;
				break;
			}
			snprintf(e->pid, sizeof(e->pid), "%s", pid);
			e->end = end;
			ntf_count++;
			break;
		}
		if (strcmp(e->pid, pid) == 0) {
			if (end > e->end)
				e->end = end;
			break;
		}
	}
}

static void
ntf_hook(const struct pidx_push *v, size_t n)
{
	int was_empty;

	pthread_mutex_lock(&ntf_mu);
	was_empty = ntf_count == 0 && !ntf_overflow;
	for (size_t i = 0; i < n && !ntf_overflow; i++)
		ntf_add(v[i].pid, v[i].log_end);
	pthread_mutex_unlock(&ntf_mu);
	if (was_empty && ntf_efd >= 0) {
		uint64_t one = 1;

		if (write(ntf_efd, &one, sizeof(one)) < 0)
			log_debug("notify wakeup lost: %s", strerror(errno));
	}
}

static void
ntf_send(struct dbconn *db, const char *payload)
{
	const char *params[1] = { payload };
	PGresult *res;

	if (db_exec(db, SQL_NOTIFY, params, &res) == QE_OK)
		PQclear(res);
}

static void
ntf_flush(struct dbconn *db)
{
	struct strbuf sb;
	int overflow;

	sb_init(&sb);
	pthread_mutex_lock(&ntf_mu);
	overflow = ntf_overflow;
	for (int i = 0; i < NTF_SLOTS && ntf_count; i++) {
		struct ntf_entry *e = &ntf_tab[i];

		if (e->pid[0] == '\0')
			continue;
		if (!overflow) {
			if (sb.len)
				sb_addc(&sb, ',');
			sb_adds(&sb, e->pid);
			sb_addc(&sb, ':');
			sb_add_i64(&sb, e->end);
		}
		e->pid[0] = '\0';
		ntf_count--;
	}
	ntf_count = 0;
	ntf_overflow = 0;
	pthread_mutex_unlock(&ntf_mu);
	if (overflow) {
		ntf_send(db, "*");
	} else {
		/* Cut at entry boundaries into payloads under the 8000-byte limit. */
		char *p = sb.buf;

		while (p && *p) {
			size_t n = strlen(p);
			char *cut = p + n;

			if (n > 7000) {
				cut = p + 7000;
				while (cut > p && *cut != ',')
					cut--;
			}
			if (*cut == ',') {
				*cut = '\0';
				ntf_send(db, p);
				p = cut + 1;
			} else {
				ntf_send(db, p);
				break;
			}
		}
	}
	sb_free(&sb);
}

static pthread_t maint_thread;
static _Atomic int maint_exit;
static struct dbconn *maint_db;
static unsigned maint_listen_serial;	/* connection serial LISTEN was issued on, 0 = none */

/* Applies one notification payload "pid:log_end,..." or "*". Returns 1 when a resync is
 * needed. */
static int
apply_notify(const char *payload)
{
	char *copy, *save = NULL;
	int need_resync = 0;

	if (strcmp(payload, "*") == 0)
		return 1;
	copy = strdup(payload);
	QASSERT(copy != NULL);
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(tok, ':'), queue[512];

		if (!colon)
			continue;
		*colon = '\0';
		if (!pidx_log_end(tok, atoll(colon + 1))) {
			need_resync = 1;
			continue;
		}
		if (pidx_queue_of(tok, queue, sizeof(queue)))
			lp_wake_queue(queue, 1);
	}
	free(copy);
	return need_resync;
}

/* LISTEN on the maintenance connection, then reload the index: what committed before the
 * LISTEN is in the snapshot, what commits after it is notified. Returns what resync_run
 * returns, or -1 when the LISTEN failed (then nothing is marked: the next round tries
 * again). */
static int
listen_and_resync(struct dbconn *helper, int alone)
{
	PGresult *res;

	if (db_exec(maint_db, SQL_LISTEN, NULL, &res) != QE_OK)
		return -1;
	PQclear(res);
	maint_listen_serial = db_serial(maint_db);
	return resync_run(maint_db, helper, alone, &maint_exit);
}

static void
ensure_listening(void)
{
	if (db_ensure(maint_db) != QE_OK) {
		maint_listen_serial = 0;
		return;
	}
	if (maint_listen_serial == db_serial(maint_db))
		return;
	/* A new connection: the database is back, and so may the lanes' be. */
	lanes_warm();
	if (listen_and_resync(NULL, 0) > 0)
		lp_wake_all();
}

/* Sleep until the next task is due, at most 200 ms (notifications end it sooner). */
static int
ntf_pending(void)
{
	int pending;

	pthread_mutex_lock(&ntf_mu);
	pending = ntf_count > 0 || ntf_overflow;
	pthread_mutex_unlock(&ntf_mu);
	return pending;
}

static int
poll_timeout_ms(void)
{
	int64_t now = now_ms(), t = 200;

	for (struct maint_task *k = maint_tasks; k->name; k++)
		if (k->next_ms - now < t)
			t = k->next_ms - now;
	/* Pushes left waiting for the gap to end (the eventfd only rings on the first). */
	if (ntf_pending() && ntf_last_ms + NTF_GAP_MS - now < t)
		t = ntf_last_ms + NTF_GAP_MS - now;
	return t < 1 ? 1 : (int)t;
}

/* When the next reload may run, after one that took `took` ms: a timed one after
 * QUEEN_INDEX_RESYNC_MS, or 20 times what it took when that is longer; one asked for by a
 * notification of an unknown partition after 4 times. Reloading a large index (a million
 * partitions take a few seconds) then costs at most a twentieth of this thread's time and
 * of the database connection when timed, a fifth when other brokers keep creating
 * partitions; a small one is reloaded as configured. */
struct resync_clock {
	int64_t next, next_asked;
	int asked;
};

static void
resync_ran(struct resync_clock *rc, int64_t took)
{
	int64_t now = now_ms();

	rc->next = now + (20 * took > qconf.index_resync_ms ? 20 * took : qconf.index_resync_ms);
	rc->next_asked = now + 4 * took;
	rc->asked = 0;
}

static void *
maint_main(void *arg)
{
	struct resync_clock rc = { .next = now_ms() + qconf.index_resync_ms };

	pidx_thread_online();
	if (maint_listen_serial)
		lanes_warm();	/* the start-up load listened: warm what ensure_listening would */
	while (!atomic_load(&maint_exit)) {
		PGconn *pg;
		struct pollfd pfd[2];
		PGnotify *n;
		uint64_t count;

		ensure_listening();
		pg = db_pg(maint_db);
		if (!pg) {
			/* Sooner while pushes wait in the spool for the database's return. */
			poll(NULL, 0, spool_pending() > 0 ? 50 : 200);
			continue;
		}
		pfd[0].fd = PQsocket(pg);
		pfd[0].events = POLLIN;
		pfd[0].revents = 0;
		pfd[1].fd = ntf_efd;
		pfd[1].events = POLLIN;
		pfd[1].revents = 0;
		poll(pfd, 2, poll_timeout_ms());
		if (pfd[1].revents && read(ntf_efd, &count, sizeof(count)) < 0)
			log_debug("notify wakeup read: %s", strerror(errno));
		if (now_ms() >= ntf_last_ms + NTF_GAP_MS && ntf_pending()) {
			ntf_flush(maint_db);
			ntf_last_ms = now_ms();
		}
		if (pfd[0].revents && (!PQconsumeInput(pg) || PQstatus(pg) != CONNECTION_OK)) {
			/* The server went away: the workers' connections are gone too. */
			db_invalidate_all();
			continue;
		}
		while ((n = PQnotifies(pg)) != NULL) {
			if (!db_is_own_backend(n->be_pid) && n->be_pid != PQbackendPID(pg))
				rc.asked |= apply_notify(n->extra);
			PQfreemem(n);
		}
		pidx_fit(0);
		for (struct maint_task *t = maint_tasks; t->name; t++) {
			if (now_ms() < t->next_ms)
				continue;
			t->run(maint_db);
			t->next_ms = now_ms() + t->interval_ms();
		}
		if ((rc.asked && now_ms() >= rc.next_asked) || now_ms() >= rc.next) {
			int64_t t0 = now_ms();

			if (resync_run(maint_db, NULL, 0, &maint_exit) > 0)
				lp_wake_all();
			resync_ran(&rc, now_ms() - t0);
		}
	}
	pidx_thread_offline();
	return NULL;
}

int
maint_initial_sync(void)
{
	/* The broker answers once it has loaded: the start-up load reads in halves side by
	 * side (a million partitions just filled, 8.2-8.9 s in one read, 6.4-7.2 s so).
	 * Later loads keep to the one connection, beside the traffic. */
	struct dbconn *helper = db_new(-1);
	int rc;

	maint_db = db_new(-1);
	/* No other thread runs yet: the load has the index to itself. */
	rc = db_ensure(maint_db) == QE_OK && listen_and_resync(helper, 1) >= 0 ? 0 : -1;
	db_free(helper);
	/* Listening already, on the index it loaded: the maintenance thread does not load it
	 * again (a million partitions are seconds of the database's time and the broker's).
	 * Else the thread listens and loads it as after any reconnection. */
	if (rc < 0)
		maint_listen_serial = 0;
	return rc;
}

int
maint_start(void)
{
	ntf_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (ntf_efd < 0) {
		log_error("cannot create an eventfd: %s", strerror(errno));
		return -1;
	}
	pidx_set_push_hook(ntf_hook);
	/* The spool's drainer is a task of this thread: open it (and recover what a previous
	 * run left) before any push can arrive. */
	if (spool_open(qconf.file_buffer_dir) < 0 || lanes_start(qconf.push_lanes) < 0)
		return -1;
	if (pthread_create(&maint_thread, NULL, maint_main, NULL) != 0) {
		log_error("cannot start the maintenance thread");
		return -1;
	}
	return 0;
}

void
maint_stop(void)
{
	atomic_store(&maint_exit, 1);
	pthread_join(maint_thread, NULL);
	lanes_stop();
	/* Pushes answered during the drain are announced before the connection goes. */
	pidx_set_push_hook(NULL);
	if (db_ok(maint_db))
		ntf_flush(maint_db);
	if (ntf_efd >= 0)
		close(ntf_efd);
	ntf_efd = -1;
	spool_close();
	db_free(maint_db);
	maint_db = NULL;
}
