/* h_timers: timers (SPEC 14, 21). Operations are validated here, in the HTTP thread, into the
 * exact array queen_timers_apply takes (the promised message ids are made here too), so the
 * worker only runs one catalogued statement per request. The transaction route reuses the
 * validator for its "timers" array. Firing due timers belongs to timers.c. */
#include "h_timers.h"
#include "b64.h"
#include "dbpool.h"
#include "h_util.h"
#include "http.h"
#include "jsonio.h"
#include "names.h"
#include "pcrypt.h"
#include "qassert.h"
#include "uuid.h"
#include "workers.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CODE_BAD "timers_bad_request"
#define CODE_HORIZON "timers_horizon"
#define CODE_TOO_LARGE "timers_payload_too_large"

/* Records error e with the machine field "code" (and "index" when index >= 0). */
static enum qe __attribute__((format(printf, 5, 6)))
op_fail(struct req *r, enum qe e, const char *code, long index, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	req_err_field(r, "code", json_string(code));
	if (index < 0)
		return req_fail(r, e, "%s", msg);
	req_err_field(r, "index", json_integer(index));
	return req_fail(r, e, "operation %ld: %s", index, msg);
}

/* A name field: queue and partition follow the rules of names.c; a timerKey is a non-empty
 * string without control characters, at most TIMERS_MAX_NAME bytes. Absent (or null) gives
 * *out = NULL, an error when required. */
static enum qe
name_field(struct req *r, long i, json_t *o, const char *key, int required, const char **out)
{
	json_t *v = json_object_get(o, key);
	const char *s, *why;
	size_t len;

	*out = NULL;
	if (!v || json_is_null(v))
		return required ? op_fail(r, QE_BAD_BODY, CODE_BAD, i, "%s is required", key)
				: QE_OK;
	if (!json_is_string(v))
		return op_fail(r, QE_BAD_BODY, CODE_BAD, i, "%s must be a string", key);
	s = json_string_value(v);
	len = json_string_length(v);
	if (strcmp(key, "timerKey") != 0) {
		/* queue and partition: the rules of every name (names.c) */
		if ((why = names_invalid(s, len)) != NULL)
			return op_fail(r, QE_BAD_BODY, CODE_BAD, i, "%s %s", key, why);
	} else if (len == 0) {
		return op_fail(r, QE_BAD_BODY, CODE_BAD, i, "%s must not be empty", key);
	} else if (strlen(s) != len || jio_has_ctl(s)) {
		return op_fail(r, QE_BAD_BODY, CODE_BAD, i, "%s must not hold control characters",
			       key);
	} else if (len > TIMERS_MAX_NAME) {
		return op_fail(r, QE_BAD_BODY, CODE_BAD, i, "%s must be at most %d bytes", key,
			       TIMERS_MAX_NAME);
	}
	*out = s;
	return QE_OK;
}

/* delayMs: a whole number of milliseconds, 0 .. the horizon (beyond it: 403). */
static enum qe
delay_field(struct req *r, long i, json_t *o, int64_t *out)
{
	json_t *v = json_object_get(o, "delayMs");
	double x;

	if (!v || json_is_null(v))
		return op_fail(r, QE_BAD_BODY, CODE_BAD, i, "delayMs is required");
	if (json_is_integer(v)) {
		*out = json_integer_value(v);
	} else if (json_is_real(v)) {
		/* Clients doing arithmetic send 1500.0; a fraction of a millisecond is not. */
		x = json_real_value(v);
		if (x >= 0 && x <= (double)TIMERS_MAX_DELAY_MS && x != (double)(int64_t)x)
			return op_fail(r, QE_BAD_BODY, CODE_BAD, i,
				       "delayMs must be a whole number of milliseconds");
		*out = x < 0 ? -1 : x > (double)TIMERS_MAX_DELAY_MS ? INT64_MAX : (int64_t)x;
	} else {
		return op_fail(r, QE_BAD_BODY, CODE_BAD, i, "delayMs must be an integer");
	}
	if (*out < 0)
		return op_fail(r, QE_BAD_BODY, CODE_BAD, i, "delayMs must be 0 or more");
	if (*out > TIMERS_MAX_DELAY_MS)
		return op_fail(r, QE_FORBIDDEN, CODE_HORIZON, i,
			       "delayMs is beyond the timer horizon of 90 days (%lld ms)",
			       (long long)TIMERS_MAX_DELAY_MS);
	return QE_OK;
}

/* The payload as compact JSON text (malloc'd): as sent, or decoded from base64 when the
 * schedule carries "payloadZstd":false (SPEC 21). */
static enum qe
payload_text(struct req *r, long i, json_t *o, char **out)
{
	json_t *z = json_object_get(o, "payloadZstd");
	json_t *p = json_object_get(o, "payload");
	json_t *decoded;
	json_error_t jerr;
	char *raw;
	long rawlen;

	*out = NULL;
	if (z && !json_is_null(z) && !json_is_boolean(z))
		return op_fail(r, QE_BAD_BODY, CODE_BAD, i, "payloadZstd must be a boolean");
	if (json_is_true(z))
		return op_fail(r, QE_BAD_BODY, CODE_BAD, i,
			       "payloadZstd:true is not supported (compressed payloads)");
	if (!json_is_false(z)) {
		*out = json_dumps(p ? p : json_null(), JSON_COMPACT | JSON_ENCODE_ANY);
		QASSERT(*out != NULL);
		return QE_OK;
	}
	if (!json_is_string(p))
		return op_fail(r, QE_BAD_BODY, CODE_BAD, i,
			       "with payloadZstd:false, payload must be a base64 string");
	raw = malloc(json_string_length(p) / 4 * 3 + 4);
	QASSERT(raw != NULL);
	rawlen = b64_decode(json_string_value(p), json_string_length(p), (unsigned char *)raw,
			    B64_LENIENT);
	if (rawlen < 0) {
		free(raw);
		return op_fail(r, QE_BAD_BODY, CODE_BAD, i, "payload is not valid base64");
	}
	decoded = jio_load(raw, (size_t)rawlen, &jerr);
	free(raw);
	if (!decoded)
		return op_fail(r, QE_BAD_BODY, CODE_BAD, i,
			       "payload is not base64 of a JSON text: %s", jerr.text);
	*out = json_dumps(decoded, JSON_COMPACT | JSON_ENCODE_ANY);
	json_decref(decoded);
	QASSERT(*out != NULL);
	return QE_OK;
}

static enum qe
validate_schedule(struct req *r, long i, json_t *o, const char *queue, const char *key,
		  json_t **norm)
{
	const char *part, *txn;
	char id[UUID_STR_LEN];
	char *payload;
	size_t plen;
	int64_t delay = 0;
	json_t *t = json_object_get(o, "txn");
	json_t *n;
	enum qe e;

	if ((e = name_field(r, i, o, "partition", 0, &part)) != QE_OK ||
	    (e = delay_field(r, i, o, &delay)) != QE_OK)
		return e;
	txn = NULL;
	if (t && !json_is_null(t)) {
		if (!json_is_string(t))
			return op_fail(r, QE_BAD_BODY, CODE_BAD, i, "txn must be a string");
		txn = json_string_value(t);
		if (json_string_length(t) == 0 || json_string_length(t) > TIMERS_MAX_TXN)
			return op_fail(r, QE_BAD_BODY, CODE_BAD, i, "txn must be 1 to %d bytes",
				       TIMERS_MAX_TXN);
		if (strlen(txn) != json_string_length(t) || jio_has_ctl(txn))
			return op_fail(r, QE_BAD_BODY, CODE_BAD, i,
				       "txn must not hold control characters");
	}
	if ((e = payload_text(r, i, o, &payload)) != QE_OK)
		return e;
	plen = strlen(payload);
	if (plen > TIMERS_MAX_PAYLOAD) {
		free(payload);
		req_err_field(r, "limit", json_integer(TIMERS_MAX_PAYLOAD));
		return op_fail(r, QE_TOO_LARGE, CODE_TOO_LARGE, i,
			       "payload is %zu bytes, the limit is %d", plen, TIMERS_MAX_PAYLOAD);
	}
	/* A timer waits in PostgreSQL: for an encrypted queue its payload is sealed now. */
	{
		char *env;

		e = pcrypt_seal_for(queue, payload, plen, &env);
		if (e != QE_OK) {
			free(payload);
			return op_fail(r, e, CODE_BAD, i, "%s", e == QE_NO_KEY
				       ? "encryption key not configured" : "payload encryption failed");
		}
		if (env) {
			free(payload);
			payload = env;
			plen = strlen(env);
		}
	}
	uuid_v7(id);
	n = json_object();
	json_object_set_new(n, "op", json_string("schedule"));
	json_object_set_new(n, "queue", json_string(queue));
	json_object_set_new(n, "timerKey", json_string(key));
	json_object_set_new(n, "partition", json_string(part ? part : "Default"));
	json_object_set_new(n, "delayMs", json_integer(delay));
	json_object_set_new(n, "txn", json_string(txn ? txn : id));
	json_object_set_new(n, "messageId", json_string(id));
	/* jansson's own output: valid UTF-8, no need to check a megabyte again. */
	json_object_set_new(n, "payload", json_stringn_nocheck(payload, plen));
	/* The producer is who the token says, whatever the body claims (SPEC 17). */
	if (r->auth.sub)
		json_object_set_new(n, "producerSub", json_string(r->auth.sub));
	free(payload);
	*norm = n;
	return QE_OK;
}

static enum qe
validate_one(struct req *r, long i, json_t *o, json_t **norm)
{
	const char *queue, *key, *op;
	json_t *v;
	enum qe e;

	*norm = NULL;
	if (!json_is_object(o))
		return op_fail(r, QE_BAD_BODY, CODE_BAD, i, "must be an object");
	v = json_object_get(o, "op");
	if (!json_is_string(v))
		return op_fail(r, QE_BAD_BODY, CODE_BAD, i,
			       "op is required: schedule or cancel");
	op = json_string_value(v);
	if (strcmp(op, "schedule") != 0 && strcmp(op, "cancel") != 0)
		return op_fail(r, QE_BAD_BODY, CODE_BAD, i,
			       "unknown op: expected schedule or cancel");
	if ((e = name_field(r, i, o, "queue", 1, &queue)) != QE_OK ||
	    (e = name_field(r, i, o, "timerKey", 1, &key)) != QE_OK)
		return e;
	if (op[0] == 's')
		return validate_schedule(r, i, o, queue, key, norm);
	*norm = json_object();
	json_object_set_new(*norm, "op", json_string("cancel"));
	json_object_set_new(*norm, "queue", json_string(queue));
	json_object_set_new(*norm, "timerKey", json_string(key));
	return QE_OK;
}

enum qe
h_timers_validate_ops(struct req *r, json_t *ops, json_t **normalized)
{
	json_t *out;

	*normalized = NULL;
	if (!json_is_array(ops))
		return op_fail(r, QE_BAD_BODY, CODE_BAD, -1, "timer operations must be an array");
	if (json_array_size(ops) > TIMERS_MAX_OPS)
		return op_fail(r, QE_BAD_BODY, CODE_BAD, -1,
			       "%zu timer operations: at most %d a call", json_array_size(ops),
			       TIMERS_MAX_OPS);
	out = json_array();
	for (size_t i = 0; i < json_array_size(ops); i++) {
		json_t *norm;
		enum qe e = validate_one(r, (long)i, json_array_get(ops, i), &norm);

		if (e != QE_OK) {
			json_decref(out);
			return e;
		}
		json_array_append_new(out, norm);
	}
	*normalized = out;
	return QE_OK;
}

struct apply_job {
	char *ops;		/* the normalized array, as text */
	size_t n;
};

static void
apply_job_free(void *p)
{
	struct apply_job *j = p;

	if (j)
		free(j->ops);
	free(j);
}

enum qe
h_timers_prepare(struct req *r)
{
	json_t *ops = r->json, *norm;
	struct apply_job *j;
	enum qe e;

	if (json_is_object(r->json)) {
		ops = json_object_get(r->json, "operations");
		if (!ops)
			return op_fail(r, QE_BAD_BODY, CODE_BAD, -1, "operations is required");
	}
	if (!json_is_array(ops))
		return op_fail(r, QE_BAD_BODY, CODE_BAD, -1, "operations must be an array");
	e = h_timers_validate_ops(r, ops, &norm);
	if (e != QE_OK)
		return e;
	j = calloc(1, sizeof(*j));
	QASSERT(j != NULL);
	j->n = json_array_size(norm);
	j->ops = json_dumps(norm, JSON_COMPACT);
	QASSERT(j->ops != NULL);
	json_decref(norm);
	r->job = j;
	r->job_free = apply_job_free;
	return QE_OK;
}

enum qe
h_timers_apply(struct req *r, struct wk *w)
{
	struct apply_job *j = r->job;
	const char *params[1] = { j->ops };
	struct strbuf sb;
	char *results = NULL;
	enum qe e;

	if (j->n > 0) {
		e = db_exec_json(w->db, SQL_TIMERS_APPLY, params, &results);
		if (e != QE_OK)
			return req_fail(r, e, "timers not applied: database unavailable");
	}
	sb_init(&sb);
	sb_adds(&sb, "{\"results\":");
	sb_adds(&sb, results ? results : "[]");
	sb_addc(&sb, '}');
	free(results);
	req_reply_sb(r, 200, &sb);
	return QE_OK;
}

struct list_job {
	char limit[24];
	const char *after;	/* borrowed from the request's query, NULL = from the start */
};

enum qe
h_timers_list_prepare(struct req *r)
{
	const char *s = req_query(r, "limit");
	struct list_job *j;
	int64_t limit = TIMERS_LIST_DEFAULT;

	if (s && *s && jio_parse_int(s, 1, TIMERS_LIST_MAX, &limit) < 0)
		return op_fail(r, QE_BAD_REQUEST, CODE_BAD, -1,
			       "limit must be an integer from 1 to %d", TIMERS_LIST_MAX);
	j = calloc(1, sizeof(*j));
	QASSERT(j != NULL);
	snprintf(j->limit, sizeof(j->limit), "%lld", (long long)limit);
	s = req_query(r, "after");
	j->after = s && *s ? s : NULL;
	r->job = j;
	r->job_free = free;
	return QE_OK;
}

enum qe
h_timers_list(struct req *r, struct wk *w)
{
	struct list_job *j = r->job;
	const char *params[3] = { req_param(r, 0), j->after, j->limit };

	return h_reply_sql_json(r, w, SQL_TIMERS_LIST, params, "Queue not found");
}

enum qe
h_timers_get(struct req *r, struct wk *w)
{
	const char *params[2] = { req_param(r, 0), req_param(r, 1) };
	const char *timer;
	struct strbuf sb;
	PGresult *res;
	enum qe e;

	e = db_exec(w->db, SQL_TIMERS_GET, params, &res);
	if (e != QE_OK)
		return req_fail(r, e, "database unavailable");
	if (PQntuples(res) != 1) {
		PQclear(res);
		return req_fail(r, QE_NO_RESOURCE, "Timer not found");
	}
	/* The timer's fields, then the payload JSON text exactly as it will be delivered. */
	timer = PQgetvalue(res, 0, 0);
	QASSERT(PQgetlength(res, 0, 0) > 2 && timer[PQgetlength(res, 0, 0) - 1] == '}');
	sb_init(&sb);
	sb_add(&sb, timer, (size_t)PQgetlength(res, 0, 0) - 1);
	sb_adds(&sb, ", \"payload\": ");
	pcrypt_reveal_sb(&sb, PQgetvalue(res, 0, 1), (size_t)PQgetlength(res, 0, 1));
	sb_addc(&sb, '}');
	PQclear(res);
	req_reply_sb(r, 200, &sb);
	return QE_OK;
}

enum qe
h_timers_cancel(struct req *r, struct wk *w)
{
	const char *params[2] = { req_param(r, 0), req_param(r, 1) };

	return h_reply_sql_json(r, w, SQL_TIMERS_CANCEL, params, "Timer not found");
}
