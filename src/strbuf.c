/* strbuf: growable buffer, plus the two escapings the broker writes by hand on hot paths:
 * JSON string literals and PostgreSQL array-literal elements. */
#include "strbuf.h"
#include "qassert.h"
#include "uuid.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

void
sb_init(struct strbuf *sb)
{
	sb->buf = NULL;
	sb->len = 0;
	sb->cap = 0;
}

void
sb_free(struct strbuf *sb)
{
	free(sb->buf);
	sb_init(sb);
}

void
sb_reset(struct strbuf *sb)
{
	sb->len = 0;
	if (sb->buf)
		sb->buf[0] = '\0';
}

char *
sb_steal(struct strbuf *sb, size_t *len)
{
	char *p;

	sb_reserve(sb, 0);
	p = sb->buf;
	if (len)
		*len = sb->len;
	sb_init(sb);
	return p;
}

/* A buffer this large is filled by the megabyte (a large request body, the parameters of a
 * large push): faulted in 4 KiB at a time it cost more than the copying into it. */
#define HUGE_FROM ((size_t)4 << 20)
#define HUGE_PAGE ((uintptr_t)2 << 20)

void
mem_advise_huge(void *p, size_t n)
{
	uintptr_t from = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
	uintptr_t to = ((uintptr_t)p + n) & ~(HUGE_PAGE - 1);

	if (n >= HUGE_FROM && to > from)
		(void)madvise((void *)from, to - from, MADV_HUGEPAGE);
}

/* Makes the buffer cap bytes long (cap > sb->cap). */
static void
sb_grow(struct strbuf *sb, size_t cap)
{
	sb->buf = realloc(sb->buf, cap);
	QASSERT(sb->buf != NULL);
	sb->cap = cap;
	mem_advise_huge(sb->buf, cap);
}

void
sb_reserve_exact(struct strbuf *sb, size_t extra)
{
	size_t need = sb->len + extra + 1;

	if (need > sb->cap)
		sb_grow(sb, need);
}

void
sb_reserve(struct strbuf *sb, size_t extra)
{
	size_t need = sb->len + extra + 1;

	if (need <= sb->cap)
		return;
	size_t cap = sb->cap ? sb->cap : 256;
	while (cap < need)
		cap *= 2;
	sb_grow(sb, cap);
}

void
sb_add(struct strbuf *sb, const char *s, size_t n)
{
	sb_reserve(sb, n);
	memcpy(sb->buf + sb->len, s, n);
	sb->len += n;
	sb->buf[sb->len] = '\0';
}

void
sb_adds(struct strbuf *sb, const char *s)
{
	sb_add(sb, s, strlen(s));
}

void
sb_addc(struct strbuf *sb, char c)
{
	sb_reserve(sb, 1);
	sb->buf[sb->len++] = c;
	sb->buf[sb->len] = '\0';
}

void
sb_addf(struct strbuf *sb, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	QASSERT(n >= 0);
	sb_reserve(sb, (size_t)n);
	va_start(ap, fmt);
	vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	sb->len += (size_t)n;
}

void
sb_add_i64(struct strbuf *sb, int64_t v)
{
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v, t = u;
	size_t n = v < 0;
	char *p;

	/* Counted, then written in place from the end: no copy of a few bytes through memcpy,
	 * which the profile of a drain put among the broker's costliest calls (offsets and
	 * times are written several times per message). */
	do {
		n++;
		t /= 10;
	} while (t);
	sb_reserve(sb, n);
	p = sb->buf + sb->len + n;
	*p = '\0';
	do {
		*--p = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		*--p = '-';
	sb->len += n;
}

void
sb_add_jstr(struct strbuf *sb, const char *s)
{
	static const char hex[] = "0123456789abcdef";

	if (!s) {
		sb_add(sb, "null", 4);
		return;
	}
	sb_addc(sb, '"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		const unsigned char *run = p;

		while (*p >= 0x20 && *p != '"' && *p != '\\')
			p++;
		if (p > run)
			sb_add(sb, (const char *)run, (size_t)(p - run));
		if (!*p)
			break;
		switch (*p) {
		case '"': sb_add(sb, "\\\"", 2); break;
		case '\\': sb_add(sb, "\\\\", 2); break;
		case '\n': sb_add(sb, "\\n", 2); break;
		case '\r': sb_add(sb, "\\r", 2); break;
		case '\t': sb_add(sb, "\\t", 2); break;
		default: {
			char u[6] = { '\\', 'u', '0', '0', hex[*p >> 4], hex[*p & 15] };
			sb_add(sb, u, 6);
		}
		}
	}
	sb_addc(sb, '"');
}

void
sb_add_pgelem(struct strbuf *sb, const char *s)
{
	if (!s) {
		sb_add(sb, "NULL", 4);
		return;
	}
	sb_reserve(sb, strlen(s) + 2);
	sb_addc(sb, '"');
	for (const char *p = s; *p; p++) {
		const char *run = p;

		while (*p && *p != '"' && *p != '\\')
			p++;
		if (p > run)
			sb_add(sb, run, (size_t)(p - run));
		if (!*p)
			break;
		sb_addc(sb, '\\');
		sb_addc(sb, *p);
	}
	sb_addc(sb, '"');
}

void
sb_add_pgnext(struct strbuf *sb, const char *s)
{
	if (sb->len > 1)
		sb_addc(sb, ',');
	sb_add_pgelem(sb, s);
}

static void
sb_add_be32(struct strbuf *sb, uint32_t v)
{
	char b[4] = { (char)(v >> 24), (char)(v >> 16), (char)(v >> 8), (char)v };

	sb_add(sb, b, 4);
}

void
sb_pgbin_array(struct strbuf *sb, size_t n, uint32_t elem_oid)
{
	sb_add_be32(sb, 1);		/* dimensions */
	sb_add_be32(sb, 0);		/* has-null flag: array_recv finds the NULLs itself */
	sb_add_be32(sb, elem_oid);	/* element type */
	sb_add_be32(sb, (uint32_t)n);	/* length of the dimension */
	sb_add_be32(sb, 1);		/* lower bound */
}

void
sb_pgbin_text_elem(struct strbuf *sb, const char *s)
{
	size_t n;

	if (!s) {
		sb_add_be32(sb, UINT32_MAX);	/* -1: NULL */
		return;
	}
	n = strlen(s);
	sb_add_be32(sb, (uint32_t)n);
	sb_add(sb, s, n);
}

void
sb_pgbin_uuid_elem(struct strbuf *sb, const char *s)
{
	uint8_t b[16];

	if (!s) {
		sb_add_be32(sb, UINT32_MAX);
		return;
	}
	QASSERT(uuid_parse(s, b) == 0);
	sb_add_be32(sb, 16);
	sb_add(sb, (const char *)b, 16);
}
