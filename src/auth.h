/* auth: who may do what (SPEC 17): bearer-token authentication, the route levels, protected
 * mode, and the counters of refusals by reason.
 *
 * The decision has two steps so that authentication comes before routing: auth_authenticate
 * runs on every request (skip list, protected mode, token) and yields an identity; once the
 * route is known, auth_allows checks its level against the identity's grants. The key
 * material lives in an immutable, reference-counted snapshot; a SIGHUP (auth_reload) builds a
 * new one and swaps it in, keeping the old one when the new key files are bad.
 *
 * Thread context: auth_start/auth_reload/auth_stop in main; the rest in any thread. */
#ifndef QUEEN_AUTH_H
#define QUEEN_AUTH_H

#include <stddef.h>
#include <stdint.h>

struct sockaddr;

/* A route's level (router.c declares one per route). */
enum auth_level {
	AUTH_READ = 1,	/* read-only: GETs of resources, status, messages, groups, dlq, kv */
	AUTH_WRITE,	/* write-only: POST push, timers */
	AUTH_RW,	/* read-write: pop, ack, lease, transaction, configure, seek, kv writes */
	AUTH_ADMIN,	/* admin: /api/v1/system/ *, DELETE of queues, groups, dlq, messages */
};

/* Outcome of authentication; every refusal but AUTH_PASS is counted under its name. */
enum auth_refusal {
	AUTH_PASS = 0,
	AUTH_MISSING,		/* 401 Authentication required */
	AUTH_INVALID,		/* 401 Invalid token */
	AUTH_EXPIRED,		/* 401 Token has expired (and Token not yet valid) */
	AUTH_FORBIDDEN,		/* 403 Insufficient permissions */
	AUTH_PROTECTED,		/* 403 protected mode */
	AUTH_REFUSAL__COUNT
};

struct auth_id {
	unsigned grants;	/* bit (1 << level) per level allowed; all bits when auth is off */
	char *sub;		/* the token's sub (malloc'd), NULL without one */
	int not_yet;		/* with AUTH_EXPIRED: the token is not yet valid (nbf) */
};

/* Builds the key snapshot from qconf, starts the JWKS URL source, and logs the protected mode
 * warning. -1 with a message naming the variable in err when key material is unusable. */
int auth_start(char *err, size_t errlen);
void auth_stop(void);
/* SIGHUP, after conf_reload: re-reads JWT_PUBLIC_KEY files, JWT_JWKS_FILE, the secret and the
 * role names. A bad file keeps the running snapshot; the reason is logged. */
void auth_reload(void);

/* Step one, before routing. authz is the Authorization header (NULL when absent), peer the
 * client address. Fills *id (release with auth_id_clear) and returns the refusal, if any. */
enum auth_refusal auth_authenticate(const char *path, const char *authz,
				    const struct sockaddr *peer, struct auth_id *id);
/* Step two: may id use a route of level lv? */
int auth_allows(const struct auth_id *id, enum auth_level lv);
void auth_id_clear(struct auth_id *id);

/* Counts a refusal, and reads the counters (indexed by enum auth_refusal). */
void auth_count(enum auth_refusal why);
void auth_counts(uint64_t out[AUTH_REFUSAL__COUNT]);
/* "missing", "invalid", "expired", "forbidden", "protected". */
const char *auth_refusal_name(enum auth_refusal why);

/* 1 when the broker listens on a loopback address only (127.0.0.0/8). */
int auth_host_is_loopback(const char *host);

#endif
