/* Cached pinned host blocks for request buffers; see pinned_pool.cu. */
#ifndef CRUNCHD_PINNED_POOL_H
#define CRUNCHD_PINNED_POOL_H

#include <stddef.h>
#include <stdint.h>

/* A pinned block of at least `bytes`, or NULL (pinning failed: use pageable memory). */
void *cr_pinned_alloc(size_t bytes);
/* Returns a block from cr_pinned_alloc to the cache (or frees it past the cache's cap). */
void cr_pinned_free(void *p);
/* Bytes of the blocks requests hold now, and of those kept for reuse. */
void cr_pinned_usage(uint64_t *in_use, uint64_t *cached);
/* Frees every cached block (at shutdown). */
void cr_pinned_release_all(void);

#endif
