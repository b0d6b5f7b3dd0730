/* uuid: time-ordered UUIDv7 generation (RFC 9562) for message and lease ids. Thread-safe. */
#ifndef QUEEN_UUID_H
#define QUEEN_UUID_H

#include <stdint.h>

#define UUID_STR_LEN 37 /* 36 characters and the NUL */

/* Writes a new UUIDv7 into out as lowercase canonical text. Within one process the ids are
 * strictly increasing, also for ids made in the same millisecond. */
void uuid_v7(char out[UUID_STR_LEN]);
/* Same, from a chosen unix time in ms (used by tests). */
void uuid_v7_at(char out[UUID_STR_LEN], uint64_t unix_ms);
/* 1 when s is a canonical UUID text (any version), else 0. */
int uuid_valid(const char *s);
/* The 16 bytes of a canonical UUID text (either case): 0, or -1 when s is not one. */
int uuid_parse(const char *s, uint8_t out[16]);
/* The canonical lowercase text of 16 bytes. */
void uuid_format(const uint8_t b[16], char out[UUID_STR_LEN]);

#endif
