/* workers: the worker pool and its job queue.
 *
 * M threads (DB_POOL_SIZE), each owning one database connection. Jobs are requests handed
 * over by http.c (or re-submitted by the long-poll machinery). A worker that takes a job whose
 * route can serve several requests at once (push) also takes the other waiting jobs of that
 * route, up to QUEEN_GROUP_COMMIT_ITEMS items: that is group commit. */
#ifndef QUEEN_WORKERS_H
#define QUEEN_WORKERS_H

#include "errors.h"

struct req;
struct dbconn;

/* What a handler gets besides the request. */
struct wk {
	int id;
	struct dbconn *db;
};

int wk_start(int nthreads);
/* Finishes every queued job, then stops the threads. */
void wk_stop(void);
/* Queues a request. QE_BUSY when the queue is full (429), QE_SHUTDOWN when stopping. */
enum qe wk_submit(struct req *r);
/* 1 when a worker other than the caller's runs a job or a job waits for one. */
int wk_contended(void);
/* Jobs waiting for a worker, for metrics. */
long wk_queued(void);
/* 1 when a push request is heavy: too large to share a group commit, it runs alone on a lane
 * of its own (workers.c). */
int wk_heavy(const struct req *r);

/* The fewest push items worth a commit of their own beside another: a light lane opens
 * beside a running one, and a group commit is cut into shards on several connections, only
 * from this many on. Every commit costs the database a fixed part (its statement's set-up,
 * locks, commit) whatever it holds: below this, two commits cost more CPU than they save
 * time, and small pushes (batches of one from many clients) gather into one larger commit
 * behind the running one. */
#define WK_SPLIT_MIN_ITEMS 100

/* A call run by some worker with its own connection on behalf of another worker: the shards
 * of a push batch run on several connections at once (h_push.c). The caller owns the struct
 * and must wk_call_wait for it before freeing it. */
struct wk_call {
	void (*fn)(struct wk *w, void *arg);
	void *arg;
	int state;			/* private to workers.c */
	struct wk_call *next;
};

/* Queues the call ahead of every request and wakes an idle worker. */
void wk_call_submit(struct wk_call *c);
/* Returns once the call has run: runs it on w itself when no worker has taken it yet, so a
 * caller never waits for a worker that is busy (progress with a pool of one). */
void wk_call_wait(struct wk *w, struct wk_call *c);

#endif
