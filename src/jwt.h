/* jwt: parsing and verifying JSON Web Tokens (RFC 7519, JWS compact form) with OpenSSL EVP.
 *
 * Three steps, each usable alone: jwt_parse splits and decodes a token without any key (a pure
 * function of its bytes, the fuzzing entry point), jwt_verify checks its signature with one
 * key, jwt_check_claims checks the time, issuer and audience claims. Nothing here logs, and no
 * error text carries a byte of the token or a key. */
#ifndef QUEEN_JWT_H
#define QUEEN_JWT_H

#include <jansson.h>
#include <openssl/evp.h>
#include <stddef.h>
#include <stdint.h>

/* Longest token accepted; a longer one is malformed (SPEC 17 bad input). */
#define JWT_MAX_TOKEN 8192

enum jwt_alg {
	JWT_ALG_UNKNOWN = 0,	/* also "none", always refused */
	JWT_HS256, JWT_HS384, JWT_HS512,
	JWT_RS256, JWT_RS384, JWT_RS512,
	JWT_ES256, JWT_EDDSA,
	JWT_ALG__COUNT
};

/* What a key can verify: a key never verifies an algorithm of another kind, so an HMAC token
 * is never checked against a public key (no algorithm confusion). */
enum jkey_kind { JKEY_HMAC, JKEY_RSA, JKEY_EC256, JKEY_ED25519 };

struct jkey {
	enum jkey_kind kind;
	char *kid;		/* NULL: no kid (a PEM key, a plain secret) */
	enum jwt_alg alg;	/* the JWK's "alg", or JWT_ALG_UNKNOWN when it named none */
	EVP_PKEY *pkey;		/* public keys */
	unsigned char *secret;	/* HMAC */
	size_t secret_len;
};

/* A parsed token. claims is owned (json_decref through jwt_clear); signing_input points into
 * the token passed to jwt_parse, which must outlive the struct. */
struct jwt {
	enum jwt_alg alg;
	char kid[256];		/* empty: the header named none */
	json_t *claims;
	const char *signing_input;
	size_t signing_len;
	unsigned char sig[512];
	size_t sig_len;
};

enum jwt_verdict {
	JWT_OK = 0,
	JWT_MALFORMED,		/* not three base64url parts of JSON objects, too long, ... */
	JWT_BAD_ALG,		/* alg none, unknown or not the configured one */
	JWT_BAD_SIGNATURE,
	JWT_BAD_CLAIMS,		/* issuer, audience, iat in the future, claim of a wrong type */
	JWT_EXPIRED,
	JWT_NOT_YET_VALID,
};

/* Parses the compact form tok[0..len) (no "Bearer " prefix): header, claims and signature.
 * Pure: no key, no clock, no global state; safe on any bytes (fuzzed). Returns JWT_OK and fills
 * *out (release with jwt_clear), or JWT_MALFORMED / JWT_BAD_ALG with *out cleared. */
enum jwt_verdict jwt_parse(const char *tok, size_t len, struct jwt *out);
void jwt_clear(struct jwt *t);

/* Checks the signature of t with key k: JWT_OK or JWT_BAD_SIGNATURE (also when the key's kind
 * or its JWK alg does not fit the token's algorithm). */
enum jwt_verdict jwt_verify(const struct jwt *t, const struct jkey *k);

/* Kind of key an algorithm needs. */
enum jkey_kind jwt_alg_kind(enum jwt_alg a);

struct jwt_claim_rules {
	int64_t now;		/* unix seconds */
	int64_t skew;
	const char *issuer;	/* NULL or empty: not checked */
	const char *audience;
};

/* exp, nbf and iat (numbers when present; exp optional) with the skew, then iss and aud
 * (exact; aud a string or an array holding it). */
enum jwt_verdict jwt_check_claims(const json_t *claims, const struct jwt_claim_rules *rules);

/* "HS256" ... "EdDSA" <-> enum; case-insensitive; unknown -> JWT_ALG_UNKNOWN. */
enum jwt_alg jwt_alg_from_name(const char *name);
const char *jwt_alg_name(enum jwt_alg a);

/* base64url without padding (RFC 7515 2): decodes in[0..n) into out (room for n*3/4+3).
 * Returns the decoded length or -1 on a character outside the alphabet or a bad length. */
long jwt_b64url_decode(const char *in, size_t n, unsigned char *out);

/* Key material: frees what a jkey holds (not the struct itself). */
void jkey_clear(struct jkey *k);

#endif
