/* pindex: the RCU partition index, a cache of PostgreSQL (never the truth).
 *
 * Per queue: id, namespace, task and its partitions; per partition: id, last offset (log end)
 * and, for every consumer group that read it, the committed offset and lease expiry as last
 * seen. It resolves names to ids without a query, chooses which partitions a pop should
 * try (and how many: pop autopilot), and tells when a parked pop has nothing to wait for.
 * Every claim is still decided by SQL under a row lock, so a stale entry costs a wasted try
 * or a late wakeup, never a wrong delivery; LISTEN/NOTIFY and a periodic resync repair it.
 *
 * Thread context: any thread that calls the lookup or update functions must have called
 * pidx_thread_online (workers and the maintenance thread do). Readers never lock. */
#ifndef QUEEN_PINDEX_H
#define QUEEN_PINDEX_H

#include "uuid.h"

#include <stddef.h>
#include <stdint.h>

void pidx_init(void);
/* The index is never torn down: it goes with the process. Taking a million partitions out of
 * the hash tables one node at a time took more than a second of every stop, and what is
 * left at exit stays reachable (no leak for LeakSanitizer). */
void pidx_thread_online(void);
void pidx_thread_offline(void);

/* Keyed hash of a consumer group name (0 is never returned). */
uint64_t pidx_group_hash(const char *group);

/* 1 and the partition id when (queue, partition) is known, else 0. */
int pidx_lookup(const char *queue, const char *partition, char id[UUID_STR_LEN]);
/* Records a partition seen in PostgreSQL (push result, snapshot, notification). ns and task
 * may be NULL when unknown (kept, or derived from the name for a new queue). log_end only
 * grows. */
void pidx_learn(const char *queue_id, const char *queue, const char *ns, const char *task,
		const char *pid, const char *partition, int64_t log_end);
/* What one commit pushed: a (partition id, log end) pair per row, gathered while its rows
 * are read and handed to the push hook (the maintenance thread, which tells the other
 * brokers) all at once. Handed over row by row, the first rows of a commit could leave in a
 * notification before the worker had read the others: a pop on another broker then found
 * one partition of the commit and answered 204 for the rest until the next notification. */
struct pidx_push {
	char pid[UUID_STR_LEN];
	int64_t log_end;
};
struct pidx_pushes {
	struct pidx_push *v;
	size_t n, cap;
};
#define PIDX_PUSHES_INIT { NULL, 0, 0 }
/* A push committed to a partition: learns it like pidx_learn and adds it to ps. */
void pidx_pushed(struct pidx_pushes *ps, const char *queue_id, const char *queue,
		 const char *pid, const char *partition, int64_t log_end);
/* Hands what ps gathered to the push hook in one call and empties ps. */
void pidx_pushes_done(struct pidx_pushes *ps);
void pidx_set_push_hook(void (*hook)(const struct pidx_push *v, size_t n));
/* Records a partition's log end by id (notification from another broker). 0 when the
 * partition is unknown, 1 when known and unchanged, 2 when it advanced. */
int pidx_log_end(const char *pid, int64_t log_end);
/* Records a group's cursor on a partition: committed offset and lease expiry (wall ms, 0 =
 * none, -1 = unchanged). */
void pidx_cursor(const char *pid, uint64_t group_hash, int64_t committed, int64_t lease_until);
/* pidx_cursor, and the name of the partition's queue copied into queue, with one lookup (an
 * ack that released a lease wakes the pops parked on that queue); 0 when unknown. */
int pidx_cursor_queue(const char *pid, uint64_t group_hash, int64_t committed,
		      int64_t lease_until, char *queue, size_t len);
/* What a pop's rows say of a partition it claimed, with one lookup: pidx_cursor and
 * pidx_log_end of the partition whose id is these 16 bytes (as PostgreSQL sends a uuid in
 * binary). */
void pidx_claimed(const uint8_t id[16], uint64_t group_hash, int64_t committed,
		  int64_t lease_until, int64_t log_end);
/* A cursor the group has not got yet on a partition: start is where its subscription makes it
 * begin (SPEC 5 "First contact"), as a pop found. Kept apart from cursors seen in PostgreSQL,
 * because a change of the subscription moves it. Like a snapshot, it does not overwrite a
 * cursor updated live since mark (pidx_cursor_mark, taken before the query). */
void pidx_cursor_implied(const char *pid, uint64_t group_hash, int64_t start, uint64_t mark);
/* Forgets every implied cursor of the group (group_hash 0: of every group), after its
 * subscription changed: its pops go to SQL again, which tells the new starts. */
void pidx_forget_implied(uint64_t group_hash);
/* The same from a database snapshot: pidx_cursor_mark() is taken before the snapshot's
 * query, and a cursor updated live since then keeps the newer state. */
uint64_t pidx_cursor_mark(void);
void pidx_cursor_snapshot(const char *pid, uint64_t group_hash, int64_t committed,
			  int64_t lease_until, uint64_t mark);
/* Name of the queue a known partition belongs to; 0 when unknown. */
int pidx_queue_of(const char *pid, char *queue, size_t len);
/* Namespace and task of a known queue (copied into the buffers); 0 when unknown. */
int pidx_queue_labels(const char *queue, char *ns, size_t nslen, char *task, size_t tasklen);
/* Removes a deleted queue and its partitions (from this broker's delete). */
void pidx_forget_queue(const char *queue);
/* Empties the slots of a deleted group on the partitions of queue (NULL: of every queue), for
 * the next groups; its next pop there goes to SQL, as a first contact. Waits for a grace
 * period: not on a hot path. */
void pidx_forget_group(const char *queue, uint64_t group_hash);
/* Grows the partition tables to the partitions known, or to `expect` when more are about to
 * be loaded (one bucket each, a power of two): called by one thread at a time (the start-up
 * load, then the maintenance thread), outside any read-side critical section. */
void pidx_fit(long expect);

/* What the index holds now: queues, partitions, group slots in use, and blocks of 4 slots
 * beyond the first block of each partition (which holds one slot). */
void pidx_size(long *queues, long *partitions, long *group_slots, long *slot_blocks);

/* A resync against a database snapshot, so that the index follows what exists (queues
 * deleted and groups deleted on other brokers): pidx_sweep_begin before the snapshot's
 * queries, pidx_sweep_partition for every partition of it (then, when those rows came
 * without them, pidx_sweep_log_end for every segment's end), then pidx_sweep_cursor for every
 * cursor, then pidx_sweep_end, which removes the partitions the snapshot did not have (but
 * not those added since it began) and empties the slots of groups that have no cursor row
 * in it, no live update since it began, and that group_known (stored starts, asked after
 * the snapshot) does not know on the queue. Called by one thread at a time. */
struct pidx_sweep {
	uint64_t gen, mark;
	int fill;	/* the index was empty and nothing else writes it: every row is new */
};
/* A partition of the snapshot. */
struct pidx_part_row {
	const char *queue_id, *queue, *ns, *task, *partition;
	const uint8_t *pid;		/* its id's 16 bytes */
	int64_t log_end;
};
/* A group's cursor on a partition of the snapshot (its queue is the partition's). */
struct pidx_cursor_row {
	const char *group;
	const uint8_t *pid;
	int64_t committed, lease_until;
};
/* alone: nothing but this sweep uses the index until it ends (start-up); into an empty
 * index the partitions are then added without looking for them first. The snapshot has each
 * partition once. */
struct pidx_sweep pidx_sweep_begin(int alone);
/* Learns the partition and marks it seen. Leaves out what this broker deleted since the
 * sweep began, and never replaces a partition of the same name learned since (a queue
 * created again): the snapshot may predate either. Returns 1 when the partition was unknown
 * or its log end grew. */
int pidx_sweep_partition(const struct pidx_sweep *sw, const struct pidx_part_row *row);
/* Raises the log end of a partition the index holds to log_end, the last offset of one of
 * its segments in the snapshot (when the partitions' rows came without their segments'
 * ends). Returns 1 when it grew. */
int pidx_sweep_log_end(const uint8_t pid[16], int64_t log_end);
/* Learns the cursor of a partition the index holds (a cursor updated live since the sweep
 * began keeps its newer state) and marks it seen; leaves out a group this broker deleted
 * since. */
void pidx_sweep_cursor(const struct pidx_sweep *sw, const struct pidx_cursor_row *row);
void pidx_sweep_end(const struct pidx_sweep *sw,
		    int (*group_known)(void *arg, const char *queue, uint64_t group_hash),
		    void *arg);

/* Calls fn for every known queue with its partition count and the number of offsets its
 * partitions have allocated (messages ever stored), as last seen. fn must not block. */
void pidx_foreach_queue(void (*fn)(void *arg, const char *queue, long partitions,
				   int64_t messages), void *arg);

/* Pop candidates for (queue, partition or NULL, group): partitions whose log end is past the
 * group's committed offset and whose lease has lapsed, as last seen, in rotating order.
 * Returns their number (up to max), or -1 when the queue (or named partition) is unknown to
 * the index and SQL must look for itself. *recheck is set to the earliest wall time (ms) at
 * which a partition skipped for its lease becomes claimable, or 0. The scan stops at max
 * candidates: a pop over 100,000 partitions reads a few hundred of them, not all.
 * Consecutive calls start max partitions apart, and one further on at each lap of the
 * queue's partitions. */
struct pidx_cand {
	uint8_t id[16];		/* binary: a pop formats only the candidates it sends */
	int64_t backlog;	/* offsets the group has to read there as last seen (the whole
				 * log for a group the index has not seen on it) */
	int held;		/* the group has a cursor row there, as last seen */
	int64_t log_end;	/* the partition's last offset as last seen: committed, so never
				 * past the database's (it may lag it) */
};
int pidx_candidates(const char *queue, const char *partition, uint64_t group_hash,
		    struct pidx_cand *out, int max, int64_t *recheck);
#endif
