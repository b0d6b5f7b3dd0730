/* Unit tests of names: the name rules (SPEC 22), UTF-8 validation, labels of a queue name
 * (SPEC 4, 21). */
#include "conf.h"
#include "names.h"
#include "tap.h"

#include <string.h>

static int
valid(const char *s, size_t len)
{
	return names_invalid(s, len) == NULL;
}

int
main(void)
{
	char ns[NAMES_BUF], task[NAMES_BUF], big[300];

	qconf.max_name_bytes = 255;
	ok(valid("orders", 6), "a plain name");
	ok(valid("caf\xc3\xa9.\xe6\x97\xa5\xe6\x9c\xac", 12), "UTF-8 names");
	ok(!valid("", 0), "empty is refused");
	is_str(names_invalid("", 0), "must not be empty", "and says so");
	memset(big, 'q', sizeof(big));
	ok(valid(big, 255), "255 bytes");
	ok(!valid(big, 256), "256 bytes are refused");
	is_str(names_invalid(big, 256), "must be at most 255 bytes", "and says the limit");
	ok(!valid("a\nb", 3), "a newline is refused");
	ok(!valid("a\x7f", 2), "DEL is refused");
	ok(!valid("a\xc2\x85", 3), "a C1 control (NEL) is refused");
	is_str(names_invalid("a\x01", 2), "must not hold control characters", "and says why");
	ok(!valid("a\0b", 3), "a NUL inside is refused");
	ok(!valid("\xff\xfe", 2), "bytes that are not UTF-8");
	ok(!valid("\xc0\x80", 2), "an overlong NUL");
	ok(!valid("\xed\xa0\x80", 3), "a surrogate");
	ok(!valid("\xf4\x90\x80\x80", 4), "past U+10FFFF");
	ok(!valid("\xe6\x97", 2), "a cut sequence");
	is_str(names_invalid("\xff", 1), "must be valid UTF-8", "says UTF-8");
	ok(names_utf8("x\xc3\xa9", 3), "names_utf8 takes UTF-8");
	ok(!names_utf8("x\0", 2), "names_utf8 refuses a NUL");
	qconf.max_name_bytes = 10;
	ok(!valid("abcdefghijk", 11), "QUEEN_MAX_NAME_BYTES lowers the limit");
	is_str(names_invalid("abcdefghijk", 11), "must be at most 10 bytes", "and the message");
	names_labels("billing.invoice.v2", ns, sizeof(ns), task, sizeof(task));
	ok(strcmp(ns, "billing") == 0 && strcmp(task, "invoice") == 0, "a.b.c -> a, b");
	names_labels("billing.refund", ns, sizeof(ns), task, sizeof(task));
	ok(strcmp(ns, "billing") == 0 && strcmp(task, "refund") == 0, "a.b -> a, b");
	names_labels("orders", ns, sizeof(ns), task, sizeof(task));
	ok(strcmp(ns, "orders") == 0 && strcmp(task, "") == 0,
	   "an undotted name is its own namespace (SPEC 21)");
	names_labels(".x", ns, sizeof(ns), task, sizeof(task));
	ok(strcmp(ns, "") == 0 && strcmp(task, "x") == 0, "a leading dot: empty namespace");
	ok(names_is_name_field("consumerGroup") && names_is_name_field("queue") &&
		   !names_is_name_field("limit"), "the fields that hold names");
	return tap_done();
}
