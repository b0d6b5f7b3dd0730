/* Always-on assertions for invariants: a broken invariant logs file:line and aborts.
 * Bad input is never an assertion; it is a 4xx (see errors.h). */
#ifndef QUEEN_QASSERT_H
#define QUEEN_QASSERT_H

#include <stdio.h>
#include <stdlib.h>

#define QASSERT(cond) \
	do { \
		if (__builtin_expect(!(cond), 0)) { \
			fprintf(stderr, "<2>queend: assertion failed at %s:%d: %s\n", \
				__FILE__, __LINE__, #cond); \
			abort(); \
		} \
	} while (0)

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
