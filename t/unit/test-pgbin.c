/* Unit tests of pgbin: binary integers, uuids and timestamps of a result (built here with
 * libpq's own result constructors, no server), and the ISO text of a time in milliseconds,
 * which must read as PostgreSQL's to_char(..., 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') does. */
#include "tap.h"
#include "pgbin.h"

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

	ok(iso_is(0, "1970-01-01T00:00:00.000Z"), "the Unix epoch");
	ok(iso_is(INT64_C(951782400123), "2000-02-29T00:00:00.123Z"), "a leap day");
	ok(iso_is(INT64_C(1735689599999), "2024-12-31T23:59:59.999Z"), "the last ms of a year");
	ok(iso_is(INT64_C(4107542400000), "2100-03-01T00:00:00.000Z"),
	   "2100 is not a leap year");
	ok(iso_is(-1, "1969-12-31T23:59:59.999Z"), "before the epoch");
	ok(iso_is(INT64_C(253402300799999), "9999-12-31T23:59:59.999Z"), "the last of 9999");
	return tap_done();
}
