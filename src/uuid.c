/* uuid: UUIDv7 = 48 bits of unix milliseconds, version 7, 12 bits of sequence, variant, 62 random
 * bits. A process-wide counter in the sequence bits keeps ids monotonic inside a millisecond. */
#include "uuid.h"
#include "hex.h"
#include "qassert.h"

#include <openssl/rand.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t uuid_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t uuid_last_ms;
static uint32_t uuid_seq;

void
uuid_format(const uint8_t b[16], char out[UUID_STR_LEN])
{
	static const char hex[] = "0123456789abcdef";
	int o = 0;

	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hex[b[i] >> 4];
		out[o++] = hex[b[i] & 15];
	}
	out[o] = '\0';
}

/* Random bits from OpenSSL's CSPRNG, drawn a few kilobytes at a time per thread: one
 * RAND_bytes call per id costs more than the rest of making it. */
static void
random_bytes(uint8_t *out, size_t n)
{
	static __thread uint8_t pool[4096];
	static __thread size_t left;

	if (left < n) {
		QASSERT(RAND_bytes(pool, sizeof(pool)) == 1);
		left = sizeof(pool);
	}
	memcpy(out, pool + sizeof(pool) - left, n);
	left -= n;
}

void
uuid_v7_at(char out[UUID_STR_LEN], uint64_t ms)
{
	uint8_t b[16];
	uint32_t seq;

	random_bytes(b + 8, 8);
	pthread_mutex_lock(&uuid_mu);
	if (ms > uuid_last_ms) {
		uuid_last_ms = ms;
		uuid_seq = 0;
	} else {
		/* Same millisecond or a clock step back: keep counting on the last time. */
		ms = uuid_last_ms;
		if (++uuid_seq > 0xfff) {
			uuid_last_ms = ++ms;
			uuid_seq = 0;
		}
	}
	seq = uuid_seq;
	pthread_mutex_unlock(&uuid_mu);

	for (int i = 0; i < 6; i++)
		b[i] = (uint8_t)(ms >> (40 - 8 * i));
	b[6] = (uint8_t)(0x70 | ((seq >> 8) & 0x0f));
	b[7] = (uint8_t)(seq & 0xff);
	b[8] = (uint8_t)(0x80 | (b[8] & 0x3f));
	uuid_format(b, out);
}

void
uuid_v7(char out[UUID_STR_LEN])
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	uuid_v7_at(out, (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000);
}

int
uuid_valid(const char *s)
{
	if (!s || strlen(s) != 36)
		return 0;
	for (int i = 0; i < 36; i++) {
		char c = s[i];

		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (c != '-')
				return 0;
		} else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
			     (c >= 'A' && c <= 'F'))) {
			return 0;
		}
	}
	return 1;
}

int
uuid_parse(const char *s, uint8_t out[16])
{
	int o = 0, hi, lo;

	/* One pass: a short text ends at its NUL, which is no hex digit. */
	for (int i = 0; i < 36;) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i++] != '-')
				return -1;
			continue;
		}
		if ((hi = hex_digit(s[i])) < 0 || (lo = hex_digit(s[i + 1])) < 0)
			return -1;
		out[o++] = (uint8_t)(hi << 4 | lo);
		i += 2;
	}
	return s[36] == '\0' ? 0 : -1;
}
