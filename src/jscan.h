/* jscan: a small validating JSON scanner for the hot path, without building a tree.
 *
 * The push route receives thousands of items a second; building a jansson tree of every
 * payload only to print it again costs more CPU than the database spends storing it. The
 * scanner walks the text once: it validates the grammar (RFC 8259, UTF-8 included), decodes
 * the strings the broker reads, and hands the rest back as raw spans, which are valid JSON
 * text to store as they are. Pure functions, no allocation, any thread. */
#ifndef QUEEN_JSCAN_H
#define QUEEN_JSCAN_H

#include <stddef.h>

struct jscan {
	const char *p;		/* next byte */
	const char *end;
	const char *err;	/* static message of the first error, NULL while none */
	size_t err_at;		/* byte offset of the error */
	const char *start;
};

enum js_type { JS_ERROR, JS_OBJECT, JS_ARRAY, JS_STRING, JS_NUMBER, JS_TRUE, JS_FALSE, JS_NULL };

void js_init(struct jscan *s, const char *buf, size_t len);
/* Skips white space; returns the type of the value that starts there (without consuming it),
 * or JS_ERROR at the end of input or on a byte no value starts with. */
enum js_type js_peek(struct jscan *s);
/* Skips one whole value, validating it; sets *span and *len to its text. 0, or -1 with s->err. */
int js_skip(struct jscan *s, const char **span, size_t *len);
/* Decodes the string at s->p into out (at least as large as the raw string) and NUL-terminates
 * it; *len is the decoded length (it may hold NUL bytes from \u0000). 0 or -1. */
int js_string(struct jscan *s, char *out, size_t *len);
/* Object and array walking: js_begin consumes '{' or '['; js_next returns 1 while there is
 * another member (for objects it decodes the key into key/keylen, up to keycap bytes, longer
 * keys are truncated and marked by *keylen = keycap) and consumes the ':' and ',' around it,
 * 0 at the closing bracket (consumed), -1 on error. */
int js_begin(struct jscan *s, char open);
int js_next(struct jscan *s, char close, int *first, char *key, size_t keycap, size_t *keylen);
/* 1 when the key js_next decoded (klen bytes) is name: byte by byte in a plain loop, not by
 * libc's strlen and strcmp, which cost the broker about 3% of its samples in a pop+ack run
 * when every key of every ack item went through them (a loop, 0.4%). A key holding a NUL
 * (from \u0000) or marked as truncated matches no name. */
static inline int
js_key_is(const char *key, size_t klen, const char *name)
{
	for (size_t i = 0; i < klen; i++)
		if (name[i] == '\0' || key[i] != name[i])
			return 0;
	return name[klen] == '\0';
}
/* 0 when only white space is left. */
int js_end(struct jscan *s);

#endif
