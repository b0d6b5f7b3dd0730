/* tap.h: a tiny TAP producer for the C unit tests (ok/is/done), enough for automake's
 * TAP driver and prove. */
#ifndef QUEEN_TAP_H
#define QUEEN_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int tap_n, tap_failed;

#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define is_str(got, want, name) \
	tap_is_str((got), (want), __FILE__, __LINE__, (name))
#define is_int(got, want, name) \
	tap_is_int((long long)(got), (long long)(want), __FILE__, __LINE__, (name))

static int __attribute__((format(printf, 4, 5)))
tap_ok(int pass, const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	printf("%s %d - ", pass ? "ok" : "not ok", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (!pass) {
		tap_failed++;
		printf("#   failed at %s:%d\n", file, line);
	}
	return pass;
}

static int __attribute__((unused))
tap_is_str(const char *got, const char *want, const char *file, int line, const char *name)
{
	int pass = (got && want && strcmp(got, want) == 0) || (!got && !want);

	if (!tap_ok(pass, file, line, "%s", name))
		printf("#   got: '%s'\n#   expected: '%s'\n", got ? got : "(null)",
		       want ? want : "(null)");
	return pass;
}

static int __attribute__((unused))
tap_is_int(long long got, long long want, const char *file, int line, const char *name)
{
	if (!tap_ok(got == want, file, line, "%s", name))
		printf("#   got: %lld\n#   expected: %lld\n", got, want);
	return got == want;
}

static int __attribute__((unused))
tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

#endif
