/* slab: see slab.h. */
#include "slab.h"
#include "qassert.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__)
#define SLAB_PLAIN_ON 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SLAB_PLAIN_ON 1
#endif
#endif
#ifndef SLAB_PLAIN_ON
#define SLAB_PLAIN_ON 0
#endif

/* Sizes are rounded up to a multiple of SLAB_STEP; above SLAB_MAX, calloc serves. */
#define SLAB_STEP 16
#define SLAB_MAX 512
/* The kernel's large page, and the blocks nodes are carved from (a million partitions of
 * short names take about four). */
#define SLAB_HUGE ((size_t)2 << 20)
#define SLAB_BLOCK ((size_t)32 << 20)

static pthread_mutex_t slab_mu = PTHREAD_MUTEX_INITIALIZER;
static void *slab_freed[SLAB_MAX / SLAB_STEP + 1];	/* by size / SLAB_STEP */
static char *slab_next, *slab_end;

/* A new block, aligned on a large page and offered to the kernel for large pages (refused
 * when transparent huge pages are off: then it is ordinary memory). */
static void
slab_grow(void)
{
	char *m = mmap(NULL, SLAB_BLOCK + SLAB_HUGE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *start;
	size_t head;

	QASSERT(m != MAP_FAILED);
	start = (char *)(((uintptr_t)m + SLAB_HUGE - 1) & ~(uintptr_t)(SLAB_HUGE - 1));
	head = (size_t)(start - m);
	if (head)
		munmap(m, head);
	munmap(start + SLAB_BLOCK, SLAB_HUGE - head);
	(void)madvise(start, SLAB_BLOCK, MADV_HUGEPAGE);
	slab_next = start;
	slab_end = start + SLAB_BLOCK;
}

void *
slab_alloc(size_t size)
{
	size_t k = (size + SLAB_STEP - 1) / SLAB_STEP, bytes = k * SLAB_STEP;
	void *p;

	if (SLAB_PLAIN_ON || size > SLAB_MAX) {
		p = calloc(1, size);
		QASSERT(p != NULL);
		return p;
	}
	pthread_mutex_lock(&slab_mu);
	if ((p = slab_freed[k]) != NULL) {
		memcpy(&slab_freed[k], p, sizeof(void *));
		pthread_mutex_unlock(&slab_mu);
		memset(p, 0, bytes);
		return p;
	}
	if ((size_t)(slab_end - slab_next) < bytes)
		slab_grow();	/* the rest of the old block, under SLAB_MAX, is left */
	p = slab_next;
	slab_next += bytes;
	pthread_mutex_unlock(&slab_mu);
	return p;		/* fresh anonymous memory: zero already */
}

void
slab_free(void *p, size_t size)
{
	size_t k = (size + SLAB_STEP - 1) / SLAB_STEP;

	if (!p)
		return;
	if (SLAB_PLAIN_ON || size > SLAB_MAX) {
		free(p);
		return;
	}
	pthread_mutex_lock(&slab_mu);
	memcpy(p, &slab_freed[k], sizeof(void *));
	slab_freed[k] = p;
	pthread_mutex_unlock(&slab_mu);
}
