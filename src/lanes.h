/* lanes: a few threads with a database connection each, for work that one caller splits and
 * waits for. The spool's drainer replays a batch in shards, one per lane, so that the spool
 * empties at the rate of several connections rather than one (QUEEN_PUSH_LANES of them, the
 * caller's own connection being the first).
 *
 * Thread context: lanes_start and lanes_stop from the main thread; lanes_run from one thread
 * at a time (the maintenance thread). The lane threads are online in the partition index. */
#ifndef QUEEN_LANES_H
#define QUEEN_LANES_H

struct dbconn;

struct lane_job {
	void (*fn)(struct dbconn *db, void *arg);
	void *arg;
};

/* Starts n - 1 lane threads (n counts the caller's connection). 0, or -1 logged. */
int lanes_start(int n);
void lanes_stop(void);
/* Has every lane (re)connect now, in the background, when its connection is down: the
 * database is back, and the spool's replay should not wait for the lanes to connect. */
void lanes_warm(void);
/* How many jobs lanes_run can run at once: the caller's connection and the lanes. */
int lanes_count(void);
/* Runs jobs[0] on own and each other job on a lane of its own, all at once, and returns
 * when all are done. n <= lanes_count(). */
void lanes_run(struct dbconn *own, const struct lane_job *jobs, int n);

#endif
