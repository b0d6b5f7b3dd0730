/* pgbin: binary result values of PostgreSQL (pgbin.h). */
#include "pgbin.h"
#include "qassert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Microseconds from the Unix epoch to PostgreSQL's, 2000-01-01. */
#define PG_EPOCH_US INT64_C(946684800000000)

static uint64_t
be(const PGresult *res, int row, int col, int len)
{
	const unsigned char *p = (const unsigned char *)PQgetvalue(res, row, col);
	uint64_t v = 0;

	if (PQgetisnull(res, row, col) || PQgetlength(res, row, col) != len)
		return 0;
	for (int i = 0; i < len; i++)
		v = v << 8 | p[i];
	return v;
}

int32_t
pgbin_i32(const PGresult *res, int row, int col)
{
	return (int32_t)(uint32_t)be(res, row, col, 4);
}

int64_t
pgbin_i64(const PGresult *res, int row, int col)
{
	return (int64_t)be(res, row, col, 8);
}

const uint8_t *
pgbin_uuid_bytes(const PGresult *res, int row, int col)
{
	if (PQgetisnull(res, row, col) || PQgetlength(res, row, col) != 16)
		return NULL;
	return (const uint8_t *)PQgetvalue(res, row, col);
}

void
pgbin_uuid(const PGresult *res, int row, int col, char out[UUID_STR_LEN])
{
	static const uint8_t zero[16];
	const uint8_t *b = pgbin_uuid_bytes(res, row, col);

	uuid_format(b ? b : zero, out);
}

/* a / b rounded toward minus infinity (b > 0). */
static int64_t
floor_div(int64_t a, int64_t b)
{
	return a / b - (a % b < 0);
}

int64_t
pgbin_ts_ms(const PGresult *res, int row, int col)
{
	return floor_div(pgbin_i64(res, row, col) + PG_EPOCH_US, 1000);
}

/* The civil date of a day count from 1970-01-01 (proleptic Gregorian): days to year, month
 * and day through 400-year eras of 146,097 days. */
static void
civil(int64_t days, int64_t *y, int *m, int *d)
{
	int64_t z = days + 719468, era = floor_div(z, 146097);
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153;

	*d = (int)(doy - (153 * mp + 2) / 5 + 1);
	*m = (int)(mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*m <= 2);
}

/* Writes v as exactly `width` decimal digits at o (v < 10^width, v >= 0). */
static void
put_digits(char *o, int64_t v, int width)
{
	while (width-- > 0) {
		o[width] = (char)('0' + v % 10);
		v /= 10;
	}
}

size_t
pgbin_iso_ms(int64_t ms, char out[PGBIN_ISO_LEN])
{
	int64_t days = floor_div(ms, 86400000), y;
	int64_t in_day = ms - days * 86400000;
	int m, d, n;

	civil(days, &y, &m, &d);
	if (y < 0 || y > 9999) {
		/* A year past four digits or before year 0 (PostgreSQL reaches 4713 BC and
		 * 294276 AD): rare, written by printf. */
		n = snprintf(out, PGBIN_ISO_LEN, "%04lld-%02d-%02dT%02d:%02d:%02d.%03dZ",
			     (long long)y, m, d, (int)(in_day / 3600000),
			     (int)(in_day / 60000 % 60), (int)(in_day / 1000 % 60),
			     (int)(in_day % 1000));
		return n < 0 ? 0 : (size_t)n < PGBIN_ISO_LEN ? (size_t)n : PGBIN_ISO_LEN - 1;
	}
	/* Written digit by digit: printf, parsing its format each time, took a twentieth of
	 * the broker's CPU in a drain of 100-message pops. */
	memcpy(out, "0000-00-00T00:00:00.000Z", 25);
	put_digits(out, y, 4);
	put_digits(out + 5, m, 2);
	put_digits(out + 8, d, 2);
	put_digits(out + 11, in_day / 3600000, 2);
	put_digits(out + 14, in_day / 60000 % 60, 2);
	put_digits(out + 17, in_day / 1000 % 60, 2);
	put_digits(out + 20, in_day % 1000, 3);
	return 24;
}

int
pgbin_same(const PGresult *res, int col, int a, int b)
{
	int len = PQgetlength(res, a, col);

	return len == PQgetlength(res, b, col) &&
	       memcmp(PQgetvalue(res, a, col), PQgetvalue(res, b, col), (size_t)len) == 0;
}

struct row_key {
	int part;		/* the key's rank: the order it first comes in */
	int row;
	int64_t off;
};

static int
row_key_cmp(const void *a, const void *b)
{
	const struct row_key *x = a, *y = b;

	if (x->part != y->part)
		return x->part < y->part ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

int *
pgbin_row_order(const PGresult *res, int key_col, int off_col)
{
	int rows = PQntuples(res), nparts = 0, sorted = 1;
	size_t cap = (size_t)(rows ? rows : 1);
	int *ord = malloc(sizeof(*ord) * cap);
	int *first = malloc(sizeof(*first) * cap);	/* a row of each rank */
	struct row_key *k = malloc(sizeof(*k) * cap);

	QASSERT(ord != NULL && first != NULL && k != NULL);
	for (int i = 0; i < rows; i++) {
		k[i].row = i;
		k[i].off = pgbin_i64(res, i, off_col);
		if (i > 0 && pgbin_same(res, key_col, i, i - 1)) {
			k[i].part = k[i - 1].part;
			continue;
		}
		/* Another key: one met before (rows out of order), or a new one. */
		k[i].part = 0;
		while (k[i].part < nparts && !pgbin_same(res, key_col, i, first[k[i].part]))
			k[i].part++;
		if (k[i].part == nparts)
			first[nparts++] = i;
		else
			sorted = 0;
	}
	for (int i = 1; i < rows && sorted; i++)
		if (k[i].part == k[i - 1].part && k[i].off <= k[i - 1].off)
			sorted = 0;
	if (!sorted)
		qsort(k, (size_t)rows, sizeof(*k), row_key_cmp);
	for (int i = 0; i < rows; i++)
		ord[i] = k[i].row;
	free(first);
	free(k);
	return ord;
}

static uint32_t
be32_at(const char *p)
{
	const unsigned char *u = (const unsigned char *)p;

	return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 | (uint32_t)u[2] << 8 | u[3];
}

/* array_send: dimensions, a has-null flag, the element type, then for each dimension its
 * length and lower bound; then each element as a length word (-1: NULL) and its bytes. */
int
pgbin_elems_open(const PGresult *res, int row, int col, struct pgbin_elems *e)
{
	char *v = PQgetvalue(res, row, col);
	int len = PQgetlength(res, row, col);
	uint32_t n;

	e->p = e->end = v;
	e->left = 0;
	if (PQgetisnull(res, row, col) || len < 12 || be32_at(v) != 1 || len < 20)
		return 0;
	n = be32_at(v + 12);
	if (n > (uint32_t)(len - 20) / 4)	/* each element takes at least its length word */
		return 0;
	e->p = v + 20;
	e->end = v + len;
	e->left = (int)n;
	return e->left;
}

const char *
pgbin_elems_next(struct pgbin_elems *e, size_t *len)
{
	uint32_t n;
	char *s;

	*len = 0;
	if (e->left <= 0 || e->end - e->p < 4) {
		e->left = 0;
		return NULL;
	}
	e->left--;
	n = be32_at(e->p);
	if (n == UINT32_MAX) {
		e->p += 4;
		return NULL;
	}
	if (n > (size_t)(e->end - e->p) - 4) {
		e->left = 0;
		return NULL;
	}
	s = e->p;
	memmove(s, s + 4, n);
	s[n] = '\0';
	e->p += 4 + (size_t)n;
	*len = n;
	return s;
}
