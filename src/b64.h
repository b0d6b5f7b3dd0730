/* b64: base64 decoding, the one decoder of the broker. Two readings of the same alphabet:
 * the strict base64url of JSON Web Tokens (RFC 7515 2: '-' and '_', no padding, one encoding
 * per value) and the lenient form clients send timer payloads in (either alphabet, '='
 * padding optional). Pure functions, any thread. */
#ifndef QUEEN_B64_H
#define QUEEN_B64_H

#include <stddef.h>

enum b64_mode {
	B64_URL_STRICT,	/* base64url, no padding, leftover bits must be zero */
	B64_LENIENT,	/* '+' or '-', '/' or '_', up to two '=' at the end */
};

/* Decodes in[0..n) into out, which has room for n / 4 * 3 + 3 bytes. Returns the decoded
 * length, or -1 on a character outside the alphabet of mode or a length no encoding has. */
long b64_decode(const char *in, size_t n, unsigned char *out, enum b64_mode mode);

#endif
