/* router: the route table of SPEC section 3 and the matcher.
 *
 * Matching walks the table once; a path that matches some pattern with another method
 * collects the methods for the Allow header of a 405. The path is matched as the client sent
 * it (libmicrohttpd is told not to decode it, http.c), and each parameter is percent-decoded
 * exactly once, here: %2F is a '/' inside a name, never a separator (SPEC 22). */
#include "router.h"
#include "h_ack.h"
#include "h_dlq.h"
#include "h_groups.h"
#include "h_kv.h"
#include "h_messages.h"
#include "h_ops.h"
#include "h_pop.h"
#include "h_push.h"
#include "h_queue.h"
#include "h_status.h"
#include "h_util.h"
#include "h_system.h"
#include "h_timers.h"
#include "h_txn.h"
#include "http.h"
#include "hex.h"
#include "qassert.h"

#include <stdlib.h>
#include <string.h>

static const struct route routes[] = {
	{ "POST", "/api/v1/push", AUTH_WRITE, BODY_RAW, h_push_prepare, h_push_run,
	  h_push_run_many },
	{ "GET", "/api/v1/pop/queue/:queue", AUTH_RW, BODY_NONE, h_pop_prepare, h_pop_run, NULL,
	  .consumer = 1 },
	{ "GET", "/api/v1/pop/queue/:queue/partition/:partition", AUTH_RW, BODY_NONE, h_pop_prepare,
	  h_pop_run, NULL, .consumer = 1 },
	{ "GET", "/api/v1/pop", AUTH_RW, BODY_NONE, h_pop_prepare, h_pop_run, NULL,
	  .consumer = 1 },
	{ "POST", "/api/v1/ack", AUTH_RW, BODY_JSON, h_ack_prepare, h_ack_run, NULL,
	  .consumer = 1 },
	{ "POST", "/api/v1/ack/batch", AUTH_RW, BODY_RAW, h_ack_prepare, h_ack_run, NULL,
	  .consumer = 1 },
	{ "POST", "/api/v1/transaction", AUTH_RW, BODY_JSON, h_txn_prepare, h_txn_run,
	  h_txn_run_many },
	{ "POST", "/api/v1/lease/:leaseId/extend", AUTH_RW, BODY_JSON_OPTIONAL, h_extend_prepare,
	  h_extend_run, NULL },
	{ "POST", "/api/v1/configure", AUTH_RW, BODY_JSON, h_configure_prepare, h_configure_run,
	  NULL },
	{ "GET", "/api/v1/resources/queues/:queue", AUTH_READ, BODY_NONE, NULL, h_queue_get, NULL },
	{ "DELETE", "/api/v1/resources/queues/:queue", AUTH_ADMIN, BODY_NONE, NULL, h_queue_delete,
	  NULL },
	{ "GET", "/api/v1/resources/queues/:queue/depth", AUTH_READ, BODY_NONE, NULL, h_queue_depth,
	  NULL },
	{ "GET", "/api/v1/dlq", AUTH_READ, BODY_NONE, NULL, h_dlq_list, NULL },
	{ "DELETE", "/api/v1/dlq", AUTH_ADMIN, BODY_NONE, NULL, h_dlq_purge, NULL },
	{ "POST", "/api/v1/dlq/:id/replay", AUTH_RW, BODY_JSON_OPTIONAL, h_dlq_replay_prepare,
	  h_dlq_replay_run, NULL },
	/* consumer groups: the literal "lagging" must come before ":group" */
	{ "GET", "/api/v1/consumer-groups", AUTH_READ, BODY_NONE, NULL, h_groups_list, NULL },
	{ "GET", "/api/v1/consumer-groups/lagging", AUTH_READ, BODY_NONE, NULL, h_groups_lagging,
	  NULL },
	{ "GET", "/api/v1/consumer-groups/:group", AUTH_READ, BODY_NONE, NULL, h_group_get, NULL },
	{ "DELETE", "/api/v1/consumer-groups/:group", AUTH_ADMIN, BODY_NONE, NULL, h_group_delete,
	  NULL },
	{ "DELETE", "/api/v1/consumer-groups/:group/queues/:queue", AUTH_ADMIN, BODY_NONE, NULL,
	  h_group_delete, NULL },
	{ "POST", "/api/v1/consumer-groups/:group/subscription", AUTH_RW, BODY_JSON,
	  h_group_subscription_prepare, h_group_subscription_run, NULL },
	{ "POST", "/api/v1/consumer-groups/:group/queues/:queue/seek", AUTH_RW, BODY_JSON,
	  h_seek_prepare,
	  h_seek_run, NULL },
	{ "POST", "/api/v1/consumer-groups/:group/queues/:queue/partitions/:partition/seek",
	  AUTH_RW,
	  BODY_JSON_OPTIONAL, h_seek_prepare, h_seek_run, NULL },
	{ "GET", "/api/v1/messages", AUTH_READ, BODY_NONE, NULL, h_messages_list, NULL },
	{ "GET", "/api/v1/messages/:partitionId/:transactionId", AUTH_READ, BODY_NONE, NULL,
	  h_message_get,
	  NULL },
	{ "DELETE", "/api/v1/messages/:partitionId/:transactionId", AUTH_ADMIN, BODY_NONE, NULL,
	  h_message_delete, NULL },
	{ "POST", "/api/v1/messages/:partitionId/:transactionId/retry", AUTH_RW, BODY_JSON_OPTIONAL,
	  h_dlq_replay_prepare, h_message_retry_run, NULL },
	/* operator views (h_status.c) */
	{ "GET", "/api/v1/resources/queues", AUTH_READ, BODY_NONE, NULL, h_sql_view, NULL,
	  .view = SQL_RES_QUEUES },
	{ "GET", "/api/v1/resources/overview", AUTH_READ, BODY_NONE, NULL, h_sql_view, NULL,
	  .view = SQL_RES_OVERVIEW },
	{ "GET", "/api/v1/resources/namespaces", AUTH_READ, BODY_NONE, NULL, h_sql_view, NULL,
	  .view = SQL_RES_NAMESPACES },
	{ "GET", "/api/v1/resources/tasks", AUTH_READ, BODY_NONE, NULL, h_sql_view, NULL,
	  .view = SQL_RES_TASKS },
	{ "GET", "/api/v1/status", AUTH_READ, BODY_NONE, NULL, h_status, NULL },
	{ "GET", "/api/v1/status/queues", AUTH_READ, BODY_NONE, NULL, h_status_queues, NULL },
	/* spool and maintenance (h_system.c) */
	{ "GET", "/api/v1/status/buffers", AUTH_READ, BODY_NONE, NULL, h_buffers, NULL },
	{ "GET", "/api/v1/system/maintenance", AUTH_ADMIN, BODY_NONE, NULL, h_maintenance_get,
	  NULL },
	{ "POST", "/api/v1/system/maintenance", AUTH_ADMIN, BODY_JSON, h_maintenance_prepare,
	  h_maintenance_set, NULL },
	{ "GET", "/api/v1/system/maintenance/pop", AUTH_ADMIN, BODY_NONE, NULL,
	  h_maintenance_pop_get, NULL },
	{ "POST", "/api/v1/system/maintenance/pop", AUTH_ADMIN, BODY_JSON, h_maintenance_prepare,
	  h_maintenance_pop_set, NULL },
	{ "GET", "/health", AUTH_READ, BODY_NONE, NULL, h_health, NULL },
	{ "GET", "/metrics", AUTH_READ, BODY_NONE, NULL, h_metrics, NULL },
	{ "GET", "/metrics/prometheus", AUTH_READ, BODY_NONE, NULL, h_prometheus, NULL },
	{ "POST", "/api/v1/kv", AUTH_RW, BODY_JSON, h_kv_prepare, h_kv_run, NULL },
	{ "GET", "/api/v1/kv/:ns/*key", AUTH_READ, BODY_NONE, h_kv_key_prepare, h_kv_key_run,
	  NULL },
	{ "PUT", "/api/v1/kv/:ns/*key", AUTH_RW, BODY_JSON, h_kv_key_prepare, h_kv_key_run, NULL },
	{ "DELETE", "/api/v1/kv/:ns/*key", AUTH_RW, BODY_JSON_OPTIONAL, h_kv_key_prepare,
	  h_kv_key_run,
	  NULL },
	{ "POST", "/api/v1/timers", AUTH_WRITE, BODY_JSON, h_timers_prepare, h_timers_apply, NULL },
	{ "GET", "/api/v1/timers/:queue", AUTH_READ, BODY_NONE, h_timers_list_prepare,
	  h_timers_list, NULL },
	{ "GET", "/api/v1/timers/:queue/*timerKey", AUTH_READ, BODY_NONE, NULL, h_timers_get,
	  NULL },
	{ "DELETE", "/api/v1/timers/:queue/*timerKey", AUTH_WRITE, BODY_NONE, NULL, h_timers_cancel,
	  NULL },
};

char *
route_pct_decode(const char *s, size_t n, size_t *outlen)
{
	char *out = malloc(n + 1), *o = out;

	QASSERT(out != NULL);
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '%' && i + 2 < n &&
		    hex_digit(s[i + 1]) >= 0 && hex_digit(s[i + 2]) >= 0) {
			*o++ = (char)(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]));
			i += 2;
		} else {
			*o++ = s[i];
		}
	}
	*o = '\0';
	if (outlen)
		*outlen = (size_t)(o - out);
	return out;
}

/* Matches path against pattern; on success stores the parameter spans. */
static int
match_pattern(const char *pat, const char *path, const char **ps, size_t *pl, int *np)
{
	*np = 0;
	while (*pat && *path) {
		if (*pat == ':' || *pat == '*') {
			int rest = *pat == '*';
			const char *end = rest ? path + strlen(path) : path + strcspn(path, "/");

			if (end == path || *np >= REQ_MAX_PARAMS)
				return 0;
			ps[*np] = path;
			pl[*np] = (size_t)(end - path);
			(*np)++;
			pat += strcspn(pat, "/");
			path = end;
			continue;
		}
		if (*pat != *path)
			return 0;
		pat++;
		path++;
	}
	return *pat == '\0' && *path == '\0';
}

void
route_param_name(const struct route *rt, int i, char *buf, size_t len)
{
	const char *p = rt->pattern;

	for (int k = 0; (p = strpbrk(p, ":*")) != NULL; k++, p++) {
		if (k == i) {
			snprintf(buf, len, "%.*s", (int)strcspn(p + 1, "/"), p + 1);
			return;
		}
	}
	snprintf(buf, len, "parameter %d", i + 1);
}

enum route_match_result
route_match(const char *method, const char *path, const struct route **out, char **params,
	    size_t *plens, int *nparams, char *allow, size_t allowlen)
{
	const char *ps[REQ_MAX_PARAMS];
	size_t pl[REQ_MAX_PARAMS];
	int np, path_seen = 0;

	allow[0] = '\0';
	for (size_t i = 0; i < ARRAY_LEN(routes); i++) {
		const struct route *rt = &routes[i];

		if (!match_pattern(rt->pattern, path, ps, pl, &np))
			continue;
		if (strcmp(rt->method, method) == 0 ||
		    (strcmp(method, "HEAD") == 0 && strcmp(rt->method, "GET") == 0)) {
			for (int k = 0; k < np; k++)
				params[k] = route_pct_decode(ps[k], pl[k], &plens[k]);
			*nparams = np;
			*out = rt;
			return ROUTE_FOUND;
		}
		if (!strstr(allow, rt->method)) {
			size_t len = strlen(allow);

			snprintf(allow + len, allowlen - len, "%s%s", len ? ", " : "", rt->method);
		}
		path_seen = 1;
	}
	return path_seen ? ROUTE_NO_METHOD : ROUTE_NO_PATH;
}
