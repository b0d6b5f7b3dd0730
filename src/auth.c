/* auth: the authentication decision, the route levels and the refusal counters.
 *
 * Key invariant: a request is served only after auth_authenticate passed it and auth_allows
 * accepted its route's level; with JWT off both pass everything except what protected mode
 * refuses. Nothing here logs a token, a secret or a key: refusals are counted, not described. */
#include "auth.h"
#include "conf.h"
#include "jwks.h"
#include "jwt.h"
#include "log.h"
#include "qassert.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#define ALL_GRANTS (1u << AUTH_READ | 1u << AUTH_WRITE | 1u << AUTH_RW | 1u << AUTH_ADMIN)

enum { ROLE_ADMIN, ROLE_RW, ROLE_RO, ROLE_WO, ROLE__COUNT };

static const unsigned role_grants[ROLE__COUNT] = {
	[ROLE_ADMIN] = ALL_GRANTS,
	[ROLE_RW] = 1u << AUTH_READ | 1u << AUTH_WRITE | 1u << AUTH_RW,
	[ROLE_RO] = 1u << AUTH_READ,
	[ROLE_WO] = 1u << AUTH_WRITE,
};

/* Everything a verification reads, immutable once published. */
struct snap {
	int refs;			/* atomic */
	enum jwt_alg fixed;		/* JWT_ALG_UNKNOWN: auto */
	struct keyset *sets[3];		/* JWT_SECRET, JWT_PUBLIC_KEY, JWT_JWKS_FILE (each optional) */
	char *skip;			/* JWT_SKIP_PATHS */
	int64_t skew;
	char *issuer, *audience, *role_claim, *roles_claim, *roles[ROLE__COUNT];
};

static struct {
	pthread_mutex_t mu;
	struct snap *cur;
	int enabled, protect, remote;
	_Atomic uint64_t refused[AUTH_REFUSAL__COUNT];
} A = { .mu = PTHREAD_MUTEX_INITIALIZER };

static const char *const refusal_names[AUTH_REFUSAL__COUNT] = {
	[AUTH_PASS] = "pass", [AUTH_MISSING] = "missing", [AUTH_INVALID] = "invalid",
	[AUTH_EXPIRED] = "expired", [AUTH_FORBIDDEN] = "forbidden", [AUTH_PROTECTED] = "protected",
};

const char *
auth_refusal_name(enum auth_refusal why)
{
	QASSERT(why >= 0 && why < AUTH_REFUSAL__COUNT);
	return refusal_names[why];
}

void
auth_count(enum auth_refusal why)
{
	if (why > AUTH_PASS && why < AUTH_REFUSAL__COUNT)
		atomic_fetch_add_explicit(&A.refused[why], 1, memory_order_relaxed);
}

void
auth_counts(uint64_t out[AUTH_REFUSAL__COUNT])
{
	for (int i = 0; i < AUTH_REFUSAL__COUNT; i++)
		out[i] = atomic_load_explicit(&A.refused[i], memory_order_relaxed);
}

static void
snap_unref(struct snap *s)
{
	if (!s || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	for (size_t i = 0; i < ARRAY_LEN(s->sets); i++)
		keyset_unref(s->sets[i]);
	free(s->skip);
	free(s->issuer);
	free(s->audience);
	free(s->role_claim);
	free(s->roles_claim);
	for (int i = 0; i < ROLE__COUNT; i++)
		free(s->roles[i]);
	free(s);
}

static struct snap *
snap_get(void)
{
	struct snap *s;

	pthread_mutex_lock(&A.mu);
	s = A.cur;
	if (s)
		__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&A.mu);
	return s;
}

static char *
xstrdup(const char *s)
{
	char *d = strdup(s ? s : "");

	QASSERT(d != NULL);
	return d;
}

/* JWT_PUBLIC_KEY: PEM text (a config file line may spell its newlines "\n"), or @path. */
static struct keyset *
load_public_key(const char *v, char *err, size_t errlen)
{
	char why[256], *text;
	size_t len;
	struct keyset *ks;

	if (v[0] == '@') {
		text = jwks_read_file(v + 1, &len, why, sizeof(why));
		if (!text) {
			snprintf(err, errlen, "JWT_PUBLIC_KEY: %s", why);
			return NULL;
		}
	} else {
		char *o;

		text = xstrdup(v);
		o = text;
		for (const char *p = v; *p; p++) {
			if (p[0] == '\\' && p[1] == 'n') {
				*o++ = '\n';
				p++;
			} else {
				*o++ = *p;
			}
		}
		*o = '\0';
		len = (size_t)(o - text);
	}
	ks = keyset_from_pem(text, len, why, sizeof(why));
	free(text);
	if (!ks)
		snprintf(err, errlen, "JWT_PUBLIC_KEY: %s", why);
	return ks;
}

static struct keyset *
load_jwks_file(const char *path, char *err, size_t errlen)
{
	char why[256], *text;
	size_t len;
	struct keyset *ks;

	text = jwks_read_file(path, &len, why, sizeof(why));
	if (!text) {
		snprintf(err, errlen, "JWT_JWKS_FILE: %s", why);
		return NULL;
	}
	ks = keyset_from_jwks(text, len, why, sizeof(why));
	free(text);
	if (!ks)
		snprintf(err, errlen, "JWT_JWKS_FILE: %s: %s", path, why);
	return ks;
}

static int
set_has_kind(const struct keyset *ks, enum jkey_kind kind)
{
	for (size_t i = 0; ks && i < ks->n; i++)
		if (ks->keys[i].kind == kind)
			return 1;
	return 0;
}

/* A new snapshot from qconf, or NULL with the reason (naming the variable) in err. */
static struct snap *
snap_build(char *err, size_t errlen)
{
	struct snap *s = calloc(1, sizeof(*s));

	QASSERT(s != NULL);
	s->refs = 1;
	s->fixed = jwt_alg_from_name(qconf.jwt_algorithm);	/* "auto" -> unknown */
	if (qconf.jwt_secret[0])
		s->sets[0] = keyset_from_secret(qconf.jwt_secret);
	if (qconf.jwt_public_key[0] &&
	    !(s->sets[1] = load_public_key(qconf.jwt_public_key, err, errlen)))
		goto fail;
	if (qconf.jwt_jwks_file[0] && !(s->sets[2] = load_jwks_file(qconf.jwt_jwks_file, err,
								     errlen)))
		goto fail;
	if (s->fixed != JWT_ALG_UNKNOWN && !A.remote) {
		enum jkey_kind need = jwt_alg_kind(s->fixed);
		int have = 0;

		for (size_t i = 0; i < ARRAY_LEN(s->sets); i++)
			have |= set_has_kind(s->sets[i], need);
		if (!have) {
			snprintf(err, errlen, "JWT_ALGORITHM: %s needs %s", jwt_alg_name(s->fixed),
				 need == JKEY_HMAC ? "JWT_SECRET (or an oct key in a JWKS)"
						   : "a matching JWT_PUBLIC_KEY or a JWKS");
			goto fail;
		}
	}
	s->skip = xstrdup(qconf.jwt_skip_paths);
	s->skew = qconf.jwt_clock_skew;
	s->issuer = xstrdup(qconf.jwt_issuer);
	s->audience = xstrdup(qconf.jwt_audience);
	s->role_claim = xstrdup(qconf.jwt_roles_claim);
	s->roles_claim = xstrdup(qconf.jwt_roles_array_claim);
	s->roles[ROLE_ADMIN] = xstrdup(qconf.jwt_role_admin);
	s->roles[ROLE_RW] = xstrdup(qconf.jwt_role_read_write);
	s->roles[ROLE_RO] = xstrdup(qconf.jwt_role_read_only);
	s->roles[ROLE_WO] = xstrdup(qconf.jwt_role_write_only);
	return s;
fail:
	snap_unref(s);
	return NULL;
}

int
auth_host_is_loopback(const char *host)
{
	struct in_addr a;

	return inet_pton(AF_INET, host, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

int
auth_start(char *err, size_t errlen)
{
	A.enabled = qconf.jwt_enabled;
	A.protect = !qconf.jwt_enabled && qconf.protected_mode &&
		    !auth_host_is_loopback(qconf.host);
	if (A.protect)
		log_warn("protected mode: JWT authentication is off and the broker listens on %s: "
			 "requests from non-loopback peers get 403; enable JWT authentication or "
			 "set QUEEN_PROTECTED_MODE=off", qconf.host);
	if (!A.enabled)
		return 0;
	if (qconf.jwt_jwks_url[0]) {
		if (jwks_remote_start(qconf.jwt_jwks_url, (long)qconf.jwt_jwks_refresh_interval,
				      (long)qconf.jwt_jwks_timeout_ms, err, errlen) < 0)
			return -1;
		A.remote = 1;
	}
	A.cur = snap_build(err, errlen);
	if (!A.cur) {
		jwks_remote_stop();
		A.remote = 0;
		return -1;
	}
	log_info("JWT authentication on (algorithm %s)", qconf.jwt_algorithm);
	return 0;
}

void
auth_stop(void)
{
	if (A.remote)
		jwks_remote_stop();
	A.remote = 0;
	pthread_mutex_lock(&A.mu);
	snap_unref(A.cur);
	A.cur = NULL;
	pthread_mutex_unlock(&A.mu);
}

void
auth_reload(void)
{
	char err[512];
	struct snap *s, *old;

	if (!A.enabled)
		return;
	s = snap_build(err, sizeof(err));
	if (!s) {
		log_error("reload: keeping the running JWT keys: %s", err);
		return;
	}
	pthread_mutex_lock(&A.mu);
	old = A.cur;
	A.cur = s;
	pthread_mutex_unlock(&A.mu);
	snap_unref(old);
	log_info("JWT keys and role names reloaded");
}

static int
is_skipped(const char *skip, const char *path)
{
	size_t plen = strlen(path);

	for (const char *p = skip; *p;) {
		size_t n = strcspn(p, ",");
		const char *e = p + n;

		while (p < e && isspace((unsigned char)*p))
			p++;
		while (e > p && isspace((unsigned char)e[-1]))
			e--;
		if ((size_t)(e - p) == plen && plen && memcmp(p, path, plen) == 0)
			return 1;
		p += n;
		if (*p == ',')
			p++;
	}
	return 0;
}

static int
peer_is_loopback(const struct sockaddr *sa)
{
	if (!sa)
		return 0;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;

		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
		const uint8_t *b = in6->sin6_addr.s6_addr;

		return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) ||
		       (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && b[12] == 127);
	}
	return sa->sa_family == AF_UNIX;
}

/* Verifies t with the keys of ks that may have signed it: 1 when one did. */
static int
try_set(const struct keyset *ks, const struct jwt *t, int *kid_seen)
{
	enum jkey_kind kind = jwt_alg_kind(t->alg);

	for (size_t i = 0; ks && i < ks->n; i++) {
		const struct jkey *k = &ks->keys[i];

		if (k->kind != kind)
			continue;
		if (t->kid[0] && k->kid) {
			if (strcmp(k->kid, t->kid) != 0)
				continue;
			*kid_seen = 1;
		}
		if (jwt_verify(t, k) == JWT_OK)
			return 1;
	}
	return 0;
}

static int
verify_any(const struct snap *s, const struct jwt *t)
{
	struct keyset *remote;
	int kid_seen = 0, ok = 0;

	for (size_t i = 0; i < ARRAY_LEN(s->sets) && !ok; i++)
		ok = try_set(s->sets[i], t, &kid_seen);
	if (ok || !A.remote)
		return ok;
	remote = jwks_remote_get();
	ok = try_set(remote, t, &kid_seen);
	keyset_unref(remote);
	if (!ok && t->kid[0] && !kid_seen) {
		/* A kid no set knows: perhaps the issuer rotated. Refetch (throttled) and retry. */
		remote = jwks_remote_refetch();
		ok = try_set(remote, t, &kid_seen);
		keyset_unref(remote);
	}
	return ok;
}

static unsigned
grants_of(const struct snap *s, const json_t *claims)
{
	const json_t *role = json_object_get(claims, s->role_claim);
	const json_t *roles = json_object_get(claims, s->roles_claim), *v;
	unsigned g = 0;
	size_t i;

	/* A role claim that is not a string counts as no role (SPEC 17 Decided). */
	for (int k = 0; k < ROLE__COUNT; k++) {
		if (json_is_string(role) && strcmp(json_string_value(role), s->roles[k]) == 0)
			g |= role_grants[k];
		if (json_is_array(roles))
			json_array_foreach(roles, i, v)
				if (json_is_string(v) && strcmp(json_string_value(v), s->roles[k]) == 0)
					g |= role_grants[k];
	}
	return g;
}

static enum auth_refusal
check_token(const char *tok, size_t len, struct auth_id *id)
{
	struct snap *s = snap_get();
	struct jwt t;
	struct jwt_claim_rules rules;
	enum jwt_verdict v;
	enum auth_refusal out = AUTH_INVALID;
	const json_t *sub;

	if (!s)
		return AUTH_INVALID;
	if (jwt_parse(tok, len, &t) != JWT_OK)
		goto out_snap;
	if ((s->fixed != JWT_ALG_UNKNOWN && t.alg != s->fixed) || !verify_any(s, &t))
		goto out;
	rules.now = (int64_t)time(NULL);
	rules.skew = s->skew;
	rules.issuer = s->issuer;
	rules.audience = s->audience;
	v = jwt_check_claims(t.claims, &rules);
	if (v == JWT_EXPIRED || v == JWT_NOT_YET_VALID) {
		id->not_yet = v == JWT_NOT_YET_VALID;
		out = AUTH_EXPIRED;
		goto out;
	}
	if (v != JWT_OK)
		goto out;
	id->grants = grants_of(s, t.claims);
	sub = json_object_get(t.claims, "sub");
	if (json_is_string(sub) && strlen(json_string_value(sub)) == json_string_length(sub))
		id->sub = xstrdup(json_string_value(sub));
	out = AUTH_PASS;
out:
	jwt_clear(&t);
out_snap:
	snap_unref(s);
	return out;
}

enum auth_refusal
auth_authenticate(const char *path, const char *authz, const struct sockaddr *peer,
		  struct auth_id *id)
{
	struct snap *s;
	const char *tok, *end;
	int skipped;

	memset(id, 0, sizeof(*id));
	if (!A.enabled) {
		/* Protected mode spares /health: load balancers probe it from anywhere. */
		if (A.protect && strcmp(path, "/health") != 0 && !peer_is_loopback(peer))
			return AUTH_PROTECTED;
		id->grants = ALL_GRANTS;
		return AUTH_PASS;
	}
	s = snap_get();
	skipped = s && is_skipped(s->skip, path);
	snap_unref(s);
	if (skipped) {
		id->grants = ALL_GRANTS;
		return AUTH_PASS;
	}
	if (!authz)
		return AUTH_MISSING;
	tok = authz;
	while (*tok == ' ' || *tok == '\t')
		tok++;
	if (strncasecmp(tok, "Bearer", 6) == 0 && (tok[6] == ' ' || tok[6] == '\t')) {
		tok += 7;
		while (*tok == ' ' || *tok == '\t')
			tok++;
	}
	if (strcasecmp(tok, "Bearer") == 0)
		return AUTH_MISSING;
	end = tok + strlen(tok);
	while (end > tok && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	if (end == tok)
		return AUTH_MISSING;
	return check_token(tok, (size_t)(end - tok), id);
}

int
auth_allows(const struct auth_id *id, enum auth_level lv)
{
	return (id->grants & (1u << lv)) != 0;
}

void
auth_id_clear(struct auth_id *id)
{
	free(id->sub);
	memset(id, 0, sizeof(*id));
}
