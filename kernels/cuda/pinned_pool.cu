/* A cache of pinned host blocks for request buffers. Pinning is expensive (cudaHostAlloc maps
 * and locks every page: tens of ms for a big upload) and cudaFreeHost synchronises the device,
 * so blocks freed by finished jobs are kept, up to CRUNCHD_PINNED_CACHE_MB (default 2048), and
 * handed to the next request that fits. */
#include <atomic>

#include <cuda_runtime.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "kernels/cuda/pinned_pool.h"
#include "kernels/cuda/prefetch.h"

#define MAX_BLOCKS 256
#define ROUND (1u << 20) /* sizes round up to 1 MiB so similar requests share blocks */

typedef struct {
    void *p;
    size_t size;
    bool in_use;
} block;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static block blocks[MAX_BLOCKS];
/* Changed under mu, read without it: the memory budget asks on every charge, from every HTTP
 * thread, and a scan of the blocks under mu there was 1.8% of a loaded daemon's samples. */
static std::atomic<size_t> cached_bytes{0}; /* bytes in blocks not in use */
static std::atomic<size_t> in_use_bytes{0}; /* bytes in blocks handed out */

static size_t cache_cap(void)
{
    static size_t cap;
    if (!cap) {
        const char *s = getenv("CRUNCHD_PINNED_CACHE_MB");
        long mb = s ? strtol(s, NULL, 10) : 2048;
        cap = (size_t)(mb > 0 ? mb : 0) << 20;
        if (!cap)
            cap = 1; /* 0 disables caching; 1 byte keeps the "set" flag */
    }
    return cap;
}

/* The smallest free block that holds `bytes` without wasting more than half of it. */
static block *find_free(size_t bytes)
{
    block *best = NULL;
    for (int i = 0; i < MAX_BLOCKS; i++) {
        block *b = &blocks[i];
        if (b->p && !b->in_use && b->size >= bytes && b->size / 2 <= bytes &&
            (!best || b->size < best->size))
            best = b;
    }
    return best;
}

static block *empty_slot(void)
{
    for (int i = 0; i < MAX_BLOCKS; i++)
        if (!blocks[i].p)
            return &blocks[i];
    return NULL;
}

/* Frees cached blocks, largest first, until `need` more bytes fit under the cap. */
static void evict_locked(size_t need)
{
    while (cached_bytes + need > cache_cap()) {
        block *victim = NULL;
        for (int i = 0; i < MAX_BLOCKS; i++)
            if (blocks[i].p && !blocks[i].in_use && (!victim || blocks[i].size > victim->size))
                victim = &blocks[i];
        if (!victim)
            return;
        cudaFreeHost(victim->p);
        cudaGetLastError();
        cached_bytes -= victim->size;
        *victim = block{};
    }
}

void *cr_pinned_alloc(size_t bytes)
{
    size_t size = (bytes + ROUND - 1) / ROUND * ROUND;
    void *p = NULL;
    pthread_mutex_lock(&mu);
    block *b = find_free(size ? size : ROUND);
    if (b) {
        b->in_use = true;
        cached_bytes -= b->size;
        in_use_bytes += b->size;
        p = b->p;
    } else if ((b = empty_slot()) != NULL) {
        if (cudaHostAlloc(&p, size ? size : ROUND, cudaHostAllocPortable) != cudaSuccess) {
            cudaGetLastError(); /* not sticky: leave nothing behind for the workers */
            evict_locked(cache_cap()); /* memory may be short: give the cache back, try again */
            if (cudaHostAlloc(&p, size ? size : ROUND, cudaHostAllocPortable) != cudaSuccess) {
                cudaGetLastError();
                p = NULL;
            }
        }
        if (p) {
            *b = (block){p, size ? size : ROUND, true};
            in_use_bytes += b->size;
        }
    }
    pthread_mutex_unlock(&mu);
    return p; /* NULL: the caller falls back to pageable memory */
}

void cr_pinned_free(void *p)
{
    if (!p)
        return;
    cr_prefetch_drop(p); /* its early device copy must be done reading before anyone reuses it */
    pthread_mutex_lock(&mu);
    for (int i = 0; i < MAX_BLOCKS; i++) {
        block *b = &blocks[i];
        if (b->p != p)
            continue;
        b->in_use = false;
        in_use_bytes -= b->size;
        if (b->size > cache_cap()) { /* too big to keep */
            cudaFreeHost(p);
            cudaGetLastError();
            *b = block{};
        } else {
            evict_locked(b->size);
            cached_bytes += b->size;
        }
        break;
    }
    pthread_mutex_unlock(&mu);
}

void cr_pinned_usage(uint64_t *in_use, uint64_t *cached)
{
    *in_use = in_use_bytes;
    *cached = cached_bytes;
}

void cr_pinned_release_all(void)
{
    pthread_mutex_lock(&mu);
    for (int i = 0; i < MAX_BLOCKS; i++)
        if (blocks[i].p && !blocks[i].in_use) {
            cudaFreeHost(blocks[i].p);
            cudaGetLastError();
            blocks[i] = block{};
        }
    cached_bytes = 0;
    pthread_mutex_unlock(&mu);
}
