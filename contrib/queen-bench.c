/*
 * queen-bench: a one-run benchmark of queend against the PostgreSQL it stores into.
 *
 * Every throughput figure is printed with its ratio to a baseline measured in the same run on
 * the same server: the same payloads inserted straight over libpq, 100 rows per INSERT, from
 * 16 connections.  Phases: baseline, push (batch 100 x 8 connections, batch 1 x 64
 * connections; 100 B and 1 KiB payloads; 10 and 10,000 partitions), pop+ack draining a
 * pre-pushed backlog with 4 consumers, a pipeline stage (pop 100, then one transaction per
 * message acking it and pushing its successor, 16 connections, in slices alternating with
 * batch-1 pushes of as many connections),
 * 10,000 timers due in the same second, long-poll wake latency, batch pushes over 10,000
 * partitions while the broker's retention rounds delete their aged segments, and the broker's
 * peak RSS.
 *
 * The HTTP side is one epoll loop with a hand-written HTTP/1.1 client and a tiny JSON scanner,
 * so on a 2-core machine shared with PostgreSQL and the broker the client costs far less CPU
 * than either.  Invariant: one request in flight per connection (no pipelining); the next
 * request of a connection is built only once the previous response has been read in full.
 *
 * Build: gcc -O2 -Wall -Wextra -std=gnu11 -I$(pg_config --includedir) queen-bench.c -lpq -lpthread
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#define BASELINE_CONNS		16
#define BASELINE_ROWS		100
#define PUSH_BIG_BATCH		100
#define PUSH_BIG_CONNS		8
#define PUSH_SMALL_CONNS	64
#define POP_CONSUMERS		4
#define POP_BATCH		100
#define REQUEST_TIMEOUT_S	60.0	/* an unanswered request is abandoned after this */
#define POP_STALL_S		90.0	/* longer than the 60 s lease of a push-created queue */
#define TXN_MESSAGES_PER_S	5000	/* input backlog per second of --duration, more than consumed */
#define TXN_PARTITIONS		1000
#define TXN_CONNS		16
#define TXN_POP_BATCH		100	/* messages a stage pops at once, one transaction each */
#define TXN_SLICES		4	/* alternations of the transaction loop and the yardstick */
#define TIMER_COUNT		10000
#define TIMER_OPS		250	/* ops per /timers call (SPEC 14 allows 256) */
#define TIMER_POLL_MS		50
#define TIMER_WAIT_S		60.0	/* after the due second, then the missing ones are failures */
#define RET_SECONDS		1	/* retentionSeconds of the retention phase's queue */
#define RET_PREFILL_SEGMENTS	4	/* segments each partition holds before the window */
#define RET_STALL_MS		50	/* SPEC target: no push stalled longer by a round */

/* ---------------------------------------------------------------- options */

static struct {
	char host[256];
	char port[16];
	const char *pg;
	long queend_pid;
	double duration;
	bool quick;
	const char *only;
	long pop_messages;
	int many_partitions;
	int lat_samples;
	int pop_partitions;	/* `partitions=` sent with each pop; 0 = not sent */
	int pop_autopilot;	/* send autopilot=true with each pop (default on) */
	bool verbose;		/* print every failure, not only the first of a phase */
} opt = {
	.host = "127.0.0.1",
	.port = "6632",
	.duration = 10,
	.pop_messages = 200000,
	.many_partitions = 10000,
	.pop_autopilot = 1,
	.lat_samples = 200,
};

static char run_id[32];
static struct addrinfo *target_ai;

/* ---------------------------------------------------------------- small utilities */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "queen-bench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n);
	if (!p)
		die("out of memory");
	return p;
}

/* A growable byte buffer; always NUL-terminated after the first write. */
struct buf {
	char *p;
	size_t len, cap;
};

static void buf_reserve(struct buf *b, size_t extra)
{
	if (b->len + extra + 1 <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + extra + 1)
		cap *= 2;
	b->p = xrealloc(b->p, cap);
	b->cap = cap;
}

static void buf_add(struct buf *b, const void *s, size_t n)
{
	buf_reserve(b, n);
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void buf_adds(struct buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

__attribute__((format(printf, 2, 3)))
static void buf_addf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	buf_reserve(b, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

static void buf_free(struct buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

/* CPU seconds this process has used, all threads. */
static double cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* xorshift64*: fast, good enough for padding and uuid bits. */
static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ULL;
}

/* A UUIDv7 (time-ordered, like the broker's message ids) as 36 characters plus NUL. */
static void uuid7(char out[37], uint64_t *rng)
{
	struct timespec ts;
	uint8_t b[16];
	uint64_t ms, r1, r2;

	clock_gettime(CLOCK_REALTIME, &ts);
	ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	r1 = rng_next(rng);
	r2 = rng_next(rng);
	for (int i = 0; i < 6; i++)
		b[i] = (uint8_t)(ms >> (40 - 8 * i));
	for (int i = 0; i < 8; i++)
		b[6 + i] = (uint8_t)(r1 >> (8 * i));
	b[14] = (uint8_t)r2;
	b[15] = (uint8_t)(r2 >> 8);
	b[6] = 0x70 | (b[6] & 0x0f);
	b[8] = 0x80 | (b[8] & 0x3f);
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
		 b[13], b[14], b[15]);
}

/* Percentiles over a growable array of samples (seconds). */
struct samples {
	double *v;
	size_t n, cap;
};

static void samples_add(struct samples *s, double x)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 1024;
		s->v = xrealloc(s->v, s->cap * sizeof(*s->v));
	}
	s->v[s->n++] = x;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double samples_pct(struct samples *s, double pct)
{
	if (s->n == 0)
		return 0;
	qsort(s->v, s->n, sizeof(*s->v), cmp_double);
	size_t i = (size_t)(pct / 100.0 * (double)(s->n - 1) + 0.5);
	return s->v[i];
}

/* ---------------------------------------------------------------- failures */

/* Counts by name (HTTP status, item status); a handful of distinct names is expected. */
#define NTALLY 8
struct tally {
	char name[24];
	long count;
};

static void tally_add(struct tally *t, const char *name, size_t nlen, long k)
{
	int i;

	if (nlen >= sizeof(t[0].name))
		nlen = sizeof(t[0].name) - 1;
	for (i = 0; i < NTALLY && t[i].count; i++)
		if (strlen(t[i].name) == nlen && memcmp(t[i].name, name, nlen) == 0)
			break;
	if (i == NTALLY)
		i = NTALLY - 1;		/* overflow lumps into the last slot */
	if (!t[i].count) {
		memcpy(t[i].name, name, nlen);
		t[i].name[nlen] = '\0';
	}
	t[i].count += k;
}

struct failures {
	struct tally http[NTALLY];	/* unexpected HTTP statuses */
	struct tally items[NTALLY];	/* items whose verdict was not the expected one */
	long transport;			/* connect/send/recv errors, malformed responses */
	long timeouts;			/* requests abandoned unanswered */
	char first[240];		/* first error text seen */
};

static long failures_total(const struct failures *f)
{
	long n = f->transport + f->timeouts;

	for (int i = 0; i < NTALLY; i++)
		n += f->http[i].count + f->items[i].count;
	return n;
}

static void failures_note(struct failures *f, const char *what, const char *text, size_t n)
{
	if (n > 160)
		n = 160;
	if (opt.verbose)
		fprintf(stderr, "queen-bench: %s: %.*s\n", what, (int)n, text);
	if (f->first[0])
		return;
	snprintf(f->first, sizeof(f->first), "%s: %.*s", what, (int)n, text);
	for (char *p = f->first; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
}

static long grand_failures;

/* Prints the failure line of a phase (nothing when clean) and adds to the run's total. */
static void failures_print(const char *label, const struct failures *f)
{
	long total = failures_total(f);

	grand_failures += total;
	if (!total)
		return;
	printf("  FAILURES in %s: %ld", label, total);
	for (int i = 0; i < NTALLY && f->http[i].count; i++)
		printf(" | HTTP %s x%ld", f->http[i].name, f->http[i].count);
	for (int i = 0; i < NTALLY && f->items[i].count; i++)
		printf(" | item %s x%ld", f->items[i].name, f->items[i].count);
	if (f->transport)
		printf(" | transport errors x%ld", f->transport);
	if (f->timeouts)
		printf(" | timeouts x%ld", f->timeouts);
	printf("\n");
	if (f->first[0])
		printf("  first error: %s\n", f->first);
}

/* ---------------------------------------------------------------- figures */

struct figure {
	char label[64];
	double value;
	const char *unit;
	int base;		/* index into base_rate, or -1 */
	char note[96];
};

static struct figure figures[64];
static int nfigures;
static double base_rate[2];	/* rows/s for 100 B and 1 KiB; 0 = not measured */
static const char *base_name[2] = { "100B", "1KiB" };

static void figure_line(const struct figure *f, char *out, size_t n)
{
	/* A label that has its own colon ("...: fired in") reads on without a second one. */
	const char *sep = strchr(f->label, ':') ? " " : ": ";
	int k;

	if (strcmp(f->unit, "x") == 0)		/* a ratio: 0.45x */
		k = snprintf(out, n, "%s%s%.2fx", f->label, sep, f->value);
	else if (strcmp(f->unit, "s") == 0)
		k = snprintf(out, n, "%s%s%.2f %s", f->label, sep, f->value, f->unit);
	else if (strcmp(f->unit, "ms") == 0 || strcmp(f->unit, "MiB") == 0)
		k = snprintf(out, n, "%s%s%.1f %s", f->label, sep, f->value, f->unit);
	else
		k = snprintf(out, n, "%s%s%.0f %s", f->label, sep, f->value, f->unit);
	if (k < 0 || (size_t)k >= n)
		return;
	if (f->base >= 0 && base_rate[f->base] > 0)
		snprintf(out + k, n - (size_t)k, " (%.2fx baseline %s)",
			 f->value / base_rate[f->base], base_name[f->base]);
	else if (f->base >= 0)
		snprintf(out + k, n - (size_t)k, " (no baseline)");
}

static void figure(const char *label, double value, const char *unit, int base, const char *note)
{
	struct figure *f;
	char line[256];

	if (nfigures == (int)(sizeof(figures) / sizeof(figures[0])))
		die("too many figures");
	f = &figures[nfigures++];
	snprintf(f->label, sizeof(f->label), "%s", label);
	f->value = value;
	f->unit = unit;
	f->base = base;
	snprintf(f->note, sizeof(f->note), "%s", note ? note : "");
	figure_line(f, line, sizeof(line));
	printf("%s%s%s\n", line, f->note[0] ? "  " : "", f->note);
}

/* ---------------------------------------------------------------- payloads */

/*
 * A JSON object of exactly `size` bytes: {"seq":"0000000000","pad":"..."}.  The ten digits are
 * stamped per message so every payload differs; the padding is random alphanumerics.
 */
struct payload {
	char *text;
	size_t len;
	size_t seq_at;
	const char *tag;	/* for queue names: 100b, 1k */
	int base;		/* index into base_rate */
};

static struct payload payloads[2];

static void payload_init(struct payload *pl, size_t size, const char *tag, int base)
{
	static const char alnum[] =
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	const char *head = "{\"seq\":\"0000000000\",\"pad\":\"";
	uint64_t rng = 0x9e3779b97f4a7c15ULL + size;
	size_t hl = strlen(head);

	pl->text = xrealloc(NULL, size + 1);
	memcpy(pl->text, head, hl);
	for (size_t i = hl; i < size - 2; i++)
		pl->text[i] = alnum[rng_next(&rng) % (sizeof(alnum) - 1)];
	memcpy(pl->text + size - 2, "\"}", 3);
	pl->len = size;
	pl->seq_at = strlen("{\"seq\":\"");
	pl->tag = tag;
	pl->base = base;
}

static void payload_stamp(char *copy, const struct payload *pl, uint64_t seq)
{
	char *d = copy + pl->seq_at;

	for (int i = 9; i >= 0; i--) {
		d[i] = (char)('0' + seq % 10);
		seq /= 10;
	}
}

static void buf_add_payload(struct buf *b, const struct payload *pl, uint64_t seq)
{
	size_t at = b->len;

	buf_add(b, pl->text, pl->len);
	payload_stamp(b->p + at, pl, seq);
}

/* ---------------------------------------------------------------- tiny JSON scanner */

/*
 * Just enough JSON to read the broker's answers: walk arrays, find an object's member, read a
 * string's raw contents (escapes left in place, so they can be copied back into JSON as is).
 * Every function takes the end of the text and returns NULL on anything malformed.
 */
static const char *js_ws(const char *p, const char *e)
{
	while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

static const char *js_str_end(const char *p, const char *e)
{
	for (p++; p < e; p++) {
		if (*p == '\\')
			p++;
		else if (*p == '"')
			return p + 1;
	}
	return NULL;
}

static const char *js_skip(const char *p, const char *e)
{
	p = js_ws(p, e);
	if (p >= e)
		return NULL;
	if (*p == '"')
		return js_str_end(p, e);
	if (*p == '{' || *p == '[') {
		int depth = 0;

		while (p < e) {
			if (*p == '"') {
				p = js_str_end(p, e);
				if (!p)
					return NULL;
				continue;
			}
			if (*p == '{' || *p == '[')
				depth++;
			else if ((*p == '}' || *p == ']') && --depth == 0)
				return p + 1;
			p++;
		}
		return NULL;
	}
	while (p < e && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n' &&
	       *p != '\r' && *p != '\t')
		p++;
	return p;
}

struct js_arr {
	const char *p, *e, *cur;
};

static bool js_arr_open(struct js_arr *a, const char *p, const char *e)
{
	p = p ? js_ws(p, e) : e;
	if (p >= e || *p != '[')
		return false;
	a->p = p + 1;
	a->e = e;
	a->cur = NULL;
	return true;
}

/* The next element of the array, or NULL at its end (or when malformed). */
static const char *js_arr_next(struct js_arr *a)
{
	const char *p = a->p;

	if (!p)
		return NULL;
	if (a->cur) {
		p = js_skip(a->cur, a->e);
		p = p ? js_ws(p, a->e) : NULL;
		if (!p || p >= a->e || *p != ',') {
			a->p = NULL;
			return NULL;
		}
		p++;
	}
	p = js_ws(p, a->e);
	if (p >= a->e || *p == ']') {
		a->p = NULL;
		return NULL;
	}
	a->cur = p;
	return p;
}

/* The value of member `key` of the object at p, or NULL. */
static const char *js_get(const char *p, const char *e, const char *key)
{
	size_t klen = strlen(key);

	p = p ? js_ws(p, e) : e;
	if (p >= e || *p != '{')
		return NULL;
	p++;
	for (;;) {
		const char *ks, *ke;

		p = js_ws(p, e);
		if (p >= e || *p != '"')
			return NULL;
		ks = p + 1;
		ke = js_str_end(p, e);
		if (!ke)
			return NULL;
		p = js_ws(ke, e);
		if (p >= e || *p != ':')
			return NULL;
		p = js_ws(p + 1, e);
		if ((size_t)(ke - 1 - ks) == klen && memcmp(ks, key, klen) == 0)
			return p;
		p = js_skip(p, e);
		if (!p)
			return NULL;
		p = js_ws(p, e);
		if (p < e && *p == ',')
			p++;
	}
}

/* The raw contents of the string at p. */
static bool js_str(const char *p, const char *e, const char **s, size_t *n)
{
	const char *end;

	if (!p || p >= e || *p != '"')
		return false;
	end = js_str_end(p, e);
	if (!end)
		return false;
	*s = p + 1;
	*n = (size_t)(end - 1 - (p + 1));
	return true;
}

static bool js_is(const char *p, const char *e, const char *lit)
{
	size_t n = strlen(lit);

	return p && (size_t)(e - p) >= n && memcmp(p, lit, n) == 0;
}

static bool js_str_eq(const char *p, const char *e, const char *want)
{
	const char *s;
	size_t n;

	return js_str(p, e, &s, &n) && n == strlen(want) && memcmp(s, want, n) == 0;
}

/* The non-negative integer member `key` of the object at p, or -1 when it is missing. */
static long long js_ll(const char *p, const char *e, const char *key)
{
	const char *v = js_get(p, e, key);

	return v && v < e && *v >= '0' && *v <= '9' ? strtoll(v, NULL, 10) : -1;
}

/* ---------------------------------------------------------------- HTTP/1.1 */

struct http_resp {
	int status;
	const char *body;	/* into the receive buffer, or the de-chunked copy */
	size_t body_len;
	bool close;		/* the server will close the connection */
};

static void http_request(struct buf *out, const char *method, const char *path, const char *body,
			 size_t blen)
{
	out->len = 0;
	buf_addf(out, "%s %s HTTP/1.1\r\nHost: %s:%s\r\n", method, path, opt.host, opt.port);
	if (body)
		buf_addf(out, "Content-Type: application/json\r\nContent-Length: %zu\r\n", blen);
	buf_adds(out, "\r\n");
	if (body)
		buf_add(out, body, blen);
}

static bool hdr_value(const char *line, size_t n, const char *name, const char **v, size_t *vlen)
{
	size_t k = strlen(name);
	const char *p, *e = line + n;

	if (n <= k || line[k] != ':' || strncasecmp(line, name, k) != 0)
		return false;
	for (p = line + k + 1; p < e && (*p == ' ' || *p == '\t'); p++)
		;
	*v = p;
	*vlen = (size_t)(e - p);
	return true;
}

static bool has_token(const char *v, size_t n, const char *tok)
{
	size_t k = strlen(tok);

	for (size_t i = 0; i + k <= n; i++)
		if (strncasecmp(v + i, tok, k) == 0)
			return true;
	return false;
}

static int http_dechunk(const char *p, const char *e, struct buf *out, struct http_resp *r)
{
	out->len = 0;
	for (;;) {
		const char *nl = memmem(p, (size_t)(e - p), "\r\n", 2);
		unsigned long sz;
		char *endp;

		if (!nl)
			return 0;
		sz = strtoul(p, &endp, 16);
		if (endp == p)
			return -1;
		p = nl + 2;
		if (sz == 0) {
			for (;;) {	/* trailers, up to the empty line */
				nl = memmem(p, (size_t)(e - p), "\r\n", 2);
				if (!nl)
					return 0;
				if (nl == p)
					break;
				p = nl + 2;
			}
			buf_reserve(out, 0);
			r->body = out->p;
			r->body_len = out->len;
			return 1;
		}
		if ((size_t)(e - p) < sz + 2)
			return 0;
		buf_add(out, p, sz);
		p += sz + 2;
	}
}

/*
 * Parses the response in in[0..len).  Returns 1 when it is complete, 0 when more bytes are
 * needed, -1 when it is malformed.  `eof`: the peer closed, so a body without a length ends.
 */
static int http_parse(const char *in, size_t len, bool eof, struct buf *dechunk,
		      struct http_resp *r)
{
	const char *he, *p, *body;
	long clen = -1;
	bool chunked = false;
	size_t avail;

	if (len == 0)
		return eof ? -1 : 0;
	he = memmem(in, len, "\r\n\r\n", 4);
	if (!he)
		return eof || len > 65536 ? -1 : 0;
	if (len < 12 || memcmp(in, "HTTP/1.", 7) != 0)
		return -1;
	r->status = atoi(in + 9);
	r->close = in[7] == '0';
	p = (const char *)memmem(in, (size_t)(he + 2 - in), "\r\n", 2) + 2;
	while (p < he + 2) {
		const char *q = memmem(p, (size_t)(he + 2 - p), "\r\n", 2), *v;
		size_t vlen;

		if (hdr_value(p, (size_t)(q - p), "content-length", &v, &vlen))
			clen = strtol(v, NULL, 10);
		else if (hdr_value(p, (size_t)(q - p), "transfer-encoding", &v, &vlen))
			chunked = has_token(v, vlen, "chunked");
		else if (hdr_value(p, (size_t)(q - p), "connection", &v, &vlen))
			r->close = has_token(v, vlen, "close");
		p = q + 2;
	}
	body = he + 4;
	avail = (size_t)(in + len - body);
	r->body = body;
	r->body_len = 0;
	if (r->status < 200)
		return -1;		/* no 1xx expected: we never send Expect */
	if (r->status == 204 || r->status == 304)
		return 1;
	if (chunked)
		return http_dechunk(body, in + len, dechunk, r);
	if (clen >= 0) {
		if (avail < (size_t)clen)
			return 0;
		r->body_len = (size_t)clen;
		return 1;
	}
	if (!eof)
		return 0;
	r->body_len = avail;
	r->close = true;
	return 1;
}

static void resolve_target(void)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	int rc = getaddrinfo(opt.host, opt.port, &hints, &target_ai);

	if (rc)
		die("cannot resolve %s:%s: %s", opt.host, opt.port, gai_strerror(rc));
}

/* A connected TCP socket to the broker, or -1.  Connect is blocking: it is loopback. */
static int tcp_connect(bool nonblock)
{
	int fd, one = 1;

	fd = socket(target_ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, target_ai->ai_addr, target_ai->ai_addrlen) < 0) {
		close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (nonblock)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	else {
		struct timeval tv = { .tv_sec = 30 };

		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	return fd;
}

/* ---------------------------------------------------------------- blocking client */

/* One keep-alive connection used in lock step: for health checks and the latency phase. */
struct hclient {
	int fd;
	struct buf req, in, dechunk;
};

static int hc_send(struct hclient *h, const char *method, const char *path, const char *body,
		   size_t blen)
{
	size_t off = 0;

	if (h->fd < 0 && (h->fd = tcp_connect(false)) < 0)
		return -1;
	http_request(&h->req, method, path, body, blen);
	while (off < h->req.len) {
		ssize_t n = send(h->fd, h->req.p + off, h->req.len - off, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			close(h->fd);
			h->fd = -1;
			return -1;
		}
		off += (size_t)n;
	}
	return 0;
}

/* Reads one response; r->body stays valid until the next call on this client. */
static int hc_recv(struct hclient *h, struct http_resp *r)
{
	int rc;

	h->in.len = 0;
	for (;;) {
		ssize_t n;

		rc = http_parse(h->in.p, h->in.len, false, &h->dechunk, r);
		if (rc)
			break;
		buf_reserve(&h->in, 65536);
		n = recv(h->fd, h->in.p + h->in.len, h->in.cap - h->in.len - 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		if (n == 0) {
			rc = http_parse(h->in.p, h->in.len, true, &h->dechunk, r);
			r->close = true;
			break;
		}
		h->in.len += (size_t)n;
	}
	if (rc != 1 || r->close) {
		close(h->fd);
		h->fd = -1;
	}
	return rc == 1 ? 0 : -1;
}

static int hc_call(struct hclient *h, const char *method, const char *path, const char *body,
		   size_t blen, struct http_resp *r)
{
	if (hc_send(h, method, path, body, blen) < 0)
		return -1;
	return hc_recv(h, r);
}

static void hc_free(struct hclient *h)
{
	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
	buf_free(&h->req);
	buf_free(&h->in);
	buf_free(&h->dechunk);
}

static void check_health(void)
{
	struct hclient h = { .fd = -1 };
	struct http_resp r;

	if (hc_call(&h, "GET", "/health", NULL, 0, &r) < 0)
		die("queend at %s:%s does not answer", opt.host, opt.port);
	if (r.status != 200)
		die("queend /health answered %d: %.*s", r.status, (int)r.body_len, r.body);
	hc_free(&h);
}

/* ---------------------------------------------------------------- epoll connection engine */

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

static void conn_start(struct conn *c);

static bool conn_open(struct conn *c)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };

	c->fd = tcp_connect(true);
	if (c->fd < 0)
		return false;
	if (epoll_ctl(c->en->ep, EPOLL_CTL_ADD, c->fd, &ev) < 0)
		die("epoll_ctl: %s", strerror(errno));
	c->want_out = false;
	return true;
}

static void conn_close(struct conn *c)
{
	if (c->fd < 0)
		return;
	epoll_ctl(c->en->ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
}

static void conn_want_out(struct conn *c, bool on)
{
	struct epoll_event ev = { .events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c };

	if (c->want_out == on)
		return;
	epoll_ctl(c->en->ep, EPOLL_CTL_MOD, c->fd, &ev);
	c->want_out = on;
}

static void conn_error(struct conn *c, const char *why)
{
	struct failures *f = c->en->fail;

	f->transport++;
	failures_note(f, "transport", why, strlen(why));
	conn_close(c);
	c->st = CS_SLEEP;
	c->not_before = now() + 0.01;
}

static void conn_finish(struct conn *c, bool eof)
{
	struct engine *en = c->en;
	struct http_resp r;
	int rc = http_parse(c->in.p, c->in.len, eof, &c->dechunk, &r);

	if (rc == 0 && !eof)
		return;
	if (rc <= 0) {
		conn_error(c, eof ? "connection closed before a full response" :
			   "malformed HTTP response");
		return;
	}
	en->t_last = now();
	c->st = CS_IDLE;
	c->not_before = 0;
	en->reply(en, c, &r);
	if (r.close || eof)
		conn_close(c);
	c->in.len = 0;
	if (c->not_before > now())
		c->st = CS_SLEEP;
	else
		conn_start(c);
}

static void conn_flush(struct conn *c)
{
	while (c->out_off < c->out.len) {
		ssize_t n = send(c->fd, c->out.p + c->out_off, c->out.len - c->out_off,
				 MSG_NOSIGNAL);

		if (n > 0) {
			c->out_off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			conn_want_out(c, true);
			return;
		}
		conn_error(c, strerror(errno));
		return;
	}
	conn_want_out(c, false);
	c->st = CS_RECV;
	if (c->in.len)		/* an early answer arrived while we were still sending */
		conn_finish(c, false);
}

static void conn_read(struct conn *c)
{
	bool eof = false;

	for (;;) {
		ssize_t n;

		buf_reserve(&c->in, 65536);
		n = recv(c->fd, c->in.p + c->in.len, c->in.cap - c->in.len - 1, 0);
		if (n > 0) {
			c->in.len += (size_t)n;
			continue;
		}
		if (n == 0) {
			eof = true;
			break;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			break;
		conn_error(c, strerror(errno));
		return;
	}
	if (c->st == CS_RECV)
		conn_finish(c, eof);
	else if (c->st == CS_SEND && eof)
		conn_error(c, "connection closed while sending");
	else if (c->st != CS_SEND) {
		c->in.len = 0;	/* idle keep-alive connection closed by the server: reopen later */
		if (eof)
			conn_close(c);
	}
}

static void conn_start(struct conn *c)
{
	struct engine *en = c->en;

	if (en->next(en, c) == STEP_STOP) {
		conn_close(c);
		c->st = CS_DONE;
		en->active--;
		return;
	}
	if (c->fd < 0 && !conn_open(c)) {
		conn_error(c, "cannot connect");
		c->not_before = now() + 0.1;
		return;
	}
	c->out_off = 0;
	c->in.len = 0;
	c->t_sent = now();
	c->st = CS_SEND;
	conn_flush(c);
}

/* Runs until every connection's `next` said stop.  `sess` is an array of `sess_size` bytes each. */
static void engine_run(struct engine *en, void *sess, size_t sess_size)
{
	struct epoll_event evs[128];

	en->ep = epoll_create1(EPOLL_CLOEXEC);
	if (en->ep < 0)
		die("epoll_create1: %s", strerror(errno));
	en->conns = calloc((size_t)en->nconns, sizeof(*en->conns));
	if (!en->conns)
		die("out of memory");
	for (int i = 0; i < en->nconns; i++) {
		struct conn *c = &en->conns[i];

		c->en = en;
		c->idx = i;
		c->sess = (char *)sess + (size_t)i * sess_size;
		if (!conn_open(c))
			die("cannot connect to %s:%s: %s", opt.host, opt.port, strerror(errno));
	}
	en->active = en->nconns;
	en->t_start = en->t_last = now();
	for (int i = 0; i < en->nconns; i++)
		conn_start(&en->conns[i]);

	while (en->active > 0) {
		double t = now(), wake = t + 0.1;
		int n, ms;

		for (int i = 0; i < en->nconns; i++) {
			struct conn *c = &en->conns[i];

			if (c->st == CS_SLEEP && c->not_before < wake)
				wake = c->not_before;
			if ((c->st == CS_SEND || c->st == CS_RECV) &&
			    t - c->t_sent > REQUEST_TIMEOUT_S) {
				en->fail->timeouts++;
				failures_note(en->fail, "timeout", "request unanswered", 18);
				conn_close(c);
				c->st = CS_SLEEP;
				c->not_before = t;
			}
		}
		ms = wake > t ? (int)((wake - t) * 1000) + 1 : 0;
		n = epoll_wait(en->ep, evs, 128, ms);
		if (n < 0 && errno != EINTR)
			die("epoll_wait: %s", strerror(errno));
		for (int k = 0; k < n; k++) {
			struct conn *c = evs[k].data.ptr;

			if (c->fd < 0 || c->st == CS_DONE)
				continue;
			if ((evs[k].events & EPOLLOUT) && c->st == CS_SEND)
				conn_flush(c);
			if ((evs[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && c->fd >= 0)
				conn_read(c);
		}
		t = now();
		for (int i = 0; i < en->nconns; i++) {
			struct conn *c = &en->conns[i];

			if (c->st == CS_SLEEP && c->not_before <= t)
				conn_start(c);
		}
	}
	for (int i = 0; i < en->nconns; i++) {
		buf_free(&en->conns[i].out);
		buf_free(&en->conns[i].in);
		buf_free(&en->conns[i].dechunk);
	}
	free(en->conns);
	close(en->ep);
}

/* Records an unexpected HTTP status and its body. */
static void fail_http_as(struct failures *f, const struct http_resp *r, const char *what)
{
	char code[8];

	snprintf(code, sizeof(code), "%d", r->status);
	tally_add(f->http, code, strlen(code), 1);
	failures_note(f, what ? what : code, r->body_len ? r->body : "(no body)",
		      r->body_len ? r->body_len : 9);
}

static void fail_http(struct failures *f, const struct http_resp *r)
{
	fail_http_as(f, r, NULL);
}

/* ---------------------------------------------------------------- phase: baseline */

struct base_worker {
	pthread_t thread;
	PGconn *pg;
	const char *table;
	const struct payload *pl;
	int idx;
	long rows;
	char err[200];
};

static atomic_bool base_stop;

static void *baseline_worker(void *arg)
{
	struct base_worker *w = arg;
	const char *values[BASELINE_ROWS * 3];
	char ids[BASELINE_ROWS][37], parts[BASELINE_ROWS][8], *bodies[BASELINE_ROWS];
	uint64_t rng = 0x1234567ULL + (uint64_t)w->idx * 7919, seq = (uint64_t)w->idx * 100000000;
	struct buf sql = { 0 };
	PGresult *res;

	buf_addf(&sql, "INSERT INTO %s (id, partition, payload) VALUES ", w->table);
	for (int i = 0; i < BASELINE_ROWS; i++)
		buf_addf(&sql, "%s($%d::uuid, $%d, $%d::jsonb)", i ? ", " : "", 3 * i + 1, 3 * i + 2,
			 3 * i + 3);
	res = PQprepare(w->pg, "ins", sql.p, 0, NULL);
	buf_free(&sql);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		snprintf(w->err, sizeof(w->err), "%s", PQerrorMessage(w->pg));
		PQclear(res);
		return NULL;
	}
	PQclear(res);
	for (int i = 0; i < BASELINE_ROWS; i++) {
		bodies[i] = xrealloc(NULL, w->pl->len + 1);
		memcpy(bodies[i], w->pl->text, w->pl->len + 1);
		snprintf(parts[i], sizeof(parts[i]), "p%d", i % 10);
		values[3 * i] = ids[i];
		values[3 * i + 1] = parts[i];
		values[3 * i + 2] = bodies[i];
	}
	while (!atomic_load(&base_stop)) {
		for (int i = 0; i < BASELINE_ROWS; i++) {
			uuid7(ids[i], &rng);
			payload_stamp(bodies[i], w->pl, seq++);
		}
		res = PQexecPrepared(w->pg, "ins", BASELINE_ROWS * 3, values, NULL, NULL, 0);
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			snprintf(w->err, sizeof(w->err), "%s", PQerrorMessage(w->pg));
			PQclear(res);
			break;
		}
		PQclear(res);
		w->rows += BASELINE_ROWS;
	}
	for (int i = 0; i < BASELINE_ROWS; i++)
		free(bodies[i]);
	return NULL;
}

static void pg_exec(PGconn *pg, const char *sql)
{
	PGresult *res = PQexec(pg, sql);

	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		die("baseline: %s: %s", sql, PQerrorMessage(pg));
	PQclear(res);
}

/* Raw PostgreSQL: 100-row INSERTs of the same payloads from 16 connections, for --duration. */
static void phase_baseline(const struct payload *pl)
{
	struct base_worker w[BASELINE_CONNS];
	struct failures fail = { 0 };
	char table[64], sql[256], label[64];
	PGconn *admin;
	long rows = 0;
	double t0, elapsed;

	snprintf(table, sizeof(table), "queen_bench_%s_%s", run_id, pl->tag);
	admin = PQconnectdb(opt.pg);
	if (PQstatus(admin) != CONNECTION_OK)
		die("baseline: cannot connect to \"%s\": %s", opt.pg, PQerrorMessage(admin));
	snprintf(sql, sizeof(sql),
		 "CREATE TABLE %s (id uuid PRIMARY KEY, partition text NOT NULL, "
		 "payload jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now())", table);
	pg_exec(admin, sql);

	memset(w, 0, sizeof(w));
	for (int i = 0; i < BASELINE_CONNS; i++) {
		w[i].pg = PQconnectdb(opt.pg);
		if (PQstatus(w[i].pg) != CONNECTION_OK)
			die("baseline: connection %d: %s", i, PQerrorMessage(w[i].pg));
		w[i].table = table;
		w[i].pl = pl;
		w[i].idx = i;
	}
	atomic_store(&base_stop, false);
	t0 = now();
	for (int i = 0; i < BASELINE_CONNS; i++)
		if (pthread_create(&w[i].thread, NULL, baseline_worker, &w[i]))
			die("pthread_create failed");
	usleep((useconds_t)(opt.duration * 1e6));
	atomic_store(&base_stop, true);
	for (int i = 0; i < BASELINE_CONNS; i++) {
		pthread_join(w[i].thread, NULL);
		rows += w[i].rows;
		if (w[i].err[0]) {
			tally_add(fail.items, "insert error", 12, 1);
			failures_note(&fail, "insert", w[i].err, strlen(w[i].err));
		}
		PQfinish(w[i].pg);
	}
	elapsed = now() - t0;
	snprintf(sql, sizeof(sql), "DROP TABLE %s", table);
	pg_exec(admin, sql);
	PQfinish(admin);

	base_rate[pl->base] = (double)rows / elapsed;
	snprintf(label, sizeof(label), "baseline insert %s", base_name[pl->base]);
	figure(label, base_rate[pl->base], "rows/s", -1, NULL);
	failures_print(label, &fail);
}

/* ---------------------------------------------------------------- push */

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
	const struct payload *pl;
	double stop_at;		/* no new request after this */
	long to_send;		/* items left to send, or -1 for "until stop_at" */
	uint64_t seq;
	long queued, requests;
	struct samples lat;
	struct failures fail;
	struct buf body;
};

struct push_conn {
	long first, span;	/* its partitions: p{first}..p{first+span-1} */
	long cursor;
	int inflight;
};

static enum step push_next(struct engine *en, struct conn *c)
{
	struct push_run *ph = en->phase;
	struct push_conn *pc = c->sess;
	struct buf *b = &ph->body;
	int n = ph->batch;

	if (now() >= ph->stop_at || ph->to_send == 0)
		return STEP_STOP;
	if (ph->to_send > 0) {
		if (n > ph->to_send)
			n = (int)ph->to_send;
		ph->to_send -= n;
	}
	b->len = 0;
	buf_adds(b, "{\"items\":[");
	for (int i = 0; i < n; i++) {
		buf_addf(b, "%s{\"queue\":\"%s\",\"partition\":\"p%ld\",\"payload\":", i ? "," : "",
			 ph->queue, pc->first + pc->cursor++ % pc->span);
		buf_add_payload(b, ph->pl, ph->seq++);
		buf_adds(b, "}");
	}
	buf_adds(b, "]}");
	http_request(&c->out, "POST", "/api/v1/push", b->p, b->len);
	pc->inflight = n;
	ph->requests++;
	return STEP_SEND;
}

static void push_reply(struct engine *en, struct conn *c, const struct http_resp *r)
{
	struct push_run *ph = en->phase;
	struct push_conn *pc = c->sess;
	const char *e = r->body + r->body_len, *el;
	struct js_arr a;
	long got = 0;

	samples_add(&ph->lat, now() - c->t_sent);
	if (r->status != 201) {
		fail_http(&ph->fail, r);
		c->not_before = now() + 0.01;
		return;
	}
	if (!js_arr_open(&a, r->body, e)) {
		tally_add(ph->fail.items, "unparsable", 10, pc->inflight);
		failures_note(&ph->fail, "push answer", r->body, r->body_len);
		return;
	}
	while ((el = js_arr_next(&a))) {
		const char *v = js_get(el, e, "status"), *s = "?", *err;
		size_t n = 1, elen;

		got++;
		if (js_str_eq(v, e, "queued")) {
			ph->queued++;
			continue;
		}
		js_str(v, e, &s, &n);
		tally_add(ph->fail.items, s, n, 1);
		if (js_str(js_get(el, e, "error"), e, &err, &elen))
			failures_note(&ph->fail, "item error", err, elen);
		else
			failures_note(&ph->fail, "item", el, (size_t)(e - el));
	}
	if (got != pc->inflight) {
		tally_add(ph->fail.items, "missing", 7, labs(pc->inflight - got));
		failures_note(&ph->fail, "answer count mismatch", r->body, r->body_len);
	}
}

/* Pushes with `nconns` connections; returns queued messages per second. */
static double push_run(struct push_run *ph, int nconns, double *elapsed)
{
	struct engine en = {
		.nconns = nconns, .next = push_next, .reply = push_reply,
		.phase = ph, .fail = &ph->fail,
	};
	struct push_conn *pcs = calloc((size_t)nconns, sizeof(*pcs));

	if (!pcs)
		die("out of memory");
	for (int i = 0; i < nconns; i++) {
		if (ph->sliced && ph->nparts >= nconns) {
			pcs[i].first = (long)i * ph->nparts / nconns;
			pcs[i].span = (long)(i + 1) * ph->nparts / nconns - pcs[i].first;
		} else {
			pcs[i].cursor = (long)i * ph->nparts / nconns;
			pcs[i].span = ph->nparts;
		}
	}
	engine_run(&en, pcs, sizeof(*pcs));
	free(pcs);
	buf_free(&ph->body);
	*elapsed = en.t_last - en.t_start;
	return *elapsed > 0 ? (double)ph->queued / *elapsed : 0;
}

/* One push figure: `batch` items a request from `nconns` connections for --duration. */
static void phase_push(int batch, int nconns, const struct payload *pl, int nparts)
{
	struct push_run ph = { 0 };
	char queue[128], label[64], note[96];
	double rate, elapsed, cpu0 = cpu_seconds();

	snprintf(queue, sizeof(queue), "bench-%s-push-b%d-%s-%dp", run_id, batch, pl->tag, nparts);
	ph.queue = queue;
	ph.batch = batch;
	ph.nparts = nparts;
	ph.pl = pl;
	ph.to_send = -1;
	ph.stop_at = now() + opt.duration;
	rate = push_run(&ph, nconns, &elapsed);
	snprintf(label, sizeof(label), "push b%d %s %dp", batch, base_name[pl->base], nparts);
	snprintf(note, sizeof(note), "[%d conns, %ld req, p50 %.1f ms, p99 %.1f ms, client cpu %.0f%%]",
		 nconns, ph.requests, samples_pct(&ph.lat, 50) * 1e3,
		 samples_pct(&ph.lat, 99) * 1e3,
		 elapsed > 0 ? 100 * (cpu_seconds() - cpu0) / elapsed : 0);
	figure(label, rate, "msg/s", pl->base, note);
	failures_print(label, &ph.fail);
	free(ph.lat.v);
}

/* ---------------------------------------------------------------- phase: encryption */

/*
 * SPEC target: sealing the payloads of an encrypted queue (AES-256-GCM in the broker) costs
 * a batch-100 push at most 10% of its rate.  The same pushes (1 KiB payloads, 10 partitions)
 * go to a queue with encryptionEnabled and to a plain one, in alternating slices so that both
 * see the same machine; the figure is the encrypted rate, with the plain rate and their ratio
 * in the note.  bench.sh gives the broker a QUEEN_ENCRYPTION_KEY.
 */
#define ENC_SLICES 4

/* CPU seconds the broker has used (user + system), from /proc; -1 without --queend-pid. */
static double broker_cpu_seconds(void)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	FILE *f;
	size_t n;

	if (opt.queend_pid <= 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%ld/stat", opt.queend_pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');	/* the command name may hold spaces */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
			 &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static bool encrypt_configure(const char *queue, struct failures *f)
{
	struct hclient h = { .fd = -1 };
	struct http_resp r;
	struct buf body = { 0 };
	int rc;

	buf_addf(&body, "{\"queue\":\"%s\",\"options\":{\"encryptionEnabled\":true}}", queue);
	rc = hc_call(&h, "POST", "/api/v1/configure", body.p, body.len, &r);
	buf_free(&body);
	if (rc < 0) {
		f->transport++;
		failures_note(f, "transport", "configure call lost", 19);
	} else if (r.status != 200) {
		fail_http(f, &r);
	}
	hc_free(&h);
	return rc >= 0 && r.status == 200;
}

static void phase_encrypt(void)
{
	struct failures fail = { 0 };
	char queue[2][128], note[160];
	double secs[2] = { 0, 0 }, cpu[2] = { 0, 0 };
	long queued[2] = { 0, 0 };
	double rate[2], us[2];

	for (int k = 0; k < 2; k++)
		snprintf(queue[k], sizeof(queue[k]), "bench-%s-%s-b%d", run_id,
			 k ? "encrypted" : "plain", PUSH_BIG_BATCH);
	if (!encrypt_configure(queue[1], &fail)) {
		failures_print("push b100 encrypted", &fail);
		return;
	}
	for (int s = 0; s < 2 * ENC_SLICES; s++) {
		struct push_run ph = { 0 };
		double elapsed;
		int k = s % 2;

		ph.queue = queue[k];
		ph.batch = PUSH_BIG_BATCH;
		ph.nparts = 10;
		ph.pl = &payloads[1];
		ph.to_send = -1;
		ph.stop_at = now() + opt.duration / ENC_SLICES;
		double c0 = broker_cpu_seconds();
		push_run(&ph, PUSH_BIG_CONNS, &elapsed);
		queued[k] += ph.queued;
		secs[k] += elapsed;
		cpu[k] += broker_cpu_seconds() - c0;
		failures_print(k ? "push b100 encrypted" : "push b100 plain (encryption phase)",
			       &ph.fail);
		free(ph.lat.v);
	}
	for (int k = 0; k < 2; k++) {
		rate[k] = secs[k] > 0 ? queued[k] / secs[k] : 0;
		us[k] = queued[k] > 0 ? 1e6 * cpu[k] / queued[k] : 0;
	}
	/* The broker's own CPU per message tells the cost of sealing from the cost PostgreSQL
	 * pays for storing ciphertext, which (unlike these payloads) does not compress. */
	snprintf(note, sizeof(note), "[plain %.0f msg/s in the same slices: %.2fx; broker cpu "
		 "%.1f vs %.1f us/msg]", rate[0], rate[0] > 0 ? rate[1] / rate[0] : 0, us[1], us[0]);
	figure("push b100 1k encrypted 10p", rate[1], "msg/s", payloads[1].base, note);
}

/* ---------------------------------------------------------------- phase: pop + ack */

struct pop_run {
	const char *queue;
	const char *group;
	long target;		/* messages to acknowledge */
	long popped, acked, noop, pops, empty, acks;
	double last_progress;
	bool stalled;
	struct buf path;
	struct failures fail;
};

struct pop_conn {
	bool ack_next;		/* the next request is the ack of the last pop */
	bool in_ack;		/* the request in flight is an ack */
	int ack_items;
	struct buf ack;
};

static enum step pop_next(struct engine *en, struct conn *c)
{
	struct pop_run *ph = en->phase;
	struct pop_conn *pc = c->sess;

	if (pc->ack_next) {
		pc->ack_next = false;
		pc->in_ack = true;
		ph->acks++;
		http_request(&c->out, "POST", "/api/v1/ack/batch", pc->ack.p, pc->ack.len);
		return STEP_SEND;
	}
	if (ph->acked >= ph->target)
		return STEP_STOP;
	if (now() - ph->last_progress > POP_STALL_S) {
		ph->stalled = true;
		return STEP_STOP;
	}
	pc->in_ack = false;
	ph->pops++;
	http_request(&c->out, "GET", ph->path.p, NULL, 0);
	return STEP_SEND;
}

/* Turns the messages of a pop answer into the body of one ack/batch; returns their count. */
static int pop_build_ack(struct pop_run *ph, struct pop_conn *pc, const struct http_resp *r)
{
	const char *e = r->body + r->body_len, *el, *top_lease = NULL, *s;
	size_t top_len = 0, n;
	struct js_arr a;
	int count = 0;

	if (js_str(js_get(r->body, e, "leaseId"), e, &s, &n)) {
		top_lease = s;
		top_len = n;
	}
	if (!js_arr_open(&a, js_get(r->body, e, "messages"), e)) {
		tally_add(ph->fail.items, "unparsable pop", 14, 1);
		failures_note(&ph->fail, "pop answer", r->body, r->body_len);
		return 0;
	}
	pc->ack.len = 0;
	buf_addf(&pc->ack, "{\"consumerGroup\":\"%s\",\"acknowledgments\":[", ph->group);
	while ((el = js_arr_next(&a))) {
		const char *txn, *pid, *lease = top_lease;
		size_t tl, pl, ll = top_len;

		if (!js_str(js_get(el, e, "transactionId"), e, &txn, &tl) ||
		    !js_str(js_get(el, e, "partitionId"), e, &pid, &pl)) {
			tally_add(ph->fail.items, "message without ids", 19, 1);
			failures_note(&ph->fail, "message", el, (size_t)(e - el));
			continue;
		}
		js_str(js_get(el, e, "leaseId"), e, &lease, &ll);
		buf_addf(&pc->ack, "%s{\"transactionId\":\"%.*s\",\"partitionId\":\"%.*s\","
			 "\"status\":\"completed\"", count ? "," : "", (int)tl, txn, (int)pl, pid);
		if (lease && ll)
			buf_addf(&pc->ack, ",\"leaseId\":\"%.*s\"", (int)ll, lease);
		buf_adds(&pc->ack, "}");
		count++;
	}
	buf_adds(&pc->ack, "]}");
	return count;
}

static void pop_reply_ack(struct pop_run *ph, struct pop_conn *pc, const struct http_resp *r)
{
	const char *e = r->body + r->body_len, *el;
	struct js_arr a;
	int got = 0;

	if (r->status != 200) {
		fail_http(&ph->fail, r);
		return;
	}
	if (!js_arr_open(&a, r->body, e)) {
		tally_add(ph->fail.items, "unparsable ack", 14, 1);
		failures_note(&ph->fail, "ack answer", r->body, r->body_len);
		return;
	}
	while ((el = js_arr_next(&a))) {
		const char *err;
		size_t elen;

		got++;
		if (js_is(js_get(el, e, "success"), e, "true")) {
			if (js_is(js_get(el, e, "noop"), e, "true"))
				ph->noop++;
			else
				ph->acked++;
			ph->last_progress = now();
			continue;
		}
		tally_add(ph->fail.items, "ack not successful", 18, 1);
		if (js_str(js_get(el, e, "error"), e, &err, &elen))
			failures_note(&ph->fail, "ack error", err, elen);
		else
			failures_note(&ph->fail, "ack", el, (size_t)(e - el));
	}
	if (got != pc->ack_items)
		tally_add(ph->fail.items, "ack answer count mismatch", 25, 1);
}

/* A pop that delivered nothing: count it, and let the connection wait 5 ms before the next. */
static void pop_answer_empty(struct conn *c, long *empty)
{
	(*empty)++;
	c->not_before = now() + 0.005;
}

/* Whether a pop answer carries messages (200); a 204 or a failure is counted and the
 * connection backs off.  Shared by the pop+ack and the transaction phases. */
static bool pop_answer_ok(struct conn *c, const struct http_resp *r, long *empty,
			  struct failures *f)
{
	if (r->status == 204) {
		pop_answer_empty(c, empty);
		return false;
	}
	if (r->status != 200) {
		fail_http(f, r);
		c->not_before = now() + 0.01;
		return false;
	}
	return true;
}

static void pop_reply(struct engine *en, struct conn *c, const struct http_resp *r)
{
	struct pop_run *ph = en->phase;
	struct pop_conn *pc = c->sess;
	int n;

	if (pc->in_ack) {
		pop_reply_ack(ph, pc, r);
		return;
	}
	if (!pop_answer_ok(c, r, &ph->empty, &ph->fail))
		return;
	n = pop_build_ack(ph, pc, r);
	if (n == 0) {
		pop_answer_empty(c, &ph->empty);
		return;
	}
	ph->popped += n;
	pc->ack_items = n;
	pc->ack_next = true;
}

/*
 * Pre-pushes --pop-messages 100-byte messages over `nparts` partitions, then 4 consumers of one
 * group drain them: pop batch 100 (wait=false), ack/batch of everything popped, repeat.
 */
static void phase_pop(int nparts)
{
	struct push_run fill = { 0 };
	struct pop_run ph = { 0 };
	struct pop_conn pcs[POP_CONSUMERS];
	struct engine en = {
		.nconns = POP_CONSUMERS, .next = pop_next, .reply = pop_reply,
		.phase = &ph, .fail = &ph.fail,
	};
	struct hclient h = { .fd = -1 };
	struct http_resp r;
	char queue[128], group[64], label[64], note[96];
	double rate, elapsed;

	snprintf(queue, sizeof(queue), "bench-%s-pop-%dp", run_id, nparts);
	snprintf(group, sizeof(group), "bench-%s", run_id);
	fill.queue = queue;
	fill.batch = PUSH_BIG_BATCH;
	fill.nparts = nparts;
	fill.pl = &payloads[0];
	fill.to_send = opt.pop_messages;
	fill.stop_at = now() + 3600;
	rate = push_run(&fill, PUSH_BIG_CONNS, &elapsed);
	printf("  pop prefill %dp: %ld queued in %.1f s (%.0f msg/s)\n", nparts, fill.queued,
	       elapsed, rate);
	snprintf(label, sizeof(label), "pop prefill %dp", nparts);
	failures_print(label, &fill.fail);
	free(fill.lat.v);

	ph.queue = queue;
	ph.group = group;
	ph.target = fill.queued;
	ph.last_progress = now();
	buf_addf(&ph.path, "/api/v1/pop/queue/%s?batch=%d&wait=false&consumerGroup=%s"
		 "&subscriptionMode=all", queue, POP_BATCH, group);
	if (opt.pop_partitions > 0)
		buf_addf(&ph.path, "&partitions=%d", opt.pop_partitions);
	/* Pop autopilot (SPEC 5): the broker chooses how many partitions one pop claims from
	 * its index, so a batch of 100 fills up even when each partition holds a few
	 * messages. A client draining many partitions sends it; --no-autopilot does not. */
	if (opt.pop_autopilot)
		buf_addf(&ph.path, "&autopilot=true");
	memset(pcs, 0, sizeof(pcs));
	engine_run(&en, pcs, sizeof(pcs[0]));
	elapsed = en.t_last - en.t_start;
	rate = elapsed > 0 ? (double)ph.acked / elapsed : 0;

	snprintf(label, sizeof(label), "pop+ack b%d %dp", POP_BATCH, nparts);
	snprintf(note, sizeof(note), "[%ld acked in %.1f s, %ld pops, %ld empty, %ld redelivered]",
		 ph.acked, elapsed, ph.pops, ph.empty,
		 ph.popped > ph.acked ? ph.popped - ph.acked : 0);
	figure(label, rate, "msg/s", payloads[0].base, note);
	if (ph.stalled) {
		tally_add(ph.fail.items, "drain stalled", 13, ph.target - ph.acked);
		failures_note(&ph.fail, "stall", "no ack progress", 15);
	}
	/* The backlog must now be empty for the group. */
	if (hc_call(&h, "GET", ph.path.p, NULL, 0, &r) < 0)
		ph.fail.transport++;
	else if (r.status != 204) {
		tally_add(ph.fail.items, "left after drain", 16, 1);
		failures_note(&ph.fail, "pop after drain", r.body, r.body_len);
	}
	failures_print(label, &ph.fail);
	hc_free(&h);
	for (int i = 0; i < POP_CONSUMERS; i++)
		buf_free(&pcs[i].ack);
	buf_free(&ph.path);
}

/* ---------------------------------------------------------------- phase: transaction */

/*
 * A pipeline stage: pop a batch of TXN_POP_BATCH messages (own group), then one transaction per
 * message that acks it and pushes its successor to an output queue's partition of the same
 * name.  This is the shape SPEC 8 exists for, so its rate (transactions per second, the pops
 * included in the time) is compared with plain batch-1 pushes from as many connections.
 */
struct txn_run {
	const char *out_queue;
	const char *group;
	double stop_at;		/* no new pop after this; a popped message is still committed */
	long pops, empty, txns, rolled_back;
	uint64_t seq;
	struct buf path;
	struct samples lat;	/* transaction request latency */
	struct failures fail;
};

struct txn_conn {
	struct buf bodies;			/* the transactions for the last pop, end to end */
	size_t end[TXN_POP_BATCH];		/* where each body ends in bodies */
	int n, next;				/* bodies built, next to send */
	bool in_commit;				/* the request in flight is a transaction */
};

static enum step txn_next(struct engine *en, struct conn *c)
{
	struct txn_run *ph = en->phase;
	struct txn_conn *tc = c->sess;

	if (tc->next < tc->n) {
		size_t from = tc->next ? tc->end[tc->next - 1] : 0;

		tc->in_commit = true;
		http_request(&c->out, "POST", "/api/v1/transaction", tc->bodies.p + from,
			     tc->end[tc->next] - from);
		tc->next++;
		return STEP_SEND;
	}
	if (now() >= ph->stop_at)
		return STEP_STOP;
	tc->in_commit = false;
	ph->pops++;
	http_request(&c->out, "GET", ph->path.p, NULL, 0);
	return STEP_SEND;
}

/* Builds one ack+push transaction per message of a pop answer; returns how many. */
static int txn_build(struct txn_run *ph, struct txn_conn *tc, const struct http_resp *r)
{
	const char *e = r->body + r->body_len, *el, *txn, *pid, *lease, *part;
	size_t tl, pl, ll, nl;
	struct js_arr a;

	tc->bodies.len = 0;
	tc->n = tc->next = 0;
	if (!js_arr_open(&a, js_get(r->body, e, "messages"), e))
		return 0;
	while (tc->n < TXN_POP_BATCH && (el = js_arr_next(&a))) {
		if (!js_str(js_get(el, e, "transactionId"), e, &txn, &tl) ||
		    !js_str(js_get(el, e, "partitionId"), e, &pid, &pl) ||
		    !js_str(js_get(el, e, "leaseId"), e, &lease, &ll) ||
		    !js_str(js_get(el, e, "partition"), e, &part, &nl)) {
			tally_add(ph->fail.items, "message without ids", 19, 1);
			failures_note(&ph->fail, "message", el, (size_t)(e - el));
			continue;
		}
		buf_addf(&tc->bodies, "{\"operations\":[{\"type\":\"ack\",\"transactionId\":"
			 "\"%.*s\",\"partitionId\":\"%.*s\",\"status\":\"completed\","
			 "\"consumerGroup\":\"%s\",\"leaseId\":\"%.*s\"},{\"type\":\"push\","
			 "\"items\":[{\"queue\":\"%s\",\"partition\":\"%.*s\",\"payload\":",
			 (int)tl, txn, (int)pl, pid, ph->group, (int)ll, lease, ph->out_queue,
			 (int)nl, part);
		buf_add_payload(&tc->bodies, &payloads[0], ph->seq++);
		buf_adds(&tc->bodies, "}]}]}");
		tc->end[tc->n++] = tc->bodies.len;
	}
	return tc->n;
}

static void txn_reply_commit(struct txn_run *ph, const struct http_resp *r, double lat)
{
	const char *e = r->body + r->body_len, *why;
	size_t n;

	samples_add(&ph->lat, lat);
	if (r->status != 200) {
		fail_http(&ph->fail, r);
		return;
	}
	if (js_is(js_get(r->body, e, "success"), e, "true")) {
		ph->txns++;
		return;
	}
	/* success:false is still 200 (SPEC 8): tally by its reason. */
	ph->rolled_back++;
	if (js_str(js_get(r->body, e, "reason"), e, &why, &n))
		tally_add(ph->fail.items, why, n, 1);
	else
		tally_add(ph->fail.items, "txn not successful", 18, 1);
	failures_note(&ph->fail, "transaction", r->body, r->body_len);
}

static void txn_reply(struct engine *en, struct conn *c, const struct http_resp *r)
{
	struct txn_run *ph = en->phase;
	struct txn_conn *tc = c->sess;

	if (tc->in_commit) {
		txn_reply_commit(ph, r, now() - c->t_sent);
		return;
	}
	if (pop_answer_ok(c, r, &ph->empty, &ph->fail) && txn_build(ph, tc, r) == 0)
		pop_answer_empty(c, &ph->empty);
}

/*
 * Pre-pushes TXN_MESSAGES_PER_S per second of --duration (at least 20,000) over TXN_PARTITIONS
 * partitions, then for --duration in all runs the pop -> ack+push loop and plain batch-1
 * pushes (the yardstick) on TXN_CONNS connections, in TXN_SLICES alternating slices of each:
 * the machine is shared, and a ratio of two figures taken one after the other is also a
 * ratio of whatever else ran then.
 */
static void phase_txn(void)
{
	struct push_run fill = { 0 }, push = { 0 };
	struct txn_run ph = { 0 };
	struct txn_conn tcs[TXN_CONNS];
	struct engine en = {
		.nconns = TXN_CONNS, .next = txn_next, .reply = txn_reply,
		.phase = &ph, .fail = &ph.fail,
	};
	char in_queue[128], out_queue[128], push_queue[128], group[64], note[128];
	double rate, push_rate, elapsed, t_txn = 0, t_push = 0;
	long pushed = 0;

	snprintf(in_queue, sizeof(in_queue), "bench-%s-txn-in", run_id);
	snprintf(out_queue, sizeof(out_queue), "bench-%s-txn-out", run_id);
	snprintf(group, sizeof(group), "bench-%s-txn", run_id);
	fill.queue = in_queue;
	fill.batch = PUSH_BIG_BATCH;
	fill.nparts = TXN_PARTITIONS;
	fill.pl = &payloads[0];
	fill.to_send = opt.duration * TXN_MESSAGES_PER_S > 20000
		       ? (long)(opt.duration * TXN_MESSAGES_PER_S) : 20000;
	fill.stop_at = now() + 3600;
	rate = push_run(&fill, PUSH_BIG_CONNS, &elapsed);
	printf("  txn prefill %dp: %ld queued in %.1f s (%.0f msg/s)\n", TXN_PARTITIONS,
	       fill.queued, elapsed, rate);
	failures_print("txn prefill", &fill.fail);
	free(fill.lat.v);

	ph.out_queue = out_queue;
	ph.group = group;
	buf_addf(&ph.path, "/api/v1/pop/queue/%s?batch=%d&wait=false&consumerGroup=%s"
		 "&subscriptionMode=all", in_queue, TXN_POP_BATCH, group);
	snprintf(push_queue, sizeof(push_queue), "bench-%s-txn-push", run_id);
	push.queue = push_queue;
	push.batch = 1;
	push.nparts = TXN_PARTITIONS;
	push.pl = &payloads[0];
	push.to_send = -1;
	for (int k = 0; k < TXN_SLICES; k++) {
		long before = push.queued;

		ph.stop_at = now() + opt.duration / TXN_SLICES;
		memset(tcs, 0, sizeof(tcs));
		engine_run(&en, tcs, sizeof(tcs[0]));
		t_txn += en.t_last - en.t_start;
		for (int i = 0; i < TXN_CONNS; i++)
			buf_free(&tcs[i].bodies);
		push.stop_at = now() + opt.duration / TXN_SLICES;
		push_run(&push, TXN_CONNS, &elapsed);
		t_push += elapsed;
		pushed += push.queued - before;
	}
	rate = t_txn > 0 ? (double)ph.txns / t_txn : 0;
	snprintf(note, sizeof(note), "[%ld txn in %.1f s, %ld pops, %ld empty, p50 %.1f ms, "
		 "p99 %.1f ms]", ph.txns, t_txn, ph.pops, ph.empty,
		 samples_pct(&ph.lat, 50) * 1e3, samples_pct(&ph.lat, 99) * 1e3);
	figure("txn ack+push 16c", rate, "txn/s", -1, note);
	failures_print("txn ack+push 16c", &ph.fail);
	push_rate = t_push > 0 ? (double)pushed / t_push : 0;
	snprintf(note, sizeof(note), "[%ld req in %.1f s, p50 %.1f ms, p99 %.1f ms]",
		 push.requests, t_push, samples_pct(&push.lat, 50) * 1e3,
		 samples_pct(&push.lat, 99) * 1e3);
	figure("push b1 100B 16c", push_rate, "msg/s", payloads[0].base, note);
	failures_print("push b1 100B 16c", &push.fail);
	figure("txn vs push b1 16c", push_rate > 0 ? rate / push_rate : 0, "x", -1,
	       "(SPEC target >= 0.40)");
	buf_free(&ph.path);
	free(ph.lat.v);
	free(push.lat.v);
}

/* ---------------------------------------------------------------- phase: timers */

/* Wall-clock milliseconds: timers are due at a wall-clock moment, not a monotonic one. */
static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Counts the ok:true results of one /timers answer; each other one is a failure. */
static long timers_count_ok(const struct http_resp *r, struct failures *f)
{
	const char *e = r->body + r->body_len, *el;
	struct js_arr a;
	long ok = 0;

	if (!js_arr_open(&a, js_get(r->body, e, "results"), e)) {
		tally_add(f->items, "unparsable", 10, 1);
		failures_note(f, "timers answer", r->body, r->body_len);
		return 0;
	}
	while ((el = js_arr_next(&a))) {
		if (js_is(js_get(el, e, "ok"), e, "true")) {
			ok++;
			continue;
		}
		tally_add(f->items, "not scheduled", 13, 1);
		failures_note(f, "timer", el, (size_t)(e - el));
	}
	return ok;
}

/* The number of messages one pop answered (0 for 204), or -1 on failure. */
static long pop_count(struct hclient *h, const char *path, struct failures *f)
{
	const char *e;
	struct http_resp r;
	struct js_arr a;
	long n = 0;

	if (hc_call(h, "GET", path, NULL, 0, &r) < 0) {
		f->transport++;
		failures_note(f, "transport", "pop answer lost", 15);
		return -1;
	}
	if (r.status == 204)
		return 0;
	if (r.status != 200) {
		fail_http(f, &r);
		return -1;
	}
	e = r.body + r.body_len;
	if (!js_arr_open(&a, js_get(r.body, e, "messages"), e))
		return 0;
	while (js_arr_next(&a))
		n++;
	return n;
}

/* Schedules TIMER_COUNT timers on `queue`, all due at wall-clock `due_ms`; returns how many. */
static long timers_schedule(struct hclient *h, const char *queue, int64_t due_ms,
			    struct failures *f)
{
	struct buf body = { 0 };
	struct http_resp r;
	long scheduled = 0;

	for (int i = 0; i < TIMER_COUNT; i += TIMER_OPS) {
		body.len = 0;
		buf_adds(&body, "{\"operations\":[");
		for (int k = i; k < i + TIMER_OPS && k < TIMER_COUNT; k++) {
			/* Per op, so the time the calls take does not spread the due moment. */
			int64_t delay = due_ms - wall_ms();

			buf_addf(&body, "%s{\"op\":\"schedule\",\"queue\":\"%s\",\"timerKey\":\"k%d\","
				 "\"delayMs\":%" PRId64 ",\"txn\":\"t%d\",\"payload\":{\"i\":%d}}",
				 k > i ? "," : "", queue, k, delay > 0 ? delay : 0, k, k);
		}
		buf_adds(&body, "]}");
		if (hc_call(h, "POST", "/api/v1/timers", body.p, body.len, &r) < 0) {
			f->transport++;
			failures_note(f, "transport", "timers call lost", 16);
		} else if (r.status != 200) {
			fail_http(f, &r);
		} else {
			scheduled += timers_count_ok(&r, f);
		}
	}
	buf_free(&body);
	return scheduled;
}

/*
 * TIMER_COUNT timers all due at the same wall-clock second about 5 s ahead; the figure is how
 * long after that second the last of them has been popped as a message (SPEC target: within
 * 2 s).
 */
static void phase_timers(void)
{
	struct hclient h = { .fd = -1 };
	struct failures fail = { 0 };
	char queue[128], note[96], path[256];
	int64_t due_ms, deadline_ms, done_ms = -1;
	long scheduled, stored = 0;

	snprintf(queue, sizeof(queue), "bench-%s-timers", run_id);
	due_ms = (wall_ms() / 1000 + 6) * 1000;	/* the whole second 5-6 s ahead */
	scheduled = timers_schedule(&h, queue, due_ms, &fail);
	if (wall_ms() >= due_ms) {
		tally_add(fail.items, "scheduling too slow", 19, 1);
		failures_note(&fail, "timers", "scheduling ran past the due second", 34);
	}
	/* A consumer's view of "fired": the messages it can pop.  Popping (autoAck) costs one
	 * partition's read, where reading the queue's detail costs more the larger the
	 * database the earlier phases left, and would slow the sweeper it measures. */
	deadline_ms = due_ms + (int64_t)(TIMER_WAIT_S * 1000);
	snprintf(path, sizeof(path), "/api/v1/pop/queue/%s?batch=1000&wait=false&autoAck=true",
		 queue);
	while (wall_ms() < deadline_ms) {
		long n = pop_count(&h, path, &fail);

		stored += n > 0 ? n : 0;
		if (stored >= TIMER_COUNT) {
			done_ms = wall_ms();
			break;
		}
		if (n <= 0)
			usleep(TIMER_POLL_MS * 1000);
	}
	snprintf(note, sizeof(note), "[%ld scheduled, %ld popped, SPEC target <= 2 s]", scheduled,
		 stored);
	if (done_ms < 0) {
		tally_add(fail.items, "not fired in time", 17, TIMER_COUNT - stored);
		failures_note(&fail, "timers", "not all popped within 60 s of the due second", 44);
		figure("timers 10000 due together: fired in", TIMER_WAIT_S, "s", -1, note);
	} else {
		figure("timers 10000 due together: fired in",
		       done_ms > due_ms ? (double)(done_ms - due_ms) / 1000 : 0, "s", -1, note);
	}
	failures_print("timers", &fail);
	hc_free(&h);
}

/* ---------------------------------------------------------------- phase: long-poll latency */

/* Pops everything deliverable (wait=false) and acks it, so the next sample starts clean. */
static void latency_drain(struct hclient *h, const char *queue)
{
	struct pop_run ph = { .group = "__QUEUE_MODE__" };
	struct pop_conn pc = { 0 };
	struct http_resp r;
	char path[256];

	snprintf(path, sizeof(path), "/api/v1/pop/queue/%s?batch=100&wait=false", queue);
	for (int i = 0; i < 100; i++) {
		if (hc_call(h, "GET", path, NULL, 0, &r) < 0 || r.status != 200)
			break;
		if (pop_build_ack(&ph, &pc, &r) == 0)
			break;
		if (hc_call(h, "POST", "/api/v1/ack/batch", pc.ack.p, pc.ack.len, &r) < 0)
			break;
	}
	buf_free(&pc.ack);
}

/* A 201 whose first element is `queued`. */
static bool push_first_queued(const struct http_resp *r)
{
	const char *e = r->body + r->body_len, *el;
	struct js_arr a;

	return r->status == 201 && js_arr_open(&a, r->body, e) && (el = js_arr_next(&a)) &&
	       js_str_eq(js_get(el, e, "status"), e, "queued");
}

/*
 * A consumer parks (wait=true) on a fresh queue; after a random 20-80 ms a producer pushes one
 * message.  Latency = push request sent -> pop response received.  The message is then acked
 * (untimed) so the partition's lease is released for the next sample.
 */
static void phase_latency(void)
{
	struct hclient cons = { .fd = -1 }, prod = { .fd = -1 };
	struct samples lat = { 0 };
	struct failures fail = { 0 };
	struct buf body = { 0 }, ack = { 0 };
	char queue[128], path[256], txn[64], note[96], what[64];
	uint64_t rng = (uint64_t)getpid() * 2654435761ULL + 1;

	snprintf(queue, sizeof(queue), "bench-%s-latency", run_id);
	snprintf(path, sizeof(path), "/api/v1/pop/queue/%s?batch=1&wait=true&timeout=10000", queue);
	for (int i = 0; i < opt.lat_samples; i++) {
		struct http_resp r, pr;
		const char *e, *msg, *got_txn, *pid, *lease;
		size_t tl, pl, ll;
		struct js_arr a;
		double t0, t1;

		if (hc_send(&cons, "GET", path, NULL, 0) < 0) {
			fail.transport++;
			failures_note(&fail, "transport", "cannot send pop", 15);
			continue;
		}
		usleep((useconds_t)(20000 + rng_next(&rng) % 60001));
		snprintf(txn, sizeof(txn), "lat-%s-%d", run_id, i);
		body.len = 0;
		buf_addf(&body, "{\"items\":[{\"queue\":\"%s\",\"transactionId\":\"%s\",\"payload\":",
			 queue, txn);
		buf_add_payload(&body, &payloads[0], (uint64_t)i);
		buf_adds(&body, "}]}");
		t0 = now();
		if (hc_send(&prod, "POST", "/api/v1/push", body.p, body.len) < 0) {
			fail.transport++;
			failures_note(&fail, "transport", "cannot send push", 16);
			hc_free(&cons);
			continue;
		}
		if (hc_recv(&cons, &r) < 0) {
			fail.transport++;
			failures_note(&fail, "transport", "pop answer lost", 15);
			hc_recv(&prod, &pr);
			latency_drain(&prod, queue);
			continue;
		}
		t1 = now();
		/* Read the message out of the pop answer before the producer reuses its buffer. */
		e = r.body + r.body_len;
		msg = js_arr_open(&a, js_get(r.body, e, "messages"), e) ? js_arr_next(&a) : NULL;
		if (r.status != 200 || !msg ||
		    !js_str(js_get(msg, e, "transactionId"), e, &got_txn, &tl) ||
		    tl != strlen(txn) || memcmp(got_txn, txn, tl) != 0 ||
		    !js_str(js_get(msg, e, "partitionId"), e, &pid, &pl) ||
		    !js_str(js_get(msg, e, "leaseId"), e, &lease, &ll)) {
			snprintf(what, sizeof(what), "sample %d: pop answered %d", i, r.status);
			if (r.status != 200) {
				fail_http_as(&fail, &r, what);
			} else {
				tally_add(fail.items, "wrong or missing message", 24, 1);
				failures_note(&fail, what, r.body, r.body_len);
			}
			hc_recv(&prod, &pr);
			latency_drain(&prod, queue);
			continue;
		}
		ack.len = 0;
		buf_addf(&ack, "{\"acknowledgments\":[{\"transactionId\":\"%s\",\"partitionId\":"
			 "\"%.*s\",\"status\":\"completed\",\"leaseId\":\"%.*s\"}]}", txn, (int)pl,
			 pid, (int)ll, lease);
		if (hc_recv(&prod, &pr) < 0) {
			fail.transport++;
			failures_note(&fail, "transport", "push answer lost", 16);
		} else if (!push_first_queued(&pr)) {
			tally_add(fail.items, "push not queued", 15, 1);
			failures_note(&fail, "push", pr.body, pr.body_len);
		}
		samples_add(&lat, t1 - t0);
		if (hc_call(&prod, "POST", "/api/v1/ack/batch", ack.p, ack.len, &pr) < 0 ||
		    pr.status != 200 ||
		    !js_arr_open(&a, pr.body, pr.body + pr.body_len) || !(msg = js_arr_next(&a)) ||
		    !js_is(js_get(msg, pr.body + pr.body_len, "success"), pr.body + pr.body_len,
			   "true")) {
			tally_add(fail.items, "ack failed", 10, 1);
			failures_note(&fail, "ack", pr.body, pr.body_len);
			latency_drain(&prod, queue);
		}
	}
	snprintf(note, sizeof(note), "[%zu samples, max %.1f ms]", lat.n,
		 samples_pct(&lat, 100) * 1e3);
	figure("long-poll wake p50", samples_pct(&lat, 50) * 1e3, "ms", -1, NULL);
	figure("long-poll wake p99", samples_pct(&lat, 99) * 1e3, "ms", -1, note);
	failures_print("long-poll wake", &fail);
	free(lat.v);
	buf_free(&body);
	buf_free(&ack);
	hc_free(&cons);
	hc_free(&prod);
}

/* ---------------------------------------------------------------- phase: retention */

/* The retention counters of GET /api/v1/status: cumulative since the broker started. */
struct ret_counters {
	long long interval_ms, rounds, skipped, failed, segments;
	int64_t last_run_ms;	/* wall ms the last round started, 0 = none yet */
};

/* Wall ms of a time as the broker writes it (2026-01-31T12:00:00.123Z), or 0. */
static int64_t iso_ms(const char *s, size_t n)
{
	struct tm tm = { 0 };
	char text[32];
	const char *rest;

	if (n >= sizeof(text))
		return 0;
	memcpy(text, s, n);
	text[n] = '\0';
	rest = strptime(text, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!rest || rest[0] != '.')
		return 0;
	return (int64_t)timegm(&tm) * 1000 + strtol(rest + 1, NULL, 10);
}

/* Reads the counters; a failed or unexpected status answer is counted in f. */
static bool retention_counters(struct hclient *h, struct ret_counters *rc, struct failures *f)
{
	const char *e, *ret, *last;
	struct http_resp r;
	size_t n;

	if (hc_call(h, "GET", "/api/v1/status", NULL, 0, &r) < 0) {
		f->transport++;
		failures_note(f, "transport", "status call lost", 16);
		return false;
	}
	if (r.status != 200) {
		fail_http(f, &r);
		return false;
	}
	e = r.body + r.body_len;
	ret = js_get(r.body, e, "retention");
	rc->interval_ms = js_ll(ret, e, "intervalMs");
	rc->rounds = js_ll(ret, e, "rounds");
	rc->skipped = js_ll(ret, e, "skipped");
	rc->failed = js_ll(ret, e, "failed");
	rc->segments = js_ll(ret, e, "segmentsDeleted");
	rc->last_run_ms = 0;
	if (js_str(js_get(ret, e, "lastRunAt"), e, &last, &n))
		rc->last_run_ms = iso_ms(last, n);
	if (rc->rounds < 0 || rc->skipped < 0 || rc->failed < 0 || rc->segments < 0) {
		tally_add(f->items, "no retention counters", 21, 1);
		failures_note(f, "status", r.body, r.body_len);
		return false;
	}
	return true;
}

/* Creates `queue` keeping RET_SECONDS of messages, consumed or not. */
static bool retention_configure(struct hclient *h, const char *queue, struct failures *f)
{
	struct http_resp r;
	struct buf body = { 0 };
	int rc;

	buf_addf(&body, "{\"queue\":\"%s\",\"options\":{\"retentionEnabled\":true,"
		 "\"retentionSeconds\":%d}}", queue, RET_SECONDS);
	rc = hc_call(h, "POST", "/api/v1/configure", body.p, body.len, &r);
	buf_free(&body);
	if (rc < 0) {
		f->transport++;
		failures_note(f, "transport", "configure call lost", 19);
		return false;
	}
	if (r.status != 200) {
		fail_http(f, &r);
		return false;
	}
	if (!js_is(js_get(r.body, r.body + r.body_len, "configured"), r.body + r.body_len,
		   "true")) {
		tally_add(f->items, "not configured", 14, 1);
		failures_note(f, "configure", r.body, r.body_len);
		return false;
	}
	return true;
}

/*
 * SPEC target: a retention round over 10,000 partitions holds no lock that stalls pushes for
 * more than 50 ms.  A queue keeping RET_SECONDS of messages is prefilled with about
 * RET_PREFILL_SEGMENTS segments in each of --many-partitions partitions (a batch-100 push
 * writes one segment in each of the 100 partitions it touches); once the first of them are
 * due, batch-100 pushes from PUSH_BIG_CONNS connections go on over the same partitions for
 * --duration while the broker's rounds move log starts (partition row locks, the only lock of
 * a round a push can wait for) and delete the segments that aged out.  Each connection keeps
 * to its own slice of the partitions, so pushes never wait for each other's row locks: a wait
 * for a queen_partitions row that PostgreSQL logs in this phase (bench.sh turns log_lock_waits
 * on) is a round's.  The
 * figures are the push latencies of the window, the max against the target (a request's
 * latency also holds CPU contention and group commit, so it is an upper bound of the stall),
 * and the rounds and deletions the status counters saw in it: a window in which no round
 * started or nothing was deleted measured nothing, so it is a failure.
 */
/*
 * The direct measure of the retention target: while the window runs, a second connection
 * asks PostgreSQL every RET_SAMPLE_MS which backends wait for a lock held by a retention
 * round (pg_blocking_pids) and since when their statement runs; the longest such wait seen
 * is the stall.  Push latency alone cannot tell a lock from a busy CPU on a shared machine.
 */
#define RET_SAMPLE_MS		5

struct stall_probe {
	PGconn *pg;
	atomic_bool stop;
	double worst_ms;	/* longest wait behind a round seen */
	long samples, waits;	/* polls made; polls that saw a push wait behind a round */
	char err[256];
};

static void *stall_probe_main(void *arg)
{
	static const char *sql =
		"SELECT coalesce(max(extract(epoch FROM clock_timestamp() - w.query_start)) "
		"* 1000, -1) FROM pg_stat_activity w "
		"WHERE w.wait_event_type = 'Lock' AND EXISTS ("
		"  SELECT 1 FROM pg_stat_activity b "
		"  WHERE b.pid = ANY (pg_blocking_pids(w.pid)) AND b.query LIKE '%queen_retention%')";
	struct stall_probe *sp = arg;
	PGresult *res;

	while (!atomic_load(&sp->stop)) {
		res = PQexec(sp->pg, sql);
		if (PQresultStatus(res) != PGRES_TUPLES_OK) {
			snprintf(sp->err, sizeof(sp->err), "%s", PQerrorMessage(sp->pg));
			PQclear(res);
			return NULL;
		}
		double ms = atof(PQgetvalue(res, 0, 0));

		PQclear(res);
		sp->samples++;
		if (ms >= 0) {
			sp->waits++;
			if (ms > sp->worst_ms)
				sp->worst_ms = ms;
		}
		usleep(RET_SAMPLE_MS * 1000);
	}
	return NULL;
}

static void phase_retention(void)
{
	struct push_run fill = { 0 }, ph = { 0 };
	struct hclient h = { .fd = -1 };
	struct ret_counters c0, c1;
	char queue[128], label[64], note[96], target[96], why[160];
	long long rounds = 0, failed = 0, segments = 0;
	double t_fill, wait, rate, elapsed;
	int64_t end_ms;
	bool counted;
	struct stall_probe probe = { 0 };
	pthread_t probe_thread;

	/* The push phase's queue over as many partitions (created here when that phase did not
	 * run): a queue of its own would add --many-partitions partitions to the broker's index
	 * and to the run's peak RSS, itself a figure.  Its old segments are due at once. */
	snprintf(queue, sizeof(queue), "bench-%s-push-b%d-%s-%dp", run_id, PUSH_BIG_BATCH,
		 payloads[0].tag, opt.many_partitions);
	snprintf(label, sizeof(label), "retention push %dp", opt.many_partitions);
	/* Before the first push: a queue that a push creates keeps everything. */
	if (!retention_configure(&h, queue, &ph.fail)) {
		failures_print(label, &ph.fail);
		hc_free(&h);
		return;
	}
	fill.queue = queue;
	fill.batch = PUSH_BIG_BATCH;
	fill.nparts = opt.many_partitions;
	fill.sliced = true;
	fill.pl = &payloads[0];
	fill.to_send = (long)opt.many_partitions * RET_PREFILL_SEGMENTS;
	fill.stop_at = now() + 3600;
	t_fill = now();
	rate = push_run(&fill, PUSH_BIG_CONNS, &elapsed);
	printf("  retention prefill %dp: %ld queued in %.1f s (%.0f msg/s)\n",
	       opt.many_partitions, fill.queued, elapsed, rate);
	failures_print("retention prefill", &fill.fail);
	free(fill.lat.v);

	/* A small prefill (--quick) is done before anything in it is due: wait until its first
	 * segments are, and a little more, so the rounds of the window have work from its start. */
	wait = t_fill + RET_SECONDS + 0.5 - now();
	if (wait > 0)
		usleep((useconds_t)(wait * 1e6));

	counted = retention_counters(&h, &c0, &ph.fail);
	if (opt.pg) {
		probe.pg = PQconnectdb(opt.pg);
		if (PQstatus(probe.pg) != CONNECTION_OK ||
		    pthread_create(&probe_thread, NULL, stall_probe_main, &probe) != 0) {
			snprintf(probe.err, sizeof(probe.err), "%s", PQerrorMessage(probe.pg));
			PQfinish(probe.pg);
			probe.pg = NULL;
		}
	}
	ph.queue = queue;
	ph.batch = PUSH_BIG_BATCH;
	ph.nparts = opt.many_partitions;
	ph.sliced = true;
	ph.pl = &payloads[0];
	ph.to_send = -1;
	ph.stop_at = now() + opt.duration;
	rate = push_run(&ph, PUSH_BIG_CONNS, &elapsed);
	end_ms = wall_ms();
	if (probe.pg) {
		atomic_store(&probe.stop, true);
		pthread_join(probe_thread, NULL);
		PQfinish(probe.pg);
	}
	counted = retention_counters(&h, &c1, &ph.fail) && counted;

	if (counted) {
		/* `rounds` counts skipped and failed rounds too (src/retention.h). */
		failed = c1.failed - c0.failed;
		rounds = c1.rounds - c0.rounds - (c1.skipped - c0.skipped) - failed;
		segments = c1.segments - c0.segments;
		if (failed > 0) {
			tally_add(ph.fail.items, "round failed", 12, failed);
			failures_note(&ph.fail, "retention", "a round's statement failed (queend log)",
				      39);
		}
		/* The counters move when a round starts (rounds, lastRunAt) and ends (segments):
		 * none started means one round outlasted the window or the maintenance thread
		 * was busy with something else all along; say how long ago the last began. */
		if (rounds <= 0) {
			if (c1.last_run_ms > 0)
				snprintf(why, sizeof(why), "no round started in the window; the last "
					 "one started %.1f s before it ended (RETENTION_INTERVAL "
					 "%lld ms)", (double)(end_ms - c1.last_run_ms) / 1000,
					 c1.interval_ms);
			else
				snprintf(why, sizeof(why), "no round has run yet (RETENTION_INTERVAL "
					 "%lld ms)", c1.interval_ms);
			tally_add(ph.fail.items, "no round started", 16, 1);
			failures_note(&ph.fail, "retention", why, strlen(why));
		} else if (segments <= 0) {
			tally_add(ph.fail.items, "nothing deleted", 15, 1);
			failures_note(&ph.fail, "retention", "rounds ran but deleted no segment", 33);
		}
	}
	snprintf(note, sizeof(note), "[p50 %.1f ms, p99 %.1f ms, max %.1f ms; %lld rounds, "
		 "%lld segments deleted]", samples_pct(&ph.lat, 50) * 1e3,
		 samples_pct(&ph.lat, 99) * 1e3, samples_pct(&ph.lat, 100) * 1e3, rounds, segments);
	figure(label, rate, "msg/s", payloads[0].base, note);
	if (probe.samples > 0 && !probe.err[0]) {
		snprintf(target, sizeof(target), "[%ld polls, %ld saw a wait] (SPEC target <= %d)",
			 probe.samples, probe.waits, RET_STALL_MS);
		figure("retention lock stall max", probe.worst_ms, "ms", -1, target);
	} else {
		printf("retention lock stall max: not measured (%s)\n",
		       probe.err[0] ? probe.err : "no --pg");
	}
	failures_print(label, &ph.fail);
	free(ph.lat.v);
	hc_free(&h);
}

/* ---------------------------------------------------------------- phase: peak RSS */

static void phase_rss(void)
{
	char path[64], line[256], note[96] = "";
	long hwm = -1, rss = -1;
	FILE *f;

	if (opt.queend_pid <= 0) {
		printf("queend peak RSS: skipped (no --queend-pid)\n");
		return;
	}
	snprintf(path, sizeof(path), "/proc/%ld/status", opt.queend_pid);
	f = fopen(path, "r");
	if (!f) {
		printf("queend peak RSS: cannot read %s: %s\n", path, strerror(errno));
		grand_failures++;
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "VmHWM: %ld kB", &hwm);
		sscanf(line, "VmRSS: %ld kB", &rss);
	}
	fclose(f);
	if (hwm < 0) {
		printf("queend peak RSS: no VmHWM in %s\n", path);
		return;
	}
	if (rss >= 0)
		snprintf(note, sizeof(note), "[now %.1f MiB]", (double)rss / 1024);
	figure("queend peak RSS", (double)hwm / 1024, "MiB", -1, note);
}

/* ---------------------------------------------------------------- main */

static void usage(FILE *out)
{
	fprintf(out,
		"usage: queen-bench [options]\n"
		"  --url URL            queend base URL (default http://127.0.0.1:6632)\n"
		"  --pg CONNINFO        libpq conninfo of the same PostgreSQL, for the baseline\n"
		"  --queend-pid N       read the broker's peak RSS (VmHWM) at the end\n"
		"  --duration SECONDS   length of each baseline and push phase and of the retention\n"
		"                       push window (default 10)\n"
		"  --quick              small sizes for a smoke run (2 s phases, 10k pop backlog,\n"
		"                       1000 partitions, 20 latency samples)\n"
		"  --only LIST          phases to run, comma-separated:\n"
		"                       baseline,push,pop,txn,timers,latency,retention,rss,\n"
		"                       encrypt\n"
		"  --pop-messages N     pop backlog size (default 200000)\n"
		"  --many-partitions N  the \"many partitions\" count (default 10000)\n"
		"  --samples N          long-poll latency samples (default 200)\n"
		"  --pop-partitions N   send partitions=N with each pop (default: not sent, i.e. 1)\n"
		"  --no-autopilot       pops do not send autopilot=true (default: they do)\n"
		"  --verbose            print every failure to stderr, not only the first of a phase\n"
		"Exit status: 0 clean run, 1 when any failure was counted, 2 on usage/setup error.\n");
}

static void parse_url(const char *url)
{
	const char *p = url, *colon, *end;

	if (strncmp(p, "http://", 7) == 0)
		p += 7;
	else if (strstr(p, "://"))
		die("only http:// URLs are supported: %s", url);
	end = p + strcspn(p, "/");
	colon = memchr(p, ':', (size_t)(end - p));
	if (!colon)
		colon = end;
	if (colon == p || (size_t)(colon - p) >= sizeof(opt.host))
		die("bad --url %s", url);
	memcpy(opt.host, p, (size_t)(colon - p));
	opt.host[colon - p] = '\0';
	if (colon < end) {
		if ((size_t)(end - colon - 1) >= sizeof(opt.port) || end - colon < 2)
			die("bad --url %s", url);
		memcpy(opt.port, colon + 1, (size_t)(end - colon - 1));
		opt.port[end - colon - 1] = '\0';
	} else {
		strcpy(opt.port, "80");
	}
}

static bool want(const char *phase)
{
	const char *p = opt.only;
	size_t n = strlen(phase);

	if (!p)
		return true;
	while (*p) {
		size_t k = strcspn(p, ",");

		if (k == n && strncmp(p, phase, n) == 0)
			return true;
		p += k;
		if (*p == ',')
			p++;
	}
	return false;
}

static long parse_long(const char *s, const char *flag, long min)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v < min)
		die("%s wants an integer >= %ld, not \"%s\"", flag, min, s);
	return v;
}

static void print_summary(void)
{
	char line[256];

	printf("\n== queen-bench summary (run %s) ==\n", run_id);
	for (int i = 0; i < nfigures; i++) {
		figure_line(&figures[i], line, sizeof(line));
		printf("  %s\n", line);
	}
	printf("  failures: %ld\n", grand_failures);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "url", required_argument, NULL, 'u' },
		{ "pg", required_argument, NULL, 'p' },
		{ "queend-pid", required_argument, NULL, 'P' },
		{ "duration", required_argument, NULL, 'd' },
		{ "quick", no_argument, NULL, 'q' },
		{ "only", required_argument, NULL, 'o' },
		{ "pop-messages", required_argument, NULL, 'm' },
		{ "many-partitions", required_argument, NULL, 'n' },
		{ "samples", required_argument, NULL, 's' },
		{ "pop-partitions", required_argument, NULL, 'w' },
		{ "no-autopilot", no_argument, NULL, 'A' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool duration_set = false, pop_set = false, many_set = false, samples_set = false;
	int ch;
	const char *only_names[] = { "baseline", "push", "pop", "txn", "timers", "latency",
				     "retention", "rss", "encrypt" };

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'u':
			parse_url(optarg);
			break;
		case 'p':
			opt.pg = optarg;
			break;
		case 'P':
			opt.queend_pid = parse_long(optarg, "--queend-pid", 1);
			break;
		case 'd':
			opt.duration = strtod(optarg, NULL);
			if (opt.duration <= 0)
				die("--duration wants a positive number of seconds");
			duration_set = true;
			break;
		case 'q':
			opt.quick = true;
			break;
		case 'o':
			opt.only = optarg;
			break;
		case 'm':
			opt.pop_messages = parse_long(optarg, "--pop-messages", 1);
			pop_set = true;
			break;
		case 'n':
			opt.many_partitions = (int)parse_long(optarg, "--many-partitions", 1);
			many_set = true;
			break;
		case 's':
			opt.lat_samples = (int)parse_long(optarg, "--samples", 1);
			samples_set = true;
			break;
		case 'w':
			opt.pop_partitions = (int)parse_long(optarg, "--pop-partitions", 1);
			break;
		case 'A':
			opt.pop_autopilot = 0;
			break;
		case 'v':
			opt.verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	if (opt.only) {
		const char *p = opt.only;

		while (*p) {
			size_t k = strcspn(p, ","), i;

			for (i = 0; i < sizeof(only_names) / sizeof(only_names[0]); i++)
				if (strlen(only_names[i]) == k && strncmp(p, only_names[i], k) == 0)
					break;
			if (i == sizeof(only_names) / sizeof(only_names[0]))
				die("--only: unknown phase \"%.*s\" "
				    "(baseline,push,pop,txn,timers,latency,retention,rss)",
				    (int)k, p);
			p += k;
			if (*p == ',')
				p++;
		}
	}
	if (opt.quick) {
		if (!duration_set)
			opt.duration = 2;
		if (!pop_set)
			opt.pop_messages = 10000;
		if (!many_set)
			opt.many_partitions = 1000;
		if (!samples_set)
			opt.lat_samples = 20;
	}
	snprintf(run_id, sizeof(run_id), "%lx%04x", (unsigned long)time(NULL),
		 (unsigned)getpid() & 0xffff);
	payload_init(&payloads[0], 100, "100b", 0);
	payload_init(&payloads[1], 1024, "1k", 1);
	resolve_target();

	printf("queen-bench run %s: queend %s:%s, %.0f s per phase, partitions 10 and %d%s\n",
	       run_id, opt.host, opt.port, opt.duration, opt.many_partitions,
	       opt.quick ? " (quick)" : "");
	if (want("baseline")) {
		if (opt.pg) {
			phase_baseline(&payloads[0]);
			phase_baseline(&payloads[1]);
		} else {
			printf("baseline: skipped (no --pg)\n");
		}
	}
	if (want("push") || want("pop") || want("txn") || want("timers") || want("latency") ||
	    want("retention") || want("encrypt"))
		check_health();
	if (want("push")) {
		int parts[2] = { 10, opt.many_partitions };

		for (int k = 0; k < 2; k++)
			for (int i = 0; i < 2; i++) {
				phase_push(PUSH_BIG_BATCH, PUSH_BIG_CONNS, &payloads[i], parts[k]);
				phase_push(1, PUSH_SMALL_CONNS, &payloads[i], parts[k]);
			}
	}
	if (want("encrypt"))
		phase_encrypt();
	if (want("pop")) {
		phase_pop(10);
		phase_pop(opt.many_partitions);
	}
	if (want("txn"))
		phase_txn();
	if (want("timers"))
		phase_timers();
	if (want("latency"))
		phase_latency();
	/* Last but the RSS reading: its queue keeps the broker's rounds busy deleting for a
	 * while after the phase, which would disturb any phase after it. */
	if (want("retention"))
		phase_retention();
	if (want("rss"))
		phase_rss();
	print_summary();
	return grand_failures ? 1 : 0;
}
