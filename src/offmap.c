/* offmap: a chained hash table split in stripes, each under its own mutex, keyed by a SipHash
 * of (lease, partition, transactionId) with a key drawn at start (transactionIds are
 * client-supplied). Each stripe sweeps its expired entries every SWEEP_EVERY insertions, so
 * an entry whose lease lapsed unacked is gone within a bounded number of later pops; the
 * global count bounds memory whatever the clients do. */
#include "offmap.h"
#include "qassert.h"
#include "siphash.h"
#include "uuid.h"

#include <openssl/rand.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define STRIPES 64
#define BUCKETS 4096		/* per stripe */
#define SWEEP_EVERY 2048	/* insertions into a stripe between two sweeps of it */

struct om_ent {
	struct om_ent *next;
	uint64_t h;
	int64_t off, until;
	char lease[UUID_STR_LEN];
	char pid[UUID_STR_LEN];
	char txn[];
};

struct stripe {
	pthread_mutex_t mu;
	unsigned puts;
	struct om_ent *b[BUCKETS];
};

static struct stripe *om_stripes;
static uint8_t om_key[16];
static _Atomic long om_n;

void
om_init(void)
{
	QASSERT(RAND_bytes(om_key, sizeof(om_key)) == 1);
	om_stripes = calloc(STRIPES, sizeof(*om_stripes));
	QASSERT(om_stripes != NULL);
	for (int i = 0; i < STRIPES; i++)
		pthread_mutex_init(&om_stripes[i].mu, NULL);
}

void
om_destroy(void)
{
	if (!om_stripes)
		return;
	for (int i = 0; i < STRIPES; i++) {
		for (int k = 0; k < BUCKETS; k++) {
			struct om_ent *e = om_stripes[i].b[k];

			while (e) {
				struct om_ent *next = e->next;

				free(e);
				e = next;
			}
		}
		pthread_mutex_destroy(&om_stripes[i].mu);
	}
	free(om_stripes);
	om_stripes = NULL;
	atomic_store(&om_n, 0);
}

/* One SipHash over "lease\0pid\0txn" when it fits on the stack (every pop puts, and every
 * ack gets and deletes, one entry per message), three combined when the key is longer. */
static uint64_t
om_hash(const char *lease, const char *pid, const char *txn)
{
	size_t ll = strlen(lease) + 1, pl = strlen(pid) + 1, tl = strlen(txn);
	char key[256];
	uint64_t h;

	if (ll + pl + tl <= sizeof(key)) {
		memcpy(key, lease, ll);
		memcpy(key + ll, pid, pl);
		memcpy(key + ll + pl, txn, tl);
		return siphash24(om_key, key, ll + pl + tl);
	}
	h = siphash24(om_key, lease, ll);
	h ^= siphash24(om_key, pid, pl) * 0x9e3779b97f4a7c15ULL;
	return h ^ (siphash24(om_key, txn, tl) * 0xc2b2ae3d27d4eb4fULL);
}

static int
om_match(const struct om_ent *e, uint64_t h, const char *lease, const char *pid, const char *txn)
{
	return e->h == h && strcmp(e->lease, lease) == 0 && strcmp(e->pid, pid) == 0 &&
	       strcmp(e->txn, txn) == 0;
}

/* Drops the stripe's expired entries. Under the stripe's mutex. */
static void
sweep(struct stripe *s, int64_t now)
{
	for (int k = 0; k < BUCKETS; k++) {
		for (struct om_ent **pp = &s->b[k]; *pp;) {
			struct om_ent *e = *pp;

			if (e->until > now) {
				pp = &e->next;
				continue;
			}
			*pp = e->next;
			free(e);
			atomic_fetch_sub(&om_n, 1);
		}
	}
}

void
om_put(const char *lease, const char *pid, const char *txn, int64_t off, int64_t lease_until,
       int64_t now)
{
	uint64_t h = om_hash(lease, pid, txn);
	struct stripe *s = &om_stripes[h % STRIPES];
	struct om_ent **pp, *e;
	size_t tl = strlen(txn);

	if (strlen(lease) >= UUID_STR_LEN || strlen(pid) >= UUID_STR_LEN)
		return;
	pthread_mutex_lock(&s->mu);
	if (++s->puts % SWEEP_EVERY == 0)
		sweep(s, now);
	pp = &s->b[(h / STRIPES) % BUCKETS];
	for (e = *pp; e; e = e->next) {
		if (om_match(e, h, lease, pid, txn)) {
			if (off < e->off)
				e->off = off;
			goto out;
		}
	}
	if (atomic_load(&om_n) >= OM_MAX_ENTRIES)
		goto out;
	e = malloc(sizeof(*e) + tl + 1);
	QASSERT(e != NULL);
	e->h = h;
	e->off = off;
	e->until = lease_until;
	memcpy(e->lease, lease, strlen(lease) + 1);
	memcpy(e->pid, pid, strlen(pid) + 1);
	memcpy(e->txn, txn, tl + 1);
	e->next = *pp;
	*pp = e;
	atomic_fetch_add(&om_n, 1);
out:
	pthread_mutex_unlock(&s->mu);
}

/* Finds (and with del, removes) an entry; its offset or -1. */
static int64_t
om_find(const char *lease, const char *pid, const char *txn, int del)
{
	uint64_t h = om_hash(lease, pid, txn);
	struct stripe *s = &om_stripes[h % STRIPES];
	int64_t off = -1;

	pthread_mutex_lock(&s->mu);
	for (struct om_ent **pp = &s->b[(h / STRIPES) % BUCKETS]; *pp; pp = &(*pp)->next) {
		struct om_ent *e = *pp;

		if (!om_match(e, h, lease, pid, txn))
			continue;
		off = e->off;
		if (del) {
			*pp = e->next;
			free(e);
			atomic_fetch_sub(&om_n, 1);
		}
		break;
	}
	pthread_mutex_unlock(&s->mu);
	return off;
}

int64_t
om_get(const char *lease, const char *pid, const char *txn)
{
	return om_find(lease, pid, txn, 0);
}

void
om_del(const char *lease, const char *pid, const char *txn)
{
	om_find(lease, pid, txn, 1);
}

long
om_count(void)
{
	return atomic_load(&om_n);
}
