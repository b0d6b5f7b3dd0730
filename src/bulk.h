/* bulk: a few threads of lower CPU priority that run a worker's large work for it.
 *
 * Parsing a body of megabytes and storing a push too large to share a group commit take a
 * core for a long time. Run at the workers' priority they share the cores on equal terms
 * with the small requests of every other client; run here, niced by QUEEN_BULK_NICE, they
 * yield to them whenever both want a core. The worker that hands the work over waits for it
 * and lends its database connection, so the work runs as if on the worker: one connection
 * per worker, no more. With QUEEN_BULK_NICE 0 the work runs on the worker itself. */
#ifndef QUEEN_BULK_H
#define QUEEN_BULK_H

struct wk;

/* Starts the threads (none when QUEEN_BULK_NICE is 0). 0 on success. */
int bulk_start(void);
/* Stops them; work handed over later runs on its worker. */
void bulk_stop(void);
/* Runs fn(w, arg) on a bulk thread and returns when it has run. req names the request in
 * the log lines fn writes (log_request). */
void bulk_run(struct wk *w, unsigned long long req, void (*fn)(struct wk *w, void *arg),
	      void *arg);

#endif
