/* h_groups: consumer-group administration and seek. The SQL of schema/functions/groups.sql decides everything
 * under row locks; this file validates requests, renders answers and keeps the partition
 * index honest afterwards: a seek may move a cursor backwards, and the index must not go on
 * telling pops that a partition has nothing for the group (they would answer 204 without
 * asking PostgreSQL). Answers of the delete and subscription functions carry keys starting
 * with "_" (partition ids, queue names) for that bookkeeping; they are removed here. */
#include "h_groups.h"
#include "dbpool.h"
#include "h_util.h"
#include "http.h"
#include "jsonio.h"
#include "longpoll.h"
#include "names.h"
#include "pindex.h"
#include "qassert.h"
#include "workers.h"

#include <stdlib.h>
#include <string.h>

/* Runs a statement answering one jsonb object and parses it into *out (caller owns). */
static enum qe
sql_object(struct req *r, struct wk *w, enum sql_id id, const char *const *params, json_t **out)
{
	char *text;
	enum qe e = db_exec_json(w->db, id, params, &text);

	*out = NULL;
	if (e != QE_OK)
		return req_fail(r, e, "database unavailable");
	if (text)
		*out = json_loads(text, 0, NULL);
	free(text);
	if (!json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		return req_fail(r, QE_INTERNAL, "unexpected answer from the database");
	}
	return QE_OK;
}

/* Wakes every queue named in the array at key, then removes the key. */
static void
wake_and_strip(json_t *o, const char *key)
{
	json_t *arr = json_object_get(o, key), *v;
	size_t i;

	json_array_foreach(arr, i, v)
		if (json_is_string(v))
			lp_wake_queue(json_string_value(v), 1);
	json_object_del(o, key);
}

/* Path parameters name things the broker writes: refuse control characters, as push does. */
static enum qe
check_names(struct req *r)
{
	for (int i = 0; i < r->nparams; i++)
		if (jio_has_ctl(req_param(r, i)))
			return req_fail(r, QE_BAD_REQUEST,
					"names must not hold control characters");
	return QE_OK;
}

enum qe
h_groups_list(struct req *r, struct wk *w)
{
	return h_reply_sql_json(r, w, SQL_GROUPS_LIST, NULL, "not found");
}

enum qe
h_groups_lagging(struct req *r, struct wk *w)
{
	const char *v = req_query(r, "minLagSeconds");
	int64_t min = 3600;
	char buf[24];
	const char *params[1] = { buf };

	if (v && *v && jio_parse_int(v, 0, INT32_MAX, &min) < 0)
		return req_fail(r, QE_BAD_REQUEST, "minLagSeconds must be a non-negative integer");
	snprintf(buf, sizeof(buf), "%lld", (long long)min);
	return h_reply_sql_json(r, w, SQL_GROUPS_LAGGING, params, "not found");
}

enum qe
h_group_get(struct req *r, struct wk *w)
{
	const char *params[1] = { req_param(r, 0) };

	return h_reply_sql_json(r, w, SQL_GROUP_DETAIL, params, "Consumer group not found");
}

enum qe
h_group_delete(struct req *r, struct wk *w)
{
	const char *group = req_param(r, 0);
	const char *queue = r->nparams > 1 ? req_param(r, 1) : NULL;
	const char *v = req_query(r, "deleteMetadata");
	int meta = 1;
	const char *params[3] = { group, queue, NULL };
	json_t *o;
	enum qe e;

	if (v && *v && jio_parse_bool(v, &meta) < 0)
		return req_fail(r, QE_BAD_REQUEST, "deleteMetadata must be true or false");
	params[2] = meta ? "true" : "false";
	if ((e = sql_object(r, w, SQL_GROUP_DELETE, params, &o)) != QE_OK)
		return e;
	/* The cursors are gone (and the stored start with deleteMetadata): the group leaves the
	 * index, whose slots go to the next groups; its next pop goes to SQL (first contact). */
	pidx_forget_group(queue, pidx_group_hash(group));
	json_object_del(o, "_pids");
	wake_and_strip(o, "_queues");
	if (!queue)
		json_object_del(o, "queueName");
	req_reply_json(r, 200, o);
	return QE_OK;
}

struct subscription_job {
	char ts[32];		/* ISO-8601 UTC, milliseconds */
};

enum qe
h_group_subscription_prepare(struct req *r)
{
	struct subscription_job *j;
	json_t *ts;
	char err[128];
	int64_t ms;
	enum qe e;

	if ((e = check_names(r)) != QE_OK)
		return e;
	if (strcmp(req_param(r, 0), QUEUE_MODE) == 0)
		return req_fail(r, QE_BAD_REQUEST,
				"%s always starts at all: it has no subscription", QUEUE_MODE);
	if (!json_is_object(r->json))
		return req_fail(r, QE_BAD_BODY, "expected an object");
	if (jio_field(r->json, "subscriptionTimestamp", JIO_STRING, &ts, err, sizeof(err)) < 0)
		return req_fail(r, QE_BAD_BODY, "%s", err);
	if (!ts)
		return req_fail(r, QE_BAD_BODY, "subscriptionTimestamp is required");
	if (strcmp(json_string_value(ts), "now") == 0)
		ms = wall_ms();
	else if (jio_parse_iso(json_string_value(ts), &ms) < 0)
		return req_fail(r, QE_BAD_BODY,
				"subscriptionTimestamp must be an ISO-8601 timestamp or \"now\"");
	j = calloc(1, sizeof(*j));
	QASSERT(j != NULL);
	jio_format_iso(ms, j->ts, sizeof(j->ts));
	r->job = j;
	r->job_free = free;
	return QE_OK;
}

enum qe
h_group_subscription_run(struct req *r, struct wk *w)
{
	struct subscription_job *j = r->job;
	const char *params[2] = { req_param(r, 0), j->ts };
	json_t *o;
	enum qe e;

	if ((e = sql_object(r, w, SQL_GROUP_SUBSCRIPTION, params, &o)) != QE_OK)
		return e;
	/* Partitions without a cursor now start elsewhere: the index forgets where it thought
	 * they started, and parked pops look again. */
	pidx_forget_implied(pidx_group_hash(req_param(r, 0)));
	wake_and_strip(o, "_queues");
	req_reply_json(r, 200, o);
	return QE_OK;
}

struct seek_job {
	int to_end;
	char ts[32];		/* ISO-8601 UTC, milliseconds, when !to_end */
};

enum qe
h_seek_prepare(struct req *r)
{
	int partition_route = r->nparams == 3;
	struct seek_job *j;
	json_t *te, *ts;
	char err[128];
	int64_t ms;
	enum qe e;

	if ((e = check_names(r)) != QE_OK)
		return e;
	j = calloc(1, sizeof(*j));
	QASSERT(j != NULL);
	r->job = j;
	r->job_free = free;
	if (partition_route && (!r->json || (json_is_object(r->json) &&
					     json_object_size(r->json) == 0))) {
		j->to_end = 1;
		return QE_OK;
	}
	if (!json_is_object(r->json))
		return req_fail(r, QE_BAD_BODY, "expected an object");
	if (jio_field(r->json, "toEnd", JIO_BOOL, &te, err, sizeof(err)) < 0 ||
	    jio_field(r->json, "timestamp", JIO_STRING, &ts, err, sizeof(err)) < 0)
		return req_fail(r, QE_BAD_BODY, "%s", err);
	if (ts && te && json_is_true(te))
		return req_fail(r, QE_BAD_REQUEST,
				"give either toEnd:true or a timestamp, not both");
	if (ts) {
		if (jio_parse_iso(json_string_value(ts), &ms) < 0)
			return req_fail(r, QE_BAD_REQUEST,
					"timestamp must be an ISO-8601 timestamp");
		jio_format_iso(ms, j->ts, sizeof(j->ts));
		return QE_OK;
	}
	if (!te || !json_is_true(te))
		return req_fail(r, QE_BAD_REQUEST,
				"seek needs {\"toEnd\":true} or {\"timestamp\":\"ISO\"}");
	j->to_end = 1;
	return QE_OK;
}

enum qe
h_seek_run(struct req *r, struct wk *w)
{
	struct seek_job *j = r->job;
	const char *group = req_param(r, 0), *queue = req_param(r, 1);
	const char *params[4] = { group, queue, r->nparams == 3 ? req_param(r, 2) : NULL,
				  j->to_end ? NULL : j->ts };
	uint64_t gh = pidx_group_hash(group);
	json_t *o, *parts;
	PGresult *res;
	int n;
	enum qe e = db_exec(w->db, SQL_SEEK, params, &res);

	if (e != QE_OK)
		return req_fail(r, e, "seek not applied: database unavailable");
	n = PQntuples(res);
	if (n > 0 && strcmp(PQgetvalue(res, 0, 0), "ok") != 0) {
		int no_queue = strcmp(PQgetvalue(res, 0, 0), "no_queue") == 0;

		PQclear(res);
		return req_fail(r, QE_NO_RESOURCE, no_queue ? "Queue not found"
							    : "Partition not found");
	}
	parts = json_array();
	for (int i = 0; i < n; i++) {
		const char *pid = PQgetvalue(res, i, 1);
		long long committed = atoll(PQgetvalue(res, i, 3));

		/* The cursor moved (maybe backwards) and holds no lease any more. */
		pidx_cursor(pid, gh, committed, 0);
		json_array_append_new(parts, json_pack("{s:s,s:s,s:I}", "partition",
						       PQgetvalue(res, i, 2), "partitionId", pid,
						       "committed", (json_int_t)committed));
	}
	PQclear(res);
	o = json_pack("{s:b,s:s,s:s,s:i,s:b,s:o,s:o}", "success", 1, "consumerGroup", group,
		      "queueName", queue, "partitionsUpdated", n, "seekToEnd", j->to_end,
		      "targetTimestamp", j->to_end ? json_null() : json_string(j->ts),
		      "partitions", parts);
	QASSERT(o != NULL);
	if (n > 0)
		lp_wake_queue(queue, n);
	req_reply_json(r, 200, o);
	return QE_OK;
}
