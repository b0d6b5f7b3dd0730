/* pcrypt: AES-256-GCM payload envelopes and the encrypted-queue cache.
 *
 * Key invariant: for a queue in the cache, no payload text leaves pcrypt_seal_for unsealed;
 * without a key the push is refused (QE_NO_KEY) rather than stored in plaintext. Keys are
 * read once at start and never logged. The cache is a sorted array of names swapped whole
 * under a read-write lock; the common case, no encrypted queue, costs one atomic load. */
#include "pcrypt.h"
#include "b64.h"
#include "conf.h"
#include "hex.h"
#include "dbpool.h"
#include "jscan.h"
#include "log.h"
#include "qassert.h"

#include <ctype.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define KEY_LEN 32
#define IV_LEN 12
#define TAG_LEN 16
#define MAX_KEYS 16

static unsigned char keys[MAX_KEYS][KEY_LEN];	/* [0] = current, when has_key */
static int nkeys, has_key;

/* Sealing runs for every item pushed to an encrypted queue, so its fixed costs are paid
 * once: the cipher is fetched once, each thread keeps a context keyed once, and IVs are drawn
 * from the CSPRNG 256 at a time (one RAND_bytes call costs as much as the whole encryption of
 * a 1 KiB payload; every IV is still random and used once). */
#define IV_POOL 256

struct sealer {
	EVP_CIPHER_CTX *ctx;
	int left;			/* unused IVs at the end of ivs */
	unsigned char ivs[IV_POOL * IV_LEN];
};

static EVP_CIPHER *gcm;
static pthread_key_t sealer_key;
static pthread_once_t sealer_once = PTHREAD_ONCE_INIT;

static void
sealer_free(void *p)
{
	struct sealer *s = p;

	EVP_CIPHER_CTX_free(s->ctx);
	OPENSSL_cleanse(s->ivs, sizeof(s->ivs));
	free(s);
}

static void
sealer_key_make(void)
{
	QASSERT(pthread_key_create(&sealer_key, sealer_free) == 0);
}

/* This thread's sealer, its context keyed with the current key; NULL on an OpenSSL failure. */
static struct sealer *
sealer_get(void)
{
	struct sealer *s;

	pthread_once(&sealer_once, sealer_key_make);
	s = pthread_getspecific(sealer_key);
	if (s)
		return s;
	s = calloc(1, sizeof(*s));
	QASSERT(s != NULL);
	s->ctx = EVP_CIPHER_CTX_new();
	if (!s->ctx || EVP_EncryptInit_ex(s->ctx, gcm, NULL, keys[0], NULL) != 1) {
		sealer_free(s);
		return NULL;
	}
	pthread_setspecific(sealer_key, s);
	return s;
}

/* The next unused random IV of this thread's pool. */
static const unsigned char *
next_iv(struct sealer *s)
{
	if (s->left == 0) {
		if (RAND_bytes(s->ivs, sizeof(s->ivs)) != 1)
			return NULL;
		s->left = IV_POOL;
	}
	s->left--;
	return s->ivs + (size_t)s->left * IV_LEN;
}

static pthread_rwlock_t set_lock = PTHREAD_RWLOCK_INITIALIZER;
static char **set_names;
static size_t set_n;
static _Atomic size_t set_count;

static void
parse_key(const char *hex, unsigned char *out)
{
	for (int i = 0; i < KEY_LEN; i++)
		out[i] = (unsigned char)(hex_digit((unsigned char)hex[2 * i]) * 16 +
					 hex_digit((unsigned char)hex[2 * i + 1]));
}

void
pcrypt_start(void)
{
	const char *p = qconf.encryption_key_previous;

	nkeys = 0;
	gcm = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL);
	QASSERT(gcm != NULL);
	has_key = qconf.encryption_key[0] != '\0';
	if (has_key)
		parse_key(qconf.encryption_key, keys[nkeys++]);
	else
		nkeys = 1;	/* slot 0 stays unused: previous keys start at 1 */
	while (*p && nkeys < MAX_KEYS) {
		while (*p == ',' || isspace((unsigned char)*p))
			p++;
		if (!*p)
			break;
		parse_key(p, keys[nkeys++]);	/* conf checked: 64 hex characters */
		p += 64;
	}
}

void
pcrypt_stop(void)
{
	OPENSSL_cleanse(keys, sizeof(keys));
	EVP_CIPHER_free(gcm);
	gcm = NULL;
	pthread_rwlock_wrlock(&set_lock);
	for (size_t i = 0; i < set_n; i++)
		free(set_names[i]);
	free(set_names);
	set_names = NULL;
	set_n = 0;
	atomic_store(&set_count, 0);
	pthread_rwlock_unlock(&set_lock);
}

int
pcrypt_has_key(void)
{
	return has_key;
}

/* ---- the encrypted-queue cache ---------------------------------------------------------- */

static int
cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void
set_replace(char **names, size_t n)
{
	char **old;
	size_t oldn;

	qsort(names, n, sizeof(*names), cmp_name);
	pthread_rwlock_wrlock(&set_lock);
	old = set_names;
	oldn = set_n;
	set_names = names;
	set_n = n;
	atomic_store(&set_count, n);
	pthread_rwlock_unlock(&set_lock);
	for (size_t i = 0; i < oldn; i++)
		free(old[i]);
	free(old);
}

static int
is_encrypted(const char *queue)
{
	int found;

	if (atomic_load_explicit(&set_count, memory_order_relaxed) == 0)
		return 0;
	pthread_rwlock_rdlock(&set_lock);
	found = set_n && bsearch(&queue, set_names, set_n, sizeof(*set_names), cmp_name) != NULL;
	pthread_rwlock_unlock(&set_lock);
	return found;
}

void
pcrypt_refresh(struct dbconn *db)
{
	PGresult *res;
	char **names;
	int n;

	if (db_exec(db, SQL_ENCRYPTED_QUEUES, NULL, &res) != QE_OK)
		return;
	n = PQntuples(res);
	names = calloc((size_t)n + 1, sizeof(*names));
	QASSERT(names != NULL);
	for (int i = 0; i < n; i++) {
		names[i] = strdup(PQgetvalue(res, i, 0));
		QASSERT(names[i] != NULL);
	}
	PQclear(res);
	set_replace(names, (size_t)n);
}

void
pcrypt_note(const char *queue, int encrypted)
{
	char **names;
	size_t n = 0;

	if (is_encrypted(queue) == !!encrypted)
		return;
	pthread_rwlock_rdlock(&set_lock);
	names = calloc(set_n + 2, sizeof(*names));
	QASSERT(names != NULL);
	for (size_t i = 0; i < set_n; i++) {
		if (strcmp(set_names[i], queue) == 0)
			continue;
		names[n] = strdup(set_names[i]);
		QASSERT(names[n] != NULL);
		n++;
	}
	pthread_rwlock_unlock(&set_lock);
	if (encrypted) {
		names[n] = strdup(queue);
		QASSERT(names[n] != NULL);
		n++;
	}
	set_replace(names, n);
}

/* ---- sealing ---------------------------------------------------------------------------- */

static void
add_b64(struct strbuf *sb, const unsigned char *p, size_t n)
{
	size_t need = 4 * ((n + 2) / 3) + 1;

	sb_reserve(sb, need);
	sb->len += (size_t)EVP_EncodeBlock((unsigned char *)sb->buf + sb->len, p, (int)n);
	sb->buf[sb->len] = '\0';
}

enum qe
pcrypt_seal_for(const char *queue, const char *payload, size_t len, char **sealed)
{
	unsigned char tag[TAG_LEN], *ct = NULL;
	const unsigned char *iv = NULL;
	EVP_CIPHER_CTX *ctx = NULL;
	struct sealer *sl;
	struct strbuf sb;
	int outl = 0, fin = 0;
	enum qe e = QE_INTERNAL;

	*sealed = NULL;
	if (!is_encrypted(queue))
		return QE_OK;
	if (!has_key)
		return QE_NO_KEY;
	ct = malloc(len + 16);
	QASSERT(ct != NULL);
	sl = sealer_get();
	ctx = sl ? sl->ctx : NULL;
	iv = sl ? next_iv(sl) : NULL;
	if (!ctx || !iv || EVP_EncryptInit_ex(ctx, NULL, NULL, NULL, iv) != 1 ||
	    EVP_EncryptUpdate(ctx, ct, &outl, (const unsigned char *)payload, (int)len) != 1 ||
	    EVP_EncryptFinal_ex(ctx, ct + outl, &fin) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG_LEN, tag) != 1)
		goto out;
	sb_init(&sb);
	sb_reserve(&sb, 4 * (len / 3) + 96);
	sb_adds(&sb, "{\"encrypted\":\"");
	add_b64(&sb, ct, (size_t)(outl + fin));
	sb_adds(&sb, "\",\"iv\":\"");
	add_b64(&sb, iv, IV_LEN);
	sb_adds(&sb, "\",\"authTag\":\"");
	add_b64(&sb, tag, TAG_LEN);
	sb_adds(&sb, "\"}");
	*sealed = sb_steal(&sb, NULL);
	e = QE_OK;
out:
	free(ct);
	return e;
}

/* ---- revealing --------------------------------------------------------------------------
 *
 * On the text, with the scanner: the plaintext goes back to the reader exactly as it was
 * sealed, as a plain queue returns its payload. Parsing it into a tree and printing it again
 * would cost every read a parse and turn what the tree cannot hold (an integer past 64 bits,
 * a repeated key) into a failure to reveal, or into another payload. */

/* An envelope's decoded fields; ct is malloc'd. close: the offset of its closing brace. */
struct envelope {
	unsigned char *ct, iv[IV_LEN + 3], tag[TAG_LEN + 5];
	long ctl, ivl, tagl;
	size_t close;
};

/* Decodes the base64 string value at the scanner: into fixed (cap bytes) when given, else
 * into a new *out. The decoded length, or -1. A string without escapes (as base64 always
 * is when written by a broker) is decoded from the text itself, read once. */
static long
b64_value(struct jscan *s, unsigned char *fixed, size_t cap, unsigned char **out)
{
	struct jscan whole = *s;
	const char *span, *text;
	char *copy = NULL;
	size_t raw, n;
	long len = -1;

	if (js_peek(s) != JS_STRING || js_skip(&whole, &span, &raw) < 0)
		return -1;
	if (!memchr(span + 1, '\\', raw - 2)) {
		text = span + 1;
		n = raw - 2;
		*s = whole;
	} else {
		copy = malloc(raw);
		QASSERT(copy != NULL);
		if (js_string(s, copy, &n) < 0) {
			free(copy);
			return -1;
		}
		text = copy;
	}
	if (!fixed) {
		*out = malloc(n / 4 * 3 + 3);
		QASSERT(*out != NULL);
		fixed = *out;
		cap = n / 4 * 3 + 3;
	}
	/* b64_decode writes up to n / 4 * 3 + 3 bytes. */
	if (n / 4 * 3 + 3 <= cap)
		len = b64_decode(text, n, fixed, B64_LENIENT);
	free(copy);
	return len;
}

/* 1 when text[0..n) is exactly one envelope object {"encrypted", "iv", "authTag"} of base64
 * strings, each once and nothing else, its fields decoded into e (the caller frees e->ct). */
static int
parse_envelope(const char *text, size_t n, struct envelope *e)
{
	static const char *const names[] = { "encrypted", "iv", "authTag" };
	struct jscan s;
	char key[16];
	size_t klen;
	int first = 1, seen = 0, rc, k;

	memset(e, 0, sizeof(*e));
	js_init(&s, text, n);
	if (js_peek(&s) != JS_OBJECT || js_begin(&s, '{') < 0)
		return 0;
	while ((rc = js_next(&s, '}', &first, key, sizeof(key), &klen)) == 1) {
		for (k = 0; k < 3 && !js_key_is(key, klen, names[k]); k++)
			;
		if (k == 3 || (seen & (1 << k)))
			break;
		seen |= 1 << k;
		if (k == 0)
			e->ctl = b64_value(&s, NULL, 0, &e->ct);
		else if (k == 1)
			e->ivl = b64_value(&s, e->iv, sizeof(e->iv), NULL);
		else
			e->tagl = b64_value(&s, e->tag, sizeof(e->tag), NULL);
		if ((k == 0 ? e->ctl : k == 1 ? e->ivl : e->tagl) < 0)
			break;
	}
	e->close = (size_t)(s.p - text) - 1;
	if (rc == 0 && seen == 7 && js_end(&s) == 0)
		return 1;
	free(e->ct);
	e->ct = NULL;
	return 0;
}

/* Opens an envelope with any configured key: the plaintext (malloc'd), or NULL when no key
 * opens it or what it holds is not one JSON value. */
static char *
open_envelope(const struct envelope *e, size_t *plen)
{
	char *plain;
	struct jscan s;

	if (e->ivl != IV_LEN || e->tagl != TAG_LEN)
		return NULL;
	plain = malloc((size_t)e->ctl + 1);
	QASSERT(plain != NULL);
	for (int k = has_key ? 0 : 1; k < nkeys; k++) {
		EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
		int outl = 0, fin = 0, ok;

		ok = ctx && EVP_DecryptInit_ex(ctx, gcm, NULL, keys[k], e->iv) == 1 &&
		     EVP_DecryptUpdate(ctx, (unsigned char *)plain, &outl, e->ct, (int)e->ctl) == 1 &&
		     EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG_LEN,
					 (void *)e->tag) == 1 &&
		     EVP_DecryptFinal_ex(ctx, (unsigned char *)plain + outl, &fin) == 1;
		EVP_CIPHER_CTX_free(ctx);
		if (!ok)
			continue;
		*plen = (size_t)(outl + fin);
		js_init(&s, plain, *plen);
		if (js_skip(&s, NULL, NULL) < 0 || js_end(&s) < 0)
			break;
		return plain;
	}
	free(plain);
	return NULL;
}

/* Appends the revealed form of the envelope text: its plaintext, or the envelope marked
 * "isEncrypted":true when no key opens it. Frees e->ct. */
static void
add_revealed(struct strbuf *sb, const char *text, struct envelope *e)
{
	size_t plen = 0;
	char *plain = open_envelope(e, &plen);

	if (plain) {
		sb_add(sb, plain, plen);
	} else {
		sb_add(sb, text, e->close);
		sb_adds(sb, ",\"isEncrypted\":true}");
	}
	free(plain);
	free(e->ct);
	e->ct = NULL;
}

/* 1 when the text at p (an object's '{') starts with a key of an envelope. An envelope holds
 * those three keys and no other, so anything else is not one: a payload is looked at no
 * further than its first key, and a document walk reads only envelopes whole. */
static int
may_be_envelope(const char *p, const char *end)
{
	static const char *const first[] = { "\"encrypted\"", "\"iv\"", "\"authTag\"" };

	if (p >= end || *p++ != '{')
		return 0;
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	for (int k = 0; k < 3; k++)
		if ((size_t)(end - p) >= strlen(first[k]) &&
		    memcmp(p, first[k], strlen(first[k])) == 0)
			return 1;
	return 0;
}

void
pcrypt_reveal_sb(struct strbuf *sb, const char *text, size_t len)
{
	struct envelope e;

	if (!may_be_envelope(text, text + len) || !parse_envelope(text, len, &e)) {
		sb_add(sb, text, len);
		return;
	}
	add_revealed(sb, text, &e);
}

/* Payloads sit a few levels down in a read view's document (messages[i].data); deeper
 * values are user data, walked no further. */
#define REVEAL_DEPTH 16

/* Walks the value at the scanner: every envelope found is appended to out in revealed form,
 * after the text of the document from *copied up to it. 0, or -1 on invalid JSON. */
static int
reveal_walk(struct jscan *s, struct strbuf *out, const char **copied, int depth)
{
	enum js_type t = js_peek(s);
	int first = 1, rc;

	if ((t != JS_OBJECT && t != JS_ARRAY) || depth >= REVEAL_DEPTH)
		return js_skip(s, NULL, NULL);
	if (t == JS_OBJECT && may_be_envelope(s->p, s->end)) {
		struct jscan whole = *s;
		struct envelope e;
		const char *span;
		size_t len;

		if (js_skip(&whole, &span, &len) < 0)
			return -1;
		if (parse_envelope(span, len, &e)) {
			sb_add(out, *copied, (size_t)(span - *copied));
			add_revealed(out, span, &e);
			*copied = span + len;
			*s = whole;
			return 0;
		}
	}
	if (js_begin(s, t == JS_OBJECT ? '{' : '[') < 0)
		return -1;
	while ((rc = js_next(s, t == JS_OBJECT ? '}' : ']', &first, NULL, 0, NULL)) == 1)
		if (reveal_walk(s, out, copied, depth + 1) < 0)
			return -1;
	return rc;
}

void
pcrypt_reveal_doc(char **json, size_t *len)
{
	struct strbuf out;
	struct jscan s;
	const char *copied;

	if (!*json || !strstr(*json, "\"encrypted\""))
		return;
	sb_init(&out);
	copied = *json;
	js_init(&s, *json, *len);
	if (reveal_walk(&s, &out, &copied, 0) < 0 || js_end(&s) < 0 || copied == *json) {
		sb_free(&out);
		return;
	}
	sb_add(&out, copied, (size_t)(*json + *len - copied));
	free(*json);
	*json = sb_steal(&out, len);
}
