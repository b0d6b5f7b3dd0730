/* pushsplit: the shards of a push batch (pushsplit.h). */
#include "pushsplit.h"
#include "h_push.h"
#include "qassert.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* FNV-1a of an item's queue and partition name. Not keyed: names chosen to collide only make
 * the split slower to build. */
static uint64_t
part_hash(const struct push_item *it)
{
	uint64_t h = 1469598103934665603ULL;

	for (const unsigned char *p = (const unsigned char *)it->queue; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	h = (h ^ 0) * 1099511628211ULL;
	for (const unsigned char *p = (const unsigned char *)it->partition; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	return h;
}

static int
same_part(const struct push_item *a, const struct push_item *b)
{
	return strcmp(a->partition, b->partition) == 0 && strcmp(a->queue, b->queue) == 0;
}

/* One partition of a batch: its first item, how many items it has, and its shard. */
struct part_load {
	const struct push_item *first;
	size_t n;
	unsigned shard;
};

static int
more_items(const void *a, const void *b)
{
	const struct part_load *x = *(struct part_load *const *)a;
	const struct part_load *y = *(struct part_load *const *)b;

	if (x->n != y->n)
		return x->n < y->n ? 1 : -1;
	return x < y ? -1 : x > y;	/* ties in order of first appearance */
}

/* Numbers the partitions of n items in order of first appearance: part[i] for item i, and
 * for each partition its first item and its count in parts. Returns how many there are. */
static size_t
count_parts(struct push_item *const *items, size_t n, size_t *part, struct part_load *parts)
{
	size_t cap = 16, np = 0;
	size_t *slot;		/* open addressing: partition number + 1, 0 = empty */

	while (cap < 2 * n)
		cap *= 2;
	slot = calloc(cap, sizeof(*slot));
	QASSERT(slot != NULL);
	for (size_t i = 0; i < n; i++) {
		size_t h = (size_t)part_hash(items[i]) & (cap - 1);

		while (slot[h] && !same_part(parts[slot[h] - 1].first, items[i]))
			h = (h + 1) & (cap - 1);
		if (!slot[h]) {
			parts[np] = (struct part_load){ .first = items[i] };
			slot[h] = ++np;
		}
		part[i] = slot[h] - 1;
		parts[part[i]].n++;
	}
	free(slot);
	return np;
}

unsigned
push_split(struct push_item *const *items, size_t n, unsigned nshards, unsigned *shard,
	   size_t *load)
{
	size_t *part = malloc((n ? n : 1) * sizeof(*part)), np;
	struct part_load *parts = malloc((n ? n : 1) * sizeof(*parts));
	struct part_load **big = malloc((n ? n : 1) * sizeof(*big));
	unsigned used = 0;

	QASSERT(nshards > 0 && part != NULL && parts != NULL && big != NULL);
	memset(load, 0, nshards * sizeof(*load));
	np = count_parts(items, n, part, parts);
	for (size_t p = 0; p < np; p++)
		big[p] = &parts[p];
	qsort(big, np, sizeof(*big), more_items);
	for (size_t p = 0; p < np; p++) {
		unsigned least = 0;

		for (unsigned s = 1; s < nshards; s++)
			if (load[s] < load[least])
				least = s;
		big[p]->shard = least;
		used += load[least] == 0;
		load[least] += big[p]->n;
	}
	for (size_t i = 0; i < n; i++)
		shard[i] = parts[part[i]].shard;
	free(big);
	free(parts);
	free(part);
	return used;
}
