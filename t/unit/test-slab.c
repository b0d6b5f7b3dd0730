/* Unit tests of slab (src/slab.c): what it hands out is zeroed, 16-byte aligned and its own;
 * a node allocated after one was given back is cleared; sizes above its largest and
 * blocks past the first are served too. */
#include "slab.h"
#include "tap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int
zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

int
main(void)
{
	enum { N = 400000 };	/* 112 bytes each: more than one block */
	unsigned char **v = malloc(N * sizeof(*v));
	unsigned char *a, *b, *big;
	int bad = 0;

	a = slab_alloc(100);
	ok(a && zero(a, 100) && ((uintptr_t)a & 15) == 0, "100 bytes: zeroed, 16-byte aligned");
	memset(a, 0xab, 100);
	b = slab_alloc(100);
	ok(b && b != a && (b + 100 <= a || a + 100 <= b), "a second node does not overlap the first");
	slab_free(a, 100);
	a = slab_alloc(97);
	ok(a && zero(a, 97), "a node allocated after one was given back is cleared");
	slab_free(a, 97);
	slab_free(b, 100);

	big = slab_alloc(5000);
	ok(big && zero(big, 5000), "a size above the largest class is served, zeroed");
	memset(big, 1, 5000);
	slab_free(big, 5000);

	for (int i = 0; i < N && v; i++) {
		v[i] = slab_alloc(100);
		bad += !zero(v[i], 100) || ((uintptr_t)v[i] & 15) != 0;
		memset(v[i], i & 0xff, 100);
	}
	for (int i = 0; i < N && v; i++)
		bad += v[i][0] != (i & 0xff) || v[i][99] != (i & 0xff);
	is_int(bad, 0, "400,000 nodes (past the first block) are zeroed, aligned and apart");
	for (int i = 0; i < N && v; i++)
		slab_free(v[i], 100);
	free(v);
	return tap_done();
}
