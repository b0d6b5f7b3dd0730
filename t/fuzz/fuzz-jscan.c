/* fuzz-jscan: libFuzzer target of the JSON scanner (src/jscan.c).
 *
 * The input is a request body as a client sends it. The target checks the scanner's own
 * promises, not only that it does not crash: a value it accepts is accepted by jansson too
 * (it stores those spans as they are), a span it returns lies inside the input, a decoded
 * string is never longer than its text, and walking an object member by member agrees with
 * skipping it whole. */
#include "jscan.h"
#include "qassert.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Walks the value at s the way the push route does: objects member by member with keys
 * decoded into a small buffer, strings decoded, anything else skipped. 0 or -1. */
static int
walk(struct jscan *s, char *out, int depth)
{
	char key[24];
	size_t klen, len;
	int first = 1, rc;

	switch (js_peek(s)) {
	case JS_OBJECT:
	case JS_ARRAY: {
		char close = js_peek(s) == JS_OBJECT ? '}' : ']';

		if (depth > 16)
			return js_skip(s, NULL, NULL);
		if (js_begin(s, close == '}' ? '{' : '[') < 0)
			return -1;
		while ((rc = js_next(s, close, &first, close == '}' ? key : NULL, sizeof(key),
				     &klen)) == 1) {
			if (close == '}')
				QASSERT(klen <= sizeof(key) && (klen == sizeof(key) ||
								key[klen] == '\0'));
			if (walk(s, out, depth + 1) < 0)
				return -1;
		}
		return rc;
	}
	case JS_STRING: {
		const char *p0 = s->p;

		if (js_string(s, out, &len) < 0)
			return -1;
		QASSERT(len + 2 <= (size_t)(s->p - p0));
		QASSERT(out[len] == '\0');
		return 0;
	}
	default:
		return js_skip(s, NULL, NULL);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data, *span;
	char *out = malloc(size + 1);
	struct jscan s;
	size_t len;
	int skipped, walked, nesting;
	json_t *j;
	json_error_t jerr;

	QASSERT(out != NULL);
	js_init(&s, text, size);
	skipped = js_skip(&s, &span, &len) == 0;
	if (skipped) {
		QASSERT(span >= text && len <= size && span + len <= text + size);
		skipped = js_end(&s) == 0;
	}
	nesting = s.err && strcmp(s.err, "nesting too deep") == 0;
	js_init(&s, text, size);
	walked = walk(&s, out, 0) == 0 && js_end(&s) == 0;
	/* The walk skips what lies deeper than 16 levels, so it may reach a little deeper. */
	QASSERT(walked == skipped || (walked && nesting));
	if (skipped) {
		/* What the scanner accepts, the rest of the broker parses too. jansson refuses
		 * numbers beyond a double, nesting past its own limit and \u0000 in a key,
		 * which the scanner passes on as text: those are the only differences. */
		j = json_loadb(text, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
		if (!j)
			QASSERT(json_error_code(&jerr) == json_error_numeric_overflow ||
				json_error_code(&jerr) == json_error_stack_overflow ||
				json_error_code(&jerr) == json_error_null_byte_in_key);
		json_decref(j);
	}
	free(out);
	return 0;
}
