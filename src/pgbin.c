/* pgbin: binary result values of PostgreSQL (pgbin.h). */
#include "pgbin.h"

#include <stdio.h>
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

size_t
pgbin_iso_ms(int64_t ms, char out[PGBIN_ISO_LEN])
{
	int64_t days = floor_div(ms, 86400000), y;
	int64_t in_day = ms - days * 86400000;
	int m, d, n;

	civil(days, &y, &m, &d);
	n = snprintf(out, PGBIN_ISO_LEN, "%04lld-%02d-%02dT%02d:%02d:%02d.%03dZ", (long long)y, m,
		     d, (int)(in_day / 3600000), (int)(in_day / 60000 % 60),
		     (int)(in_day / 1000 % 60), (int)(in_day % 1000));
	return n < 0 ? 0 : (size_t)n < PGBIN_ISO_LEN ? (size_t)n : PGBIN_ISO_LEN - 1;
}
