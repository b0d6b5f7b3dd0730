/* pushsplit: how a batch of push items is cut into shards that commit side by side, on
 * several connections at once (a coalesced push, a spool replay).
 *
 * Pure: no I/O, no global state; any thread. */
#ifndef QUEEN_PUSHSPLIT_H
#define QUEEN_PUSHSPLIT_H

#include <stddef.h>

struct push_item;

/* Gives each of the n items a shard below nshards (shard[i]) and counts each shard's items
 * (load[0 .. nshards - 1]). A partition (queue and partition name) goes whole to one shard,
 * so its items keep their order; the partitions are spread so that the shards hold about as
 * many items each: the largest first, each to the shard holding fewest so far. The batch
 * ends when its last shard commits, so an uneven split costs the time of the largest.
 * Returns how many shards are not empty. */
unsigned push_split(struct push_item *const *items, size_t n, unsigned nshards,
		    unsigned *shard, size_t *load);

#endif
