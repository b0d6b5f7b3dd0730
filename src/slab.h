/* slab: memory for the partition index's many small nodes (partitions and their blocks of
 * group slots), carved from large blocks the kernel may back with 2 MiB pages. A million
 * partitions are millions of nodes that lookups reach at random: on 4 KiB pages each such
 * reach missed the TLB as well as the cache, and the first touch of every page was a fault.
 * A freed node goes on a list of its size and is handed out again; blocks are kept. Under
 * AddressSanitizer it is calloc and free, so that the sanitizer sees every node. */
#ifndef QUEEN_SLAB_H
#define QUEEN_SLAB_H

#include <stddef.h>

/* size bytes, zeroed, 16-byte aligned; never NULL (aborts when memory is out). */
void *slab_alloc(size_t size);
/* Gives back what slab_alloc(size) returned, size the same. */
void slab_free(void *p, size_t size);

#endif
