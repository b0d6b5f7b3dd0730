/* jwt: compact JWS tokens, parsed by hand and verified with OpenSSL EVP.
 *
 * Invariant: every byte of a token is hostile. Lengths are checked before every copy, the JSON
 * parts go through jansson (which refuses invalid UTF-8), and a verdict is all a caller learns:
 * no message here ever quotes the token. HMAC signatures are compared in constant time. */
#include "jwt.h"
#include "b64.h"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/hmac.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const alg_names[JWT_ALG__COUNT] = {
	[JWT_ALG_UNKNOWN] = "none",
	[JWT_HS256] = "HS256", [JWT_HS384] = "HS384", [JWT_HS512] = "HS512",
	[JWT_RS256] = "RS256", [JWT_RS384] = "RS384", [JWT_RS512] = "RS512",
	[JWT_ES256] = "ES256", [JWT_EDDSA] = "EdDSA",
};

enum jwt_alg
jwt_alg_from_name(const char *name)
{
	for (int a = 1; a < JWT_ALG__COUNT; a++)
		if (strcasecmp(name, alg_names[a]) == 0)
			return (enum jwt_alg)a;
	return JWT_ALG_UNKNOWN;
}

const char *
jwt_alg_name(enum jwt_alg a)
{
	return a > 0 && a < JWT_ALG__COUNT ? alg_names[a] : "none";
}

enum jkey_kind
jwt_alg_kind(enum jwt_alg a)
{
	switch (a) {
	case JWT_RS256:
	case JWT_RS384:
	case JWT_RS512:
		return JKEY_RSA;
	case JWT_ES256:
		return JKEY_EC256;
	case JWT_EDDSA:
		return JKEY_ED25519;
	default:
		return JKEY_HMAC;
	}
}

static const EVP_MD *
alg_md(enum jwt_alg a)
{
	switch (a) {
	case JWT_HS256:
	case JWT_RS256:
	case JWT_ES256:
		return EVP_sha256();
	case JWT_HS384:
	case JWT_RS384:
		return EVP_sha384();
	case JWT_HS512:
	case JWT_RS512:
		return EVP_sha512();
	default:
		return NULL;	/* EdDSA hashes inside the signature scheme */
	}
}

long
jwt_b64url_decode(const char *in, size_t n, unsigned char *out)
{
	return b64_decode(in, n, out, B64_URL_STRICT);
}

/* Decodes one base64url part holding a JSON object. */
static json_t *
part_json(const char *p, size_t n)
{
	unsigned char *buf;
	json_t *j = NULL;
	long len;

	if (n == 0)
		return NULL;
	buf = malloc(n);
	if (!buf)
		return NULL;
	len = jwt_b64url_decode(p, n, buf);
	if (len > 0)
		j = json_loadb((const char *)buf, (size_t)len, JSON_REJECT_DUPLICATES, NULL);
	free(buf);
	if (j && !json_is_object(j)) {
		json_decref(j);
		j = NULL;
	}
	return j;
}

void
jwt_clear(struct jwt *t)
{
	json_decref(t->claims);
	memset(t, 0, sizeof(*t));
}

enum jwt_verdict
jwt_parse(const char *tok, size_t len, struct jwt *out)
{
	const char *d1, *d2, *end = tok + len;
	json_t *hdr, *alg, *kid;
	long sl;

	memset(out, 0, sizeof(*out));
	if (len == 0 || len > JWT_MAX_TOKEN)
		return JWT_MALFORMED;
	d1 = memchr(tok, '.', len);
	if (!d1)
		return JWT_MALFORMED;
	d2 = memchr(d1 + 1, '.', (size_t)(end - d1 - 1));
	if (!d2 || memchr(d2 + 1, '.', (size_t)(end - d2 - 1)))
		return JWT_MALFORMED;
	/* The signature part first: it is the cheapest to refuse. 512 bytes hold an RSA-4096
	 * signature; a longer one is no signature of ours. */
	if ((size_t)(end - d2 - 1) > (sizeof(out->sig) / 3) * 4)
		return JWT_MALFORMED;
	sl = jwt_b64url_decode(d2 + 1, (size_t)(end - d2 - 1), out->sig);
	if (sl <= 0)
		return JWT_MALFORMED;
	out->sig_len = (size_t)sl;

	hdr = part_json(tok, (size_t)(d1 - tok));
	if (!hdr)
		return JWT_MALFORMED;
	alg = json_object_get(hdr, "alg");
	kid = json_object_get(hdr, "kid");
	if (!json_is_string(alg) || (kid && !json_is_string(kid)) ||
	    (kid && json_string_length(kid) >= sizeof(out->kid)) || json_object_get(hdr, "crit")) {
		json_decref(hdr);
		return JWT_MALFORMED;
	}
	/* Case matters in a token header: "none" in any spelling is refused, and "hs256" is not
	 * an algorithm name (RFC 7518 3.1). */
	out->alg = jwt_alg_from_name(json_string_value(alg));
	if (out->alg != JWT_ALG_UNKNOWN &&
	    strcmp(alg_names[out->alg], json_string_value(alg)) != 0)
		out->alg = JWT_ALG_UNKNOWN;
	if (kid) {
		memcpy(out->kid, json_string_value(kid), json_string_length(kid));
		out->kid[json_string_length(kid)] = '\0';
		/* A kid with a NUL inside cannot be compared as a string: malformed. */
		if (strlen(out->kid) != json_string_length(kid)) {
			json_decref(hdr);
			memset(out, 0, sizeof(*out));
			return JWT_MALFORMED;
		}
	}
	json_decref(hdr);
	out->claims = part_json(d1 + 1, (size_t)(d2 - d1 - 1));
	if (!out->claims) {
		memset(out, 0, sizeof(*out));
		return JWT_MALFORMED;
	}
	out->signing_input = tok;
	out->signing_len = (size_t)(d2 - tok);
	if (out->alg == JWT_ALG_UNKNOWN) {
		jwt_clear(out);
		return JWT_BAD_ALG;
	}
	return JWT_OK;
}

static int
verify_hmac(const struct jwt *t, const struct jkey *k)
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int maclen = 0;

	if (!HMAC(alg_md(t->alg), k->secret, (int)k->secret_len,
		  (const unsigned char *)t->signing_input, t->signing_len, mac, &maclen))
		return 0;
	return maclen == t->sig_len && CRYPTO_memcmp(mac, t->sig, maclen) == 0;
}

/* JWS carries ECDSA signatures as r || s (32 bytes each for P-256); OpenSSL verifies DER. */
static int
es256_der(const struct jwt *t, unsigned char **der, int *derlen)
{
	ECDSA_SIG *es;
	BIGNUM *r, *s;

	if (t->sig_len != 64)
		return 0;
	es = ECDSA_SIG_new();
	r = BN_bin2bn(t->sig, 32, NULL);
	s = BN_bin2bn(t->sig + 32, 32, NULL);
	if (!es || !r || !s || !ECDSA_SIG_set0(es, r, s)) {
		ECDSA_SIG_free(es);
		BN_free(r);
		BN_free(s);
		return 0;
	}
	*der = NULL;
	*derlen = i2d_ECDSA_SIG(es, der);
	ECDSA_SIG_free(es);
	return *derlen > 0;
}

static int
verify_pkey(const struct jwt *t, const struct jkey *k)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	const unsigned char *sig = t->sig;
	unsigned char *der = NULL;
	size_t siglen = t->sig_len;
	int derlen = 0, ok = 0;

	if (!ctx || !k->pkey)
		goto out;
	if (t->alg == JWT_ES256) {
		if (!es256_der(t, &der, &derlen))
			goto out;
		sig = der;
		siglen = (size_t)derlen;
	}
	if (EVP_DigestVerifyInit(ctx, NULL, alg_md(t->alg), NULL, k->pkey) != 1)
		goto out;
	ok = EVP_DigestVerify(ctx, sig, siglen, (const unsigned char *)t->signing_input,
			      t->signing_len) == 1;
out:
	OPENSSL_free(der);
	EVP_MD_CTX_free(ctx);
	return ok;
}

enum jwt_verdict
jwt_verify(const struct jwt *t, const struct jkey *k)
{
	int ok;

	if (t->alg == JWT_ALG_UNKNOWN || k->kind != jwt_alg_kind(t->alg) ||
	    (k->alg != JWT_ALG_UNKNOWN && k->alg != t->alg))
		return JWT_BAD_SIGNATURE;
	ok = k->kind == JKEY_HMAC ? verify_hmac(t, k) : verify_pkey(t, k);
	return ok ? JWT_OK : JWT_BAD_SIGNATURE;
}

/* A NumericDate claim: absent (1, *v untouched), a number (1), anything else (0). */
static int
num_claim(const json_t *claims, const char *name, int64_t *v, int *present)
{
	const json_t *c = json_object_get(claims, name);

	*present = c != NULL;
	if (!c)
		return 1;
	if (json_is_integer(c)) {
		*v = (int64_t)json_integer_value(c);
		return 1;
	}
	if (json_is_real(c)) {
		double d = json_real_value(c);

		if (!(d > -9.0e15 && d < 9.0e15))
			return 0;
		*v = (int64_t)d;
		return 1;
	}
	return 0;
}

static int
audience_ok(const json_t *aud, const char *want)
{
	size_t i;
	const json_t *v;

	if (json_is_string(aud))
		return strcmp(json_string_value(aud), want) == 0;
	if (!json_is_array(aud))
		return 0;
	json_array_foreach(aud, i, v)
		if (json_is_string(v) && strcmp(json_string_value(v), want) == 0)
			return 1;
	return 0;
}

enum jwt_verdict
jwt_check_claims(const json_t *claims, const struct jwt_claim_rules *rules)
{
	int64_t exp = 0, nbf = 0, iat = 0;
	int has_exp, has_nbf, has_iat;
	const json_t *iss;

	if (!num_claim(claims, "exp", &exp, &has_exp) || !num_claim(claims, "nbf", &nbf, &has_nbf) ||
	    !num_claim(claims, "iat", &iat, &has_iat))
		return JWT_BAD_CLAIMS;
	if (has_exp && rules->now > exp + rules->skew)
		return JWT_EXPIRED;
	if (has_nbf && rules->now + rules->skew < nbf)
		return JWT_NOT_YET_VALID;
	/* A token issued in the future (beyond the skew) is not trusted (SPEC 17 Decided). */
	if (has_iat && iat > rules->now + rules->skew)
		return JWT_BAD_CLAIMS;
	if (rules->issuer && rules->issuer[0]) {
		iss = json_object_get(claims, "iss");
		if (!json_is_string(iss) || strcmp(json_string_value(iss), rules->issuer) != 0)
			return JWT_BAD_CLAIMS;
	}
	if (rules->audience && rules->audience[0] &&
	    !audience_ok(json_object_get(claims, "aud"), rules->audience))
		return JWT_BAD_CLAIMS;
	return JWT_OK;
}

void
jkey_clear(struct jkey *k)
{
	if (!k)
		return;
	free(k->kid);
	EVP_PKEY_free(k->pkey);
	if (k->secret)
		OPENSSL_clear_free(k->secret, k->secret_len);
	memset(k, 0, sizeof(*k));
}
