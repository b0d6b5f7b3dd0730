/* Unit tests of strbuf: growth, JSON string escaping, PostgreSQL array elements. */
#include "strbuf.h"
#include "tap.h"

#include <stdint.h>
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
	sb_reset(&sb);
	/* Integers are written in place: each length from one digit to nineteen and a sign,
	 * at the edge of the buffer's capacity (a fresh buffer of 256 bytes). */
	sb_add_i64(&sb, 0);
	sb_addc(&sb, ' ');
	sb_add_i64(&sb, INT64_MIN);
	sb_addc(&sb, ' ');
	sb_add_i64(&sb, INT64_MAX);
	sb_addc(&sb, ' ');
	sb_add_i64(&sb, 1000000);
	is_str(sb.buf, "0 -9223372036854775808 9223372036854775807 1000000",
	       "0, the extremes and a power of ten");
	sb_free(&sb);
	sb_init(&sb);
	while (sb.len < 250)
		sb_addc(&sb, 'y');
	sb_add_i64(&sb, -1234567890123);
	is_int(sb.len, 264, "a number across the capacity grows the buffer");
	is_str(sb.buf + 250, "-1234567890123", "and is written whole");
	sb_reset(&sb);
	sb_addf(&sb, "%d-%s", 42, "z");
	sb_add_i64(&sb, -7);
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
