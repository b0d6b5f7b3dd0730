/* offmap: the offsets of the messages delivered under live leases, by (lease, partition,
 * transactionId), as the pop that delivered them read them from the segments.
 *
 * An ack names a message by its transactionId; finding its offset costs PostgreSQL a read of
 * the lease span's segments. What this broker delivered it already knows: a segment never
 * changes, and a lease id names one pop, so while that lease holds the cursor the offsets of
 * its span are exactly the ones recorded here. An ack that finds every item here is one keyed
 * update per (partition, group) (queen_ack_known verifies the lease and the span); anything
 * not found (another broker's pop, an entry dropped for room) goes the way it always went.
 * A cache: losing an entry costs a segment read, never a wrong commit.
 *
 * Thread-safe (striped mutexes); any thread. Entries leave when acked, or after their lease
 * expires (swept as the map is written), and the map holds at most OM_MAX_ENTRIES. */
#ifndef QUEEN_OFFMAP_H
#define QUEEN_OFFMAP_H

#include <stdint.h>

#define OM_MAX_ENTRIES 262144

void om_init(void);
void om_destroy(void);

/* Records that off of partition pid holds transactionId txn, delivered under lease until
 * lease_until (wall ms); now is the wall time in ms. Keeps the lowest offset of a txn that
 * occurs twice in one span (as SQL resolves it). Silently skipped when the map is full. */
void om_put(const char *lease, const char *pid, const char *txn, int64_t off,
	    int64_t lease_until, int64_t now);
/* The offset recorded for (lease, pid, txn), or -1. */
int64_t om_get(const char *lease, const char *pid, const char *txn);
/* Forgets (lease, pid, txn) (acked). */
void om_del(const char *lease, const char *pid, const char *txn);
/* Entries held (for tests and metrics). */
long om_count(void);

#endif
