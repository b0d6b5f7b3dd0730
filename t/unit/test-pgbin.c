/* Unit tests of pgbin: binary integers, uuids, timestamps and arrays of a result (built here
 * with libpq's own result constructors, no server), the order rows are read in, and the ISO
 * text of a time in milliseconds, which must read as PostgreSQL's
 * to_char(..., 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') does. */
#include "tap.h"
#include "pgbin.h"
#include "strbuf.h"

#include <stdlib.h>

/* A one-row result of binary columns holding the given bytes (NULL: SQL NULL). */
static PGresult *
row_of(int n, const char *const *vals, const int *lens)
{
	PGresult *res = PQmakeEmptyPGresult(NULL, PGRES_TUPLES_OK);
	PGresAttDesc att[8];

	memset(att, 0, sizeof(att));
	for (int i = 0; i < n; i++) {
		att[i].name = (char *)"c";
		att[i].format = 1;
		att[i].typlen = lens[i];
	}
	if (!res || !PQsetResultAttrs(res, n, att))
		return NULL;
	for (int i = 0; i < n; i++)
		if (!PQsetvalue(res, 0, i, (char *)vals[i], vals[i] ? lens[i] : -1))
			return NULL;
	return res;
}

/* A result of rows (key byte, int8 offset) in binary, for the row order. */
static PGresult *
keyed_rows(int n, const char *keys, const int64_t *offs)
{
	PGresult *res = PQmakeEmptyPGresult(NULL, PGRES_TUPLES_OK);
	PGresAttDesc att[2];

	memset(att, 0, sizeof(att));
	att[0].name = att[1].name = (char *)"c";
	att[0].format = att[1].format = 1;
	att[0].typlen = 1;
	att[1].typlen = 8;
	if (!res || !PQsetResultAttrs(res, 2, att))
		return NULL;
	for (int i = 0; i < n; i++) {
		unsigned char be[8];

		for (int b = 0; b < 8; b++)
			be[b] = (unsigned char)((uint64_t)offs[i] >> (56 - 8 * b));
		if (!PQsetvalue(res, i, 0, (char *)&keys[i], 1) ||
		    !PQsetvalue(res, i, 1, (char *)be, 8))
			return NULL;
	}
	return res;
}

/* 1 when pgbin_row_order of the rows gives the row numbers want. */
static int
order_is(int n, const char *keys, const int64_t *offs, const int *want)
{
	PGresult *res = keyed_rows(n, keys, offs);
	int *ord = res ? pgbin_row_order(res, 0, 1) : NULL, good = ord != NULL;

	for (int i = 0; good && i < n; i++)
		if (ord[i] != want[i]) {
			printf("# position %d: row %d, want row %d\n", i, ord[i], want[i]);
			good = 0;
		}
	free(ord);
	PQclear(res);
	return good;
}

/* 1 when the array (len bytes at v) says it holds count elements and the first n read back
 * as want (NULL: a NULL element), each NUL-terminated, then NULL. */
static int
elems_are(const char *v, int len, int count, int n, const char *const *want)
{
	const char *vals[] = { v };
	PGresult *res = row_of(1, vals, &len);
	struct pgbin_elems e;
	int good = res && pgbin_elems_open(res, 0, 0, &e) == count;

	for (int i = 0; good && i < n; i++) {
		size_t got_len;
		const char *got = pgbin_elems_next(&e, &got_len);

		if (!want[i] ? got != NULL
			     : !got || got_len != strlen(want[i]) || strcmp(got, want[i]) != 0) {
			printf("# element %d: got %s, want %s\n", i, got ? got : "NULL",
			       want[i] ? want[i] : "NULL");
			good = 0;
		}
	}
	if (good) {
		size_t got_len;

		good = pgbin_elems_next(&e, &got_len) == NULL && got_len == 0;
	}
	PQclear(res);
	return good;
}

static int
iso_is(int64_t ms, const char *want)
{
	char out[PGBIN_ISO_LEN];
	size_t n = pgbin_iso_ms(ms, out);

	if (n != strlen(want) || strcmp(out, want) != 0) {
		printf("# %lld ms: got %s, want %s\n", (long long)ms, out, want);
		return 0;
	}
	return 1;
}

int
main(void)
{
	/* int4 -2, int8 2^40 + 5, a uuid, timestamptz 0 and -1 us (PostgreSQL's epoch and the
	 * microsecond before it), a NULL */
	static const char i4[4] = { '\xff', '\xff', '\xff', '\xfe' };
	static const char i8[8] = { 0, 0, 1, 0, 0, 0, 0, 5 };
	static const char id[16] = { 0x01, 0x23, 0x45, 0x67, '\x89', '\xab', 0x7c, '\xde',
				     '\x8f', 0x01, 0x23, 0x45, 0x67, '\x89', '\xab', '\xcd' };
	static const char t0[8] = { 0 };
	static const char tm1[8] = { '\xff', '\xff', '\xff', '\xff', '\xff', '\xff', '\xff', '\xff' };
	const char *vals[] = { i4, i8, id, t0, tm1, NULL };
	const int lens[] = { 4, 8, 16, 8, 8, 8 };
	PGresult *res = row_of(6, vals, lens);
	char u[UUID_STR_LEN];

	ok(res != NULL, "a result of binary columns is built");
	ok(pgbin_i32(res, 0, 0) == -2, "int4 is big-endian two's complement");
	ok(pgbin_i64(res, 0, 1) == (INT64_C(1) << 40) + 5, "int8 too");
	pgbin_uuid(res, 0, 2, u);
	ok(strcmp(u, "01234567-89ab-7cde-8f01-23456789abcd") == 0, "uuid: its canonical text");
	ok(pgbin_ts_ms(res, 0, 3) == INT64_C(946684800000), "timestamptz 0 is 2000-01-01");
	ok(pgbin_ts_ms(res, 0, 4) == INT64_C(946684799999),
	   "a microsecond before it rounds down to the millisecond before");
	ok(pgbin_i64(res, 0, 5) == 0 && pgbin_ts_ms(res, 0, 5) == INT64_C(946684800000),
	   "NULL reads as 0");
	ok(pgbin_i32(res, 0, 1) == 0, "a column of another length reads as 0");
	pgbin_uuid(res, 0, 1, u);
	ok(strcmp(u, "00000000-0000-0000-0000-000000000000") == 0, "and an id of it as zeros");
	ok(pgbin_uuid_bytes(res, 0, 2) != NULL && pgbin_uuid_bytes(res, 0, 2)[15] == 0xcd &&
	   pgbin_uuid_bytes(res, 0, 1) == NULL && pgbin_uuid_bytes(res, 0, 5) == NULL,
	   "a uuid's bytes; none of a NULL or of another length");
	PQclear(res);

	{
		static const int64_t in_order[] = { 4, 5, 6, 0, 1 };
		static const int want_same[] = { 0, 1, 2, 3, 4 };
		static const int64_t moved[] = { 6, 4, 5, 1, 0 };
		static const int want_moved[] = { 1, 2, 0, 4, 3 };
		static const int64_t back[] = { 4, 0, 5, 1, 6 };
		static const int want_back[] = { 0, 2, 4, 1, 3 };

		ok(order_is(5, "aaabb", in_order, want_same),
		   "rows that come in order are read as they come");
		ok(order_is(5, "aaabb", moved, want_moved),
		   "a key's rows out of offset order are read in offset order");
		ok(order_is(5, "ababa", back, want_back),
		   "a key met again after another: its rows together, keys in first-come order");
		ok(order_is(1, "a", in_order, want_same), "one row");
	}

	{
		static const char *const four[] = { "abc", NULL, "", "{\"k\":[1,2]}" };
		static const char *const none[] = { NULL };
		struct strbuf a;
		PGresult *nul;
		struct pgbin_elems e;
		size_t len;

		sb_init(&a);
		sb_pgbin_array(&a, 4, PG_TEXTOID);
		for (int i = 0; i < 4; i++)
			sb_pgbin_text_elem(&a, four[i]);
		ok(elems_are(a.buf, (int)a.len, 4, 4, four),
		   "an array's elements, NULL and empty ones too, each a string in place");
		ok(elems_are(a.buf, (int)a.len - 1, 4, 3, four),
		   "an element cut short is not read, nor any after it");
		sb_reset(&a);
		sb_pgbin_array(&a, 1000, PG_TEXTOID);
		sb_pgbin_text_elem(&a, "x");
		ok(elems_are(a.buf, (int)a.len, 0, 0, none),
		   "more elements than the value can hold: none");
		sb_reset(&a);
		sb_pgbin_array(&a, 1, PG_TEXTOID);
		a.buf[3] = 2;
		sb_pgbin_text_elem(&a, "x");
		ok(elems_are(a.buf, (int)a.len, 0, 0, none), "an array of two dimensions: none");
		sb_reset(&a);
		sb_pgbin_array(&a, 1, PG_TEXTOID);
		sb_pgbin_text_elem(&a, "x");
		a.buf[23] = 9;
		ok(elems_are(a.buf, (int)a.len, 1, 1, none),
		   "an element longer than the value: NULL, and the end");
		sb_free(&a);
		nul = row_of(1, none, (const int[]){ 4 });
		ok(nul && pgbin_elems_open(nul, 0, 0, &e) == 0 && !pgbin_elems_next(&e, &len),
		   "a NULL array has no elements");
		PQclear(nul);
	}

	ok(iso_is(0, "1970-01-01T00:00:00.000Z"), "the Unix epoch");
	ok(iso_is(INT64_C(951782400123), "2000-02-29T00:00:00.123Z"), "a leap day");
	ok(iso_is(INT64_C(1735689599999), "2024-12-31T23:59:59.999Z"), "the last ms of a year");
	ok(iso_is(INT64_C(4107542400000), "2100-03-01T00:00:00.000Z"),
	   "2100 is not a leap year");
	ok(iso_is(-1, "1969-12-31T23:59:59.999Z"), "before the epoch");
	ok(iso_is(INT64_C(253402300799999), "9999-12-31T23:59:59.999Z"), "the last of 9999");
	ok(iso_is(INT64_C(253402300800000), "10000-01-01T00:00:00.000Z"),
	   "a fifth digit of the year past 9999");
	ok(iso_is(INT64_C(-62135596800000), "0001-01-01T00:00:00.000Z"),
	   "year 1, padded to four digits");
	return tap_done();
}
