/* jwks: verification keys from a JWKS (RFC 7517) or a PEM text, and the JWKS fetched from a URL.
 *
 * A keyset is immutable once built and reference-counted: a request holds a reference for as
 * long as it verifies, a reload or a refresh publishes a new set and drops the old one. The URL
 * source runs one background thread (libcurl) that refreshes every JWT_JWKS_REFRESH_INTERVAL
 * seconds and on demand when a token names an unknown kid (at most every 5 s); a request never
 * waits longer than JWT_JWKS_TIMEOUT_MS for it. No error text ever carries key material. */
#ifndef QUEEN_JWKS_H
#define QUEEN_JWKS_H

#include "jwt.h"

#include <stddef.h>

struct keyset {
	int refs;		/* atomic */
	size_t n;
	struct jkey keys[];
};

/* Parses a JWKS text ({"keys":[...]}): every usable signature key (RSA, EC P-256, OKP Ed25519,
 * oct) becomes a jkey; unusable entries are skipped. Returns a set with one reference, or NULL
 * with the reason in err (also when no key is usable). */
struct keyset *keyset_from_jwks(const char *text, size_t len, char *err, size_t errlen);
/* One key from a PEM public key (RSA, EC P-256 or Ed25519), as a set of one. */
struct keyset *keyset_from_pem(const char *pem, size_t len, char *err, size_t errlen);
/* One HMAC secret (the bytes of the string), as a set of one. */
struct keyset *keyset_from_secret(const char *secret);
struct keyset *keyset_ref(struct keyset *ks);
void keyset_unref(struct keyset *ks);	/* NULL is fine */

/* Reads a whole file of at most 1 MiB (caller frees). NULL with the reason in err. */
char *jwks_read_file(const char *path, size_t *len, char *err, size_t errlen);

/* The URL source. jwks_remote_start fetches once (failing with the reason in err) and starts
 * the refresh thread; jwks_remote_stop ends it. jwks_remote_get returns the current set with a
 * reference (NULL when there is no URL source). jwks_remote_refetch asks for a fetch because a
 * token named a kid the set lacks: when the last fetch began at least 5 s ago it triggers one
 * and waits for it at most timeout_ms; returns the (possibly new) set with a reference. */
int jwks_remote_start(const char *url, long refresh_s, long timeout_ms, char *err, size_t errlen);
void jwks_remote_stop(void);
struct keyset *jwks_remote_get(void);
struct keyset *jwks_remote_refetch(void);

#endif
