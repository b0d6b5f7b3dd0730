/* Unit tests of offmap: what a pop delivered of a partition under a lease (a span), found again
 * by the ack, forgotten when acked or when the lease lapsed, and bounded. */
#include "offmap.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>

#define L1 "0190f5c2-0000-7000-8000-000000000001"
#define L2 "0190f5c2-0000-7000-8000-000000000002"
#define P1 "5a1b2c3d-0000-4000-8000-000000000001"
#define P2 "5a1b2c3d-0000-4000-8000-000000000002"

static int64_t
get1(const char *lease, const char *pid, const char *txn)
{
	int64_t off;

	om_get_run(lease, pid, 1, &txn, &off);
	return off;
}

int
main(void)
{
	const char *span[] = { "t-a", "t-b", "t-a", "t-c" };
	const int64_t offs[] = { 41, 42, 40, 43 };
	const char *run[] = { "t-c", "t-x", "t-b" };
	int64_t got[3];
	static char names[OM_MAX_ENTRIES + 1000][16];
	static const char *many[OM_MAX_ENTRIES + 1000];
	static int64_t many_offs[OM_MAX_ENTRIES + 1000];

	om_init();
	om_put_span(L1, P1, 4, span, offs, 2000, 1000);
	is_int(get1(L1, P1, "t-b"), 42, "the offset delivered under the lease");
	is_int(get1(L1, P1, "t-a"), 40, "an id twice in one span resolves to its lowest offset");
	is_int(om_count(), 3, "three messages held (one id twice)");
	is_int(get1(L2, P1, "t-a"), -1, "under another lease: unknown");
	is_int(get1(L1, P2, "t-a"), -1, "on another partition: unknown");
	is_int(get1(L1, P1, "t-x"), -1, "an id never delivered: unknown");
	is_int((int64_t)om_get_run(L1, P1, 3, run, got), 2, "a run of three: two found");
	ok(got[0] == 43 && got[1] == -1 && got[2] == 42, "each at its place, -1 for the unknown");

	om_del_run(L1, P1, 1, &span[0]);
	is_int(get1(L1, P1, "t-a"), -1, "acked: forgotten");
	is_int(get1(L1, P1, "t-b"), 42, "the rest of the span stays");
	is_int(om_count(), 2, "two messages left");
	om_del_run(L1, P1, 3, run);
	is_int(om_count(), 0, "all acked: the span is gone");
	is_int(get1(L1, P1, "t-b"), -1, "and nothing of it is found");

	/* A span of a lapsed lease goes as its stripe is written again. */
	om_put_span(L1, P1, 4, span, offs, 2000, 1000);
	for (int i = 0; i < OM_MAX_ENTRIES + 1000; i++) {
		snprintf(names[i], sizeof(names[i]), "late-%d", i);
		many[i] = names[i];
		many_offs[i] = i;
	}
	for (int i = 0; i < 20000; i++) {
		char lease[40];

		snprintf(lease, sizeof(lease), "0190f5c2-0000-7000-8000-%012d", 100 + i);
		om_put_span(lease, P2, 10, many + 10 * i, many_offs + 10 * i, 9000, 5000);
	}
	ok(get1(L1, P1, "t-b") == -1, "the lapsed lease's span is swept");
	is_int(om_count(), 200000, "the live ones stay");
	om_put_span(L2, P2, 70000, many + 200000, many_offs + 200000, 9000, 5000);
	is_int(om_count(), 200000, "a span past OM_MAX_ENTRIES messages is not kept");
	is_int(get1(L2, P2, many[200001]), -1, "its messages are not found (the ack reads SQL)");
	om_put_span(L2, P2, 62144, many + 200000, many_offs + 200000, 9000, 5000);
	is_int(om_count(), OM_MAX_ENTRIES, "one that fits is");
	is_int(get1(L2, P2, many[262143]), 262143, "and found");
	om_destroy();
	return tap_done();
}
