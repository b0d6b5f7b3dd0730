/* Unit tests of offmap: what a pop delivered under a lease, found again by the ack, forgotten
 * when acked or when the lease lapsed, and bounded. */
#include "offmap.h"
#include "tap.h"

#include <stdio.h>

#define L1 "0190f5c2-0000-7000-8000-000000000001"
#define L2 "0190f5c2-0000-7000-8000-000000000002"
#define P1 "5a1b2c3d-0000-4000-8000-000000000001"
#define P2 "5a1b2c3d-0000-4000-8000-000000000002"

int
main(void)
{
	char txn[32];

	om_init();
	om_put(L1, P1, "t-a", 41, 2000, 1000);
	om_put(L1, P1, "t-b", 42, 2000, 1000);
	is_int(om_get(L1, P1, "t-a"), 41, "the offset delivered under the lease");
	is_int(om_get(L1, P1, "t-b"), 42, "another message of the same lease");
	is_int(om_get(L2, P1, "t-a"), -1, "under another lease: unknown");
	is_int(om_get(L1, P2, "t-a"), -1, "on another partition: unknown");
	is_int(om_get(L1, P1, "t-c"), -1, "an id never delivered: unknown");
	om_put(L1, P1, "t-a", 45, 2000, 1000);
	is_int(om_get(L1, P1, "t-a"), 41, "an id twice in one span resolves to its lowest offset");
	om_put(L1, P1, "t-a", 40, 2000, 1000);
	is_int(om_get(L1, P1, "t-a"), 40, "a lower one replaces it");
	om_del(L1, P1, "t-a");
	is_int(om_get(L1, P1, "t-a"), -1, "acked: forgotten");
	is_int(om_count(), 1, "one entry left");

	/* Entries of a lapsed lease go as their stripe is written again. */
	for (int i = 0; i < 200000; i++) {
		snprintf(txn, sizeof(txn), "late-%d", i);
		om_put(L2, P2, txn, i, 9000, 5000);
	}
	ok(om_get(L1, P1, "t-b") == -1, "the lapsed lease's entry is swept");
	is_int(om_count(), 200000, "the live ones stay");
	for (int i = 200000; i < OM_MAX_ENTRIES + 1000; i++) {
		snprintf(txn, sizeof(txn), "late-%d", i);
		om_put(L2, P2, txn, i, 9000, 5000);
	}
	is_int(om_count(), OM_MAX_ENTRIES, "never more than OM_MAX_ENTRIES");
	snprintf(txn, sizeof(txn), "late-%d", OM_MAX_ENTRIES + 10);
	is_int(om_get(L2, P2, txn), -1, "beyond the bound: not kept (the ack reads SQL)");
	om_destroy();
	return tap_done();
}
