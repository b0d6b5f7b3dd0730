/* Unit tests of jscan: grammar checks, string decoding, raw spans, object walking. */
#include "jscan.h"
#include "tap.h"

#include <string.h>

static int
valid(const char *text)
{
	struct jscan s;

	js_init(&s, text, strlen(text));
	return js_skip(&s, NULL, NULL) == 0 && js_end(&s) == 0;
}

/* A string of `at` plain letters, then `what` (its own bytes), then 20 more letters, decoded:
 * whatever the offset of the byte that ends a plain run (eight are taken at a time), the
 * decoding is the same. Returns 1 when the scan agrees with `valid_want` and, when valid,
 * the decoded bytes are the letters, `decoded`, the letters. */
static int
run_ends_at(int at, const char *what, const char *decoded, int valid_want)
{
	char text[128], want[128], out[128];
	struct jscan s;
	size_t len;
	int n = 0, w = 0;

	text[n++] = '"';
	for (int i = 0; i < at; i++)
		text[n++] = want[w++] = (char)('a' + i % 26);
	n += snprintf(text + n, sizeof(text) - (size_t)n, "%s", what);
	w += snprintf(want + w, sizeof(want) - (size_t)w, "%s", decoded);
	for (int i = 0; i < 20; i++)
		text[n++] = want[w++] = 'z';
	text[n++] = '"';
	js_init(&s, text, (size_t)n);
	if (js_string(&s, out, &len) < 0)
		return !valid_want;
	return valid_want && len == (size_t)w && memcmp(out, want, len) == 0;
}

int
main(void)
{
	struct jscan s;
	char buf[64], key[16];
	size_t len, klen;
	const char *span;
	int first = 1, n = 0;

	ok(valid("{\"a\":[1,2.5e-3,true,false,null,\"x\"],\"b\":{}}"), "a nested document");
	ok(valid(" -0 "), "negative zero with white space");
	ok(!valid("[1,]"), "trailing comma in an array");
	ok(!valid("{\"a\":1,}"), "trailing comma in an object");
	ok(!valid("01"), "leading zero");
	ok(!valid("1."), "fraction without digits");
	ok(!valid("\"a\tb\""), "raw tab in a string");
	ok(!valid("\"\\x\""), "unknown escape");
	ok(!valid("\"\xc3\x28\""), "invalid UTF-8");
	ok(!valid("\"\xed\xa0\x80\""), "UTF-8 encoded surrogate");
	ok(!valid("\"\\ud800\""), "unpaired surrogate escape");
	ok(!valid("tru"), "cut literal");
	ok(!valid("{} {}"), "two values");
	ok(!valid("{\"a\" 1}"), "missing colon");
	ok(valid("\"\xe2\x82\xac \\u00e9 \\ud83d\\ude00\""), "UTF-8 and escapes");

	js_init(&s, "\"a\\u00e9\\n\\u0000z\"", 19);
	ok(js_string(&s, buf, &len) == 0, "decode a string");
	is_int(len, 6, "decoded length counts the NUL");
	ok(memcmp(buf, "a\xc3\xa9\n\0z", 6) == 0, "decoded bytes");

	js_init(&s, "{ \"k1\" : [1, {\"x\":2}] , \"k2\":\"v\" }", 33);
	ok(js_begin(&s, '{') == 0, "object begins");
	while (js_next(&s, '}', &first, key, sizeof(key), &klen) == 1) {
		n++;
		if (strcmp(key, "k1") == 0) {
			ok(js_skip(&s, &span, &len) == 0, "skip the array value");
			ok(len == strlen("[1, {\"x\":2}]") && memcmp(span, "[1, {\"x\":2}]", len) == 0,
			   "raw span of it");
		} else {
			ok(js_string(&s, buf, &len) == 0 && strcmp(buf, "v") == 0, "string member");
		}
	}
	is_int(n, 2, "two members");
	ok(js_end(&s) == 0, "nothing after");

	{
		int good = 1;

		for (int at = 0; at < 17; at++) {
			good &= run_ends_at(at, "\\\"", "\"", 1);
			good &= run_ends_at(at, "\\n", "\n", 1);
			good &= run_ends_at(at, "\xc3\xa9", "\xc3\xa9", 1);
			good &= run_ends_at(at, "\x7f", "\x7f", 1);
			good &= run_ends_at(at, "\t", "", 0);
			good &= run_ends_at(at, "\x1f", "", 0);
			good &= run_ends_at(at, "\xc3\x28", "", 0);
		}
		for (int at = 0; at < 17; at++) {
			char text[40];
			struct jscan q;

			memset(text, 'a', sizeof(text));
			text[0] = text[at + 1] = '"';
			js_init(&q, text, sizeof(text));
			good &= js_string(&q, buf, &len) == 0 && len == (size_t)at &&
				q.p == text + at + 2;
		}
		ok(good, "a plain run ends at an escape, a control character, a quote or UTF-8 "
		   "at every offset of an 8-byte step");
	}
	{
		/* Keys as js_next decodes them: its length, NUL bytes inside, truncation. */
		char k8[8];
		size_t k8len;
		int at_first = 1;
		struct jscan o;
		const char *obj = "{\"data\":1,\"dat\":2,\"data\\u0000x\":3,\"datax\":4,"
				  "\"a-very-long-key\":5}";
		int got[5], k = 0;

		js_init(&o, obj, strlen(obj));
		js_begin(&o, '{');
		while (k < 5 && js_next(&o, '}', &at_first, k8, sizeof(k8), &k8len) == 1) {
			got[k++] = js_key_is(k8, k8len, "data");
			js_skip(&o, NULL, NULL);
		}
		ok(k == 5 && got[0] && !got[1] && !got[2] && !got[3] && !got[4],
		   "a key is a name exactly: not its prefix, nor with a NUL or more after it, "
		   "nor a truncated key");
		ok(js_key_is("", 0, "") && !js_key_is("", 0, "x"), "the empty key is the empty name");
	}
	return tap_done();
}
