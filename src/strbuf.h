/* strbuf: a growable byte buffer for building response bodies and SQL array literals.
 * Always NUL-terminated; allocation failure aborts (the broker cannot answer without memory). */
#ifndef QUEEN_STRBUF_H
#define QUEEN_STRBUF_H

#include <stddef.h>
#include <stdint.h>

struct strbuf {
	char *buf;
	size_t len;
	size_t cap;
};

void sb_init(struct strbuf *sb);
void sb_free(struct strbuf *sb);
void sb_reset(struct strbuf *sb);
/* Takes the bytes out of the buffer; the caller frees them. The buffer is left empty. */
char *sb_steal(struct strbuf *sb, size_t *len);
/* Asks for transparent huge pages in the 2 MiB-aligned interior of [p, p + n) when n is 4 MiB
 * or more (sb_reserve does for its buffers): a buffer of megabytes written once then costs a
 * page fault every 2 MiB, not every 4 KiB. Advice only: where THP is off, nothing changes. */
void mem_advise_huge(void *p, size_t n);
void sb_reserve(struct strbuf *sb, size_t extra);
/* As sb_reserve, to exactly what is asked rather than the next power of two: for an answer
 * whose size is known before it is written. Doubled, 140 KiB became 256 KiB, malloc's mmap
 * threshold (main.c): a fresh mapping for every such answer, each page faulted in. */
void sb_reserve_exact(struct strbuf *sb, size_t extra);
void sb_add(struct strbuf *sb, const char *s, size_t n);
void sb_adds(struct strbuf *sb, const char *s);
void sb_addc(struct strbuf *sb, char c);
void sb_addf(struct strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_add_i64(struct strbuf *sb, int64_t v);
/* Appends s as a JSON string literal (quoted, escaped); NULL appends null. */
void sb_add_jstr(struct strbuf *sb, const char *s);
/* Appends s as one element of a PostgreSQL array literal ("..." escaped); NULL appends NULL. */
void sb_add_pgelem(struct strbuf *sb, const char *s);
/* The same as the next element of the array literal being built in sb (opened with '{'): a
 * comma before it unless it is the first. */
void sb_add_pgnext(struct strbuf *sb, const char *s);
/* A one-dimensional PostgreSQL array in binary wire format (what array_recv reads), for a
 * parameter sent with format 1: no escaping or parsing on either side, each element
 * length-prefixed.  sb_pgbin_array writes the header of an array of n elements of the type
 * (PG_TEXTOID or PG_UUIDOID); then sb_pgbin_text_elem or sb_pgbin_uuid_elem appends each
 * element in order (NULL = SQL NULL; a uuid as canonical text, which must be valid).
 * sb->len is the parameter's length. */
#define PG_TEXTOID 25
#define PG_UUIDOID 2950
void sb_pgbin_array(struct strbuf *sb, size_t n, uint32_t elem_oid);
void sb_pgbin_text_elem(struct strbuf *sb, const char *s);
void sb_pgbin_uuid_elem(struct strbuf *sb, const char *s);

#endif
