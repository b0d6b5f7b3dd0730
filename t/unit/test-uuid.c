/* Unit tests of uuid: UUIDv7 layout, validity, monotonic order within a millisecond, and the
 * round trip between text and the 16 bytes the partition index keeps. */
#include "tap.h"
#include "uuid.h"

int
main(void)
{
	char a[UUID_STR_LEN], b[UUID_STR_LEN];
	int increasing = 1;

	uuid_v7_at(a, 0x0123456789abULL);
	ok(uuid_valid(a), "a v7 id is a canonical UUID: %s", a);
	ok(strncmp(a, "01234567-89ab-7", 15) == 0, "timestamp and version are in place");
	ok(strchr("89ab", a[19]) != NULL, "variant bits are 10");
	for (int i = 0; i < 5000; i++) {
		uuid_v7(b);
		uuid_v7(a);
		increasing &= strcmp(b, a) < 0;
	}
	ok(increasing, "ids made one after the other sort in order");
	ok(!uuid_valid("not-a-uuid"), "garbage is not a UUID");
	ok(!uuid_valid("01234567-89ab-7cde-8f01-23456789abcZ"), "a bad hex digit is refused");
	ok(uuid_valid("01234567-89AB-7cde-8f01-23456789abcd"), "upper case hex is accepted");

	uint8_t raw[16];

	ok(uuid_parse("01234567-89AB-7cde-8f01-23456789abcd", raw) == 0 && raw[0] == 0x01 &&
	   raw[5] == 0xab && raw[6] == 0x7c && raw[15] == 0xcd, "text parses to its 16 bytes");
	uuid_format(raw, b);
	ok(strcmp(b, "01234567-89ab-7cde-8f01-23456789abcd") == 0,
	   "and formats back in lower case: %s", b);
	uuid_v7(a);
	ok(uuid_parse(a, raw) == 0, "a v7 id parses");
	uuid_format(raw, b);
	ok(strcmp(a, b) == 0, "and round-trips");
	ok(uuid_parse("01234567-89ab-7cde-8f01-23456789abc", raw) < 0 &&
	   uuid_parse("01234567-89ab-7cde-8f01-23456789abcdd", raw) < 0 &&
	   uuid_parse("0123456789ab-7cde-8f01-23456789abcdef", raw) < 0,
	   "a short, long or undashed text is no UUID");
	return tap_done();
}
