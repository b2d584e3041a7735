/* A cache of pinned host blocks for request buffers. Pinning is expensive (cudaHostAlloc maps
 * and locks every page: tens of ms for a big upload) and cudaFreeHost synchronises the device,
 * so blocks freed by finished jobs are kept, up to CRUNCHD_PINNED_CACHE_MB (default 2048), and
 * handed to the next request that fits. */
#include <algorithm>
#include <atomic>

#include <cuda_runtime.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "kernels/cuda/pinned_pool.h"
#include "kernels/cuda/prefetch.h"

#define MAX_BLOCKS 256
#define ROUND (1u << 20) /* sizes round up to 1 MiB so similar requests share blocks */
#define BIG 64           /* free lists per size in MiB below this; one list for all above */
#define HASH 1024        /* pointer -> block, open addressing: at most a quarter full */

/* Every alloc and free of a loaded daemon comes here (three per small .npy job), under one
 * lock: free blocks are kept in lists by size and blocks found by pointer through a hash, where
 * scans of all 256 blocks cost 2.8% of the samples serving 64x64 .npy GEMMs (H200 machine). */
typedef struct {
    void *p;
    size_t size;
    bool in_use;
    int prev, next; /* in its size's free list while cached; -1: none */
} block;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static block blocks[MAX_BLOCKS];
static int free_head[BIG + 1];
static int by_ptr[HASH];
static bool tables_ready; /* the two above hold -1 for empty: set on first use, under mu */
/* Changed under mu, read without it: the memory budget asks on every charge, from every HTTP
 * thread, and a scan of the blocks under mu there was 1.8% of a loaded daemon's samples. */
static std::atomic<size_t> cached_bytes{0}; /* bytes in blocks not in use */
static std::atomic<size_t> in_use_bytes{0}; /* bytes in blocks handed out */

static void lock_pool(void)
{
    pthread_mutex_lock(&mu);
    if (!tables_ready) {
        std::fill(free_head, free_head + BIG + 1, -1);
        std::fill(by_ptr, by_ptr + HASH, -1);
        tables_ready = true;
    }
}

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

static int size_class(size_t size)
{
    size_t c = size / ROUND;
    return c < BIG ? (int)c : BIG;
}

static void list_push(int i)
{
    int c = size_class(blocks[i].size);
    blocks[i].prev = -1;
    blocks[i].next = free_head[c];
    if (free_head[c] >= 0)
        blocks[free_head[c]].prev = i;
    free_head[c] = i;
}

static void list_remove(int i)
{
    block *b = &blocks[i];
    if (b->prev >= 0)
        blocks[b->prev].next = b->next;
    else
        free_head[size_class(b->size)] = b->next;
    if (b->next >= 0)
        blocks[b->next].prev = b->prev;
    b->prev = b->next = -1;
}

static unsigned hash_of(const void *p)
{
    return (unsigned)(((uintptr_t)p >> 12) * 0x9E3779B97F4A7C15ull >> 54) % HASH;
}

static int hash_find(const void *p)
{
    for (unsigned h = hash_of(p);; h = (h + 1) % HASH)
        if (by_ptr[h] < 0 || blocks[by_ptr[h]].p == p)
            return (int)h;
}

/* Linear probing's deletion: later entries of the run move back over the hole. */
static void hash_delete(unsigned h)
{
    by_ptr[h] = -1;
    for (unsigned j = (h + 1) % HASH; by_ptr[j] >= 0; j = (j + 1) % HASH) {
        unsigned home = hash_of(blocks[by_ptr[j]].p);
        bool movable = h <= j ? home <= h || home > j : home <= h && home > j;
        if (movable) {
            by_ptr[h] = by_ptr[j];
            by_ptr[j] = -1;
            h = j;
        }
    }
}

/* The block leaves the pool: its pages unpinned, its slot empty. */
static void drop_block(int i)
{
    cudaFreeHost(blocks[i].p);
    cudaGetLastError();
    hash_delete((unsigned)hash_find(blocks[i].p));
    blocks[i] = block{NULL, 0, false, -1, -1};
}

/* The smallest free block that holds `bytes` without wasting more than half of it. */
static int find_free(size_t bytes)
{
    int c = size_class(bytes), last = size_class(2 * bytes);
    for (int k = c; k < BIG && k <= last; k++)
        if (free_head[k] >= 0)
            return free_head[k];
    int best = -1;
    for (int i = free_head[BIG]; i >= 0; i = blocks[i].next)
        if (blocks[i].size >= bytes && blocks[i].size / 2 <= bytes && (best < 0 || blocks[i].size < blocks[best].size))
            best = i;
    return best;
}

static int empty_slot(void)
{
    for (int i = 0; i < MAX_BLOCKS; i++)
        if (!blocks[i].p)
            return i;
    return -1;
}

/* Frees cached blocks, largest first, until `need` more bytes fit under the cap. */
static void evict_locked(size_t need)
{
    while (cached_bytes + need > cache_cap()) {
        int victim = -1;
        for (int i = free_head[BIG]; i >= 0; i = blocks[i].next)
            if (victim < 0 || blocks[i].size > blocks[victim].size)
                victim = i;
        for (int k = BIG - 1; victim < 0 && k > 0; k--)
            victim = free_head[k];
        if (victim < 0)
            return;
        list_remove(victim);
        cached_bytes -= blocks[victim].size;
        drop_block(victim);
    }
}

static void *pin_new(size_t size)
{
    void *p = NULL;
    if (cudaHostAlloc(&p, size, cudaHostAllocPortable) == cudaSuccess)
        return p;
    cudaGetLastError();         /* not sticky: leave nothing behind for the workers */
    evict_locked(cache_cap()); /* memory may be short: give the cache back, try again */
    if (cudaHostAlloc(&p, size, cudaHostAllocPortable) == cudaSuccess)
        return p;
    cudaGetLastError();
    return NULL;
}

void *cr_pinned_alloc(size_t bytes)
{
    size_t size = bytes ? (bytes + ROUND - 1) / ROUND * ROUND : ROUND;
    void *p = NULL;
    lock_pool();
    int i = find_free(size);
    if (i >= 0) {
        list_remove(i);
        blocks[i].in_use = true;
        cached_bytes -= blocks[i].size;
        in_use_bytes += blocks[i].size;
        p = blocks[i].p;
    } else if ((i = empty_slot()) >= 0 && (p = pin_new(size)) != NULL) {
        blocks[i] = block{p, size, true, -1, -1};
        by_ptr[hash_find(p)] = i;
        in_use_bytes += size;
    }
    pthread_mutex_unlock(&mu);
    return p; /* NULL: the caller falls back to pageable memory */
}

void cr_pinned_free(void *p)
{
    if (!p)
        return;
    cr_prefetch_drop(p); /* its early device copy must be done reading before anyone reuses it */
    lock_pool();
    int i = by_ptr[hash_find(p)];
    if (i >= 0) {
        block *b = &blocks[i];
        b->in_use = false;
        in_use_bytes -= b->size;
        if (b->size > cache_cap()) { /* too big to keep */
            drop_block(i);
        } else {
            evict_locked(b->size);
            cached_bytes += b->size;
            list_push(i);
        }
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
    lock_pool();
    for (int k = 0; k <= BIG; k++)
        while (free_head[k] >= 0) {
            int i = free_head[k];
            list_remove(i);
            drop_block(i);
        }
    cached_bytes = 0;
    pthread_mutex_unlock(&mu);
}
