/* fuzz-jsonio: libFuzzer target of the request helpers (src/jsonio.c): query-string booleans
 * and integers, whole numbers sent as doubles, ISO-8601 timestamps, control-character checks,
 * the request body parser and typed JSON fields.
 *
 * The input is a string (a query value, a timestamp, a number) and, past its first NUL, a
 * request body parsed by jio_load whose members are read with every field kind. The oracle:
 * an integer parsed is inside its range, a whole number taken from a double is that double,
 * a body with a raw NUL byte is refused, a boolean is 0 or 1, a timestamp parsed and
 * formatted parses again to the same instant, and a typed field is either of its kind or
 * refused with a message naming it. */
#include "jsonio.h"
#include "qassert.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_fields(json_t *o)
{
	static const enum jio_kind kinds[] = { JIO_STRING, JIO_INT, JIO_BOOL, JIO_ARRAY,
		JIO_OBJECT, JIO_ANY };
	const char *key;
	json_t *v;

	json_object_foreach(o, key, v) {
		for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
			json_t *out;
			char err[128];

			err[0] = '\0';
			if (jio_field(o, key, kinds[k], &out, err, sizeof(err)) < 0) {
				QASSERT(out == NULL && strncmp(err, key, strlen(key) < 100 ?
							       strlen(key) : 100) == 0);
				continue;
			}
			QASSERT(out == NULL ? json_is_null(v) : out == v);
		}
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, '\0', size);
	size_t slen = nul ? (size_t)(nul - data) : size;
	char *s = malloc(slen + 1), buf[32];
	int64_t v, ms, again;
	int b;

	QASSERT(s != NULL);
	memcpy(s, data, slen);
	s[slen] = '\0';
	if (jio_parse_bool(s, &b) == 0)
		QASSERT(b == 0 || b == 1);
	if (jio_parse_int(s, -1000, 1000, &v) == 0)
		QASSERT(v >= -1000 && v <= 1000);
	if (jio_parse_int(s, INT64_MIN, INT64_MAX, &v) == 0)
		(void)v;
	(void)jio_has_ctl(s);
	{
		/* Any double a client can send (1e300, -0, 2^63, NaN-free JSON numbers). */
		char *end;
		double d = strtod(s, &end);

		if (end != s && jio_whole(d, -1000, INT64_MAX, &v) == 0)
			QASSERT(v >= -1000 && (double)v == d);
	}
	if (jio_parse_iso(s, &ms) == 0) {
		jio_format_iso(ms, buf, sizeof(buf));
		/* Years outside 0000-9999 do not print in four digits: only those round-trip. */
		if (strlen(buf) == 24) {
			QASSERT(jio_parse_iso(buf, &again) == 0);
			QASSERT(again == ms);
		}
	}
	if (nul) {
		json_error_t jerr;
		json_t *j = jio_load((const char *)nul + 1, size - slen - 1, &jerr);

		/* The request parser refuses a raw NUL byte anywhere. */
		if (j)
			QASSERT(memchr(nul + 1, '\0', size - slen - 1) == NULL);

		if (json_is_object(j))
			check_fields(j);
		json_decref(j);
	}
	free(s);
	return 0;
}
