/* Unit tests of jsonio: booleans, integers, ISO timestamps, typed fields. */
#include "jsonio.h"
#include "tap.h"

int
main(void)
{
	int b = -1;
	int64_t v = 0, ms = 0;
	char buf[32], err[128];
	json_t *o, *f;

	ok(jio_parse_bool("true", &b) == 0 && b == 1, "true");
	ok(jio_parse_bool("0", &b) == 0 && b == 0, "0 is false");
	ok(jio_parse_bool("yes", &b) < 0, "yes is not a query boolean");
	ok(jio_parse_int("42", 1, 100, &v) == 0 && v == 42, "integer in range");
	ok(jio_parse_int("420", 1, 100, &v) < 0, "integer out of range");
	ok(jio_parse_int("4x", 1, 100, &v) < 0, "trailing garbage");
	ok(jio_parse_iso("2026-08-24T09:15:00.000Z", &ms) == 0 && ms == 1787562900000LL,
	   "ISO with milliseconds");
	jio_format_iso(ms, buf, sizeof(buf));
	is_str(buf, "2026-08-24T09:15:00.000Z", "format round trip");
	ok(jio_parse_iso("2026-08-24T11:15:00.5+02:00", &ms) == 0 && ms == 1787562900500LL,
	   "offset and short fraction");
	ok(jio_parse_iso("2026-13-01T00:00:00Z", &ms) < 0, "month 13 is refused");
	ok(jio_parse_iso("yesterday", &ms) < 0, "words are refused");
	ok(jio_has_ctl("a\tb") && !jio_has_ctl("a b"), "control characters are found");
	o = json_pack("{s:s, s:i, s:n}", "s", "x", "i", 3, "n");
	ok(jio_field(o, "s", JIO_STRING, &f, err, sizeof(err)) == 0 && f, "string field");
	ok(jio_field(o, "n", JIO_STRING, &f, err, sizeof(err)) == 0 && !f, "null is absent");
	ok(jio_field(o, "i", JIO_STRING, &f, err, sizeof(err)) < 0, "wrong kind is refused");
	is_str(err, "i must be a string", "and the message names the field");
	json_decref(o);
	return tap_done();
}
