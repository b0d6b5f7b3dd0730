/* Unit tests of siphash: the reference vector of the SipHash paper. */
#include "siphash.h"
#include "tap.h"

#include <stdint.h>

int
main(void)
{
	uint8_t key[16], msg[15];

	for (int i = 0; i < 16; i++)
		key[i] = (uint8_t)i;
	for (int i = 0; i < 15; i++)
		msg[i] = (uint8_t)i;
	is_int(siphash24(key, msg, 15) == 0xa129ca6149be45e5ULL, 1,
	       "SipHash-2-4 of 00..0e under key 00..0f matches the paper");
	ok(siphash24(key, "abc", 3) != siphash24(key, "abd", 3), "different input, different hash");
	key[0] ^= 1;
	ok(siphash24(key, msg, 15) != 0xa129ca6149be45e5ULL, "another key, another hash");
	return tap_done();
}
