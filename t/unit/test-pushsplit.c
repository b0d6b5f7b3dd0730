/* Unit tests of push_split: each partition whole in one shard, partitions told apart by queue
 * and name, and the shards even where the partitions allow it. */
#include "pushsplit.h"
#include "h_push.h"
#include "tap.h"

#include <stdio.h>
#include <string.h>

#define MAXN 1000

static struct push_item it[MAXN];
static struct push_item *items[MAXN];
static unsigned shard[MAXN];
static size_t load[8];
static char names[MAXN][16];

static void
set(size_t i, const char *queue, const char *partition)
{
	memset(&it[i], 0, sizeof(it[i]));
	it[i].queue = queue;
	it[i].partition = partition;
	items[i] = &it[i];
}

/* Every two items of one partition (same queue and name) share their shard. */
static int
whole(size_t n)
{
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (strcmp(it[i].queue, it[j].queue) == 0 &&
			    strcmp(it[i].partition, it[j].partition) == 0 && shard[i] != shard[j])
				return 0;
	return 1;
}

static size_t
most(unsigned nshards)
{
	size_t m = 0;

	for (unsigned s = 0; s < nshards; s++)
		m = load[s] > m ? load[s] : m;
	return m;
}

int
main(void)
{
	static const size_t sizes[] = { 5, 3, 2, 2, 1, 1 };
	size_t n = 0;
	unsigned used;

	/* Ten partitions of 100 items each, interleaved, as the bench pushes them. */
	for (size_t i = 0; i < 1000; i++) {
		snprintf(names[i % 10], sizeof(names[0]), "p%zu", i % 10);
		set(i, "bench", names[i % 10]);
	}
	used = push_split(items, 1000, 2, shard, load);
	is_int(used, 2, "ten partitions use both shards");
	is_int(load[0], 500, "ten partitions of 100 split 500 and 500 (first)");
	is_int(load[1], 500, "ten partitions of 100 split 500 and 500 (second)");
	ok(whole(1000), "each partition in one shard");

	/* Uneven partitions: 14 items as 5, 3, 2, 2, 1, 1 fit in two shards of 7. */
	for (size_t p = 0; p < 6; p++) {
		snprintf(names[p], sizeof(names[0]), "u%zu", p);
		for (size_t k = 0; k < sizes[p]; k++)
			set(n++, "q", names[p]);
	}
	push_split(items, n, 2, shard, load);
	is_int(most(2), 7, "partitions of 5, 3, 2, 2, 1 and 1 items: 7 in each shard");
	ok(whole(n), "each uneven partition in one shard");

	/* One name in two queues is two partitions; so are "ab"/"c" and "a"/"bc". */
	for (size_t i = 0; i < 8; i++)
		set(i, i % 2 ? "a" : "b", "p");
	push_split(items, 8, 2, shard, load);
	ok(load[0] == 4 && load[1] == 4, "partition p of queues a and b go to two shards");
	for (size_t i = 0; i < 6; i++)
		set(i, i % 2 ? "ab" : "a", i % 2 ? "c" : "bc");
	push_split(items, 6, 2, shard, load);
	ok(load[0] == 3 && load[1] == 3, "queue ab partition c is not queue a partition bc");

	/* One partition: one shard, whatever the count of shards. */
	for (size_t i = 0; i < 50; i++)
		set(i, "q", "only");
	used = push_split(items, 50, 4, shard, load);
	ok(used == 1 && most(4) == 50 && whole(50), "one partition fills one shard of four");
	is_int(push_split(items, 0, 4, shard, load), 0, "no items: no shard used");
	used = push_split(items, 50, 1, shard, load);
	ok(used == 1 && shard[0] == 0 && shard[49] == 0, "one shard takes everything");

	/* A thousand partitions of one item each over three shards: 334, 333, 333. */
	for (size_t i = 0; i < 1000; i++) {
		snprintf(names[i], sizeof(names[0]), "k%zu", i);
		set(i, "many", names[i]);
	}
	used = push_split(items, 1000, 3, shard, load);
	ok(used == 3 && most(3) == 334 && load[0] + load[1] + load[2] == 1000,
	   "1000 one-item partitions over three shards: at most 334 in one");
	return tap_done();
}
