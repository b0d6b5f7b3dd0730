/* siphash: SipHash-2-4, a keyed hash for client-supplied names in the partition index, so a
 * client cannot choose names that collide on purpose. */
#ifndef QUEEN_SIPHASH_H
#define QUEEN_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t siphash24(const uint8_t key[16], const void *data, size_t len);

#endif
