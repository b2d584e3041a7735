/* Host-to-device copies of a big input started while its request is still arriving.
 *
 * A binary upload fills a pinned block front to back; every few MiB that have arrived are
 * copied to a device buffer on a stream of their own, so when the last byte lands only the last
 * chunk is still to copy and the worker starts the kernel almost at once. The copy is a
 * shortcut, never the only copy: the host block stays complete, and a worker on another device,
 * or any failure here, just copies from it as usual.
 *
 * An entry lives from its block's first ready bytes until the block is freed (pinned_pool.cu
 * calls cr_prefetch_drop first): the device buffer is then read by every run of the task
 * (compare mode runs several) and released with the request. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/prefetch.h"

#define MAX_ENTRIES 64
#define CHUNK_BYTES (4u << 20) /* ~75 us of copy engine time per call at 55 GB/s */

typedef struct {
    const char *host;       /* NULL: free slot */
    size_t total, copied;
    int device;
    char *dev;
    cudaStream_t stream;
    cudaEvent_t done;       /* recorded after the last chunk */
    bool failed;            /* gave up: the worker copies from host; kept so no retry per chunk */
} entry;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static entry entries[MAX_ENTRIES];
static unsigned next_device;

static entry *find_locked(const void *host)
{
    for (int i = 0; i < MAX_ENTRIES; i++)
        if (entries[i].host && entries[i].host == host)
            return &entries[i];
    return NULL;
}

/* Releases what an entry holds on its device. Waits for its copies first: the host block goes
 * back to the cache after this, and a copy still reading it would read the next request. */
static void release(entry *x)
{
    if (x->stream) {
        cudaSetDevice(x->device);
        cudaStreamSynchronize(x->stream);
        if (x->dev)
            cudaFreeAsync(x->dev, x->stream);
        cudaStreamDestroy(x->stream);
    }
    if (x->done)
        cudaEventDestroy(x->done);
    cudaGetLastError(); /* best effort: a sticky fault surfaces in the workers */
    x->stream = NULL;
    x->done = NULL;
    x->dev = NULL;
}

static cudaError_t start(entry *x, cr_cuda_err *e)
{
    int n = 0;
    cudaMemPool_t pool;
    CR_CHECK(e, cudaGetDeviceCount(&n));
    x->device = (int)(next_device++ % (unsigned)(n > 0 ? n : 1));
    CR_CHECK(e, cudaSetDevice(x->device));
    CR_CHECK(e, cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking));
    CR_CHECK(e, cudaEventCreateWithFlags(&x->done, cudaEventDisableTiming));
    CR_CHECK(e, cudaDeviceGetDefaultMemPool(&pool, x->device));
    CR_CHECK(e, cudaMallocFromPoolAsync((void **)&x->dev, x->total, pool, x->stream));
cleanup:
    return e->code;
}

static cudaError_t advance(entry *x, size_t ready, cr_cuda_err *e)
{
    CR_CHECK(e, cudaSetDevice(x->device));
    CR_CHECK(e, cudaMemcpyAsync(x->dev + x->copied, x->host + x->copied, ready - x->copied,
                                cudaMemcpyHostToDevice, x->stream));
    x->copied = ready;
    if (ready == x->total)
        CR_CHECK(e, cudaEventRecord(x->done, x->stream));
cleanup:
    return e->code;
}

static entry *claim_locked(const void *host, size_t total)
{
    for (int i = 0; i < MAX_ENTRIES; i++)
        if (!entries[i].host) {
            entries[i] = entry{};
            entries[i].host = (const char *)host;
            entries[i].total = total;
            return &entries[i];
        }
    return NULL;
}

/* Inputs from CRUNCHD_PREFETCH_MIN_MB (default 8; 0 turns prefetching off) up: smaller ones
 * copy in well under a millisecond anyway. */
static size_t min_bytes(void)
{
    static size_t min;
    if (!min) {
        const char *s = getenv("CRUNCHD_PREFETCH_MIN_MB");
        long mb = s ? strtol(s, NULL, 10) : 8;
        min = mb > 0 ? (size_t)mb << 20 : SIZE_MAX;
    }
    return min;
}

void cr_prefetch_ready(const void *host, size_t ready, size_t total)
{
    cr_cuda_err e = {};
    if (total < min_bytes() || ready > total)
        return;
    pthread_mutex_lock(&mu);
    entry *x = find_locked(host);
    if (!x && (x = claim_locked(host, total)) != NULL && start(x, &e) != cudaSuccess)
        x->failed = true;
    bool due = x && !x->failed && x->total == total &&
               (ready - x->copied >= CHUNK_BYTES || (ready == total && x->copied < total));
    if (due && advance(x, ready, &e) != cudaSuccess)
        x->failed = true;
    if (x && x->failed && x->stream)
        release(x); /* hold no device memory for a copy nobody will use */
    pthread_mutex_unlock(&mu);
}

bool cr_prefetch_take(const void *host, size_t bytes, int device, void **dev, cudaEvent_t *done)
{
    pthread_mutex_lock(&mu);
    const entry *x = find_locked(host);
    bool ok = x && !x->failed && x->device == device && x->total == bytes && x->copied == bytes;
    if (ok) {
        *dev = x->dev;
        *done = x->done;
    }
    pthread_mutex_unlock(&mu);
    return ok;
}

void cr_prefetch_drop(const void *host)
{
    pthread_mutex_lock(&mu);
    entry *x = find_locked(host);
    if (x) {
        release(x);
        *x = entry{};
    }
    pthread_mutex_unlock(&mu);
}
