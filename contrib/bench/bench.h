/*
 * queen-bench: what the phases share.  The common part (util.c, report.c, json.c, http.c,
 * engine.c, proc.c) is an HTTP/1.1 client, an epoll engine driving many keep-alive
 * connections, timing and percentiles, /proc readings of the broker, and the figures every
 * phase prints; each phase lives in a file of its own and reads on its own.
 *
 * Invariant of the engine: one request in flight per connection (no pipelining); the next
 * request of a connection is built only once the previous response has been read in full.
 * Everything runs on the main thread except the baseline's libpq workers and the retention
 * phase's stall probe, which touch nothing here but their own state.
 */
#ifndef QUEEN_BENCH_H
#define QUEEN_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define BASELINE_CONNS		16
#define BASELINE_ROWS		100
#define PUSH_BIG_BATCH		100
#define PUSH_BIG_CONNS		8
#define PUSH_SMALL_CONNS	64
#define POP_CONSUMERS		4
#define POP_BATCH		100
#define REQUEST_TIMEOUT_S	60.0	/* an unanswered request is abandoned after this */
#define POP_STALL_S		90.0	/* longer than the 60 s lease of a push-created queue */

/* ---------------------------------------------------------------- options (main.c) */

struct bench_opt {
	char host[256];
	char port[16];
	const char *pg;
	long queend_pid;
	const char *pg_data;		/* --pg-data: the database's CPU from /proc */
	const char *restart_cmd;	/* restarts the broker, prints its new pid (--scale) */
	const char *pg_cmd;	/* `CMD stop` / `CMD start` stop and start PostgreSQL (outage) */
	double outage_seconds;
	double duration;
	double steady_seconds;
	bool quick;
	bool scale;
	const char *only;
	long pop_messages;
	long drain_messages;
	long scale_partitions;
	int many_partitions;
	int lat_samples;
	int pop_partitions;	/* `partitions=` sent with each pop; 0 = not sent */
	int pop_autopilot;	/* send autopilot=true with each pop (default on) */
	bool verbose;		/* print every failure, not only the first of a phase */
};

extern struct bench_opt opt;
extern char run_id[32];

/* ---------------------------------------------------------------- util.c */

double now(void);
int64_t wall_ms(void);
__attribute__((noreturn, format(printf, 1, 2)))
void die(const char *fmt, ...);
void *xrealloc(void *p, size_t n);

/* A growable byte buffer; always NUL-terminated after the first write. */
struct buf {
	char *p;
	size_t len, cap;
};

void buf_reserve(struct buf *b, size_t extra);
void buf_add(struct buf *b, const void *s, size_t n);
void buf_adds(struct buf *b, const char *s);
__attribute__((format(printf, 2, 3)))
void buf_addf(struct buf *b, const char *fmt, ...);
void buf_free(struct buf *b);

double cpu_seconds(void);		/* this process, all threads */
uint64_t rng_next(uint64_t *s);
void uuid7(char out[37], uint64_t *rng);

/* Percentiles over a growable array of samples (seconds). */
struct samples {
	double *v;
	size_t n, cap;
};

void samples_add(struct samples *s, double x);
double samples_pct(struct samples *s, double pct);

/*
 * A JSON object of exactly `size` bytes: {"seq":"0000000000","pad":"..."}.  The ten digits are
 * stamped per message so every payload differs; the padding is random alphanumerics, the same
 * in every message, so that a segment of them compresses to a twentieth.  A unique payload
 * draws its padding anew for every message (random hex, as ids, hashes and ciphertext are):
 * nothing to gain for the compression of PostgreSQL, as with most real traffic.
 */
struct payload {
	char *text;
	size_t len;
	size_t seq_at;
	size_t pad_at;
	const char *tag;	/* for queue names: 100b, 1k */
	int base;		/* index into base_rate */
	bool unique;		/* the padding differs in every message */
};

extern struct payload payloads[2];	/* 100 B and 1 KiB */

void payload_init(struct payload *pl, size_t size, const char *tag, int base);
/* Stamps seq into a copy of pl->text (and, for a unique payload, its padding). */
void payload_stamp(char *copy, const struct payload *pl, uint64_t seq);
void buf_add_payload(struct buf *b, const struct payload *pl, uint64_t seq);

/* ---------------------------------------------------------------- report.c */

/* Counts by name (HTTP status, item status); a handful of distinct names is expected. */
#define NTALLY 8
struct tally {
	char name[24];
	long count;
};

struct failures {
	struct tally http[NTALLY];	/* unexpected HTTP statuses */
	struct tally items[NTALLY];	/* items whose verdict was not the expected one */
	long transport;			/* connect/send/recv errors, malformed responses */
	long timeouts;			/* requests abandoned unanswered */
	char first[240];		/* first error text seen */
};

extern long grand_failures;
extern double base_rate[2];		/* rows/s for 100 B and 1 KiB; 0 = not measured */
extern const char *base_name[2];

void tally_add(struct tally *t, const char *name, size_t nlen, long k);
void failures_note(struct failures *f, const char *what, const char *text, size_t n);
/* Prints the failure line of a phase (nothing when clean) and adds to the run's total. */
void failures_print(const char *label, const struct failures *f);

/* Prints and records one figure; `base` >= 0 adds its ratio to that baseline. */
void figure(const char *label, double value, const char *unit, int base, const char *note);
/* A figure that is the ratio num/den ("x"), 0 when den is not positive. */
void figure_ratio(const char *label, double num, double den, const char *note);
void print_summary(void);

/* ---------------------------------------------------------------- json.c */

/*
 * Just enough JSON to read the broker's answers.  Every function takes the end of the text
 * and returns NULL (false, -1) on anything malformed.
 */
struct js_arr {
	const char *p, *e, *cur;
};

bool js_arr_open(struct js_arr *a, const char *p, const char *e);
const char *js_arr_next(struct js_arr *a);
const char *js_get(const char *p, const char *e, const char *key);
bool js_str(const char *p, const char *e, const char **s, size_t *n);
bool js_is(const char *p, const char *e, const char *lit);
bool js_str_eq(const char *p, const char *e, const char *want);
long long js_ll(const char *p, const char *e, const char *key);

/* ---------------------------------------------------------------- http.c */

struct http_resp {
	int status;
	const char *body;	/* into the receive buffer, or the de-chunked copy */
	size_t body_len;
	bool close;		/* the server will close the connection */
};

void http_request(struct buf *out, const char *method, const char *path, const char *body,
		  size_t blen);
int http_parse(const char *in, size_t len, bool eof, struct buf *dechunk, struct http_resp *r);
void resolve_target(void);
int tcp_connect(bool nonblock);

/* One keep-alive connection used in lock step: for health checks and the latency phase. */
struct hclient {
	int fd;
	struct buf req, in, dechunk;
};

int hc_send(struct hclient *h, const char *method, const char *path, const char *body,
	    size_t blen);
/* Reads one response; r->body stays valid until the next call on this client. */
int hc_recv(struct hclient *h, struct http_resp *r);
int hc_call(struct hclient *h, const char *method, const char *path, const char *body,
	    size_t blen, struct http_resp *r);
void hc_free(struct hclient *h);
void check_health(void);

/* ---------------------------------------------------------------- engine.c */

/*
 * N keep-alive connections driven by one thread.  Each connection asks the phase for its next
 * request (`next`), sends it, reads the whole response and hands it to `reply`; `reply` may
 * ask for a pause (`not_before`) before the next request.  A transport error is counted, the
 * connection reopened and the request lost.
 */
enum cstate { CS_IDLE, CS_SEND, CS_RECV, CS_SLEEP, CS_DONE };
enum step { STEP_SEND, STEP_STOP };

struct engine;

struct conn {
	struct engine *en;
	int fd;
	int idx;
	enum cstate st;
	bool want_out;
	struct buf out;
	size_t out_off;
	struct buf in;
	struct buf dechunk;
	double t_sent;
	double not_before;
	void *sess;		/* the phase's per-connection state */
};

struct engine {
	int ep;
	int nconns, active;
	struct conn *conns;
	enum step (*next)(struct engine *en, struct conn *c);
	void (*reply)(struct engine *en, struct conn *c, const struct http_resp *r);
	void *phase;
	struct failures *fail;
	double t_start, t_last;
};

/* Runs until every connection's `next` said stop.  `sess` is an array of `sess_size` bytes each. */
void engine_run(struct engine *en, void *sess, size_t sess_size);
/* Records an unexpected HTTP status and its body. */
void fail_http_as(struct failures *f, const struct http_resp *r, const char *what);
void fail_http(struct failures *f, const struct http_resp *r);

/* ---------------------------------------------------------------- proc.c */

/* The broker's CPU seconds (utime + stime of /proc/<pid>/stat), or -1 when unreadable. */
double proc_cpu_seconds(long pid);
/* The CPU seconds of the PostgreSQL server of --pg-data: its postmaster, every process it
 * started that still runs, and those it has reaped; -1 when unreadable. */
double pg_cpu_seconds(void);
/* A "Vm...:" line of /proc/<pid>/status in KiB (VmRSS, VmHWM), or -1. */
long proc_status_kib(long pid, const char *field);

/*
 * Broker CPU over a stretch of a phase: cpu_mark before, cpu_per_msg after; the figure is
 * microseconds of broker CPU per message, or -1 without --queend-pid. figure_cpu prints the
 * database's beside it with --pg-data.
 */
struct cpu_mark {
	double broker, db, t;
};

void cpu_mark(struct cpu_mark *m);
double cpu_us_per_msg(const struct cpu_mark *m, long messages);
/* Prints "<label>: N us/msg" with its target, or a line saying why it was not measured; then,
 * with --pg-data, the database's CPU per message under the label's "broker" made "database". */
void figure_cpu(const char *label, const struct cpu_mark *m, long messages, const char *target);

/* ---------------------------------------------------------------- push.c */

/*
 * Items are spread round-robin over partitions p0..p{N-1}, item by item (a batch of 100 over
 * 10 partitions writes 10 messages to each), each connection starting at its own offset.
 * `sliced`: each connection keeps to its own N/conns of them instead, so no two requests in
 * flight ever share a partition and no push waits for another's partition row locks.
 */
struct push_run {
	const char *queue;
	int batch;
	int nparts;
	bool sliced;
	bool once;		/* sliced: each connection writes one message to each of its own */
	bool txn_ids;		/* send a transactionId per item (t<seq>) */
	const struct payload *pl;
	double stop_at;		/* no new request after this */
	long to_send;		/* items left to send, or -1 for "until stop_at" */
	double rate_per_conn;	/* > 0: each connection paces its requests to this many msg/s */
	uint64_t seq;
	long queued, requests;
	struct samples lat;
	struct failures fail;
	struct buf body;
	double *t_queued;	/* when set: [seq] = when the push of item seq was answered */
	uint64_t t_cap;		/* entries of t_queued */
	/* The outage phase: "buffered" items count as acknowledged (buffered; how[seq] = 2,
	 * queued ones 1, when how is set) and 503 answers as refusals, not failures. */
	bool outage;
	long buffered, refused;
	uint8_t *how;
};

/* Pushes with `nconns` connections; returns queued messages per second. */
double push_run(struct push_run *ph, int nconns, double *elapsed);
/* One push figure of --duration: `batch` items a request from `nconns` connections over
 * `nparts` partitions of a queue of its own, each item with a transactionId when `txn_ids`
 * (the queue's dedup window is on); `target` is appended to the note; the run's counters
 * are copied to *out when given (its samples are freed).  Returns msg/s. */
double push_figure(int batch, int nconns, const struct payload *pl, int nparts, bool txn_ids,
		   const char *label, const char *target, struct push_run *out);
/* A push capacity of 1 KiB items: `fig` when an earlier phase measured it (> 0), else
 * push_figure for at most 5 s.  Returns msg/s. */
double push_capacity(double fig, int batch, int nconns, int nparts, const char *label);
/* Fills `queue` with `count` messages over `nparts` partitions, batch 100 from 8 connections,
 * and prints one "prefill" line; returns the number queued. */
long push_fill(const char *queue, int nparts, long count, const struct payload *pl,
	       const char *label, double *rate);

/* ---------------------------------------------------------------- pop.c */

struct pop_run {
	const char *queue;
	const char *group;
	long target;		/* messages to acknowledge */
	long popped, acked, noop, pops, empty, acks;
	double last_progress;
	bool stalled;
	struct buf path;
	double stop_at;		/* > 0: no new pop after this, whatever is left */
	struct samples lat;	/* pop latency (answers carrying messages or not) */
	struct failures fail;
	double *t_popped;	/* when set: [seq of the payload] = when its pop was answered */
	uint64_t t_cap;		/* entries of t_popped */
	long repeated;		/* with t_popped: messages popped again (redelivered) */
	long distinct;		/* with t_popped: messages popped at least once */
	bool outage;		/* 503 answers are refusals, not failures */
	long refused;
};

struct pop_conn {
	struct pop_run *run;	/* the group this consumer drains for */
	bool ack_next;		/* the next request is the ack of the last pop */
	bool in_ack;		/* the request in flight is an ack */
	int ack_items;
	struct buf ack;
};

int pop_build_ack(struct pop_run *ph, struct pop_conn *pc, const struct http_resp *r);
void pop_answer_empty(struct conn *c, long *empty);
bool pop_answer_ok(struct conn *c, const struct http_resp *r, long *empty, struct failures *f);
/* The pop path of a pop+ack drain of `queue` by `group` (batch POP_BATCH, wait=false). */
void pop_path(struct buf *path, const char *queue, const char *group, bool autopilot);
/* Drains ph->target messages (or until ph->stop_at) with `nconns` consumers (pop +
 * ack/batch); returns acked/s.  The caller frees ph->path, ph->lat.v. */
double pop_drain(struct pop_run *ph, int nconns, double *elapsed);
/* The same for `nruns` groups at once, `conns_each` consumers each, in one engine; returns
 * the messages acked by all of them per second. */
double pop_drain_many(struct pop_run *runs, int nruns, int conns_each, double *elapsed);
/* Counts a pop after the drain that still found something for the group as a failure. */
void pop_check_empty(struct pop_run *ph);

/*
 * A timed load (steady.c; the steady and outage phases): producers push `batch` 1 KiB items
 * over `nparts` partitions paced to `rate` msg/s in all (0 = unpaced), every item answered
 * timed in prod->t_queued and every message popped timed in cons->t_popped (by payload seq,
 * `cap` of them), while consumers of `group` long-poll pop batch 100 and ack.  The caller
 * sets the end (prod->stop_at, cons->target or cons->stop_at) and runs the producers on a
 * thread of their own and pop_drain on its own; load_free frees what load_init allocated.
 */
void load_init(struct push_run *prod, struct pop_run *cons, const char *queue,
	       const char *group, int batch, int nparts, double rate, int producers,
	       uint64_t cap);
void load_free(struct push_run *prod, struct pop_run *cons);

/* A queue holding one 1 KiB message in each of `nparts` new partitions (drain.c), with a
 * transactionId per message when `txn_ids`; returns how many were queued. */
long fill_one_each(const char *queue, long nparts, bool txn_ids, double *rate, double *p99);

/* ---------------------------------------------------------------- phases */

void phase_baseline(const struct payload *pl);
void phase_push(int batch, int nconns, const struct payload *pl, int nparts);
void phase_pop(int nparts);
void phase_txn(void);
void phase_timers(void);
void phase_latency(void);
void phase_retention(void);
void phase_rss(void);
void phase_push_load(void);
void phase_drain(void);
void phase_groups(void);
void phase_steady(void);
void phase_scale(void);
void phase_encrypt(void);
void phase_outage(void);

/* Figures shared between phases of one run: 0 = not measured in this run. */
extern double fig_push_b100;		/* push b100 1KiB 16c 10p, msg/s */
extern double fig_push_b1;		/* push b1 1KiB 16c 10p, msg/s */
extern double fig_drain_10p;		/* drain 10p, 4 consumers, msg/s */

#endif
