/* log: leveled, line-buffered logging to stderr.
 *
 * A repeated identical message (a database outage logs the same error from every worker) is
 * rate limited: the same text within one second is counted, not printed, and the count is
 * reported with the next line that gets through. */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>
#include <time.h>

static _Atomic int log_level = LOG_LV_INFO;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_last[256];
static time_t log_last_at;
static unsigned log_suppressed;

int
log_level_parse(const char *s)
{
	static const struct { const char *name; int lv; } names[] = {
		{ "error", LOG_LV_ERROR }, { "warn", LOG_LV_WARN }, { "warning", LOG_LV_WARN },
		{ "info", LOG_LV_INFO }, { "debug", LOG_LV_DEBUG }, { "trace", LOG_LV_DEBUG },
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcasecmp(s, names[i].name) == 0)
			return names[i].lv;
	return -1;
}

void
log_set_level(enum log_level lv)
{
	atomic_store(&log_level, lv);
}

int
log_enabled(enum log_level lv)
{
	return (int)lv <= atomic_load(&log_level);
}

static __thread unsigned long long log_req;

void
log_request(unsigned long long id)
{
	log_req = id;
}

void
log_msg(enum log_level lv, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	struct timespec ts;
	struct tm tm;
	time_t now;

	if (!log_enabled(lv))
		return;
	va_start(ap, fmt);
	if (log_req) {
		int n = snprintf(line, sizeof(line), "req=%llu ", log_req);

		vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	} else {
		vsnprintf(line, sizeof(line), fmt, ap);
	}
	va_end(ap);
	/* One event, one line: a control byte that came from a client (a raw byte in a path, a
	 * name) or from PostgreSQL's error text must not start a forged line of its own. */
	for (char *p = line; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';

	clock_gettime(CLOCK_REALTIME, &ts);
	now = ts.tv_sec;
	gmtime_r(&now, &tm);

	pthread_mutex_lock(&log_mu);
	if (now == log_last_at && strncmp(line, log_last, sizeof(log_last) - 1) == 0) {
		log_suppressed++;
		pthread_mutex_unlock(&log_mu);
		return;
	}
	if (log_suppressed)
		fprintf(stderr, "<%d>%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ (last message repeated %u times)\n",
			LOG_LV_INFO, tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
			tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, log_suppressed);
	log_suppressed = 0;
	strncpy(log_last, line, sizeof(log_last) - 1);
	log_last[sizeof(log_last) - 1] = '\0';
	log_last_at = now;
	fprintf(stderr, "<%d>%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s\n", lv, tm.tm_year + 1900,
		tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
		line);
	pthread_mutex_unlock(&log_mu);
}
