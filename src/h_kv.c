/* h_kv: key/value ops are checked here, op by op, against one table of what each op takes;
 * the worker sends the checked ops (only the fields that mean something, nulls dropped) to
 * queen_kv() in one round trip and answers what it returns. Key invariant: nothing reaches
 * the database that the schema functions would refuse, so a rejected call changed nothing
 * and an accepted one fails only for database reasons. */
#include "h_kv.h"
#include "dbpool.h"
#include "http.h"
#include "log.h"
#include "qassert.h"
#include "workers.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define KV_PRUNE_BATCH "1000"
#define KV_PRUNE_ROUNDS 5
#define KV_PRUNE_INTERVAL_MS 10000

/* What an op takes. */
enum {
	F_KEY = 1 << 0,		/* ns, key */
	F_KEYS = 1 << 1,	/* ns, keys[] */
	F_PREFIX = 1 << 2,	/* ns, prefix, after?, limit? */
	F_VALUE = 1 << 3,	/* value (any JSON, null included) */
	F_TTL = 1 << 4,		/* exactly one of ttlSeconds or forever:true */
	F_EXPECT = 1 << 5,	/* expect? */
	F_DELTA = 1 << 6,	/* delta? (default 1), max? */
	F_WRITE = 1 << 7,	/* may carry required */
	F_STANDALONE = 1 << 8,	/* not inside a transaction */
};

static const struct {
	const char *name;
	unsigned flags;
} kv_ops[] = {
	{ "get", F_KEY },
	{ "getMany", F_KEYS },
	{ "getPrefix", F_PREFIX | F_STANDALONE },
	{ "put", F_KEY | F_VALUE | F_TTL | F_EXPECT | F_WRITE },
	{ "putIfAbsent", F_KEY | F_VALUE | F_TTL | F_WRITE },
	{ "delete", F_KEY | F_EXPECT | F_WRITE },
	{ "incr", F_KEY | F_TTL | F_EXPECT | F_DELTA | F_WRITE },
};

/* One validation pass over a list of ops. */
struct kv_check {
	struct req *r;
	int standalone;
	int sugar;		/* one op from a sugar route: details name no index */
	size_t keys;		/* keys named so far */
	json_t *out;		/* normalised ops, or NULL when only checking */
};

struct kv_job {
	char *ops;		/* normalised ops, compact JSON text */
	int sugar;		/* answer the first result element, with an ETag */
};

static void
kv_job_free(void *p)
{
	struct kv_job *j = p;

	if (j)
		free(j->ops);
	free(j);
}

/* Records a KV error on the request: {"error":code,"reason":reason,"detail":...,"index"}. */
static enum qe __attribute__((format(printf, 6, 7)))
kv_reject(struct kv_check *c, long idx, enum qe e, const char *code, const char *reason,
	  const char *fmt, ...)
{
	char detail[400], full[480];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	if (idx >= 0 && !c->sugar)
		snprintf(full, sizeof(full), "operations[%ld]: %s", idx, detail);
	else
		snprintf(full, sizeof(full), "%s", detail);
	req_err_field(c->r, "reason", json_string(reason));
	req_err_field(c->r, "detail", json_string(full));
	if (idx >= 0 && !c->sugar)
		req_err_field(c->r, "index", json_integer(idx));
	return req_fail(c->r, e, "%s", code);
}

#define BAD(c, i, reason, ...) \
	kv_reject(c, i, QE_BAD_REQUEST, "kv_bad_request", reason, __VA_ARGS__)
#define LIMIT(c, i, reason, ...) \
	kv_reject(c, i, QE_BAD_REQUEST, "kv_limit_exceeded", reason, __VA_ARGS__)

/* A string PostgreSQL can store: no NUL inside. */
static int
pg_string(json_t *s)
{
	return strlen(json_string_value(s)) == json_string_length(s);
}

/* 1 when some string inside v holds a NUL (jsonb cannot store "\u0000"). */
static int
has_nul(json_t *v)
{
	const char *k;
	json_t *e;
	size_t i;

	switch (json_typeof(v)) {
	case JSON_STRING:
		return !pg_string(v);
	case JSON_ARRAY:
		json_array_foreach(v, i, e)
			if (has_nul(e))
				return 1;
		return 0;
	case JSON_OBJECT:
		json_object_foreach(v, k, e)
			if (has_nul(e))
				return 1;
		return 0;
	default:
		return 0;
	}
}

/* Copies field name of op into the normalised op (when building one). */
static void
keep(struct kv_check *c, json_t *dst, const char *name, json_t *v)
{
	if (c->out && v)
		json_object_set(dst, name, v);
}

/* Field name of op: absent or null -> *out NULL and QE_OK; else it must have JSON type t. */
static enum qe
field(struct kv_check *c, long i, json_t *op, const char *name, json_type t, const char *what,
      json_t **out)
{
	json_t *v = json_object_get(op, name);

	*out = NULL;
	if (!v || json_is_null(v))
		return QE_OK;
	if (json_typeof(v) != t && !(t == JSON_TRUE && json_is_boolean(v)))
		return BAD(c, i, "bad_field", "%s must be %s", name, what);
	*out = v;
	return QE_OK;
}

/* An integer field within [min, max]. */
static enum qe
int_field(struct kv_check *c, long i, json_t *op, const char *name, json_int_t min,
	  json_int_t max, json_t **out)
{
	enum qe e = field(c, i, op, name, JSON_INTEGER, "an integer", out);

	if (e != QE_OK || !*out)
		return e;
	if (json_integer_value(*out) < min || json_integer_value(*out) > max)
		return BAD(c, i, "bad_field", "%s must be an integer in [%" PRId64 ", %" PRId64 "]",
			   name, (int64_t)min, (int64_t)max);
	return QE_OK;
}

/* A namespace or key: a non-empty string without NUL, at most KV_MAX_KEY_BYTES. */
static enum qe
name_check(struct kv_check *c, long i, json_t *v, const char *name)
{
	if (!json_is_string(v) || !pg_string(v))
		return BAD(c, i, "bad_field", "%s must be a string without NUL characters", name);
	if (json_string_length(v) == 0)
		return BAD(c, i, "bad_field", "%s must not be empty", name);
	if (json_string_length(v) > KV_MAX_KEY_BYTES)
		return LIMIT(c, i, strcmp(name, "ns") == 0 ? "ns_too_long" : "key_too_long",
			     "%s is %zu bytes; the limit is %d", name, json_string_length(v),
			     KV_MAX_KEY_BYTES);
	return QE_OK;
}

static enum qe
count_key(struct kv_check *c, long i)
{
	if (++c->keys > KV_MAX_KEYS)
		return LIMIT(c, i, "too_many_keys", "more than %d keys in one call", KV_MAX_KEYS);
	return QE_OK;
}

static enum qe
check_required_name(struct kv_check *c, long i, json_t *op, const char *name, json_t *dst)
{
	json_t *v = json_object_get(op, name);
	enum qe e;

	if (!v || json_is_null(v))
		return BAD(c, i, "missing_field", "%s is required", name);
	e = name_check(c, i, v, name);
	if (e == QE_OK)
		keep(c, dst, name, v);
	return e;
}

static enum qe
check_keys(struct kv_check *c, long i, json_t *op, json_t *dst)
{
	json_t *keys, *k;
	size_t n;
	enum qe e = field(c, i, op, "keys", JSON_ARRAY, "an array of strings", &keys);

	if (e != QE_OK)
		return e;
	if (!keys)
		return BAD(c, i, "missing_field", "keys is required");
	json_array_foreach(keys, n, k) {
		char what[32];

		snprintf(what, sizeof(what), "keys[%zu]", n);
		if ((e = name_check(c, i, k, what)) != QE_OK || (e = count_key(c, i)) != QE_OK)
			return e;
	}
	keep(c, dst, "keys", keys);
	return QE_OK;
}

static enum qe
check_prefix(struct kv_check *c, long i, json_t *op, json_t *dst)
{
	json_t *v;
	enum qe e;

	for (int k = 0; k < 2; k++) {
		const char *name = k ? "after" : "prefix";

		if ((e = field(c, i, op, name, JSON_STRING, "a string", &v)) != QE_OK)
			return e;
		if (v && !pg_string(v))
			return BAD(c, i, "bad_field", "%s must not hold NUL characters", name);
		if (v && json_string_length(v) > KV_MAX_KEY_BYTES)
			return LIMIT(c, i, "key_too_long", "%s is %zu bytes; the limit is %d", name,
				     json_string_length(v), KV_MAX_KEY_BYTES);
		keep(c, dst, name, v);
	}
	/* Above the cap of 1000 the answer is truncated and pages on with nextAfter. */
	if ((e = int_field(c, i, op, "limit", 1, INT32_MAX, &v)) != QE_OK)
		return e;
	if (v && c->out)
		json_object_set_new(dst, "limit",
				    json_integer(json_integer_value(v) > 1000 ? 1000 :
						 json_integer_value(v)));
	return count_key(c, i);
}

static enum qe
check_value(struct kv_check *c, long i, json_t *op, json_t *dst)
{
	json_t *v = json_object_get(op, "value");
	char *text;
	size_t len;

	if (!v)
		return BAD(c, i, "missing_field", "value is required");
	if (has_nul(v))
		return BAD(c, i, "bad_field", "value must not hold NUL characters in strings");
	text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	QASSERT(text != NULL);
	len = strlen(text);
	free(text);
	if (len > KV_MAX_VALUE_BYTES) {
		req_err_field(c->r, "limit", json_integer(KV_MAX_VALUE_BYTES));
		return kv_reject(c, i, QE_TOO_LARGE, "kv_value_too_large", "value_too_large",
				 "value is %zu bytes of JSON; the limit is %d", len,
				 KV_MAX_VALUE_BYTES);
	}
	keep(c, dst, "value", v);
	return QE_OK;
}

static enum qe
check_ttl(struct kv_check *c, long i, json_t *op, json_t *dst)
{
	json_t *ttl, *forever;
	enum qe e;

	if ((e = int_field(c, i, op, "ttlSeconds", 1, INT32_MAX, &ttl)) != QE_OK ||
	    (e = field(c, i, op, "forever", JSON_TRUE, "a boolean", &forever)) != QE_OK)
		return e;
	if (forever && !json_is_true(forever))
		forever = NULL;
	if (!ttl == !forever)
		return BAD(c, i, "ttl", "a write needs exactly one of ttlSeconds or forever:true");
	keep(c, dst, "ttlSeconds", ttl);
	keep(c, dst, "forever", forever);
	return QE_OK;
}

static enum qe
check_op(struct kv_check *c, long i, json_t *op)
{
	json_t *name, *v, *dst = NULL;
	unsigned flags = 0;
	size_t k;
	enum qe e;

	if (!json_is_object(op))
		return BAD(c, i, "bad_op", "an op must be an object");
	name = json_object_get(op, "op");
	if (!name || json_is_null(name))
		return BAD(c, i, "missing_field", "op is required");
	if (!json_is_string(name))
		return BAD(c, i, "bad_field", "op must be a string");
	for (k = 0; k < ARRAY_LEN(kv_ops); k++)
		if (strcmp(json_string_value(name), kv_ops[k].name) == 0)
			break;
	if (k == ARRAY_LEN(kv_ops))
		return BAD(c, i, "unknown_op", "unknown op: expected get, getMany, getPrefix, put, "
			   "putIfAbsent, delete or incr");
	flags = kv_ops[k].flags;
	if ((flags & F_STANDALONE) && !c->standalone)
		return BAD(c, i, "not_allowed", "%s is not allowed in a transaction",
			   kv_ops[k].name);
	if (c->out) {
		dst = json_object();
		json_array_append_new(c->out, dst);
		json_object_set_new(dst, "op", json_string(kv_ops[k].name));
	}
	if ((e = check_required_name(c, i, op, "ns", dst)) != QE_OK)
		return e;
	if ((flags & F_KEY) && ((e = check_required_name(c, i, op, "key", dst)) != QE_OK ||
				(e = count_key(c, i)) != QE_OK))
		return e;
	if ((flags & F_KEYS) && (e = check_keys(c, i, op, dst)) != QE_OK)
		return e;
	if ((flags & F_PREFIX) && (e = check_prefix(c, i, op, dst)) != QE_OK)
		return e;
	if ((flags & F_VALUE) && (e = check_value(c, i, op, dst)) != QE_OK)
		return e;
	if ((flags & F_TTL) && (e = check_ttl(c, i, op, dst)) != QE_OK)
		return e;
	if ((e = int_field(c, i, op, "expect", 0, INT64_MAX, &v)) != QE_OK)
		return e;
	if (v && !(flags & F_EXPECT))
		return BAD(c, i, "not_allowed", "%s takes no expect", kv_ops[k].name);
	keep(c, dst, "expect", v);
	if (flags & F_DELTA) {
		if ((e = int_field(c, i, op, "delta", INT64_MIN, INT64_MAX, &v)) != QE_OK)
			return e;
		keep(c, dst, "delta", v);
		if ((e = int_field(c, i, op, "max", INT64_MIN, INT64_MAX, &v)) != QE_OK)
			return e;
		keep(c, dst, "max", v);
	}
	if ((e = field(c, i, op, "required", JSON_TRUE, "a boolean", &v)) != QE_OK)
		return e;
	if (v && json_is_true(v) && !(flags & F_WRITE))
		return BAD(c, i, "not_allowed", "required applies to writes only");
	keep(c, dst, "required", v);
	return QE_OK;
}

static enum qe
check_ops(struct kv_check *c, json_t *ops)
{
	json_t *op;
	size_t i;
	enum qe e;

	if (!json_is_array(ops))
		return BAD(c, -1, "bad_body", "expected an array of ops or {\"operations\":[...]}");
	if (json_array_size(ops) > KV_MAX_OPS)
		return LIMIT(c, -1, "too_many_ops", "%zu ops; the limit is %d a call",
			     json_array_size(ops), KV_MAX_OPS);
	json_array_foreach(ops, i, op)
		if ((e = check_op(c, (long)i, op)) != QE_OK)
			return e;
	return QE_OK;
}

enum qe
h_kv_validate_ops(struct req *r, json_t *ops, int standalone)
{
	struct kv_check c = { .r = r, .standalone = standalone };

	return check_ops(&c, ops);
}

/* Checks ops, and on success hangs the job (normalised ops) on the request. */
static enum qe
make_job(struct kv_check *c, json_t *ops, int sugar)
{
	struct kv_job *j;
	enum qe e;

	c->out = json_array();
	e = check_ops(c, ops);
	if (e != QE_OK) {
		json_decref(c->out);
		return e;
	}
	j = calloc(1, sizeof(*j));
	QASSERT(j != NULL);
	j->ops = json_dumps(c->out, JSON_COMPACT);
	QASSERT(j->ops != NULL);
	j->sugar = sugar;
	json_decref(c->out);
	c->out = NULL;
	c->r->job = j;
	c->r->job_free = kv_job_free;
	return QE_OK;
}

enum qe
h_kv_prepare(struct req *r)
{
	struct kv_check c = { .r = r, .standalone = 1 };
	json_t *ops = r->json;

	if (json_is_object(ops)) {
		ops = json_object_get(r->json, "operations");
		if (!ops || json_is_null(ops))
			return BAD(&c, -1, "missing_field", "operations is required");
	}
	return make_job(&c, ops, 0);
}

enum qe
h_kv_run(struct req *r, struct wk *w)
{
	struct kv_job *j = r->job;
	const char *params[1] = { j->ops };
	char *json;
	enum qe e = db_exec_json(w->db, SQL_KV, params, &json);

	if (e != QE_OK)
		return req_fail(r, e, "kv not applied: database unavailable");
	if (!json)
		return req_fail(r, QE_INTERNAL, "kv: no answer from the database");
	req_reply(r, 200, json, strlen(json));
	return QE_OK;
}

enum qe
h_kv_key_prepare(struct req *r)
{
	struct kv_check c = { .r = r, .standalone = 1, .sugar = 1 };
	static const char *const put_fields[] = { "value", "ttlSeconds", "forever", "expect",
						  "required", NULL };
	static const char *const delete_fields[] = { "expect", "required", NULL };
	int put = strcmp(r->method, "PUT") == 0, del = strcmp(r->method, "DELETE") == 0;
	const char *const *fields = put ? put_fields : del ? delete_fields : NULL;
	json_t *op, *ops;
	enum qe e;

	if (r->json && !json_is_object(r->json))
		return BAD(&c, -1, "bad_body", "the body must be an object");
	op = json_object();
	json_object_set_new(op, "op", json_string(put ? "put" : del ? "delete" : "get"));
	json_object_set_new(op, "ns", json_string(req_param(r, 0)));
	json_object_set_new(op, "key", json_string(req_param(r, 1)));
	if (!json_object_get(op, "ns") || !json_object_get(op, "key")) {
		json_decref(op);
		return BAD(&c, -1, "bad_field", "ns and key must be valid UTF-8");
	}
	/* The path names the key; the body carries the rest (a get takes no body). */
	for (; r->json && fields && *fields; fields++) {
		json_t *v = json_object_get(r->json, *fields);

		if (v)
			json_object_set(op, *fields, v);
	}
	ops = json_array();
	json_array_append_new(ops, op);
	e = make_job(&c, ops, 1);
	json_decref(ops);
	return e;
}

/* Sets an ETag header holding the version of a result element, when it has one. */
static void
set_etag(struct req *r, json_t *result)
{
	json_t *v = json_object_get(result, "version");
	char tag[32];

	if (!json_is_integer(v))
		return;
	snprintf(tag, sizeof(tag), "\"%" JSON_INTEGER_FORMAT "\"", json_integer_value(v));
	req_header(r, "ETag", tag);
}

enum qe
h_kv_key_run(struct req *r, struct wk *w)
{
	struct kv_job *j = r->job;
	const char *params[1] = { j->ops };
	json_t *answer, *result;
	json_error_t jerr;
	char *json;
	enum qe e = db_exec_json(w->db, SQL_KV, params, &json);

	if (e != QE_OK)
		return req_fail(r, e, "kv not applied: database unavailable");
	if (!json)
		return req_fail(r, QE_INTERNAL, "kv: no answer from the database");
	answer = json_loads(json, 0, &jerr);
	free(json);
	if (!answer)
		return req_fail(r, QE_INTERNAL, "kv: unreadable answer from the database");
	result = json_array_get(json_object_get(answer, "results"), 0);
	if (!result) {
		/* A required precondition was lost: the whole verdict. */
		req_reply_json(r, 200, answer);
		return QE_OK;
	}
	json_incref(result);
	json_decref(answer);
	if (json_is_true(json_object_get(result, "found")) ||
	    (json_is_true(json_object_get(result, "applied")) && strcmp(r->method, "PUT") == 0))
		set_etag(r, result);
	req_reply_json(r, 200, result);
	return QE_OK;
}

void
kv_prune(struct dbconn *db)
{
	const char *params[1] = { KV_PRUNE_BATCH };
	long total = 0;

	for (int round = 0; round < KV_PRUNE_ROUNDS; round++) {
		PGresult *res;
		long n;

		if (db_exec(db, SQL_KV_PRUNE, params, &res) != QE_OK)
			break;
		n = PQntuples(res) == 1 ? atol(PQgetvalue(res, 0, 0)) : 0;
		PQclear(res);
		total += n;
		if (n < atol(KV_PRUNE_BATCH))
			break;
	}
	if (total)
		log_debug("kv: pruned %ld expired keys", total);
}

int64_t
kv_prune_interval_ms(void)
{
	return KV_PRUNE_INTERVAL_MS;
}
