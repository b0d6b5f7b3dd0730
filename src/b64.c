/* b64: base64 decoding (see b64.h). */
#include "b64.h"

#include <pthread.h>

/* The 6-bit value of c, or -1 when c is not in the alphabet of mode. */
static int
sextet(unsigned char c, enum b64_mode mode)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '-' || (c == '+' && mode == B64_LENIENT))
		return 62;
	if (c == '_' || (c == '/' && mode == B64_LENIENT))
		return 63;
	return -1;
}

/* sextet() of every byte, per mode (64: not in the alphabet), so that the loop below looks
 * each character up instead of branching on its range: decoding the envelopes of every pop
 * of an encrypted queue was a fifth of the broker's time. */
static unsigned char table[2][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void
table_make(void)
{
	for (int c = 0; c < 256; c++) {
		int strict = sextet((unsigned char)c, B64_URL_STRICT);
		int lenient = sextet((unsigned char)c, B64_LENIENT);

		table[B64_URL_STRICT][c] = (unsigned char)(strict < 0 ? 64 : strict);
		table[B64_LENIENT][c] = (unsigned char)(lenient < 0 ? 64 : lenient);
	}
}

long
b64_decode(const char *in, size_t n, unsigned char *out, enum b64_mode mode)
{
	const unsigned char *t, *u = (const unsigned char *)in;
	size_t o = 0, pad = 0, i, m;
	unsigned acc = 0, bad = 0;

	if (mode == B64_LENIENT)
		while (pad < n && in[n - 1 - pad] == '=')
			pad++;
	if (pad > 2 || (pad && n % 4 != 0) || (n - pad) % 4 == 1)
		return -1;
	pthread_once(&table_once, table_make);
	t = table[mode];
	m = n - pad;
	/* Whole groups of four characters, three bytes each. */
	for (i = 0; i + 4 <= m; i += 4) {
		unsigned a = t[u[i]], b = t[u[i + 1]], c = t[u[i + 2]], d = t[u[i + 3]];

		bad |= a | b | c | d;
		acc = a << 18 | b << 12 | c << 6 | d;
		out[o++] = (unsigned char)(acc >> 16);
		out[o++] = (unsigned char)(acc >> 8);
		out[o++] = (unsigned char)acc;
	}
	/* The last two or three: one or two bytes, and 4 or 2 bits left over. */
	acc = 0;
	for (size_t k = i; k < m; k++) {
		bad |= t[u[k]];
		acc = acc << 6 | t[u[k]];
	}
	if (m - i == 2) {
		out[o++] = (unsigned char)(acc >> 4);
		acc &= 0xf;
	} else if (m - i == 3) {
		out[o++] = (unsigned char)(acc >> 10);
		out[o++] = (unsigned char)(acc >> 2);
		acc &= 0x3;
	}
	if (bad & 64)
		return -1;
	/* Strict: leftover bits must be zero, so one value has one encoding. */
	if (mode == B64_URL_STRICT && acc != 0)
		return -1;
	return (long)o;
}
