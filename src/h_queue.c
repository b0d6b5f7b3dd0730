/* h_queue: queue options are validated here against one table (name, kind, range), so
 * queen_configure only ever stores well-typed values; reads come back from SQL as JSON. */
#include "h_queue.h"
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

enum opt_kind { OPT_INT, OPT_BOOL };

static const struct {
	const char *name;
	enum opt_kind kind;
	int64_t min, max;
} queue_options[] = {
	{ "leaseTime", OPT_INT, 1, 86400 * 7 },
	{ "retryLimit", OPT_INT, 0, 1000000 },
	{ "deadLetterQueue", OPT_BOOL, 0, 1 },
	{ "dlqAfterMaxRetries", OPT_BOOL, 0, 1 },
	{ "dedupWindowSeconds", OPT_INT, 0, 86400 * 365 },
	{ "retentionEnabled", OPT_BOOL, 0, 1 },
	{ "retentionSeconds", OPT_INT, 0, INT32_MAX },
	{ "completedRetentionSeconds", OPT_INT, 0, INT32_MAX },
	{ "maxWaitTimeSeconds", OPT_INT, 0, INT32_MAX },
	{ "delayedProcessing", OPT_INT, 0, INT32_MAX },
	{ "windowBuffer", OPT_INT, 0, INT32_MAX },
	{ "encryptionEnabled", OPT_BOOL, 0, 1 },
	{ "priority", OPT_INT, INT32_MIN, INT32_MAX },
	{ "maxSize", OPT_INT, 0, INT64_MAX },
	{ "ttl", OPT_INT, 0, INT32_MAX },
	{ "retryDelay", OPT_INT, 0, INT32_MAX },
};

struct configure_job {
	const char *queue, *ns, *task;
	char *options;		/* validated jsonb text */
	int merge;
};

static void
configure_job_free(void *p)
{
	struct configure_job *j = p;

	if (j)
		free(j->options);
	free(j);
}

/* Copies the known options found in src into dst. Returns NULL, or the name of the first
 * bad one (SPEC 21: a refused configure names it as a string). */
static const char *
pick_options(json_t *src, json_t *dst)
{
	for (size_t i = 0; i < ARRAY_LEN(queue_options); i++) {
		json_t *v = json_object_get(src, queue_options[i].name);
		int64_t whole;
		int ok;

		if (!v || json_is_null(v))
			continue;
		if (queue_options[i].kind == OPT_BOOL) {
			ok = json_is_boolean(v);
		} else if (json_is_real(v)) {
			/* Whole numbers sent as 30.0 are accepted. */
			if (jio_whole(json_real_value(v), queue_options[i].min,
				      queue_options[i].max, &whole) < 0)
				return queue_options[i].name;
			json_object_set_new(dst, queue_options[i].name, json_integer(whole));
			continue;
		} else {
			ok = json_is_integer(v) && json_integer_value(v) >= queue_options[i].min &&
			     json_integer_value(v) <= queue_options[i].max;
		}
		if (ok && strcmp(queue_options[i].name, "encryptionEnabled") == 0 &&
		    json_is_true(v))
			ok = 0; /* payload encryption is not available in this release */
		if (!ok)
			return queue_options[i].name;
		json_object_set(dst, queue_options[i].name, v);
	}
	return NULL;
}

/* A label sent with configure: '' is allowed (no label); otherwise a name. */
static const char *
label_invalid(json_t *v)
{
	return v && json_string_length(v) ? names_invalid(json_string_value(v), json_string_length(v))
					 : NULL;
}

enum qe
h_configure_prepare(struct req *r)
{
	struct configure_job *j;
	json_t *q, *ns, *task, *opts, *mode, *picked;
	const char *bad;
	char err[128];

	if (!json_is_object(r->json))
		return req_fail(r, QE_BAD_BODY, "expected an object");
	if (jio_field(r->json, "queue", JIO_STRING, &q, err, sizeof(err)) < 0 ||
	    jio_field(r->json, "namespace", JIO_STRING, &ns, err, sizeof(err)) < 0 ||
	    jio_field(r->json, "task", JIO_STRING, &task, err, sizeof(err)) < 0 ||
	    jio_field(r->json, "options", JIO_OBJECT, &opts, err, sizeof(err)) < 0 ||
	    jio_field(r->json, "mode", JIO_STRING, &mode, err, sizeof(err)) < 0)
		return req_fail(r, QE_BAD_BODY, "%s", err);
	if (!q || json_string_length(q) == 0)
		return req_fail(r, QE_BAD_BODY, "queue is required");
	if ((bad = names_invalid(json_string_value(q), json_string_length(q))) != NULL)
		return req_fail(r, QE_BAD_REQUEST, "queue %s", bad);
	if ((bad = label_invalid(ns)) != NULL)
		return req_fail(r, QE_BAD_REQUEST, "namespace %s", bad);
	if ((bad = label_invalid(task)) != NULL)
		return req_fail(r, QE_BAD_REQUEST, "task %s", bad);
	if (mode && strcmp(json_string_value(mode), "merge") != 0 &&
	    strcmp(json_string_value(mode), "replace") != 0)
		return req_fail(r, QE_BAD_BODY, "mode must be replace or merge");
	picked = json_object();
	bad = pick_options(r->json, picked);
	if (!bad && opts)
		bad = pick_options(opts, picked);
	if (bad) {
		json_decref(picked);
		req_err_field(r, "invalid", json_string(bad));
		return req_fail(r, QE_BAD_REQUEST, "invalid queue option: %s", bad);
	}
	j = calloc(1, sizeof(*j));
	QASSERT(j != NULL);
	j->queue = json_string_value(q);
	j->ns = ns ? json_string_value(ns) : NULL;
	j->task = task ? json_string_value(task) : NULL;
	j->merge = mode && strcmp(json_string_value(mode), "merge") == 0;
	j->options = json_dumps(picked, JSON_COMPACT);
	json_decref(picked);
	r->job = j;
	r->job_free = configure_job_free;
	return QE_OK;
}

enum qe
h_configure_run(struct req *r, struct wk *w)
{
	struct configure_job *j = r->job;
	const char *params[5] = { j->queue, j->ns, j->task, j->options,
				  j->merge ? "true" : "false" };
	enum qe e = h_reply_sql_json(r, w, SQL_CONFIGURE, params, "Queue not found");

	/* Options such as delayedProcessing may make data deliverable or not: let parked pops
	 * look again. Labels may have changed: the index picks them up at its next resync. */
	if (e == QE_OK)
		lp_wake_queue(j->queue, 1);
	return e;
}

enum qe
h_queue_get(struct req *r, struct wk *w)
{
	const char *params[1] = { req_param(r, 0) };

	return h_reply_sql_json(r, w, SQL_QUEUE_DETAIL, params, "Queue not found");
}

enum qe
h_queue_depth(struct req *r, struct wk *w)
{
	const char *g = req_query(r, "group");
	const char *params[2] = { req_param(r, 0), g && *g ? g : NULL };

	return h_reply_sql_json(r, w, SQL_QUEUE_DEPTH, params, "Queue not found");
}

enum qe
h_queue_delete(struct req *r, struct wk *w)
{
	const char *params[1] = { req_param(r, 0) };
	enum qe e = h_reply_sql_json(r, w, SQL_QUEUE_DELETE, params, "Queue not found");

	if (e == QE_OK)
		pidx_forget_queue(req_param(r, 0));
	return e;
}
