/* maint: the background thread. It owns one database connection of its own, listens for
 * pushes committed by other brokers (NOTIFY queen_push) to keep the partition index fresh
 * and wake parked pops, and resyncs the whole index from PostgreSQL every
 * QUEEN_INDEX_RESYNC_MS. Every loop is bounded per round. */
#ifndef QUEEN_MAINT_H
#define QUEEN_MAINT_H

/* Listens for pushes and loads the index once (synchronously, before the HTTP server
 * starts); the maintenance thread then goes on listening on that connection without
 * loading it again. 0 or -1 (the thread listens and loads it when it starts). */
int maint_initial_sync(void);
int maint_start(void);
void maint_stop(void);

#endif
