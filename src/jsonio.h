/* jsonio: small, pure helpers for reading requests and writing answers: query-string
 * booleans and integers, typed JSON fields where null means absent (SPEC 21), control
 * character checks, and ISO-8601 UTC timestamps with milliseconds. No I/O, no state. */
#ifndef QUEEN_JSONIO_H
#define QUEEN_JSONIO_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* "true"/"false"/"1"/"0" -> 0 and *out; anything else -> -1. */
int jio_parse_bool(const char *s, int *out);
/* Decimal integer within [min, max] -> 0 and *out; else -1. */
int jio_parse_int(const char *s, int64_t min, int64_t max, int64_t *out);
/* ISO-8601 timestamp ("2026-08-24T09:15:00.000Z", offsets and missing fractions accepted)
 * -> 0 and unix milliseconds; else -1. */
int jio_parse_iso(const char *s, int64_t *unix_ms);
/* Unix milliseconds -> "2026-08-24T09:15:00.000Z" (buf of at least 25 bytes). */
void jio_format_iso(int64_t unix_ms, char *buf, size_t len);

/* The one way a request's JSON text is parsed: any value at top level, \u0000 allowed in
 * strings, and a raw NUL byte anywhere refused (jansson would stop reading at it and take
 * what came before, so {"a":false<NUL>,"b":1} would mean {"a":false}). NULL with err set
 * on error. The caller owns the result. */
json_t *jio_load(const char *buf, size_t len, json_error_t *err);

/* A JSON number sent as a double (30.0) that is a whole number within [min, max] -> 0 and
 * *out; else -1. The range is checked before any conversion: converting a double outside
 * the range of int64_t (1e300) to an integer is undefined behaviour. */
int jio_whole(double d, int64_t min, int64_t max, int64_t *out);

/* 1 when s holds a control character (below 0x20 or 0x7f). */
int jio_has_ctl(const char *s);

enum jio_kind { JIO_STRING, JIO_INT, JIO_BOOL, JIO_ARRAY, JIO_OBJECT, JIO_ANY };

/* Field key of object o with kind k. Absent and JSON null give *out = NULL and 0; a value of
 * another kind gives -1 and a message "<key> must be a <kind>" in err. */
int jio_field(json_t *o, const char *key, enum jio_kind k, json_t **out, char *err,
	      size_t errlen);

#endif
