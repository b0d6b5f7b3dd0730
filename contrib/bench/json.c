/*
 * queen-bench: a tiny JSON scanner.  Just enough JSON to read the broker's answers: walk
 * arrays, find an object's member, read a string's raw contents (escapes left in place, so
 * they can be copied back into JSON as is).
 */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static const char *js_ws(const char *p, const char *e)
{
	while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

static const char *js_str_end(const char *p, const char *e)
{
	for (p++; p < e; p++) {
		if (*p == '\\')
			p++;
		else if (*p == '"')
			return p + 1;
	}
	return NULL;
}

static const char *js_skip(const char *p, const char *e)
{
	p = js_ws(p, e);
	if (p >= e)
		return NULL;
	if (*p == '"')
		return js_str_end(p, e);
	if (*p == '{' || *p == '[') {
		int depth = 0;

		while (p < e) {
			if (*p == '"') {
				p = js_str_end(p, e);
				if (!p)
					return NULL;
				continue;
			}
			if (*p == '{' || *p == '[')
				depth++;
			else if ((*p == '}' || *p == ']') && --depth == 0)
				return p + 1;
			p++;
		}
		return NULL;
	}
	while (p < e && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n' &&
	       *p != '\r' && *p != '\t')
		p++;
	return p;
}

bool js_arr_open(struct js_arr *a, const char *p, const char *e)
{
	p = p ? js_ws(p, e) : e;
	if (p >= e || *p != '[')
		return false;
	a->p = p + 1;
	a->e = e;
	a->cur = NULL;
	return true;
}

/* The next element of the array, or NULL at its end (or when malformed). */
const char *js_arr_next(struct js_arr *a)
{
	const char *p = a->p;

	if (!p)
		return NULL;
	if (a->cur) {
		p = js_skip(a->cur, a->e);
		p = p ? js_ws(p, a->e) : NULL;
		if (!p || p >= a->e || *p != ',') {
			a->p = NULL;
			return NULL;
		}
		p++;
	}
	p = js_ws(p, a->e);
	if (p >= a->e || *p == ']') {
		a->p = NULL;
		return NULL;
	}
	a->cur = p;
	return p;
}

/* The value of member `key` of the object at p, or NULL. */
const char *js_get(const char *p, const char *e, const char *key)
{
	size_t klen = strlen(key);

	p = p ? js_ws(p, e) : e;
	if (p >= e || *p != '{')
		return NULL;
	p++;
	for (;;) {
		const char *ks, *ke;

		p = js_ws(p, e);
		if (p >= e || *p != '"')
			return NULL;
		ks = p + 1;
		ke = js_str_end(p, e);
		if (!ke)
			return NULL;
		p = js_ws(ke, e);
		if (p >= e || *p != ':')
			return NULL;
		p = js_ws(p + 1, e);
		if ((size_t)(ke - 1 - ks) == klen && memcmp(ks, key, klen) == 0)
			return p;
		p = js_skip(p, e);
		if (!p)
			return NULL;
		p = js_ws(p, e);
		if (p < e && *p == ',')
			p++;
	}
}

/* The raw contents of the string at p. */
bool js_str(const char *p, const char *e, const char **s, size_t *n)
{
	const char *end;

	if (!p || p >= e || *p != '"')
		return false;
	end = js_str_end(p, e);
	if (!end)
		return false;
	*s = p + 1;
	*n = (size_t)(end - 1 - (p + 1));
	return true;
}

bool js_is(const char *p, const char *e, const char *lit)
{
	size_t n = strlen(lit);

	return p && (size_t)(e - p) >= n && memcmp(p, lit, n) == 0;
}

bool js_str_eq(const char *p, const char *e, const char *want)
{
	const char *s;
	size_t n;

	return js_str(p, e, &s, &n) && n == strlen(want) && memcmp(s, want, n) == 0;
}

/* The non-negative integer member `key` of the object at p, or -1 when it is missing. */
long long js_ll(const char *p, const char *e, const char *key)
{
	const char *v = js_get(p, e, key);

	return v && v < e && *v >= '0' && *v <= '9' ? strtoll(v, NULL, 10) : -1;
}
