/* Unit tests of jwt: the pure parse step on good and hostile tokens, HMAC verification, the
 * claim rules, and the strict base64url decoder. */
#include "jwt.h"
#include "tap.h"

#include <openssl/hmac.h>
#include <stdlib.h>

static void
b64url(const unsigned char *in, size_t n, char *out)
{
	static const char a[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t o = 0;

	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) |
			     (i + 2 < n ? in[i + 2] : 0);

		out[o++] = a[v >> 18 & 63];
		out[o++] = a[v >> 12 & 63];
		if (i + 1 < n)
			out[o++] = a[v >> 6 & 63];
		if (i + 2 < n)
			out[o++] = a[v & 63];
	}
	out[o] = '\0';
}

/* header.claims.signature with HS256 under key (sig_ok 0: a wrong signature). */
static char *
make(const char *hdr, const char *claims, const char *key, int sig_ok)
{
	char *t = malloc(8192);
	unsigned char mac[64];
	unsigned len = 0;
	size_t n;

	b64url((const unsigned char *)hdr, strlen(hdr), t);
	n = strlen(t);
	t[n++] = '.';
	b64url((const unsigned char *)claims, strlen(claims), t + n);
	n = strlen(t);
	HMAC(EVP_sha256(), key, (int)strlen(key), (unsigned char *)t, n, mac, &len);
	if (!sig_ok)
		mac[0] ^= 1;
	t[n++] = '.';
	b64url(mac, len, t + n);
	return t;
}

static enum jwt_verdict
parse(const char *tok)
{
	struct jwt t;
	enum jwt_verdict v = jwt_parse(tok, strlen(tok), &t);

	jwt_clear(&t);
	return v;
}

int
main(void)
{
	struct jkey k = { .kind = JKEY_HMAC, .secret = (unsigned char *)"k3y", .secret_len = 3 };
	struct jwt_claim_rules rules = { .now = 1000000, .skew = 30, .issuer = "iss",
					 .audience = "aud" };
	struct jwt t;
	unsigned char out[64];
	char *good = make("{\"alg\":\"HS256\",\"kid\":\"k1\"}", "{\"sub\":\"x\"}", "k3y", 1);
	char *bad = make("{\"alg\":\"HS256\"}", "{\"sub\":\"x\"}", "k3y", 0);
	char big[JWT_MAX_TOKEN + 16];

	is_int(jwt_parse(good, strlen(good), &t), JWT_OK, "a well-formed token parses");
	is_int(t.alg, JWT_HS256, "its algorithm");
	is_str(t.kid, "k1", "its kid");
	is_str(json_string_value(json_object_get(t.claims, "sub")), "x", "its claims");
	is_int(jwt_verify(&t, &k), JWT_OK, "the right secret verifies it");
	k.secret_len = 2;
	is_int(jwt_verify(&t, &k), JWT_BAD_SIGNATURE, "another secret does not");
	k.secret_len = 3;
	k.kind = JKEY_RSA;
	is_int(jwt_verify(&t, &k), JWT_BAD_SIGNATURE, "a key of another kind never verifies it");
	k.kind = JKEY_HMAC;
	jwt_clear(&t);
	ok(jwt_parse(bad, strlen(bad), &t) == JWT_OK && jwt_verify(&t, &k) == JWT_BAD_SIGNATURE,
	   "a flipped signature bit fails");
	jwt_clear(&t);

	is_int(parse(""), JWT_MALFORMED, "empty");
	is_int(parse("abc"), JWT_MALFORMED, "no dots");
	is_int(parse("a.b.c.d"), JWT_MALFORMED, "four parts");
	is_int(parse(".."), JWT_MALFORMED, "three empty parts");
	is_int(parse("e30.e30.AA"), JWT_MALFORMED, "a header without alg");
	is_int(parse("eyJhbGciOiJIUzI1NiJ9.W10.AA"), JWT_MALFORMED, "claims that are an array");
	is_int(parse("eyJhbGciOiJIUzI1NiJ9.e30.A"), JWT_MALFORMED, "a one-character signature");
	is_int(parse("eyJhbGciOiJIUzI1NiJ9.e30.A*"), JWT_MALFORMED, "a character outside base64url");
	is_int(parse("eyJhbGciOiJub25lIn0.e30.AA"), JWT_BAD_ALG, "alg none");
	is_int(parse("eyJhbGciOiJoczI1NiJ9.e30.AA"), JWT_BAD_ALG, "alg hs256 (wrong case)");
	is_int(parse("eyJhbGciOiJIUzI1NiJ9.eyJzIjoi_yJ9.AA"), JWT_MALFORMED,
	       "claims that are not UTF-8");
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	big[10] = '.';
	big[20] = '.';
	is_int(parse(big), JWT_MALFORMED, "a token over 8 KiB");

	is_int(jwt_b64url_decode("AQ", 2, out), 1, "AQ decodes to one byte");
	is_int(jwt_b64url_decode("AR", 2, out), -1, "AR has stray bits: refused");
	is_int(jwt_b64url_decode("AQ==", 4, out), -1, "padding is not base64url");

#define CLAIMS(s) json_loads(s, 0, NULL)
	{
		struct {
			const char *claims;
			enum jwt_verdict want;
			const char *name;
		} cases[] = {
			{ "{\"iss\":\"iss\",\"aud\":\"aud\"}", JWT_OK, "no time claims" },
			{ "{\"iss\":\"iss\",\"aud\":[\"x\",\"aud\"],\"exp\":1000010}", JWT_OK,
			  "aud in an array, exp ahead" },
			{ "{\"iss\":\"iss\",\"aud\":\"aud\",\"exp\":999980}", JWT_OK,
			  "exp 20 s ago, within the skew" },
			{ "{\"iss\":\"iss\",\"aud\":\"aud\",\"exp\":999960}", JWT_EXPIRED,
			  "exp 40 s ago" },
			{ "{\"iss\":\"iss\",\"aud\":\"aud\",\"nbf\":1000040}", JWT_NOT_YET_VALID,
			  "nbf 40 s ahead" },
			{ "{\"iss\":\"iss\",\"aud\":\"aud\",\"iat\":1000040}", JWT_BAD_CLAIMS,
			  "iat 40 s ahead" },
			{ "{\"iss\":\"iss\",\"aud\":\"aud\",\"exp\":\"soon\"}", JWT_BAD_CLAIMS,
			  "exp a string" },
			{ "{\"iss\":\"other\",\"aud\":\"aud\"}", JWT_BAD_CLAIMS, "another issuer" },
			{ "{\"iss\":\"iss\",\"aud\":[\"x\"]}", JWT_BAD_CLAIMS, "another audience" },
			{ "{\"iss\":\"iss\"}", JWT_BAD_CLAIMS, "no audience" },
		};

		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			json_t *c = CLAIMS(cases[i].claims);

			is_int(jwt_check_claims(c, &rules), cases[i].want, cases[i].name);
			json_decref(c);
		}
	}
	free(good);
	free(bad);
	return tap_done();
}
