/* Early device copies of uploads still arriving; see prefetch.cu. */
#ifndef CRUNCHD_PREFETCH_H
#define CRUNCHD_PREFETCH_H

#include <cuda_runtime.h>
#include <stddef.h>

/* Bytes [0, ready) of the pinned block `host`, which will hold `total` bytes, are final.
 * Big inputs start (or continue) copying to a device; failures only mean no early copy. */
void cr_prefetch_ready(const void *host, size_t ready, size_t total);

/* The device copy of `host` (all `bytes` of it) on `device`, and the event its last chunk
 * records; false when there is none (not prefetched, another device, failed, incomplete).
 * The buffer stays valid until cr_prefetch_drop(host). */
bool cr_prefetch_take(const void *host, size_t bytes, int device, void **dev, cudaEvent_t *done);

/* Waits for the block's copies and frees its device buffer; before the block is reused. */
void cr_prefetch_drop(const void *host);

#endif
