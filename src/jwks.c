/* jwks: JWK and PEM keys into EVP_PKEY, and the refresh thread of a JWKS URL.
 *
 * Key invariant of the URL source: the published set only ever changes to a set that parsed
 * with at least one usable key; a failed fetch is logged (reason only, never the body) and the
 * last good set stays. One thread does every fetch, so a slow server holds up no request for
 * longer than the wait a refetch allows. */
#include "jwks.h"
#include "log.h"
#include "qassert.h"

#include <curl/curl.h>
#include <errno.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define JWKS_MAX_BYTES (1024 * 1024)
#define REFETCH_MIN_MS 5000

struct keyset *
keyset_ref(struct keyset *ks)
{
	if (ks)
		__atomic_add_fetch(&ks->refs, 1, __ATOMIC_RELAXED);
	return ks;
}

void
keyset_unref(struct keyset *ks)
{
	if (!ks || __atomic_sub_fetch(&ks->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	for (size_t i = 0; i < ks->n; i++)
		jkey_clear(&ks->keys[i]);
	free(ks);
}

static struct keyset *
keyset_alloc(size_t n)
{
	struct keyset *ks = calloc(1, sizeof(*ks) + n * sizeof(ks->keys[0]));

	QASSERT(ks != NULL);
	ks->refs = 1;
	return ks;
}

/* A base64url member of a JWK, decoded (caller frees); NULL when absent or invalid. */
static unsigned char *
b64_member(const json_t *jwk, const char *name, size_t *len)
{
	const json_t *v = json_object_get(jwk, name);
	unsigned char *buf;
	long n;

	if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > 4096)
		return NULL;
	buf = malloc(json_string_length(v));
	QASSERT(buf != NULL);
	n = jwt_b64url_decode(json_string_value(v), json_string_length(v), buf);
	if (n <= 0) {
		free(buf);
		return NULL;
	}
	*len = (size_t)n;
	return buf;
}

static EVP_PKEY *
pkey_fromdata(const char *type, OSSL_PARAM_BLD *bld)
{
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
	OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
	EVP_PKEY *pk = NULL;

	if (!ctx || !params || EVP_PKEY_fromdata_init(ctx) != 1 ||
	    EVP_PKEY_fromdata(ctx, &pk, EVP_PKEY_PUBLIC_KEY, params) != 1)
		pk = NULL;
	OSSL_PARAM_free(params);
	EVP_PKEY_CTX_free(ctx);
	return pk;
}

static EVP_PKEY *
rsa_from_jwk(const json_t *jwk)
{
	size_t nl = 0, el = 0;
	unsigned char *n = b64_member(jwk, "n", &nl), *e = b64_member(jwk, "e", &el);
	BIGNUM *bn = NULL, *be = NULL;
	OSSL_PARAM_BLD *bld = NULL;
	EVP_PKEY *pk = NULL;

	if (!n || !e || nl < 256)	/* RSA keys under 2048 bits are refused */
		goto out;
	bn = BN_bin2bn(n, (int)nl, NULL);
	be = BN_bin2bn(e, (int)el, NULL);
	bld = OSSL_PARAM_BLD_new();
	if (bn && be && bld && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn) &&
	    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, be))
		pk = pkey_fromdata("RSA", bld);
out:
	OSSL_PARAM_BLD_free(bld);
	BN_free(bn);
	BN_free(be);
	free(n);
	free(e);
	return pk;
}

static EVP_PKEY *
ec_from_jwk(const json_t *jwk)
{
	size_t xl = 0, yl = 0;
	unsigned char *x = b64_member(jwk, "x", &xl), *y = b64_member(jwk, "y", &yl);
	unsigned char pt[65];
	OSSL_PARAM_BLD *bld = NULL;
	EVP_PKEY *pk = NULL;
	const json_t *crv = json_object_get(jwk, "crv");

	if (!x || !y || xl != 32 || yl != 32 || !json_is_string(crv) ||
	    strcmp(json_string_value(crv), "P-256") != 0)
		goto out;
	pt[0] = 0x04;	/* uncompressed point */
	memcpy(pt + 1, x, 32);
	memcpy(pt + 33, y, 32);
	bld = OSSL_PARAM_BLD_new();
	if (bld && OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "P-256", 0) &&
	    OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, pt, sizeof(pt)))
		pk = pkey_fromdata("EC", bld);
out:
	OSSL_PARAM_BLD_free(bld);
	free(x);
	free(y);
	return pk;
}

static EVP_PKEY *
okp_from_jwk(const json_t *jwk)
{
	size_t xl = 0;
	unsigned char *x = b64_member(jwk, "x", &xl);
	const json_t *crv = json_object_get(jwk, "crv");
	EVP_PKEY *pk = NULL;

	if (x && xl == 32 && json_is_string(crv) &&
	    strcmp(json_string_value(crv), "Ed25519") == 0)
		pk = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, x, xl);
	free(x);
	return pk;
}

/* One JWK into k; 0 on success, -1 when it is not a usable signature key. */
static int
jkey_from_jwk(const json_t *jwk, struct jkey *k)
{
	const json_t *kty = json_object_get(jwk, "kty"), *use = json_object_get(jwk, "use");
	const json_t *kid = json_object_get(jwk, "kid"), *alg = json_object_get(jwk, "alg");
	const char *t;

	memset(k, 0, sizeof(*k));
	if (!json_is_string(kty) || (use && !(json_is_string(use) &&
					      strcmp(json_string_value(use), "sig") == 0)))
		return -1;
	if (alg) {
		k->alg = json_is_string(alg) ? jwt_alg_from_name(json_string_value(alg))
					     : JWT_ALG_UNKNOWN;
		if (k->alg == JWT_ALG_UNKNOWN)
			return -1;	/* an algorithm we do not verify: not our key */
	}
	t = json_string_value(kty);
	if (strcmp(t, "RSA") == 0) {
		k->kind = JKEY_RSA;
		k->pkey = rsa_from_jwk(jwk);
	} else if (strcmp(t, "EC") == 0) {
		k->kind = JKEY_EC256;
		k->pkey = ec_from_jwk(jwk);
	} else if (strcmp(t, "OKP") == 0) {
		k->kind = JKEY_ED25519;
		k->pkey = okp_from_jwk(jwk);
	} else if (strcmp(t, "oct") == 0) {
		k->kind = JKEY_HMAC;
		k->secret = b64_member(jwk, "k", &k->secret_len);
	} else {
		return -1;
	}
	if ((!k->pkey && !k->secret) || (k->alg && jwt_alg_kind(k->alg) != k->kind)) {
		jkey_clear(k);
		return -1;
	}
	if (json_is_string(kid)) {
		k->kid = strdup(json_string_value(kid));
		QASSERT(k->kid != NULL);
	}
	return 0;
}

struct keyset *
keyset_from_jwks(const char *text, size_t len, char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *doc = json_loadb(text, len, 0, &jerr), *keys, *jwk;
	struct keyset *ks = NULL;
	size_t i;

	keys = json_object_get(doc, "keys");
	if (!json_is_array(keys)) {
		snprintf(err, errlen, doc ? "not a JWKS: no \"keys\" array"
					  : "not JSON (line %d column %d)", jerr.line,
			 jerr.column);
		goto out;
	}
	ks = keyset_alloc(json_array_size(keys));
	json_array_foreach(keys, i, jwk)
		if (json_is_object(jwk) && jkey_from_jwk(jwk, &ks->keys[ks->n]) == 0)
			ks->n++;
	if (ks->n == 0) {
		snprintf(err, errlen, "no usable key among its %zu (RSA of 2048 bits or more, "
			 "EC P-256, OKP Ed25519 or oct, use sig)", json_array_size(keys));
		keyset_unref(ks);
		ks = NULL;
	}
out:
	json_decref(doc);
	return ks;
}

struct keyset *
keyset_from_pem(const char *pem, size_t len, char *err, size_t errlen)
{
	BIO *bio = BIO_new_mem_buf(pem, (int)len);
	EVP_PKEY *pk = bio ? PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL) : NULL;
	struct keyset *ks;
	enum jkey_kind kind;
	char group[32] = "";

	BIO_free(bio);
	if (!pk) {
		snprintf(err, errlen, "not a PEM public key (-----BEGIN PUBLIC KEY-----)");
		return NULL;
	}
	switch (EVP_PKEY_get_base_id(pk)) {
	case EVP_PKEY_RSA:
		kind = JKEY_RSA;
		break;
	case EVP_PKEY_EC:
		kind = JKEY_EC256;
		if (!EVP_PKEY_get_utf8_string_param(pk, OSSL_PKEY_PARAM_GROUP_NAME, group,
						    sizeof(group), NULL) ||
		    strcmp(group, "prime256v1") != 0) {
			snprintf(err, errlen, "an EC key must be on curve P-256");
			EVP_PKEY_free(pk);
			return NULL;
		}
		break;
	case EVP_PKEY_ED25519:
		kind = JKEY_ED25519;
		break;
	default:
		snprintf(err, errlen, "key type not supported (RSA, EC P-256 or Ed25519)");
		EVP_PKEY_free(pk);
		return NULL;
	}
	ks = keyset_alloc(1);
	ks->n = 1;
	ks->keys[0].kind = kind;
	ks->keys[0].pkey = pk;
	return ks;
}

struct keyset *
keyset_from_secret(const char *secret)
{
	struct keyset *ks = keyset_alloc(1);

	ks->n = 1;
	ks->keys[0].kind = JKEY_HMAC;
	ks->keys[0].secret_len = strlen(secret);
	ks->keys[0].secret = malloc(ks->keys[0].secret_len + 1);
	QASSERT(ks->keys[0].secret != NULL);
	memcpy(ks->keys[0].secret, secret, ks->keys[0].secret_len + 1);
	return ks;
}

char *
jwks_read_file(const char *path, size_t *len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	size_t n;

	if (!f) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		return NULL;
	}
	buf = malloc(JWKS_MAX_BYTES + 1);
	QASSERT(buf != NULL);
	n = fread(buf, 1, JWKS_MAX_BYTES + 1, f);
	fclose(f);
	if (n > JWKS_MAX_BYTES) {
		snprintf(err, errlen, "%s is larger than 1 MiB", path);
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* ---- the URL source ---------------------------------------------------------------------- */

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;		/* signals the thread (wanted, stop) and the waiters (gen) */
	pthread_t thread;
	int running, stop, wanted, fetching;
	unsigned long gen;		/* fetches finished, good or bad */
	int64_t last_start_ms;		/* monotonic start of the last fetch */
	struct keyset *set;
	char *url;
	long refresh_s, timeout_ms;
} remote = { .mu = PTHREAD_MUTEX_INITIALIZER };

static int64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct fetch_buf {
	char *p;
	size_t n;
	int too_big;
};

static size_t
fetch_write(char *data, size_t size, size_t nmemb, void *cls)
{
	struct fetch_buf *b = cls;
	size_t n = size * nmemb;

	if (b->n + n > JWKS_MAX_BYTES) {
		b->too_big = 1;
		return 0;
	}
	b->p = realloc(b->p, b->n + n + 1);
	QASSERT(b->p != NULL);
	memcpy(b->p + b->n, data, n);
	b->n += n;
	b->p[b->n] = '\0';
	return n;
}

/* One GET of the URL, parsed into a set. NULL with the reason in err. */
static struct keyset *
fetch_once(const char *url, long timeout_ms, char *err, size_t errlen)
{
	CURL *c = curl_easy_init();
	struct fetch_buf b = { 0 };
	struct keyset *ks = NULL;
	long status = 0;
	CURLcode rc;

	if (!c) {
		snprintf(err, errlen, "cannot start an HTTP client");
		return NULL;
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, fetch_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(c, CURLOPT_MAXREDIRS, 3L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (b.too_big)
		snprintf(err, errlen, "answer larger than 1 MiB");
	else if (rc != CURLE_OK)
		snprintf(err, errlen, "fetch failed: %s", curl_easy_strerror(rc));
	else if (status != 200)
		snprintf(err, errlen, "fetch answered HTTP %ld", status);
	else
		ks = keyset_from_jwks(b.p ? b.p : "", b.n, err, errlen);
	free(b.p);
	curl_easy_cleanup(c);
	return ks;
}

static void *
remote_thread(void *arg)
{
	pthread_mutex_lock(&remote.mu);
	while (!remote.stop) {
		struct timespec dl;
		char err[256];
		struct keyset *ks, *old;

		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_sec += remote.refresh_s;
		while (!remote.stop && !remote.wanted)
			if (pthread_cond_timedwait(&remote.cv, &remote.mu, &dl) == ETIMEDOUT)
				break;
		if (remote.stop)
			break;
		remote.wanted = 0;
		remote.fetching = 1;
		remote.last_start_ms = mono_ms();
		pthread_mutex_unlock(&remote.mu);
		ks = fetch_once(remote.url, remote.timeout_ms, err, sizeof(err));
		if (!ks)
			log_warn("JWT_JWKS_URL: refresh failed, keeping the last good keys: %s", err);
		pthread_mutex_lock(&remote.mu);
		old = NULL;
		if (ks) {
			old = remote.set;
			remote.set = ks;
		}
		remote.gen++;
		remote.fetching = 0;
		pthread_cond_broadcast(&remote.cv);
		pthread_mutex_unlock(&remote.mu);
		keyset_unref(old);
		pthread_mutex_lock(&remote.mu);
	}
	pthread_mutex_unlock(&remote.mu);
	return NULL;
}

int
jwks_remote_start(const char *url, long refresh_s, long timeout_ms, char *err, size_t errlen)
{
	pthread_condattr_t ca;
	char why[256];

	curl_global_init(CURL_GLOBAL_DEFAULT);
	remote.url = strdup(url);
	QASSERT(remote.url != NULL);
	remote.refresh_s = refresh_s;
	remote.timeout_ms = timeout_ms;
	remote.last_start_ms = mono_ms();
	remote.set = fetch_once(url, timeout_ms, why, sizeof(why));
	if (!remote.set) {
		snprintf(err, errlen, "JWT_JWKS_URL: %s", why);
		free(remote.url);
		remote.url = NULL;
		return -1;
	}
	pthread_condattr_init(&ca);
	pthread_cond_init(&remote.cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&remote.thread, NULL, remote_thread, NULL) != 0) {
		snprintf(err, errlen, "JWT_JWKS_URL: cannot start the refresh thread");
		return -1;
	}
	remote.running = 1;
	return 0;
}

void
jwks_remote_stop(void)
{
	if (!remote.running)
		return;
	pthread_mutex_lock(&remote.mu);
	remote.stop = 1;
	pthread_cond_broadcast(&remote.cv);
	pthread_mutex_unlock(&remote.mu);
	pthread_join(remote.thread, NULL);
	remote.running = 0;
	keyset_unref(remote.set);
	remote.set = NULL;
	free(remote.url);
	remote.url = NULL;
	curl_global_cleanup();
}

struct keyset *
jwks_remote_get(void)
{
	struct keyset *ks;

	if (!remote.running)
		return NULL;
	pthread_mutex_lock(&remote.mu);
	ks = keyset_ref(remote.set);
	pthread_mutex_unlock(&remote.mu);
	return ks;
}

struct keyset *
jwks_remote_refetch(void)
{
	struct keyset *ks;
	struct timespec dl;
	unsigned long gen;

	if (!remote.running)
		return NULL;
	pthread_mutex_lock(&remote.mu);
	gen = remote.gen;
	if (!remote.wanted && mono_ms() - remote.last_start_ms >= REFETCH_MIN_MS) {
		remote.wanted = 1;
		remote.last_start_ms = mono_ms();	/* throttle the next asker already */
		pthread_cond_broadcast(&remote.cv);
	}
	if (remote.wanted || remote.fetching) {
		/* A fetch is due or running: wait for its end, at most the fetch timeout. */
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_sec += remote.timeout_ms / 1000;
		dl.tv_nsec += (remote.timeout_ms % 1000) * 1000000;
		if (dl.tv_nsec >= 1000000000) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000;
		}
		while (remote.gen == gen && !remote.stop)
			if (pthread_cond_timedwait(&remote.cv, &remote.mu, &dl) == ETIMEDOUT)
				break;
	}
	ks = keyset_ref(remote.set);
	pthread_mutex_unlock(&remote.mu);
	return ks;
}
