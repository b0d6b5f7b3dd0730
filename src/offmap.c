/* offmap: a chained hash table of spans split in stripes, each under its own mutex. A span is
 * what one pop delivered of one partition under one lease: keyed by a SipHash of (lease,
 * partition) with a key drawn at start, it holds its messages in one allocation, found by a
 * SipHash of their transactionId (client-supplied) in an open-addressed index. A pop puts a
 * span and an ack looks up a run of items of one span with one lock and one chain walk: per
 * message, one hash of its transactionId and a probe. Each stripe sweeps its spans of lapsed
 * leases every SWEEP_EVERY spans put into it; the global count of messages bounds memory
 * whatever the clients do. */
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
#define BUCKETS 1024		/* per stripe */
#define SWEEP_EVERY 256		/* spans put into a stripe between two sweeps of it */

struct om_msg {
	uint64_t h;		/* hash of the transactionId */
	int64_t off;		/* -1: acked */
	uint32_t txn;		/* where its text starts in the span's text */
	uint32_t len;
};

struct om_span {
	struct om_span *next;
	uint64_t h;
	int64_t until;
	char lease[UUID_STR_LEN];
	char pid[UUID_STR_LEN];
	uint32_t n, left, mask;
	struct om_msg *msg;	/* n of them, in the same allocation */
	uint32_t *slot;		/* mask + 1 of them: message index + 1, 0 empty */
	char *text;		/* the transactionIds, one after another */
};

struct stripe {
	pthread_mutex_t mu;
	unsigned puts;
	struct om_span *b[BUCKETS];
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
			struct om_span *s = om_stripes[i].b[k];

			while (s) {
				struct om_span *next = s->next;

				free(s);
				s = next;
			}
		}
		pthread_mutex_destroy(&om_stripes[i].mu);
	}
	free(om_stripes);
	om_stripes = NULL;
	atomic_store(&om_n, 0);
}

/* The hash of (lease, partition): both are UUID texts, so one SipHash over both. */
static uint64_t
span_hash(const char *lease, const char *pid)
{
	char key[2 * UUID_STR_LEN];
	size_t ll = strlen(lease) + 1, pl = strlen(pid);

	memcpy(key, lease, ll);
	memcpy(key + ll, pid, pl);
	return siphash24(om_key, key, ll + pl);
}

static struct om_span **
bucket(struct stripe *st, uint64_t h)
{
	return &st->b[(h / STRIPES) % BUCKETS];
}

/* The span of (lease, pid) in its stripe, or NULL. Under the stripe's mutex. */
static struct om_span **
find_span(struct stripe *st, uint64_t h, const char *lease, const char *pid)
{
	struct om_span **pp;

	for (pp = bucket(st, h); *pp; pp = &(*pp)->next)
		if ((*pp)->h == h && strcmp((*pp)->lease, lease) == 0 &&
		    strcmp((*pp)->pid, pid) == 0)
			return pp;
	return NULL;
}

static void
unlink_span(struct om_span **pp)
{
	struct om_span *s = *pp;

	*pp = s->next;
	atomic_fetch_sub(&om_n, (long)s->left);
	free(s);
}

/* The index of the message whose transactionId is txn (hash h), or -1. */
static long
find_msg(const struct om_span *s, uint64_t h, const char *txn, size_t len)
{
	for (uint32_t i = (uint32_t)h & s->mask;; i = (i + 1) & s->mask) {
		uint32_t m = s->slot[i];

		if (m == 0)
			return -1;
		m--;
		if (s->msg[m].h == h && s->msg[m].len == len &&
		    memcmp(s->text + s->msg[m].txn, txn, len) == 0)
			return m;
	}
}

/* Drops the stripe's spans of lapsed leases. Under the stripe's mutex. */
static void
sweep(struct stripe *st, int64_t now)
{
	for (int k = 0; k < BUCKETS; k++)
		for (struct om_span **pp = &st->b[k]; *pp;)
			if ((*pp)->until <= now)
				unlink_span(pp);
			else
				pp = &(*pp)->next;
}

void
om_put_span(const char *lease, const char *pid, size_t n, const char *const *txns,
	    const int64_t *offs, int64_t lease_until, int64_t now)
{
	uint64_t h;
	struct stripe *st;
	struct om_span *s, **old;
	size_t text = 0, slots = 2;
	uint32_t used = 0;
	char *p;

	if (n == 0 || n > UINT32_MAX / 4 || strlen(lease) >= UUID_STR_LEN ||
	    strlen(pid) >= UUID_STR_LEN || atomic_load(&om_n) + (long)n > OM_MAX_ENTRIES)
		return;
	for (size_t i = 0; i < n; i++)
		text += strlen(txns[i]);
	while (slots < 2 * n)
		slots <<= 1;
	if (text > UINT32_MAX)
		return;
	/* One allocation: the span, its messages, its index, the text. */
	s = malloc(sizeof(*s) + n * sizeof(struct om_msg) + slots * sizeof(uint32_t) + text);
	QASSERT(s != NULL);
	s->msg = (struct om_msg *)(s + 1);
	s->slot = (uint32_t *)(s->msg + n);
	s->text = (char *)(s->slot + slots);
	memset(s->slot, 0, slots * sizeof(uint32_t));
	s->mask = (uint32_t)slots - 1;
	s->until = lease_until;
	memcpy(s->lease, lease, strlen(lease) + 1);
	memcpy(s->pid, pid, strlen(pid) + 1);
	p = s->text;
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(txns[i]);
		uint64_t th = siphash24(om_key, txns[i], len);
		long m;

		memcpy(p, txns[i], len);
		s->msg[used] = (struct om_msg){ th, offs[i], (uint32_t)(p - s->text), (uint32_t)len };
		if ((m = find_msg(s, th, txns[i], len)) >= 0) {
			/* A transactionId twice in one span: its lowest offset, as SQL has it. */
			if (offs[i] < s->msg[m].off)
				s->msg[m].off = offs[i];
			continue;
		}
		for (uint32_t k = (uint32_t)th & s->mask;; k = (k + 1) & s->mask)
			if (s->slot[k] == 0) {
				s->slot[k] = used + 1;
				break;
			}
		p += len;
		used++;
	}
	s->n = s->left = used;
	h = span_hash(lease, pid);
	s->h = h;
	st = &om_stripes[h % STRIPES];
	pthread_mutex_lock(&st->mu);
	if (++st->puts % SWEEP_EVERY == 0)
		sweep(st, now);
	if ((old = find_span(st, h, lease, pid)) != NULL)
		unlink_span(old);	/* a lease names one pop: only a repeat can meet it */
	s->next = *bucket(st, h);
	*bucket(st, h) = s;
	atomic_fetch_add(&om_n, (long)used);
	pthread_mutex_unlock(&st->mu);
}

/* Looks up (and with del, forgets) n transactionIds of the span (lease, pid): offs[i] is the
 * offset of txns[i] or -1. Returns how many were found. */
static size_t
om_run(const char *lease, const char *pid, size_t n, const char *const *txns, int64_t *offs,
       int del)
{
	uint64_t h = span_hash(lease, pid);
	struct stripe *st = &om_stripes[h % STRIPES];
	struct om_span **pp, *s;
	size_t found = 0;

	for (size_t i = 0; offs && i < n; i++)
		offs[i] = -1;
	pthread_mutex_lock(&st->mu);
	if ((pp = find_span(st, h, lease, pid)) == NULL) {
		pthread_mutex_unlock(&st->mu);
		return 0;
	}
	s = *pp;
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(txns[i]);
		long m = find_msg(s, siphash24(om_key, txns[i], len), txns[i], len);

		if (m < 0 || s->msg[m].off < 0)
			continue;
		found++;
		if (offs)
			offs[i] = s->msg[m].off;
		if (del) {
			s->msg[m].off = -1;
			s->left--;
			atomic_fetch_sub(&om_n, 1);
		}
	}
	if (s->left == 0)
		unlink_span(pp);
	pthread_mutex_unlock(&st->mu);
	return found;
}

size_t
om_get_run(const char *lease, const char *pid, size_t n, const char *const *txns, int64_t *offs)
{
	return om_run(lease, pid, n, txns, offs, 0);
}

void
om_del_run(const char *lease, const char *pid, size_t n, const char *const *txns)
{
	om_run(lease, pid, n, txns, NULL, 1);
}

long
om_count(void)
{
	return atomic_load(&om_n);
}
