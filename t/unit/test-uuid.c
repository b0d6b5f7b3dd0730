/* Unit tests of uuid: UUIDv7 layout, validity, monotonic order within a millisecond. */
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
	return tap_done();
}
