/* b64: base64 decoding (see b64.h). */
#include "b64.h"

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

long
b64_decode(const char *in, size_t n, unsigned char *out, enum b64_mode mode)
{
	size_t o = 0, pad = 0;
	unsigned acc = 0;
	int bits = 0;

	if (mode == B64_LENIENT)
		while (pad < n && in[n - 1 - pad] == '=')
			pad++;
	if (pad > 2 || (pad && n % 4 != 0) || (n - pad) % 4 == 1)
		return -1;
	for (size_t i = 0; i < n - pad; i++) {
		int v = sextet((unsigned char)in[i], mode);

		if (v < 0)
			return -1;
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	/* Strict: leftover bits must be zero, so one value has one encoding. */
	if (mode == B64_URL_STRICT && acc != 0)
		return -1;
	return (long)o;
}
