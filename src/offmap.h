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
 * Thread-safe (striped mutexes); any thread. Messages leave when acked, a span once all of
 * its messages are acked or after its lease expires (swept as the map is written), and the
 * map holds at most OM_MAX_ENTRIES messages. */
#ifndef QUEEN_OFFMAP_H
#define QUEEN_OFFMAP_H

#include <stddef.h>
#include <stdint.h>

#define OM_MAX_ENTRIES 262144

void om_init(void);
void om_destroy(void);

/* Records what one pop delivered of partition pid under lease, until lease_until (wall ms;
 * now is the wall time in ms): n messages, transactionId txns[i] at offset offs[i]. A txn
 * twice keeps its lowest offset (as SQL resolves it). Replaces what was held for (lease,
 * pid). Silently skipped when the map would hold more than OM_MAX_ENTRIES messages. */
void om_put_span(const char *lease, const char *pid, size_t n, const char *const *txns,
		 const int64_t *offs, int64_t lease_until, int64_t now);
/* The offsets recorded for n transactionIds of (lease, pid): offs[i] for txns[i], or -1.
 * Returns how many were found. */
size_t om_get_run(const char *lease, const char *pid, size_t n, const char *const *txns,
		  int64_t *offs);
/* Forgets n transactionIds of (lease, pid) (acked). */
void om_del_run(const char *lease, const char *pid, size_t n, const char *const *txns);
/* Messages held (for tests and metrics). */
long om_count(void);

#endif
