/* pgbin: the values of a result PostgreSQL sent in binary (a statement of the catalogue with
 * binary_result, sqlstmt.h): integers, uuids and timestamps read without a text detour on
 * either side, and the text the broker answers with made from them.
 *
 * Pure: no I/O, no global state; any thread. A column of another type or length than asked
 * reads as 0 (ids as all zeros): the catalogue fixes the types, so that is a bug, not input. */
#ifndef QUEEN_PGBIN_H
#define QUEEN_PGBIN_H

#include "uuid.h"

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>

/* The longest text of pgbin_iso_ms and its NUL: "YYYY-MM-DDTHH:MM:SS.mmmZ" (a year past
 * 9999 is longer; PostgreSQL's timestamps end in 294276). */
#define PGBIN_ISO_LEN 32

int32_t pgbin_i32(const PGresult *res, int row, int col);
int64_t pgbin_i64(const PGresult *res, int row, int col);
/* A uuid column's 16 bytes, or NULL when it is NULL or not 16 bytes long. */
const uint8_t *pgbin_uuid_bytes(const PGresult *res, int row, int col);
/* A uuid column as canonical lowercase text. */
void pgbin_uuid(const PGresult *res, int row, int col, char out[UUID_STR_LEN]);
/* A timestamptz column as milliseconds since the Unix epoch (rounded down). */
int64_t pgbin_ts_ms(const PGresult *res, int row, int col);
/* Milliseconds since the Unix epoch as UTC ISO 8601 text with milliseconds and a Z, as
 * to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') writes it. Returns the
 * length. */
size_t pgbin_iso_ms(int64_t ms, char out[PGBIN_ISO_LEN]);
/* 1 when rows a and b hold the same bytes in column col (an id, a key). */
int pgbin_same(const PGresult *res, int col, int a, int b);
/* The order to read rows in (a malloc'd array of row numbers, the caller frees): the rows of
 * one key (the bytes of column key_col) together, in the order of the int8 column off_col,
 * the keys in the order they first come. Rows that already come so are left as they are (a
 * pop's rows, one key per partition: SQL is not asked to sort them, its sort copied every
 * payload once more, and they come in order but for a segment stored out of place, in space
 * that retention freed). */
int *pgbin_row_order(const PGresult *res, int key_col, int off_col);

/* The elements of a one-dimensional array column, read one at a time: a pop's row is the
 * slice of one segment, its ids, transaction ids and payloads as arrays (one row and one
 * set of per-row fields a slice, not a message). */
struct pgbin_elems {
	char *p, *end;
	int left;
};
/* Opens the array at (row, col). Returns how many elements it holds: 0 for NULL, and for a
 * value that is not a one-dimensional array (then each next is NULL). */
int pgbin_elems_open(const PGresult *res, int row, int col, struct pgbin_elems *e);
/* The next element as a NUL-terminated string, made in place: its bytes move over their
 * length word and a NUL follows them (the result's memory is the caller's, and the column
 * is no longer an array after). NULL for a NULL element and past the last; *len its
 * length (0 then). */
const char *pgbin_elems_next(struct pgbin_elems *e, size_t *len);

#endif
