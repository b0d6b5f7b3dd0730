/* Unit tests of strbuf: growth, JSON string escaping, PostgreSQL array elements. */
#include "strbuf.h"
#include "tap.h"

#include <stdlib.h>

int
main(void)
{
	struct strbuf sb;
	char *s;

	sb_init(&sb);
	for (int i = 0; i < 1000; i++)
		sb_addc(&sb, 'x');
	is_int(sb.len, 1000, "a thousand appends grow the buffer");
	sb_reset(&sb);
	sb_add_jstr(&sb, "a\"b\\c\n\x01");
	is_str(sb.buf, "\"a\\\"b\\\\c\\n\\u0001\"", "JSON escaping of quote, backslash, control");
	sb_reset(&sb);
	sb_add_jstr(&sb, NULL);
	is_str(sb.buf, "null", "NULL string is JSON null");
	sb_reset(&sb);
	sb_add_pgelem(&sb, "say \"hi\" \\ {x,y}");
	is_str(sb.buf, "\"say \\\"hi\\\" \\\\ {x,y}\"", "array element escaping");
	sb_reset(&sb);
	sb_add_pgelem(&sb, NULL);
	is_str(sb.buf, "NULL", "NULL element");
	sb_reset(&sb);
	sb_addf(&sb, "%d-%s", 42, "z");
	sb_add_i64(&sb, -7);
	is_str(sb.buf, "42-z-7", "formatted appends");
	s = sb_steal(&sb, NULL);
	is_str(s, "42-z-7", "steal hands the bytes over");
	ok(sb.buf == NULL && sb.len == 0, "steal leaves the buffer empty");
	free(s);
	sb_adds(&sb, "ab");
	sb_reserve_exact(&sb, 140 * 1024);
	is_int(sb.cap, 2 + 140 * 1024 + 1, "an exact reservation is what was asked");
	is_str(sb.buf, "ab", "and keeps what was written");
	sb_reserve(&sb, 140 * 1024);
	is_int(sb.cap, 2 + 140 * 1024 + 1, "a reservation within it leaves it as it is");
	sb_reserve(&sb, 150 * 1024);
	is_int(sb.cap, 2 * (2 + 140 * 1024 + 1), "past it, it doubles as before");
	sb_free(&sb);
	return tap_done();
}
