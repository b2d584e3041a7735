/* A big matrix input received straight into device memory (backend.h, sink_*).
 *
 * Receiving a 64 MiB operand into a pinned block of its own writes every byte to host memory,
 * and a socket's copy into memory it has not touched lately runs at ~4 GB/s on the H100 machine,
 * against ~6.4 GB/s into a buffer it keeps reusing (bench-e2e's raw_unix_gbps and
 * raw_unix_kept_gbps). So the sink receives into a few small pinned slots, reused round the ring:
 * each full slot is copied to its place in a device buffer on the sink's own stream, and the
 * receiver moves on to the next slot, waiting only if that slot's last copy has not finished
 * (the copy engine drains a 2 MiB slot in ~40 us, the socket fills one in ~300 us). The slots stay
 * in the CPU's caches; the operand never exists in host memory at all. A big result goes the
 * other way (sink_target, sink_read): the job writes it into the sink's device buffer, and the
 * answer is sent piece by piece from slots the copy engine fills a few pieces ahead.
 * Measured (bench/results/device-stream-h100-s10.log): the receive of a 4096² float32 pair 1.9-6.1
 * ms shorter in 4 of 5 runs, no d2h left in the worker; the client's own sending and receiving,
 * not the daemon, is most of what remains above the bare-socket floor.
 *
 * A sink holds its device buffer from the first byte received until its request ends, queued
 * time included, where a request received into host memory holds none: so sinks together take at
 * most CRUNCHD_SINK_MAX_MB of a device's memory (default: half of it), and past that a request is
 * received into host memory as before, leaving the rest to the jobs that run.
 *
 * Tuning, read once: CRUNCHD_SINK_MIN_MB (default 8; 0 turns sinks off: inputs land in host
 * memory and prefetch.cu copies them early, as before), CRUNCHD_SINK_SLOT_KB (2048),
 * CRUNCHD_SINK_SLOTS (4) and CRUNCHD_SINK_MAX_MB (half the device's memory). */
#include <atomic>

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_sink.h"
#include "kernels/cuda/env_long.h"
#include "kernels/cuda/pinned_pool.h"

#define MAX_SLOTS 16
#define MAX_DEVICES 64

struct cr_sink {
    size_t total, written; /* bytes received into the ring so far */
    size_t queued;         /* bytes whose copy to the device is queued: the current slot's start */
    int device;
    char *dev;
    cudaStream_t stream;
    char *ring;            /* slots * slot_bytes, pinned; given back once all of it is copied */
    size_t slot_bytes, fill;
    int slots, cur;
    cudaEvent_t drained[MAX_SLOTS]; /* recorded after the copy out of (or into) each slot */
    bool pending[MAX_SLOTS];
    bool broken;
    /* reading a result out: bytes handed out and done with, bytes whose copy is queued, and the
     * piece handed out last (its slot is not refilled before the next read) */
    size_t handed, fetched, held;
    bool counted;          /* total is in held_bytes[device] */
};

/* Device bytes the open sinks hold, and the most they may, per device (the cap set on first use). */
static std::atomic<size_t> held_bytes[MAX_DEVICES];
static std::atomic<size_t> cap_bytes[MAX_DEVICES];

typedef struct {
    size_t min_bytes, slot_bytes;
    int slots;
    size_t max_bytes; /* 0: half of each device's memory */
} sink_config;

static sink_config config(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    static sink_config c;
    pthread_once(&once, [] {
        long mb = cr_env_long("CRUNCHD_SINK_MIN_MB", 8, 0, 1L << 20);
        c.min_bytes = mb > 0 ? (size_t)mb << 20 : SIZE_MAX;
        c.slot_bytes = (size_t)cr_env_long("CRUNCHD_SINK_SLOT_KB", 2048, 64, 1L << 20) << 10;
        c.slots = (int)cr_env_long("CRUNCHD_SINK_SLOTS", 4, 2, MAX_SLOTS);
        c.max_bytes = (size_t)cr_env_long("CRUNCHD_SINK_MAX_MB", 0, 0, 1L << 30) << 20;
    });
    return c;
}

static bool device_exists(int device, cr_cuda_err *e)
{
    int n = 0;
    return !cr_check_record(e, cudaGetDeviceCount(&n), "cudaGetDeviceCount", __FILE__, __LINE__) && device >= 0 &&
           device < n && device < MAX_DEVICES;
}

/* Counts total against the device's share for sinks; false (nothing counted) when it would pass it. */
static bool reserve(int device, size_t total, size_t max_bytes)
{
    size_t cap = max_bytes ? max_bytes : cap_bytes[device].load();
    if (!cap) {
        size_t free_b = 0, total_b = 0;
        if (cudaSetDevice(device) != cudaSuccess || cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
            cudaGetLastError();
            return false;
        }
        cap = total_b / 2;
        cap_bytes[device].store(cap);
    }
    size_t held = held_bytes[device].load();
    do {
        if (held + total > cap)
            return false;
    } while (!held_bytes[device].compare_exchange_weak(held, held + total));
    return true;
}

static cudaError_t setup(cr_sink *s, cr_cuda_err *e)
{
    cudaMemPool_t pool;
    CR_CHECK(e, cudaSetDevice(s->device));
    CR_CHECK(e, cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
    for (int i = 0; i < s->slots; i++)
        CR_CHECK(e, cudaEventCreateWithFlags(&s->drained[i], cudaEventDisableTiming));
    CR_CHECK(e, cudaDeviceGetDefaultMemPool(&pool, s->device));
    CR_CHECK(e, cudaMallocFromPoolAsync((void **)&s->dev, s->total, pool, s->stream));
    if (!(s->ring = (char *)cr_pinned_alloc((size_t)s->slots * s->slot_bytes)))
        CR_CHECK(e, cudaErrorMemoryAllocation);
cleanup:
    return e->code;
}

cr_sink *cr_sink_open(size_t total, int device, size_t *staging)
{
    sink_config c = config();
    cr_cuda_err e = {};
    if (total < c.min_bytes)
        return NULL;
    cr_sink *s = (cr_sink *)calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->total = total;
    s->slot_bytes = c.slot_bytes;
    s->slots = c.slots;
    s->device = device;
    if (!device_exists(device, &e) || !(s->counted = reserve(device, total, c.max_bytes)) ||
        setup(s, &e) != cudaSuccess) {
        cr_sink_free(s); /* no room, or no device: the caller receives into host memory */
        return NULL;
    }
    *staging = (size_t)s->slots * s->slot_bytes;
    return s;
}

static char *slot(cr_sink *s, int i) { return s->ring + (size_t)i * s->slot_bytes; }

void *cr_sink_space(cr_sink *s, size_t *len)
{
    if (s->broken || !s->ring || s->written >= s->total)
        return NULL;
    if (!s->fill && s->pending[s->cur]) { /* the ring came round: its last copy must be done */
        if (cudaEventSynchronize(s->drained[s->cur]) != cudaSuccess) {
            s->broken = true;
            return NULL;
        }
        s->pending[s->cur] = false;
    }
    size_t room = s->slot_bytes - s->fill, left = s->total - s->written;
    *len = room < left ? room : left;
    return slot(s, s->cur) + s->fill;
}

/* The current slot's bytes to their place on the device; the next slot becomes current. */
static cudaError_t drain(cr_sink *s, cr_cuda_err *e)
{
    CR_CHECK(e, cudaSetDevice(s->device));
    CR_CHECK(e, cudaMemcpyAsync(s->dev + s->queued, slot(s, s->cur), s->fill, cudaMemcpyHostToDevice, s->stream));
    CR_CHECK(e, cudaEventRecord(s->drained[s->cur], s->stream));
    s->pending[s->cur] = true;
    s->queued += s->fill;
    s->cur = (s->cur + 1) % s->slots;
    s->fill = 0;
cleanup:
    return e->code;
}

int cr_sink_commit(cr_sink *s, size_t n)
{
    cr_cuda_err e = {};
    if (s->broken || n > s->slot_bytes - s->fill || n > s->total - s->written) {
        s->broken = true;
        return -1;
    }
    s->fill += n;
    s->written += n;
    if ((s->fill == s->slot_bytes || s->written == s->total) && s->fill && drain(s, &e) != cudaSuccess)
        s->broken = true;
    return s->broken ? -1 : 0;
}

int cr_sink_finish(cr_sink *s, void **dev, int *device)
{
    if (s->broken || s->written != s->total || s->fill)
        return -1;
    if (cudaSetDevice(s->device) != cudaSuccess || cudaStreamSynchronize(s->stream) != cudaSuccess) {
        s->broken = true;
        return -1;
    }
    cr_pinned_free(s->ring); /* every copy out of it is done: the next part's sink takes it warm */
    s->ring = NULL;
    *dev = s->dev;
    *device = s->device;
    return 0;
}

void *cr_sink_target(cr_sink *s, int *device)
{
    *device = s->device;
    return s->dev;
}

/* Queues the copies of the pieces that fit the ring: a slot is refilled only once the piece it
 * held was handed out and given back (the next read). */
static cudaError_t fetch_ahead(cr_sink *s, cr_cuda_err *e)
{
    CR_CHECK(e, cudaSetDevice(s->device));
    while (s->fetched < s->total && s->fetched < s->handed + (size_t)s->slots * s->slot_bytes) {
        int k = (int)(s->fetched / s->slot_bytes % (size_t)s->slots);
        size_t n = s->total - s->fetched < s->slot_bytes ? s->total - s->fetched : s->slot_bytes;
        CR_CHECK(e, cudaMemcpyAsync(slot(s, k), s->dev + s->fetched, n, cudaMemcpyDeviceToHost, s->stream));
        CR_CHECK(e, cudaEventRecord(s->drained[k], s->stream));
        s->fetched += n;
    }
cleanup:
    return e->code;
}

int cr_sink_read(cr_sink *s, const void **p, size_t *len)
{
    cr_cuda_err e = {};
    s->handed += s->held;
    s->held = 0;
    if (s->broken || !s->ring)
        return -1;
    if (s->handed >= s->total)
        return 0;
    int k = (int)(s->handed / s->slot_bytes % (size_t)s->slots);
    if (fetch_ahead(s, &e) != cudaSuccess || cudaEventSynchronize(s->drained[k]) != cudaSuccess) {
        s->broken = true;
        return -1;
    }
    *p = slot(s, k);
    *len = s->held = s->total - s->handed < s->slot_bytes ? s->total - s->handed : s->slot_bytes;
    return 1;
}

void cr_sink_usage(int device, uint64_t *held, uint64_t *cap)
{
    bool ok = device >= 0 && device < MAX_DEVICES;
    size_t max = config().max_bytes;
    *held = ok ? held_bytes[device].load() : 0;
    *cap = ok ? (max ? max : cap_bytes[device].load()) : 0; /* 0 until the first sink sets it */
}

void cr_sink_free(void *p)
{
    cr_sink *s = (cr_sink *)p;
    if (!s)
        return;
    if (s->stream) {
        cudaSetDevice(s->device);
        cudaStreamSynchronize(s->stream); /* no copy may still read the ring or write dev */
        if (s->dev)
            cudaFreeAsync(s->dev, s->stream);
        cudaStreamDestroy(s->stream);
    }
    for (int i = 0; i < s->slots; i++)
        if (s->drained[i])
            cudaEventDestroy(s->drained[i]);
    if (s->ring)
        cr_pinned_free(s->ring);
    if (s->counted)
        held_bytes[s->device] -= s->total;
    cudaGetLastError(); /* best effort: a sticky fault surfaces in the workers */
    free(s);
}
