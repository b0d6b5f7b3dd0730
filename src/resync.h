/* resync: the partition index reloaded from a snapshot of the database. */
#ifndef QUEEN_RESYNC_H
#define QUEEN_RESYNC_H

#include "dbpool.h"

#include <stdatomic.h>

/* Reloads every queue, partition and cursor into the index in one snapshot, and drops from
 * the index what the database no longer has; stops early (-1) once *stop is set. Returns how
 * many partitions were new or advanced, or -1. With a helper connection (else NULL) that
 * connects, the partitions and the cursors are each read in parts, two side by side. alone:
 * nothing else uses the index until this returns (start-up), see pidx_sweep_begin. One
 * thread at a time, outside any read-side critical section. */
int resync_run(struct dbconn *db, struct dbconn *helper, int alone, const _Atomic int *stop);

#endif
