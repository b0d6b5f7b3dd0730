/* maint: the background thread. It owns one database connection of its own, listens for
 * pushes committed by other brokers (NOTIFY queen_push) to keep the partition index fresh
 * and wake parked pops, and resyncs the whole index from PostgreSQL every
 * QUEEN_INDEX_RESYNC_MS. Every loop is bounded per round. */
#ifndef QUEEN_MAINT_H
#define QUEEN_MAINT_H

/* Loads the index once (synchronously, before the HTTP server starts). 0 or -1. */
int maint_initial_sync(void);
int maint_start(void);
void maint_stop(void);

#endif
