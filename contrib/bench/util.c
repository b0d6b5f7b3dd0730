/*
 * queen-bench: small utilities shared by every phase: time, memory, byte buffers, random
 * numbers and UUIDv7s, percentiles, and the JSON payloads the phases push.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench.h"

/* ---------------------------------------------------------------- time, memory, buffers */

double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void die(const char *fmt, ...)
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

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n);
	if (!p)
		die("out of memory");
	return p;
}

void buf_reserve(struct buf *b, size_t extra)
{
	if (b->len + extra + 1 <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + extra + 1)
		cap *= 2;
	b->p = xrealloc(b->p, cap);
	b->cap = cap;
}

void buf_add(struct buf *b, const void *s, size_t n)
{
	buf_reserve(b, n);
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void buf_adds(struct buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

__attribute__((format(printf, 2, 3)))
void buf_addf(struct buf *b, const char *fmt, ...)
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

void buf_free(struct buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

/* CPU seconds this process has used, all threads. */
double cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* xorshift64*: fast, good enough for padding and uuid bits. */
uint64_t rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ULL;
}

/* A UUIDv7 (time-ordered, like the broker's message ids) as 36 characters plus NUL. */
void uuid7(char out[37], uint64_t *rng)
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

void samples_add(struct samples *s, double x)
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

double samples_pct(struct samples *s, double pct)
{
	if (s->n == 0)
		return 0;
	qsort(s->v, s->n, sizeof(*s->v), cmp_double);
	size_t i = (size_t)(pct / 100.0 * (double)(s->n - 1) + 0.5);
	return s->v[i];
}

/* ---------------------------------------------------------------- phase: timers */

/* Wall-clock milliseconds: timers are due at a wall-clock moment, not a monotonic one. */
int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}


/* ---------------------------------------------------------------- payloads */

struct payload payloads[2];

void payload_init(struct payload *pl, size_t size, const char *tag, int base)
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
	pl->pad_at = hl;
	pl->tag = tag;
	pl->base = base;
	pl->unique = false;
}

void payload_stamp(char *copy, const struct payload *pl, uint64_t seq)
{
	/* An odd multiplier keeps the state non-zero, as rng_next needs. */
	uint64_t rng = (seq + 1) * 0x9e3779b97f4a7c15ULL, r = 0;
	char *d = copy + pl->seq_at;

	for (int i = 9; i >= 0; i--) {
		d[i] = (char)('0' + seq % 10);
		seq /= 10;
	}
	if (pl->unique) {
		static const char hex[] = "0123456789abcdef";
		char *p = copy + pl->pad_at, *end = copy + pl->len - 2;

		for (int left = 0; p < end; p++, left--, r >>= 4) {
			if (left == 0) {
				r = rng_next(&rng);
				left = 16;
			}
			*p = hex[r & 15];
		}
	}
}

void buf_add_payload(struct buf *b, const struct payload *pl, uint64_t seq)
{
	size_t at = b->len;

	buf_add(b, pl->text, pl->len);
	payload_stamp(b->p + at, pl, seq);
}
