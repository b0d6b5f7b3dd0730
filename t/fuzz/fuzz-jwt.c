/* fuzz-jwt: libFuzzer target of the token parser (src/jwt.c), the first code that reads a
 * client's Authorization header when JWT authentication is on.
 *
 * The input is a token in compact form. The oracle: jwt_parse answers JWT_OK, JWT_MALFORMED
 * or JWT_BAD_ALG; a parsed token names a known algorithm, carries an object of claims, a
 * signing input inside the token and a signature that fits its buffer; verifying it with an
 * HMAC key answers JWT_OK or JWT_BAD_SIGNATURE; the claim rules answer one of their verdicts;
 * and jwt_clear leaves nothing behind (LeakSanitizer). */
#include "jwt.h"
#include "qassert.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned char secret[] = "fuzzing-secret";
	const char *tok = (const char *)data;
	struct jkey key = { .kind = JKEY_HMAC, .alg = JWT_ALG_UNKNOWN, .secret = secret,
			    .secret_len = sizeof(secret) - 1 };
	struct jwt_claim_rules rules = { .now = 1767225600, .skew = 30, .issuer = "queen",
					 .audience = "brokers" };
	struct jwt t;
	enum jwt_verdict v = jwt_parse(tok, size, &t);
	enum jwt_verdict c;

	QASSERT(v == JWT_OK || v == JWT_MALFORMED || v == JWT_BAD_ALG);
	if (v != JWT_OK)
		return 0;
	QASSERT(t.alg > JWT_ALG_UNKNOWN && t.alg < JWT_ALG__COUNT);
	QASSERT(json_is_object(t.claims));
	QASSERT(t.signing_input >= tok && t.signing_input + t.signing_len <= tok + size);
	QASSERT(t.sig_len <= sizeof(t.sig));
	QASSERT(strlen(t.kid) < sizeof(t.kid));
	v = jwt_verify(&t, &key);
	QASSERT(v == JWT_OK || v == JWT_BAD_SIGNATURE);
	c = jwt_check_claims(t.claims, &rules);
	QASSERT(c == JWT_OK || c == JWT_BAD_CLAIMS || c == JWT_EXPIRED || c == JWT_NOT_YET_VALID);
	jwt_clear(&t);
	return 0;
}
