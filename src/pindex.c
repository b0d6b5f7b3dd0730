/* pindex: three rculfhash tables (queues by name, partitions by (queue, name), partitions by
 * id) over nodes that are added as they are seen and removed when they are gone from
 * PostgreSQL (queue delete, or missing from a resync snapshot), then freed after a grace
 * period with call_rcu. A queue's partition list is an array published with
 * rcu_assign_pointer: appended in place, or replaced (copy, publish) to grow or to drop
 * partitions, by writers under pidx_write_mu. Counters in a node are atomics, so readers need
 * no lock. A group slot of a deleted group is emptied for the next group: first marked
 * GH_DYING (no lookup finds it, no claim takes it), and cleared only after a grace period,
 * when no reader or writer that found it by its group is left. Names are hashed with a keyed
 * SipHash so clients cannot aim collisions at a bucket. */
#include "pindex.h"
#include "names.h"
#include "qassert.h"
#include "siphash.h"
#include "slab.h"

#include <openssl/rand.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <urcu/urcu-memb.h>
#include <urcu/rculfhash.h>

/* gh of a slot being emptied: between its group's deletion and the end of a grace period. */
#define GH_DYING UINT64_MAX

struct gslot {
	_Atomic uint64_t gh;		/* 0: free */
	_Atomic int64_t committed;
	_Atomic int64_t lease_until;
	_Atomic uint64_t stamp;		/* cursor_seq of the last live update */
	_Atomic int implied;		/* no cursor row: committed is where the group would start */
	_Atomic uint32_t seen;		/* last resync whose snapshot had its cursor row (low bits) */
};

/* A partition's group slots: a chain of blocks, none until a group is seen there. The first
 * holds one slot (most partitions are read by one group, and a million partitions are the
 * index's bulk), each later one GSLOT_BLOCK. A block is appended (CAS on the head pointer or
 * on the tail's next) when a group finds every slot taken: readers walk the chain without a
 * lock, and any number of groups stays on the fast path. The slots of deleted groups are
 * taken by the next groups, and empty blocks at the end of the chain are removed
 * (trim_blocks; never the first): a closed block's next is GB_END, which ends a walk, and
 * sends a claim back to the head. */
#define GSLOT_FIRST 1
#define GSLOT_BLOCK 4

struct gblock {
	struct gblock *_Atomic next;
	struct rcu_head rcu;
	int n;				/* slots in s */
	struct gslot s[];
};

static struct gblock gb_end_mark;
#define GB_END (&gb_end_mark)

/* The block after b in a walk (NULL at the end). */
static struct gblock *
gb_next(struct gblock *b)
{
	struct gblock *n = atomic_load(&b->next);

	return n == GB_END ? NULL : n;
}

static size_t
gb_size(int n)
{
	return sizeof(struct gblock) + (size_t)n * sizeof(struct gslot);
}

static void
gb_free(struct gblock *b)
{
	slab_free(b, gb_size(b->n));
}

struct pq_queue;

/* A partition: 96 bytes and its name, 112 for a name of up to 15 bytes (slab.c rounds to
 * 16), so that a million fit in the broker's memory budget (the id is kept as its 16
 * bytes, the name inside the node, resync generations in 32 bits). */
struct pq_part {
	struct cds_lfht_node by_name;
	struct cds_lfht_node by_id;
	struct rcu_head rcu;
	struct pq_queue *q;
	_Atomic int64_t log_end;
	struct gblock *_Atomic groups;	/* NULL until a group is seen here */
	_Atomic uint32_t seen;		/* last resync whose snapshot had it (low bits) */
	uint32_t born;			/* the resync under way or last begun when it was added */
	uint8_t id[16];
	char name[];
};

/* The bytes of a partition whose name takes nlen bytes with its NUL. */
static size_t
part_size(size_t nlen)
{
	return sizeof(struct pq_part) + nlen;
}

/* A queue's partitions. Writers (serialised by pidx_write_mu) append in place while there is
 * room: p[n] is written first, then n is published with a release store, so a reader that
 * loads n (acquire) sees every p[i] below it. When full, the array is copied into one twice
 * as large, published, and the old one freed after a grace period: amortised O(1) per
 * partition, where copying on every append cost O(n^2) memory traffic at start-up. */
struct pq_parts {
	struct rcu_head rcu;
	size_t cap;
	_Atomic size_t n;
	struct pq_part *p[];
};

static size_t
parts_len(struct pq_parts *parts)
{
	return atomic_load_explicit(&parts->n, memory_order_acquire);
}

struct pq_queue {
	struct cds_lfht_node node;
	struct rcu_head rcu;
	char id[UUID_STR_LEN];
	char *name;
	char *ns;
	char *task;
	struct pq_parts *parts;		/* RCU-published */
	pthread_mutex_t mu;		/* serialises writers of parts */
	_Atomic unsigned rotor;
	int dead;
};

static struct cds_lfht *ht_queues, *ht_parts, *ht_ids;
static pthread_mutex_t pidx_write_mu = PTHREAD_MUTEX_INITIALIZER;
static uint8_t pidx_key[16];
/* What the index holds now, for /metrics. */
static _Atomic long pidx_n_queues, pidx_n_parts, pidx_n_slots, pidx_n_blocks;
/* Resyncs begun so far; the current one is numbered sweep_gen. */
static _Atomic uint64_t sweep_gen;

/* What this broker deleted while a resync's query may have been reading it: rows of a
 * snapshot taken before the delete must not bring it back. A tombstone lives until the next
 * resync begins, whose snapshot is later than the delete. */
struct tomb {
	uint64_t qh;	/* hash of the queue's name; 0: every queue (a group deleted everywhere) */
	uint64_t gh;	/* the group; 0: the whole queue */
	uint64_t gen;	/* sweep_gen when it was laid */
};
static pthread_mutex_t tomb_mu = PTHREAD_MUTEX_INITIALIZER;
static struct tomb *tombs;
static size_t tomb_cap;
static _Atomic size_t tomb_n;
/* What pidx_sweep_buried finds of a snapshot row: its queue or its group deleted here. */
#define BURIED_QUEUE 1
#define BURIED_GROUP 2
static int pidx_sweep_buried(const char *queue, const char *group);

static uint64_t
hash_str(const char *s)
{
	return siphash24(pidx_key, s, strlen(s));
}

static uint64_t
hash_pair(const char *a, const char *b)
{
	uint64_t h = siphash24(pidx_key, a, strlen(a) + 1);

	return h ^ (siphash24(pidx_key, b, strlen(b)) * 0x9e3779b97f4a7c15ULL);
}

/* The 16 bytes of a partition id and their hash; 0 when pid is not a UUID (no partition). */
struct pid_key {
	uint8_t b[16];
	uint64_t h;
};

/* The key of the partition id whose 16 bytes k->b holds. */
static void
pid_key_hash(struct pid_key *k)
{
	k->h = siphash24(pidx_key, k->b, sizeof(k->b));
}

static void
pid_key_bytes(const uint8_t b[16], struct pid_key *k)
{
	memcpy(k->b, b, sizeof(k->b));
	pid_key_hash(k);
}

static int
pid_key(const char *pid, struct pid_key *k)
{
	if (uuid_parse(pid, k->b) < 0)
		return 0;
	pid_key_hash(k);
	return 1;
}

uint64_t
pidx_group_hash(const char *group)
{
	uint64_t h = hash_str(group);

	return h == 0 ? 1 : h == GH_DYING ? 2 : h;
}

static int64_t
wall_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Buckets of the partition tables at start, and how many they have been resized to. A lookup
 * walks its bucket's chain, one cache miss a node, and liburcu's own resizing grows a table
 * late and in steps: measured at 100,000 partitions, 0.8-1.2 us a lookup in a table that
 * started at 1024 buckets, 40-90 ns in one sized for them. 2^16 buckets cost 1 MiB a table;
 * past that, pidx_fit resizes them to the partitions known. */
#define PIDX_MIN_BUCKETS (1UL << 16)
static unsigned long pidx_buckets = PIDX_MIN_BUCKETS;

void
pidx_init(void)
{
	QASSERT(RAND_bytes(pidx_key, sizeof(pidx_key)) == 1);
	ht_queues = cds_lfht_new_flavor(64, 64, 0, CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING,
					&urcu_memb_flavor, NULL);
	ht_parts = cds_lfht_new_flavor(PIDX_MIN_BUCKETS, PIDX_MIN_BUCKETS, 0,
				       CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING,
				       &urcu_memb_flavor, NULL);
	ht_ids = cds_lfht_new_flavor(PIDX_MIN_BUCKETS, PIDX_MIN_BUCKETS, 0,
				     CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING,
				     &urcu_memb_flavor, NULL);
	QASSERT(ht_queues && ht_parts && ht_ids);
}

/* The most partitions an expectation sizes the tables for (16 MiB of buckets a table):
 * beyond, they grow with the partitions actually loaded, so that an estimate gone wrong
 * (the planner's count of a table just emptied) costs at most that. */
#define PIDX_EXPECT_MAX (1L << 20)

void
pidx_fit(long expect)
{
	unsigned long want = pidx_buckets, n = (unsigned long)atomic_load(&pidx_n_parts);

	if (expect > PIDX_EXPECT_MAX)
		expect = PIDX_EXPECT_MAX;
	if (expect > 0 && (unsigned long)expect > n)
		n = (unsigned long)expect;
	while (want < n)
		want <<= 1;
	if (want == pidx_buckets)
		return;
	/* Waits for grace periods: never inside a read-side critical section. */
	cds_lfht_resize(ht_parts, want);
	cds_lfht_resize(ht_ids, want);
	pidx_buckets = want;
}

void
pidx_thread_online(void)
{
	urcu_memb_register_thread();
}

void
pidx_thread_offline(void)
{
	urcu_memb_unregister_thread();
}

static long
held_slots(struct gblock *b)
{
	long n = 0;

	for (int i = 0; i < b->n; i++) {
		uint64_t gh = atomic_load(&b->s[i].gh);

		n += gh != 0 && gh != GH_DYING;
	}
	return n;
}

/* After a grace period: nothing can claim a slot of p any more, so the count is exact. */
static void
free_part(struct pq_part *p)
{
	struct gblock *first = atomic_load(&p->groups), *b = first;
	long slots = 0;

	for (struct gblock *c = b; c; c = gb_next(c))
		slots += held_slots(c);
	atomic_fetch_sub(&pidx_n_slots, slots);
	while (b) {
		struct gblock *next = gb_next(b);

		if (b != first)
			atomic_fetch_sub(&pidx_n_blocks, 1);
		gb_free(b);
		b = next;
	}
	slab_free(p, part_size(strlen(p->name) + 1));
}

static void
free_queue(struct pq_queue *q)
{
	free(q->parts);
	free(q->name);
	free(q->ns);
	free(q->task);
	pthread_mutex_destroy(&q->mu);
	free(q);
}

static void
free_part_rcu(struct rcu_head *h)
{
	free_part(caa_container_of(h, struct pq_part, rcu));
}

static void
free_queue_rcu(struct rcu_head *h)
{
	free_queue(caa_container_of(h, struct pq_queue, rcu));
}

static void
free_parts_rcu(struct rcu_head *h)
{
	free(caa_container_of(h, struct pq_parts, rcu));
}

static int
match_queue(struct cds_lfht_node *node, const void *key)
{
	return strcmp(caa_container_of(node, struct pq_queue, node)->name, key) == 0;
}

struct pkey {
	const char *queue;
	const char *name;
};

static int
match_part(struct cds_lfht_node *node, const void *key)
{
	const struct pq_part *p = caa_container_of(node, struct pq_part, by_name);
	const struct pkey *k = key;

	return strcmp(p->name, k->name) == 0 && strcmp(p->q->name, k->queue) == 0;
}

static int
match_id(struct cds_lfht_node *node, const void *key)
{
	return memcmp(caa_container_of(node, struct pq_part, by_id)->id, key, 16) == 0;
}

/* Read side only. */
static struct pq_queue *
find_queue(const char *name)
{
	struct cds_lfht_iter it;
	struct cds_lfht_node *n;

	cds_lfht_lookup(ht_queues, hash_str(name), match_queue, name, &it);
	n = cds_lfht_iter_get_node(&it);
	return n ? caa_container_of(n, struct pq_queue, node) : NULL;
}

/* h: hash_pair(queue, name). */
static struct pq_part *
find_part_h(const char *queue, const char *name, uint64_t h)
{
	struct pkey k = { queue, name };
	struct cds_lfht_iter it;
	struct cds_lfht_node *n;

	cds_lfht_lookup(ht_parts, h, match_part, &k, &it);
	n = cds_lfht_iter_get_node(&it);
	return n ? caa_container_of(n, struct pq_part, by_name) : NULL;
}

static struct pq_part *
find_part(const char *queue, const char *name)
{
	return find_part_h(queue, name, hash_pair(queue, name));
}

static struct pq_part *
find_key(const struct pid_key *k)
{
	struct cds_lfht_iter it;
	struct cds_lfht_node *n;

	cds_lfht_lookup(ht_ids, k->h, match_id, k->b, &it);
	n = cds_lfht_iter_get_node(&it);
	return n ? caa_container_of(n, struct pq_part, by_id) : NULL;
}

static struct pq_part *
find_id(const char *id)
{
	struct pid_key k;

	return pid_key(id, &k) ? find_key(&k) : NULL;
}

int
pidx_lookup(const char *queue, const char *partition, char id[UUID_STR_LEN])
{
	struct pq_part *p;
	int found = 0;

	urcu_memb_read_lock();
	p = find_part(queue, partition);
	if (p) {
		uuid_format(p->id, id);
		found = 1;
	}
	urcu_memb_read_unlock();
	return found;
}

/* Raises *v to n; 1 when it moved. */
static int
atomic_max(_Atomic int64_t *v, int64_t n)
{
	int64_t cur = atomic_load(v);

	while (n > cur) {
		if (atomic_compare_exchange_weak(v, &cur, n))
			return 1;
	}
	return 0;
}

static char *
xstrdup(const char *s)
{
	char *d = strdup(s ? s : "");

	QASSERT(d != NULL);
	return d;
}

/* The labels of a queue the index learns by name only (names.c holds the rule). */
static void
derive_labels(const char *name, char **ns, char **task)
{
	char nsb[NAMES_BUF], taskb[NAMES_BUF];

	names_labels(name, nsb, sizeof(nsb), taskb, sizeof(taskb));
	*ns = xstrdup(nsb);
	*task = xstrdup(taskb);
}

/* Returns the queue node, creating it. Called under pidx_write_mu and a read-side section. */
static struct pq_queue *
get_queue(const char *queue_id, const char *name, const char *ns, const char *task)
{
	struct pq_queue *q = find_queue(name);

	if (q) {
		if (queue_id && strcmp(q->id, queue_id) != 0)
			snprintf(q->id, sizeof(q->id), "%s", queue_id);
		return q;
	}
	q = calloc(1, sizeof(*q));
	QASSERT(q != NULL);
	snprintf(q->id, sizeof(q->id), "%s", queue_id ? queue_id : "");
	q->name = xstrdup(name);
	if (ns && task) {
		q->ns = xstrdup(ns);
		q->task = xstrdup(task);
	} else {
		derive_labels(name, &q->ns, &q->task);
	}
	pthread_mutex_init(&q->mu, NULL);
	q->parts = calloc(1, sizeof(struct pq_parts));
	QASSERT(q->parts != NULL);
	cds_lfht_add(ht_queues, hash_str(name), &q->node);
	atomic_fetch_add(&pidx_n_queues, 1);
	return q;
}

/* Takes p out of the tables and frees it after a grace period; the caller takes it out of
 * its queue's array. Under pidx_write_mu and a read-side section, as are the two below. */
static void
unlink_part(struct pq_part *p)
{
	cds_lfht_del(ht_ids, &p->by_id);
	cds_lfht_del(ht_parts, &p->by_name);
	atomic_fetch_sub(&pidx_n_parts, 1);
	urcu_memb_call_rcu(&p->rcu, free_part_rcu);
}

static void
unlink_queue(struct pq_queue *q)
{
	cds_lfht_del(ht_queues, &q->node);
	atomic_fetch_sub(&pidx_n_queues, 1);
	urcu_memb_call_rcu(&q->rcu, free_queue_rcu);
}

/* Publishes q's partitions without those whose drop[i] is set, and unlinks these. Readers
 * still walking the old array keep it until a grace period has passed. Returns how many
 * partitions q has left. */
static size_t
drop_parts(struct pq_queue *q, const unsigned char *drop)
{
	struct pq_parts *old = q->parts, *kept;
	size_t len = parts_len(old), n = 0;

	kept = malloc(sizeof(*kept) + len * sizeof(kept->p[0]));
	QASSERT(kept != NULL);
	kept->cap = len;
	for (size_t i = 0; i < len; i++) {
		if (drop[i])
			unlink_part(old->p[i]);
		else
			kept->p[n++] = old->p[i];
	}
	atomic_store_explicit(&kept->n, n, memory_order_relaxed);
	rcu_assign_pointer(q->parts, kept);
	urcu_memb_call_rcu(&old->rcu, free_parts_rcu);
	return n;
}

/* A partition name of q learned under a new id belongs to a new incarnation of the queue
 * (deleted and created again, maybe on another broker): the old partition, found by that
 * name, is dropped, so that no lookup serves its id. */
static void
drop_stale_name(struct pq_queue *q, struct pq_part *old)
{
	struct pq_parts *parts = q->parts;
	size_t len = parts_len(parts);
	unsigned char *drop;

	drop = calloc(len ? len : 1, 1);
	QASSERT(drop != NULL);
	for (size_t i = 0; i < len; i++)
		drop[i] = parts->p[i] == old;
	drop_parts(q, drop);
	free(drop);
}

/* 1 when a partition born in resync generation `born` was added since resync `gen` began
 * (generations compared in 32 bits, modulo their wrap). */
static int
born_since(uint32_t born, uint64_t gen)
{
	return (int32_t)(born - (uint32_t)gen) >= 0;
}

/* Whether labels given (ns and task not NULL) differ from q's. In a read-side section. */
static int
labels_differ(struct pq_queue *q, const char *ns, const char *task)
{
	return ns && task && (strcmp(rcu_dereference(q->ns), ns) != 0 ||
			      strcmp(rcu_dereference(q->task), task) != 0);
}

/* The partition of key, added to the index when new, its log end raised to log_end: the
 * core of pidx_learn, under pidx_write_mu and a read-side section. as_of > 0: the row comes
 * from the snapshot of resync as_of, and is left out (NULL) when a partition of the same
 * name was learned since that resync began (a queue created again after the snapshot) or
 * this broker deleted its queue since: it must not bring the old incarnation back; what it
 * returns is marked seen by that resync here, not looked up again by the sweep. unseen: the
 * caller knows the index holds neither this id nor this name (a start-up load into an empty
 * index that nothing else writes), so neither is looked up. */
static struct pq_part *
add_part(const char *queue_id, const char *queue, const char *ns, const char *task,
	 const struct pid_key *key, const char *partition, int64_t log_end, uint64_t as_of,
	 int unseen)
{
	struct pq_part *p = unseen ? NULL : find_key(key), *named;
	struct pq_queue *q;
	struct pq_parts *old, *grown;
	size_t nlen, len;
	uint64_t h;

	if (p) {
		atomic_max(&p->log_end, log_end);
		if (as_of > 0)
			atomic_store(&p->seen, (uint32_t)as_of);
		return p;
	}
	h = hash_pair(queue, partition);
	named = unseen ? NULL : find_part_h(queue, partition, h);
	/* The tombstone is asked under the write lock, which a delete takes only after laying
	 * it: the delete has either been seen here or comes after, and then takes this
	 * partition out with the others. */
	if (as_of > 0 && ((named && born_since(named->born, as_of)) ||
			  (pidx_sweep_buried(queue, NULL) & BURIED_QUEUE)))
		return NULL;
	q = get_queue(queue_id, queue, ns, task);
	if (named)
		drop_stale_name(q, named);
	old = q->parts;
	nlen = strlen(partition) + 1;
	p = slab_alloc(part_size(nlen));
	memcpy(p->id, key->b, sizeof(p->id));
	memcpy(p->name, partition, nlen);
	p->q = q;
	p->born = (uint32_t)atomic_load(&sweep_gen);
	atomic_store(&p->seen, (uint32_t)as_of);
	atomic_store(&p->log_end, log_end);
	cds_lfht_add(ht_ids, key->h, &p->by_id);
	atomic_fetch_add(&pidx_n_parts, 1);
	cds_lfht_add(ht_parts, h, &p->by_name);
	len = parts_len(old);
	if (len < old->cap) {
		old->p[len] = p;
		atomic_store_explicit(&old->n, len + 1, memory_order_release);
	} else {
		size_t cap = old->cap ? 2 * old->cap : 8;

		grown = malloc(sizeof(*grown) + cap * sizeof(grown->p[0]));
		QASSERT(grown != NULL);
		grown->cap = cap;
		memcpy(grown->p, old->p, len * sizeof(old->p[0]));
		grown->p[len] = p;
		atomic_store_explicit(&grown->n, len + 1, memory_order_relaxed);
		rcu_assign_pointer(q->parts, grown);
		urcu_memb_call_rcu(&old->rcu, free_parts_rcu);
	}
	return p;
}

/* learn past its lookup: for a caller that has just missed key or seen its labels differ
 * (unseen as for add_part). */
static void
learn_locked(const char *queue_id, const char *queue, const char *ns, const char *task,
	     const struct pid_key *key, const char *partition, int64_t log_end, uint64_t as_of,
	     int unseen)
{
	struct pq_part *p;

	pthread_mutex_lock(&pidx_write_mu);
	urcu_memb_read_lock();
	p = add_part(queue_id, queue, ns, task, key, partition, log_end, as_of, unseen);
	if (p && labels_differ(p->q, ns, task)) {
		/* Labels change only by configure; keep the old strings for readers (leak-free:
		 * they are replaced under the write lock and freed after a grace period). */
		struct pq_queue *q = p->q;
		char *ons = q->ns, *otask = q->task;

		rcu_assign_pointer(q->ns, xstrdup(ns));
		rcu_assign_pointer(q->task, xstrdup(task));
		urcu_memb_read_unlock();
		urcu_memb_synchronize_rcu();
		free(ons);
		free(otask);
		pthread_mutex_unlock(&pidx_write_mu);
		return;
	}
	urcu_memb_read_unlock();
	pthread_mutex_unlock(&pidx_write_mu);
}

/* pidx_learn, as_of as for add_part. */
static void
learn(const char *queue_id, const char *queue, const char *ns, const char *task,
      const struct pid_key *key, const char *partition, int64_t log_end, uint64_t as_of)
{
	struct pq_part *p;

	urcu_memb_read_lock();
	p = find_key(key);
	if (p && !labels_differ(p->q, ns, task)) {
		atomic_max(&p->log_end, log_end);
		urcu_memb_read_unlock();
		return;
	}
	urcu_memb_read_unlock();
	learn_locked(queue_id, queue, ns, task, key, partition, log_end, as_of, 0);
}

static void (*pidx_push_hook)(const struct pidx_push *v, size_t n);

void
pidx_set_push_hook(void (*hook)(const struct pidx_push *v, size_t n))
{
	pidx_push_hook = hook;
}

void
pidx_learn(const char *queue_id, const char *queue, const char *ns, const char *task,
	   const char *pid, const char *partition, int64_t log_end)
{
	struct pid_key key;

	if (pid_key(pid, &key))	/* else not a partition id: nothing PostgreSQL said */
		learn(queue_id, queue, ns, task, &key, partition, log_end, 0);
}

void
pidx_pushed(struct pidx_pushes *ps, const char *queue_id, const char *queue, const char *pid,
	    const char *partition, int64_t log_end)
{
	pidx_learn(queue_id, queue, NULL, NULL, pid, partition, log_end);
	/* A commit's rows come partition by partition: one entry each, not one a message. */
	if (ps->n && strcmp(ps->v[ps->n - 1].pid, pid) == 0) {
		if (log_end > ps->v[ps->n - 1].log_end)
			ps->v[ps->n - 1].log_end = log_end;
		return;
	}
	if (ps->n == ps->cap) {
		ps->cap = ps->cap ? 2 * ps->cap : 16;
		ps->v = realloc(ps->v, ps->cap * sizeof(ps->v[0]));
		QASSERT(ps->v != NULL);
	}
	snprintf(ps->v[ps->n].pid, sizeof(ps->v[ps->n].pid), "%s", pid);
	ps->v[ps->n++].log_end = log_end;
}

void
pidx_pushes_done(struct pidx_pushes *ps)
{
	if (pidx_push_hook && ps->n)
		pidx_push_hook(ps->v, ps->n);
	free(ps->v);
	*ps = (struct pidx_pushes)PIDX_PUSHES_INIT;
}

/* pidx_log_end of the partition of key k (NULL: none). */
static int
log_end_of(const struct pid_key *k, int64_t log_end)
{
	struct pq_part *p;
	int rc = 0;

	urcu_memb_read_lock();
	p = k ? find_key(k) : NULL;
	if (p)
		rc = atomic_max(&p->log_end, log_end) ? 2 : 1;
	urcu_memb_read_unlock();
	return rc;
}

int
pidx_log_end(const char *pid, int64_t log_end)
{
	struct pid_key k;

	return log_end_of(pid_key(pid, &k) ? &k : NULL, log_end);
}

/* A block of n slots, the first taken by gh. */
static struct gblock *
gb_new(int n, uint64_t gh)
{
	struct gblock *b = slab_alloc(gb_size(n));

	b->n = n;
	for (int i = 0; i < n; i++)
		atomic_store(&b->s[i].committed, -1);
	atomic_store(&b->s[0].gh, gh);
	return b;
}

static struct gslot *
find_slot(struct pq_part *p, uint64_t gh, int claim)
{
	struct gblock *b;

	for (b = atomic_load(&p->groups); b; b = gb_next(b))
		for (int i = 0; i < b->n; i++)
			if (atomic_load(&b->s[i].gh) == gh)
				return &b->s[i];
	if (!claim)
		return NULL;
	while ((b = atomic_load(&p->groups)) == NULL) {
		struct gblock *nb = gb_new(GSLOT_FIRST, gh), *none = NULL;

		if (atomic_compare_exchange_strong(&p->groups, &none, nb)) {
			atomic_fetch_add(&pidx_n_slots, 1);
			return &nb->s[0];
		}
		gb_free(nb);	/* another group came first: look in its block */
	}
	for (;;) {
		for (int i = 0; i < b->n; i++) {
			uint64_t seen = 0;

			if (atomic_compare_exchange_strong(&b->s[i].gh, &seen, gh)) {
				atomic_fetch_add(&pidx_n_slots, 1);
				return &b->s[i];
			}
			if (seen == gh)
				return &b->s[i];
		}
		struct gblock *next = atomic_load(&b->next);

		if (!next) {
			struct gblock *nb = gb_new(GSLOT_BLOCK, gh);

			if (atomic_compare_exchange_strong(&b->next, &next, nb)) {
				atomic_fetch_add(&pidx_n_slots, 1);
				atomic_fetch_add(&pidx_n_blocks, 1);
				return &nb->s[0];
			}
			gb_free(nb);	/* another group appended first: look in its block */
		}
		/* A block being trimmed away sends the claim back to the head. */
		b = next == GB_END ? atomic_load(&p->groups) : next;
	}
}

/* Live updates (what a handler saw committed) are numbered; a snapshot taken before one of
 * them must not overwrite it: the resync query runs for a while, and a lease it read may be
 * released by an ack that lands in the index before the snapshot does. */
static _Atomic uint64_t cursor_seq;

/* A live update always; one from a snapshot (or implied) only over a slot not updated live
 * since mark. */
static void
slot_set(struct gslot *s, int64_t committed, int64_t lease_until, int live, uint64_t mark,
	 int implied)
{
	if (!live && atomic_load(&s->stamp) > mark)
		return;
	if (live)
		atomic_store(&s->stamp, atomic_fetch_add(&cursor_seq, 1) + 1);
	atomic_store(&s->committed, committed);
	atomic_store(&s->implied, implied);
	if (lease_until >= 0)
		atomic_store(&s->lease_until, lease_until);
}

/* Sets group gh's slot of partition p (NULL: unknown, nothing done). Under the read lock. */
static void
part_cursor_set(struct pq_part *p, uint64_t gh, int64_t committed, int64_t lease_until,
		int live, uint64_t mark, int implied)
{
	struct gslot *s = p ? find_slot(p, gh, 1) : NULL;

	if (s)
		slot_set(s, committed, lease_until, live, mark, implied);
}

/* Sets group gh's slot of partition pid; the name of its queue is copied into queue when
 * that is not NULL. 1 when the partition is known. */
static int
cursor_set(const char *pid, uint64_t gh, int64_t committed, int64_t lease_until, int live,
	   uint64_t mark, int implied, char *queue, size_t len)
{
	struct pq_part *p;

	urcu_memb_read_lock();
	p = find_id(pid);
	part_cursor_set(p, gh, committed, lease_until, live, mark, implied);
	if (p && queue)
		snprintf(queue, len, "%s", p->q->name);
	urcu_memb_read_unlock();
	return p != NULL;
}

void
pidx_cursor(const char *pid, uint64_t gh, int64_t committed, int64_t lease_until)
{
	cursor_set(pid, gh, committed, lease_until, 1, 0, 0, NULL, 0);
}

int
pidx_cursor_queue(const char *pid, uint64_t gh, int64_t committed, int64_t lease_until,
		  char *queue, size_t len)
{
	return cursor_set(pid, gh, committed, lease_until, 1, 0, 0, queue, len);
}

void
pidx_claimed(const uint8_t id[16], uint64_t gh, int64_t committed, int64_t lease_until,
	     int64_t log_end)
{
	struct pid_key k;
	struct pq_part *p;

	memcpy(k.b, id, sizeof(k.b));
	pid_key_hash(&k);
	urcu_memb_read_lock();
	p = find_key(&k);
	part_cursor_set(p, gh, committed, lease_until, 1, 0, 0);
	if (p)
		atomic_max(&p->log_end, log_end);
	urcu_memb_read_unlock();
}

void
pidx_cursor_implied(const char *pid, uint64_t gh, int64_t start, uint64_t mark)
{
	cursor_set(pid, gh, start, 0, 0, mark, 1, NULL, 0);
}

void
pidx_forget_implied(uint64_t gh)
{
	struct cds_lfht_iter it;
	struct cds_lfht_node *n;

	urcu_memb_read_lock();
	cds_lfht_for_each(ht_ids, &it, n) {
		struct pq_part *p = caa_container_of(n, struct pq_part, by_id);

		for (struct gblock *b = atomic_load(&p->groups); b; b = gb_next(b)) {
			for (int i = 0; i < b->n; i++) {
				struct gslot *s = &b->s[i];
				uint64_t sg = atomic_load(&s->gh);

				if (sg && (!gh || sg == gh) && atomic_load(&s->implied)) {
					atomic_store(&s->committed, -1);
					atomic_store(&s->implied, 0);
				}
			}
		}
	}
	urcu_memb_read_unlock();
}

uint64_t
pidx_cursor_mark(void)
{
	return atomic_load(&cursor_seq);
}

void
pidx_cursor_snapshot(const char *pid, uint64_t gh, int64_t committed, int64_t lease_until,
		     uint64_t mark)
{
	cursor_set(pid, gh, committed, lease_until, 0, mark, 0, NULL, 0);
}

int
pidx_queue_of(const char *pid, char *queue, size_t len)
{
	struct pq_part *p;

	urcu_memb_read_lock();
	p = find_id(pid);
	if (p)
		snprintf(queue, len, "%s", p->q->name);
	urcu_memb_read_unlock();
	return p != NULL;
}

int
pidx_queue_labels(const char *queue, char *ns, size_t nslen, char *task, size_t tasklen)
{
	struct pq_queue *q;
	int found = 0;

	urcu_memb_read_lock();
	q = find_queue(queue);
	if (q) {
		snprintf(ns, nslen, "%s", rcu_dereference(q->ns));
		snprintf(task, tasklen, "%s", rcu_dereference(q->task));
		found = 1;
	}
	urcu_memb_read_unlock();
	return found;
}

static void
lay_tomb(uint64_t qh, uint64_t gh)
{
	size_t n;

	pthread_mutex_lock(&tomb_mu);
	n = atomic_load(&tomb_n);
	if (n == tomb_cap) {
		tomb_cap = tomb_cap ? 2 * tomb_cap : 16;
		tombs = realloc(tombs, tomb_cap * sizeof(tombs[0]));
		QASSERT(tombs != NULL);
	}
	tombs[n] = (struct tomb){ qh, gh, atomic_load(&sweep_gen) };
	atomic_store(&tomb_n, n + 1);
	pthread_mutex_unlock(&tomb_mu);
}

/* Drops the tombstones laid before resync gen began. */
static void
clear_tombs(uint64_t gen)
{
	size_t k = 0;

	pthread_mutex_lock(&tomb_mu);
	for (size_t i = 0; i < atomic_load(&tomb_n); i++)
		if (tombs[i].gen >= gen)
			tombs[k++] = tombs[i];
	atomic_store(&tomb_n, k);
	if (k == 0) {
		free(tombs);
		tombs = NULL;
		tomb_cap = 0;
	}
	pthread_mutex_unlock(&tomb_mu);
}

static int
pidx_sweep_buried(const char *queue, const char *group)
{
	uint64_t qh, gh;
	int r = 0;

	if (atomic_load(&tomb_n) == 0)
		return 0;
	qh = hash_str(queue);
	gh = group ? pidx_group_hash(group) : 0;
	pthread_mutex_lock(&tomb_mu);
	for (size_t i = 0; i < atomic_load(&tomb_n); i++) {
		const struct tomb *t = &tombs[i];

		if (t->gh == 0 && t->qh == qh)
			r |= BURIED_QUEUE;
		else if (gh && t->gh == gh && (t->qh == 0 || t->qh == qh))
			r |= BURIED_GROUP;
	}
	pthread_mutex_unlock(&tomb_mu);
	return r;
}

void
pidx_forget_queue(const char *queue)
{
	struct pq_queue *q;

	lay_tomb(hash_str(queue), 0);
	pthread_mutex_lock(&pidx_write_mu);
	urcu_memb_read_lock();
	q = find_queue(queue);
	if (q) {
		struct pq_parts *parts = q->parts;

		for (size_t i = 0; i < parts_len(parts); i++)
			unlink_part(parts->p[i]);
		unlink_queue(q);
	}
	urcu_memb_read_unlock();
	pthread_mutex_unlock(&pidx_write_mu);
}

/* Slots marked GH_DYING (and their partitions), to be emptied once a grace period has
 * passed. */
struct dying {
	struct gslot **s;
	struct pq_part **p;
	size_t n, cap;
};

/* Marks the slots of gh on p dying (one, unless two claims raced). Under pidx_write_mu and
 * a read-side section. */
static void
kill_slot(struct pq_part *p, uint64_t gh, struct dying *d)
{
	for (struct gblock *b = atomic_load(&p->groups); b; b = gb_next(b)) {
		for (int i = 0; i < b->n; i++) {
			uint64_t want = gh;

			if (!atomic_compare_exchange_strong(&b->s[i].gh, &want, GH_DYING))
				continue;
			if (d->n == d->cap) {
				d->cap = d->cap ? 2 * d->cap : 64;
				d->s = realloc(d->s, d->cap * sizeof(d->s[0]));
				d->p = realloc(d->p, d->cap * sizeof(d->p[0]));
				QASSERT(d->s != NULL && d->p != NULL);
			}
			d->p[d->n] = p;
			d->s[d->n++] = &b->s[i];
		}
	}
}

static void
free_block_rcu(struct rcu_head *h)
{
	gb_free(caa_container_of(h, struct gblock, rcu));
}

/* Removes the empty blocks at the end of p's chain (never the first). Under pidx_write_mu,
 * the only place blocks are removed. A block is closed by taking its free slots
 * (0 -> GH_DYING) and then its next (NULL -> GB_END): a claim racing either wins first
 * (the block stays) or finds it closed and starts again from the head; it is unlinked and
 * freed after a grace period, when no walk is left in it. */
static void
trim_blocks(struct pq_part *p)
{
	for (;;) {
		struct gblock *prev = atomic_load(&p->groups), *last, *nil = NULL;
		int closed = 0;

		if (!prev || !(last = gb_next(prev)))
			return;
		while (gb_next(last)) {
			prev = last;
			last = gb_next(last);
		}
		for (; closed < last->n; closed++) {
			uint64_t free_gh = 0;

			if (!atomic_compare_exchange_strong(&last->s[closed].gh, &free_gh, GH_DYING))
				break;
		}
		if (closed < last->n || !atomic_compare_exchange_strong(&last->next, &nil,
									    GB_END)) {
			while (closed > 0)
				atomic_store(&last->s[--closed].gh, 0);
			return;
		}
		atomic_store(&prev->next, NULL);
		atomic_fetch_sub(&pidx_n_blocks, 1);
		urcu_memb_call_rcu(&last->rcu, free_block_rcu);
	}
}

/* Empties the dying slots for the next groups, and trims the blocks left empty. Under
 * pidx_write_mu, outside any read-side section: the partitions holding them are not freed
 * meanwhile (only writers holding the mutex remove partitions). After the grace period no
 * thread is left that found one of them by its old group, so none writes that group's
 * cursor into a slot another group takes. */
static void
bury_slots(struct dying *d)
{
	if (d->n)
		urcu_memb_synchronize_rcu();
	for (size_t i = 0; i < d->n; i++) {
		struct gslot *s = d->s[i];

		atomic_store(&s->committed, -1);
		atomic_store(&s->lease_until, 0);
		atomic_store(&s->stamp, 0);
		atomic_store(&s->implied, 0);
		atomic_store(&s->seen, 0);
		atomic_store(&s->gh, 0);
	}
	atomic_fetch_sub(&pidx_n_slots, (long)d->n);
	for (size_t i = 0; i < d->n; i++)
		if (i == 0 || d->p[i] != d->p[i - 1])
			trim_blocks(d->p[i]);
	free(d->s);
	free(d->p);
}

void
pidx_forget_group(const char *queue, uint64_t gh)
{
	struct dying d = { NULL, NULL, 0, 0 };
	struct cds_lfht_iter it;
	struct cds_lfht_node *n;

	lay_tomb(queue ? hash_str(queue) : 0, gh);
	pthread_mutex_lock(&pidx_write_mu);
	urcu_memb_read_lock();
	if (queue) {
		struct pq_queue *q = find_queue(queue);
		struct pq_parts *parts = q ? q->parts : NULL;

		for (size_t i = 0; q && i < parts_len(parts); i++)
			kill_slot(parts->p[i], gh, &d);
	} else {
		cds_lfht_for_each(ht_ids, &it, n)
			kill_slot(caa_container_of(n, struct pq_part, by_id), gh, &d);
	}
	urcu_memb_read_unlock();
	bury_slots(&d);
	pthread_mutex_unlock(&pidx_write_mu);
}

struct pidx_sweep
pidx_sweep_begin(int alone)
{
	struct pidx_sweep sw;

	/* Into an empty index that nothing else writes, every row is new: a million partitions
	 * at start-up were three hash lookups each that could only miss, over half the
	 * broker's CPU for the load. */
	sw.fill = alone && atomic_load(&pidx_n_parts) == 0;
	sw.gen = atomic_fetch_add(&sweep_gen, 1) + 1;
	clear_tombs(sw.gen);
	sw.mark = atomic_load(&cursor_seq);
	return sw;
}

int
pidx_sweep_partition(const struct pidx_sweep *sw, const struct pidx_part_row *row)
{
	struct pq_part *p;
	struct pid_key key;
	int advanced;

	if (pidx_sweep_buried(row->queue, NULL) & BURIED_QUEUE)
		return 0;
	pid_key_bytes(row->pid, &key);
	if (sw->fill) {
		learn_locked(row->queue_id, row->queue, row->ns, row->task, &key, row->partition,
			     row->log_end, sw->gen, 1);
		return 1;
	}
	urcu_memb_read_lock();
	p = find_key(&key);
	advanced = !p || atomic_max(&p->log_end, row->log_end);
	if (p && !labels_differ(p->q, row->ns, row->task)) {
		atomic_store(&p->seen, (uint32_t)sw->gen);
		urcu_memb_read_unlock();
		return advanced;
	}
	/* New, or its queue relabelled by a configure: under the write lock, which marks it
	 * seen (a million new partitions at start-up were five lookups each, two of them
	 * this one's again). */
	urcu_memb_read_unlock();
	learn_locked(row->queue_id, row->queue, row->ns, row->task, &key, row->partition,
		     row->log_end, sw->gen, 0);
	return advanced;
}

int
pidx_sweep_log_end(const uint8_t pid[16], int64_t log_end)
{
	struct pid_key key;

	pid_key_bytes(pid, &key);
	return log_end_of(&key, log_end) == 2;
}

void
pidx_sweep_cursor(const struct pidx_sweep *sw, const struct pidx_cursor_row *row)
{
	uint64_t gh = pidx_group_hash(row->group);
	struct pq_part *p;
	struct pid_key key;
	char *queue = NULL;	/* the partition's queue, when a tombstone may name it */
	int slot_made = 0;

	pid_key_bytes(row->pid, &key);
	urcu_memb_read_lock();
	p = find_key(&key);
	if (p) {
		struct gslot *s;

		if (atomic_load(&tomb_n) > 0)
			queue = xstrdup(p->q->name);
		s = queue && pidx_sweep_buried(queue, row->group) ? NULL : find_slot(p, gh, 1);
		if (s) {
			slot_set(s, row->committed, row->lease_until, 0, sw->mark, 0);
			atomic_store(&s->seen, (uint32_t)sw->gen);
			slot_made = 1;
			if (!queue && atomic_load(&tomb_n) > 0)
				queue = xstrdup(p->q->name);
		}
	}
	urcu_memb_read_unlock();
	/* The group's tombstone was asked before the slot was set, outside the write lock: a
	 * delete that laid it since may have emptied the slots before this one came back.
	 * Asked again now, either it is there, or the delete's own sweep comes after the slot. */
	if (slot_made && queue && (pidx_sweep_buried(queue, row->group) & BURIED_GROUP))
		pidx_forget_group(queue, gh);
	free(queue);
}

/* The slots of p whose group the sweep found nowhere: no cursor row in the snapshot, no
 * live update since it began, and not known to the database on this queue. */
static void
sweep_slots(const struct pidx_sweep *sw, struct pq_part *p,
	    int (*group_known)(void *arg, const char *queue, uint64_t gh), void *arg,
	    struct dying *d)
{
	for (struct gblock *b = atomic_load(&p->groups); b; b = gb_next(b)) {
		for (int i = 0; i < b->n; i++) {
			struct gslot *s = &b->s[i];
			uint64_t gh = atomic_load(&s->gh);

			if (gh == 0 || gh == GH_DYING || atomic_load(&s->seen) == (uint32_t)sw->gen ||
			    atomic_load(&s->stamp) > sw->mark || group_known(arg, p->q->name, gh))
				continue;
			kill_slot(p, gh, d);
		}
	}
}

void
pidx_sweep_end(const struct pidx_sweep *sw,
	       int (*group_known)(void *arg, const char *queue, uint64_t gh), void *arg)
{
	struct dying d = { NULL, NULL, 0, 0 };
	struct cds_lfht_iter it;
	struct cds_lfht_node *n;
	unsigned char *drop = NULL;
	size_t dropcap = 0;

	pthread_mutex_lock(&pidx_write_mu);
	urcu_memb_read_lock();
	cds_lfht_for_each(ht_queues, &it, n) {
		struct pq_queue *q = caa_container_of(n, struct pq_queue, node);
		struct pq_parts *parts = q->parts;
		size_t len = parts_len(parts), gone = 0;

		if (len > dropcap) {
			dropcap = len;
			drop = realloc(drop, dropcap);
			QASSERT(drop != NULL);
		}
		for (size_t i = 0; i < len; i++) {
			struct pq_part *p = parts->p[i];

			/* Added after the snapshot's query began: too new to be in it. */
			drop[i] = atomic_load(&p->seen) != (uint32_t)sw->gen &&
				  !born_since(p->born, sw->gen);
			gone += drop[i];
			if (!drop[i])
				sweep_slots(sw, p, group_known, arg, &d);
		}
		if (gone && drop_parts(q, drop) == 0)
			unlink_queue(q);
	}
	urcu_memb_read_unlock();
	free(drop);
	bury_slots(&d);
	pthread_mutex_unlock(&pidx_write_mu);
}

void
pidx_size(long *queues, long *partitions, long *group_slots, long *slot_blocks)
{
	*queues = atomic_load(&pidx_n_queues);
	*partitions = atomic_load(&pidx_n_parts);
	*group_slots = atomic_load(&pidx_n_slots);
	*slot_blocks = atomic_load(&pidx_n_blocks);
}

void
pidx_foreach_queue(void (*fn)(void *arg, const char *queue, long partitions, int64_t messages),
		   void *arg)
{
	struct cds_lfht_iter it;
	struct cds_lfht_node *n;

	urcu_memb_read_lock();
	for (cds_lfht_first(ht_queues, &it); (n = cds_lfht_iter_get_node(&it)) != NULL;
	     cds_lfht_next(ht_queues, &it)) {
		struct pq_queue *q = caa_container_of(n, struct pq_queue, node);
		struct pq_parts *parts = rcu_dereference(q->parts);
		int64_t total = 0;

		size_t len = parts_len(parts);

		for (size_t i = 0; i < len; i++)
			total += atomic_load(&parts->p[i]->log_end) + 1;
		fn(arg, q->name, (long)len, total);
	}
	urcu_memb_read_unlock();
}

/* How many offsets the group has to read on p as last seen (0 = nothing, or only a live lease
 * stands in the way: then *lease_block is its expiry). A group never seen here counts the
 * whole log: SQL decides where its cursor starts. *held: the group has a cursor row here, as
 * last seen (not only the start its subscription implies); *log_end: p's last offset. */
static int64_t
pending(struct pq_part *p, uint64_t gh, int64_t now, int64_t *lease_block, int *held,
	int64_t *log_end)
{
	int64_t end = atomic_load(&p->log_end), committed;
	struct gslot *s = find_slot(p, gh, 0);
	int64_t until;

	*lease_block = 0;
	*held = s && !atomic_load(&s->implied);
	*log_end = end;
	if (end < 0)
		return 0;
	if (!s)
		return end + 1;
	committed = atomic_load(&s->committed);
	if (committed >= end)
		return 0;
	until = atomic_load(&s->lease_until);
	if (until > now) {
		*lease_block = until;
		return 0;
	}
	return end - (committed < -1 ? -1 : committed);
}

/* Adds p to the candidates (out has room) when the group has something to read there; else
 * notes when its lease lapses. */
static void
offer(struct pq_part *p, uint64_t gh, int64_t now, struct pidx_cand *out, int *n,
      int64_t *recheck)
{
	int held;
	int64_t block, end, np = pending(p, gh, now, &block, &held, &end);

	if (np > 0) {
		memcpy(out[*n].id, p->id, sizeof(out[*n].id));
		out[*n].backlog = np;
		out[*n].held = held;
		out[*n].log_end = end;
		(*n)++;
	} else if (block && (*recheck == 0 || block < *recheck)) {
		*recheck = block;
	}
}

int
pidx_candidates(const char *queue, const char *partition, uint64_t gh, struct pidx_cand *out,
		int max, int64_t *recheck)
{
	int64_t now = wall_now_ms();
	int n = 0;

	*recheck = 0;
	urcu_memb_read_lock();
	if (partition) {
		struct pq_part *p = find_part(queue, partition);

		if (p)
			offer(p, gh, now, out, &n, recheck);
		else
			n = -1;
	} else {
		struct pq_queue *q = find_queue(queue);
		struct pq_parts *parts = q ? rcu_dereference(q->parts) : NULL;

		size_t len = q ? parts_len(parts) : 0;

		if (len == 0) {
			n = -1;
		} else {
			/* Concurrent pops start max apart, so that their candidate lists do not
			 * overlap where the queue has enough ready partitions: two pops offered
			 * the same partitions only skip each other's claims. Each lap of the
			 * rotor starts one further on, so that every partition comes first in
			 * turn: a step that shares a factor with len (8 over 10 partitions)
			 * would otherwise start only at every other one, and a pop of one
			 * partition would reach the rest only past locked claims. */
			unsigned r = atomic_fetch_add(&q->rotor, (unsigned)max);
			size_t start = ((size_t)r + (size_t)r / len) % len;

			/* The recheck time of a cut scan is unknown (0): a pop that then
			 * gets nothing from SQL looks again soon rather than at a lease the
			 * scan happened to see. */
			size_t i;

			for (i = 0; i < len && n < max; i++)
				offer(parts->p[(start + i) % len], gh, now, out, &n, recheck);
			if (i < len)
				*recheck = 0;
		}
	}
	urcu_memb_read_unlock();
	return n;
}
