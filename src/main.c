/* main: start-up, signals and shutdown order. Nothing else lives here.
 *
 * Start: configuration, database (waiting for it), migrations, index load, worker pool,
 * long-poll thread, maintenance thread, HTTP, then READY=1 to systemd. Signals are blocked in
 * every thread and taken here with sigwait: SIGTERM/SIGINT drain and exit 0, SIGHUP reloads
 * what can change at runtime (a bad new configuration is logged and the old one kept). */
#include "auth.h"
#include "bulk.h"
#include "conf.h"
#include "dbpool.h"
#include "http.h"
#include "log.h"
#include "longpoll.h"
#include "maint.h"
#include "metrics.h"
#include "migrate.h"
#include "offmap.h"
#include "pcrypt.h"
#include "pindex.h"
#include "workers.h"

#include "config.h"

#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* Tells systemd (Type=notify) the broker is ready; a no-op outside systemd. */
static void
notify_systemd(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa;
	int fd;

	if (!path || (path[0] != '/' && path[0] != '@') || strlen(path) >= sizeof(sa.sun_path))
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, strlen(path));
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = '\0';
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	if (sendto(fd, state, strlen(state), 0, (struct sockaddr *)&sa,
		   (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path))) < 0)
		log_warn("systemd notification failed: %s", strerror(errno));
	close(fd);
}

/* Every parked long-poll holds a socket: take the whole hard limit on open files, so that
 * QUEEN_MAX_LONGPOLLS (10,000 by default) is what bounds them, not a soft limit of 1,024. */
static void
raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			log_warn("cannot raise the open file limit: %s", strerror(errno));
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (int64_t)rl.rlim_cur < qconf.max_longpolls + 1024)
		log_warn("open file limit %llu is below QUEEN_MAX_LONGPOLLS + 1024: parked "
			 "long-polls will be refused by the kernel before the broker's cap",
			 (unsigned long long)rl.rlim_cur);
}

/* Connects for the migrations, waiting for PostgreSQL while it is not up yet. Returns NULL
 * only when a stop signal arrived meanwhile. */
static PGconn *
wait_for_database(const sigset_t *stop)
{
	int delay_ms = 250;

	for (;;) {
		PGconn *pg = db_connect_raw();
		struct timespec ts;

		if (pg)
			return pg;
		log_warn("waiting for a read-write PostgreSQL at host %s port %s", qconf.pg_host,
			 qconf.pg_port);
		ts.tv_sec = delay_ms / 1000;
		ts.tv_nsec = (long)(delay_ms % 1000) * 1000000;
		if (sigtimedwait(stop, NULL, &ts) > 0)
			return NULL;
		if (delay_ms < 5000)
			delay_ms *= 2;
	}
}

static void
reload(void)
{
	char err[512];
	int lv;

	if (conf_reload(&qconf, err, sizeof(err)) < 0) {
		log_error("reload refused, keeping the running configuration: %s", err);
		return;
	}
	lv = log_level_parse(qconf.log_level);
	if (lv > 0)
		log_set_level((enum log_level)lv);
	auth_reload();
	log_info("configuration reloaded");
}

static void
shutdown_all(void)
{
	log_info("stopping: draining in-flight requests");
	notify_systemd("STOPPING=1");
	http_quiesce();
	lp_shutdown();
	wk_stop();
	bulk_stop();
	maint_stop();
	lp_stop();
	http_stop();
	auth_stop();
	pcrypt_stop();
	pidx_thread_offline();
	om_destroy();
}

/* Starts the threads that serve, in order. When one cannot start, those already running are
 * stopped before it returns -1: a worker may be inside libpq, connecting, and leaving main
 * with it running raced the libraries' exit handlers (an abort in Kerberos's, one start in
 * seven, when FILE_BUFFER_DIR was another broker's). */
static int
start_threads(void)
{
	if (bulk_start() < 0)
		return -1;
	if (wk_start((int)qconf.db_pool_size) < 0)
		goto no_workers;
	if (lp_start() < 0)
		goto no_longpoll;
	if (maint_start() < 0)
		goto no_maint;
	if (http_start() < 0)
		goto no_http;
	return 0;
no_http:
	maint_stop();
no_maint:
	lp_stop();
no_longpoll:
	wk_stop();
no_workers:
	bulk_stop();
	return -1;
}

int
main(int argc, char **argv)
{
	enum conf_action action;
	char err[512];
	sigset_t sigs, stop;
	PGconn *pg;
	int sig, lv, mrc;

	if (conf_load(&qconf, argc, argv, &action, err, sizeof(err)) < 0) {
		fprintf(stderr, "queend: %s\n", err);
		return 2;
	}
	switch (action) {
	case CONF_HELP:
		conf_print_help(stdout);
		conf_free(&qconf);
		return 0;
	case CONF_VERSION:
		printf("queend %s\n", PACKAGE_VERSION);
		conf_free(&qconf);
		return 0;
	case CONF_CHECK:
		printf("queend: configuration OK\n");
		conf_free(&qconf);
		return 0;
	case CONF_PRINT:
		conf_print(&qconf, stdout);
		conf_free(&qconf);
		return 0;
	case CONF_RUN:
		break;
	}
	lv = log_level_parse(qconf.log_level);
	log_set_level((enum log_level)(lv > 0 ? lv : LOG_LV_INFO));

	/* Block the signals before any thread exists, so every thread inherits the mask. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);

	/* Few malloc arenas: the threads mostly wait on I/O, and one arena per thread costs
	 * resident memory for nothing. */
	mallopt(M_ARENA_MAX, 2);
	/* Request bodies and group-commit parameters are large and short-lived: a fixed mmap
	 * threshold gives them back to the system when freed, instead of glibc raising the
	 * threshold and keeping them on the heap, where fragmentation holds on to them. */
	mallopt(M_MMAP_THRESHOLD, 256 * 1024);
	mallopt(M_TRIM_THRESHOLD, 1024 * 1024);
	raise_fd_limit();
	metrics_start();
	/* Key material before anything else: a broker that cannot authenticate must not start. */
	if (auth_start(err, sizeof(err)) < 0) {
		log_error("%s", err);
		conf_free(&qconf);
		return 2;
	}
	pcrypt_start();
	pidx_init();
	om_init();
	pidx_thread_online();
	log_info("queend %s starting", PACKAGE_VERSION);

	/* The migrations run under an advisory lock on the primary. A failover under way (the
	 * connection lost, or the server no longer the primary) is no reason to give up: connect
	 * again, to whichever host is the primary now, and take the lock there. */
	for (;;) {
		pg = wait_for_database(&stop);
		if (!pg) {
			auth_stop();
			pidx_thread_offline();
			om_destroy();
			conf_free(&qconf);
			return 0;
		}
		mrc = migrate_apply(pg);
		if (mrc == 0 || migrate_server_ok(pg))
			break;
		log_warn("the database went away during the schema migration: connecting again");
		PQfinish(pg);
	}
	if (mrc < 0) {
		PQfinish(pg);
		log_error("cannot bring the database schema up to date; stopping");
		auth_stop();
		pidx_thread_offline();
		om_destroy();
		conf_free(&qconf);
		return 1;
	}
	PQfinish(pg);
	if (maint_initial_sync() < 0)
		log_warn("partition index starts empty: the first resync will fill it");
	if (start_threads() < 0) {
		log_error("start-up failed; stopping");
		return 1;
	}
	notify_systemd("READY=1");
	log_info("ready");

	for (;;) {
		if (sigwait(&sigs, &sig) != 0)
			continue;
		if (sig == SIGHUP) {
			reload();
			continue;
		}
		if (sig == SIGTERM || sig == SIGINT)
			break;
	}
	shutdown_all();
	conf_free(&qconf);
	log_info("stopped");
	return 0;
}
