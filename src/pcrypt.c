/* pcrypt: AES-256-GCM payload envelopes and the encrypted-queue cache.
 *
 * Key invariant: for a queue in the cache, no payload text leaves pcrypt_seal_for unsealed;
 * without a key the push is refused (QE_NO_KEY) rather than stored in plaintext. Keys are
 * read once at start and never logged. The cache is a sorted array of names swapped whole
 * under a read-write lock; the common case, no encrypted queue, costs one atomic load. */
#include "pcrypt.h"
#include "conf.h"
#include "dbpool.h"
#include "log.h"
#include "qassert.h"

#include <ctype.h>
#include <jansson.h>
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

static int
hexval(int c)
{
	return isdigit(c) ? c - '0' : tolower(c) - 'a' + 10;
}

static void
parse_key(const char *hex, unsigned char *out)
{
	for (int i = 0; i < KEY_LEN; i++)
		out[i] = (unsigned char)(hexval((unsigned char)hex[2 * i]) * 16 +
					 hexval((unsigned char)hex[2 * i + 1]));
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

/* ---- revealing -------------------------------------------------------------------------- */

/* Standard base64 of a JSON string member into a new buffer; -1 when not valid. */
static long
b64_member(const json_t *o, const char *k, unsigned char **out)
{
	const json_t *v = json_object_get(o, k);
	size_t n = json_string_length(v);
	const char *s = json_string_value(v);
	int len;

	if (!s || n % 4 || n > (size_t)1 << 30)
		return -1;
	*out = malloc(n / 4 * 3 + 1);
	QASSERT(*out != NULL);
	len = EVP_DecodeBlock(*out, (const unsigned char *)s, (int)n);
	if (len < 0) {
		free(*out);
		*out = NULL;
		return -1;
	}
	/* EVP_DecodeBlock counts the padding as zero bytes. */
	if (n && s[n - 1] == '=')
		len--;
	if (n > 1 && s[n - 2] == '=')
		len--;
	return len;
}

static int
is_envelope(const json_t *o)
{
	return json_is_object(o) && json_object_size(o) == 3 &&
	       json_is_string(json_object_get(o, "encrypted")) &&
	       json_is_string(json_object_get(o, "iv")) &&
	       json_is_string(json_object_get(o, "authTag"));
}

/* Opens an envelope with any configured key: the plaintext (malloc'd, NUL-terminated), or
 * NULL when no key opens it. */
static char *
open_envelope(const json_t *env, size_t *plen)
{
	unsigned char *ct = NULL, *iv = NULL, *tag = NULL;
	long ctl = b64_member(env, "encrypted", &ct), ivl = b64_member(env, "iv", &iv);
	long tagl = b64_member(env, "authTag", &tag);
	char *plain = NULL;

	if (ctl < 0 || ivl != IV_LEN || tagl != TAG_LEN)
		goto out;
	plain = malloc((size_t)ctl + 1);
	QASSERT(plain != NULL);
	for (int k = has_key ? 0 : 1; k < nkeys; k++) {
		EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
		int outl = 0, fin = 0, ok;

		ok = ctx && EVP_DecryptInit_ex(ctx, gcm, NULL, keys[k], iv) == 1 &&
		     EVP_DecryptUpdate(ctx, (unsigned char *)plain, &outl, ct, (int)ctl) == 1 &&
		     EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG_LEN, tag) == 1 &&
		     EVP_DecryptFinal_ex(ctx, (unsigned char *)plain + outl, &fin) == 1;
		EVP_CIPHER_CTX_free(ctx);
		if (ok) {
			plain[outl + fin] = '\0';
			*plen = (size_t)(outl + fin);
			goto out;
		}
	}
	free(plain);
	plain = NULL;
out:
	free(ct);
	free(iv);
	free(tag);
	return plain;
}

/* The revealed value of an envelope: its plaintext as JSON, or a copy marked isEncrypted. */
static json_t *
reveal_value(json_t *env)
{
	size_t plen = 0;
	char *plain = open_envelope(env, &plen);
	json_t *v = plain ? json_loadb(plain, plen, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL) : NULL;

	free(plain);
	if (!v) {
		v = json_deep_copy(env);
		json_object_set_new(v, "isEncrypted", json_true());
	}
	return v;
}

static int
walk(json_t *j)
{
	int changed = 0;

	if (json_is_object(j)) {
		const char *k;
		json_t *v;

		json_object_foreach(j, k, v) {
			if (is_envelope(v)) {
				json_object_set_new(j, k, reveal_value(v));
				changed = 1;
			} else {
				changed |= walk(v);
			}
		}
	} else if (json_is_array(j)) {
		for (size_t i = 0; i < json_array_size(j); i++) {
			json_t *v = json_array_get(j, i);

			if (is_envelope(v)) {
				json_array_set_new(j, i, reveal_value(v));
				changed = 1;
			} else {
				changed |= walk(v);
			}
		}
	}
	return changed;
}

void
pcrypt_reveal_sb(struct strbuf *sb, const char *text)
{
	json_t *env;
	char *out;

	if (text[0] != '{' || !strstr(text, "\"encrypted\"")) {
		sb_adds(sb, text);
		return;
	}
	env = json_loads(text, JSON_ALLOW_NUL, NULL);
	if (!is_envelope(env)) {
		json_decref(env);
		sb_adds(sb, text);
		return;
	}
	{
		json_t *v = reveal_value(env);

		out = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		json_decref(v);
	}
	json_decref(env);
	QASSERT(out != NULL);
	sb_adds(sb, out);
	free(out);
}

void
pcrypt_reveal_doc(char **json, size_t *len)
{
	json_t *doc;
	char *out;

	if (!*json || !strstr(*json, "\"encrypted\""))
		return;
	doc = json_loadb(*json, *len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
	if (!doc)
		return;
	if (walk(doc)) {
		out = json_dumps(doc, JSON_COMPACT | JSON_ENCODE_ANY);
		QASSERT(out != NULL);
		free(*json);
		*json = out;
		*len = strlen(out);
	}
	json_decref(doc);
}
