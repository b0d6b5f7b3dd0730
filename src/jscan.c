/* jscan: recursive descent over JSON text with a depth limit, strict about the grammar
 * (no trailing commas, no leading zeros, no raw control characters in strings, valid UTF-8),
 * so anything it accepts is JSON PostgreSQL and every client will accept too. */
#include "jscan.h"

#include <stdint.h>
#include <string.h>

#define JS_MAX_DEPTH 512

static int
fail(struct jscan *s, const char *msg)
{
	if (!s->err) {
		s->err = msg;
		s->err_at = (size_t)(s->p - s->start);
	}
	return -1;
}

void
js_init(struct jscan *s, const char *buf, size_t len)
{
	s->p = buf;
	s->start = buf;
	s->end = buf + len;
	s->err = NULL;
	s->err_at = 0;
}

static void
ws(struct jscan *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
		s->p++;
}

enum js_type
js_peek(struct jscan *s)
{
	ws(s);
	if (s->p >= s->end)
		return JS_ERROR;
	switch (*s->p) {
	case '{': return JS_OBJECT;
	case '[': return JS_ARRAY;
	case '"': return JS_STRING;
	case 't': return JS_TRUE;
	case 'f': return JS_FALSE;
	case 'n': return JS_NULL;
	default:
		if (*s->p == '-' || (*s->p >= '0' && *s->p <= '9'))
			return JS_NUMBER;
		return JS_ERROR;
	}
}

/* Length of the UTF-8 sequence at p (1 to 4), or 0 when it is not valid UTF-8. */
static size_t
utf8_len(const unsigned char *p, const unsigned char *end)
{
	unsigned c = p[0];
	size_t n;
	uint32_t cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, cp = c & 0x07;
	else
		return 0;
	if ((size_t)(end - p) < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return n;
}

static int
hex4(const char *p, uint32_t *out)
{
	uint32_t v = 0;

	for (int i = 0; i < 4; i++) {
		char c = p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (uint32_t)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

static size_t
put_utf8(char *o, uint32_t cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* Whether none of the 8 bytes at p is a control character, a quote, a backslash or a byte of
 * a multi-byte UTF-8 sequence. (x - 0x0101..) & ~x & 0x8080.. is not zero exactly when some
 * byte of x is zero, and (x - 0x2020..) & ~x when some byte is below 0x20: x ^ 0x2222.. has a
 * zero byte where x has a quote; a high bit is a byte past ASCII. */
static int
plain8(const char *p)
{
	const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
	uint64_t w, q, b;

	memcpy(&w, p, sizeof(w));
	q = w ^ (ones * '"');
	b = w ^ (ones * '\\');
	return (((w - ones * 0x20) & ~w) | ((q - ones) & ~q) | ((b - ones) & ~b) | w) & high
		? 0 : 1;
}

/* Scans the string at s->p; decodes into out when out is not NULL. */
static int
scan_string(struct jscan *s, char *out, size_t *len)
{
	size_t o = 0;

	if (s->p >= s->end || *s->p != '"')
		return fail(s, "expected a string");
	s->p++;
	for (;;) {
		const char *run = s->p;
		unsigned char c;

		/* A run of printable ASCII other than the quote and the backslash, the bulk of
		 * most strings, is taken whole, eight bytes a step while they are all plain;
		 * what ends it is looked at below. */
		while (s->end - run >= 8 && plain8(run))
			run += 8;
		while (run < s->end && (unsigned char)*run >= 0x20 && (unsigned char)*run < 0x80 &&
		       *run != '"' && *run != '\\')
			run++;
		if (run > s->p) {
			if (out)
				memcpy(out + o, s->p, (size_t)(run - s->p));
			o += (size_t)(run - s->p);
			s->p = run;
		}
		if (s->p >= s->end)
			return fail(s, "unterminated string");
		c = (unsigned char)*s->p;
		if (c == '"') {
			s->p++;
			break;
		}
		if (c < 0x20)
			return fail(s, "control character in a string");
		if (c == '\\') {
			uint32_t cp;
			char e;

			if (s->end - s->p < 2)
				return fail(s, "unterminated string");
			e = s->p[1];
			s->p += 2;
			switch (e) {
			case '"': cp = '"'; break;
			case '\\': cp = '\\'; break;
			case '/': cp = '/'; break;
			case 'b': cp = '\b'; break;
			case 'f': cp = '\f'; break;
			case 'n': cp = '\n'; break;
			case 'r': cp = '\r'; break;
			case 't': cp = '\t'; break;
			case 'u':
				if (s->end - s->p < 4 || hex4(s->p, &cp) < 0)
					return fail(s, "bad \\u escape");
				s->p += 4;
				if (cp >= 0xd800 && cp <= 0xdbff) {
					uint32_t lo;

					if (s->end - s->p < 6 || s->p[0] != '\\' || s->p[1] != 'u' ||
					    hex4(s->p + 2, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff)
						return fail(s, "unpaired surrogate in a \\u escape");
					s->p += 6;
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				} else if (cp >= 0xdc00 && cp <= 0xdfff) {
					return fail(s, "unpaired surrogate in a \\u escape");
				}
				break;
			default:
				return fail(s, "bad escape in a string");
			}
			{
				/* Counted also when only measuring: js_next sizes the key
				 * buffer by this length before decoding into it. */
				char scratch[4];

				o += put_utf8(out ? out + o : scratch, cp);
			}
			continue;
		}
		{
			size_t n = utf8_len((const unsigned char *)s->p,
					    (const unsigned char *)s->end);

			if (n == 0)
				return fail(s, "invalid UTF-8 in a string");
			if (out)
				memcpy(out + o, s->p, n);
			o += n;
			s->p += n;
		}
	}
	if (out)
		out[o] = '\0';
	if (len)
		*len = o;
	return 0;
}

static int
digits(struct jscan *s)
{
	const char *p0 = s->p;

	while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
		s->p++;
	return s->p > p0 ? 0 : -1;
}

static int
scan_number(struct jscan *s)
{
	if (*s->p == '-')
		s->p++;
	if (s->p < s->end && *s->p == '0') {
		s->p++;
	} else if (digits(s) < 0) {
		return fail(s, "bad number");
	}
	if (s->p < s->end && *s->p == '.') {
		s->p++;
		if (digits(s) < 0)
			return fail(s, "bad number");
	}
	if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
		s->p++;
		if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
			s->p++;
		if (digits(s) < 0)
			return fail(s, "bad number");
	}
	return 0;
}

static int
literal(struct jscan *s, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0)
		return fail(s, "invalid literal");
	s->p += n;
	return 0;
}

static int skip_value(struct jscan *s, int depth);

static int
skip_container(struct jscan *s, char close, int depth)
{
	int first = 1, r;

	if (depth > JS_MAX_DEPTH)
		return fail(s, "nesting too deep");
	s->p++;
	while ((r = js_next(s, close, &first, NULL, 0, NULL)) == 1)
		if (skip_value(s, depth + 1) < 0)
			return -1;
	return r;
}

static int
skip_value(struct jscan *s, int depth)
{
	switch (js_peek(s)) {
	case JS_OBJECT: return skip_container(s, '}', depth);
	case JS_ARRAY: return skip_container(s, ']', depth);
	case JS_STRING: return scan_string(s, NULL, NULL);
	case JS_NUMBER: return scan_number(s);
	case JS_TRUE: return literal(s, "true");
	case JS_FALSE: return literal(s, "false");
	case JS_NULL: return literal(s, "null");
	default: return fail(s, s->p >= s->end ? "unexpected end of input" : "expected a value");
	}
}

int
js_skip(struct jscan *s, const char **span, size_t *len)
{
	const char *p0;

	ws(s);
	p0 = s->p;
	if (skip_value(s, 0) < 0)
		return -1;
	if (span)
		*span = p0;
	if (len)
		*len = (size_t)(s->p - p0);
	return 0;
}

int
js_string(struct jscan *s, char *out, size_t *len)
{
	ws(s);
	return scan_string(s, out, len);
}

int
js_begin(struct jscan *s, char open)
{
	ws(s);
	if (s->p >= s->end || *s->p != open)
		return fail(s, open == '{' ? "expected an object" : "expected an array");
	s->p++;
	return 0;
}

int
js_next(struct jscan *s, char close, int *first, char *key, size_t keycap, size_t *keylen)
{
	ws(s);
	if (s->p >= s->end)
		return fail(s, "unexpected end of input");
	if (*s->p == close) {
		s->p++;
		return 0;
	}
	if (!*first) {
		if (*s->p != ',')
			return fail(s, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
		s->p++;
		ws(s);
	}
	*first = 0;
	if (close == '}') {
		const char *k0 = s->p;
		size_t n;

		if (scan_string(s, NULL, &n) < 0)
			return -1;
		if (key) {
			/* Decode again into the caller's buffer when it fits. */
			if (n < keycap) {
				const char *after = s->p;

				s->p = k0;
				scan_string(s, key, keylen);
				s->p = after;
			} else {
				key[0] = '\0';
				*keylen = keycap;
			}
		}
		ws(s);
		if (s->p >= s->end || *s->p != ':')
			return fail(s, "expected ':'");
		s->p++;
	}
	return 1;
}

int
js_end(struct jscan *s)
{
	ws(s);
	if (s->p != s->end)
		return fail(s, "unexpected text after the value");
	return 0;
}
