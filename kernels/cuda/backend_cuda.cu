/* The cuda backend: device enumeration and the table server/ calls through. Its kernels are rows
 * of kernels/registry.c; workers (cuda_worker.cu) and task runs (cuda_run.cu) live beside it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_worker.h"
#include "kernels/cuda/device_sink.h"
#include "kernels/cuda/env_long.h"
#include "kernels/cuda/pinned_pool.h"
#include "kernels/cuda/prefetch.h"

static int n_devices;

/* Memory a task frees goes back to its device's pool, not to the driver, so the next task of the
 * same size allocates without a round trip; past CRUNCHD_DEVICE_CACHE_MB (default 2048) of it,
 * the pool gives the rest back at the next synchronisation: a daemon that once ran a 40 GB job,
 * or received a burst of big uploads, does not keep that memory from other processes while idle
 * (several test daemons sharing one GPU ran it out, and a new context could not be made). */
static cudaError_t keep_pool_memory(int device, cr_cuda_err *e)
{
    cudaMemPool_t pool;
    uint64_t keep = (uint64_t)cr_env_long("CRUNCHD_DEVICE_CACHE_MB", 2048, 0, 1L << 30) << 20;
    CR_CHECK(e, cudaDeviceGetDefaultMemPool(&pool, device));
    CR_CHECK(e, cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
cleanup:
    return e->code;
}

static void cuda_device_pool_usage(int device, uint64_t *in_use, uint64_t *cached)
{
    cudaMemPool_t pool;
    uint64_t used = 0, reserved = 0; /* what the two attributes are (cuuint64_t) */
    *in_use = *cached = 0;
    if (device < 0 || device >= n_devices || cudaDeviceGetDefaultMemPool(&pool, device) != cudaSuccess ||
        cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used) != cudaSuccess ||
        cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved) != cudaSuccess) {
        cudaGetLastError();
        return;
    }
    *in_use = used;
    *cached = reserved > used ? reserved - used : 0;
}

static void cuda_device_trim(void)
{
    cudaMemPool_t pool;
    for (int d = 0; d < n_devices; d++)
        if (cudaDeviceGetDefaultMemPool(&pool, d) != cudaSuccess || cudaMemPoolTrimTo(pool, 0) != cudaSuccess)
            cudaGetLastError(); /* not sticky: the memory only stays cached */
}

/* cudaDeviceScheduleAuto spins whenever the machine has more cores than the process has
 * contexts, which is always here: pick the schedule instead. */
static unsigned schedule_flag(cr_wait_mode wait)
{
    switch (wait) {
    case CR_WAIT_SPIN: return cudaDeviceScheduleSpin;
    case CR_WAIT_BLOCK: return cudaDeviceScheduleBlockingSync;
    default: return cudaDeviceScheduleYield;
    }
}

static cr_status cuda_init(const cr_backend_opts *o, char *err, size_t errlen)
{
    cr_cuda_err e = {};
    int count = 0;
    cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess || count == 0) {
        snprintf(err, errlen, "no usable CUDA device (CUDA_VISIBLE_DEVICES=%s): %s",
                 getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "unset",
                 rc != cudaSuccess ? cudaGetErrorString(rc) : "none found");
        cudaGetLastError();
        return CR_E_UNSUPPORTED;
    }
    for (int d = 0; d < count; d++) {
        CR_CHECK(&e, cudaSetDevice(d));
        CR_CHECK(&e, cudaSetDeviceFlags(schedule_flag(o->wait))); /* before the context exists */
        CR_CHECK(&e, keep_pool_memory(d, &e));
    }
    n_devices = count;
    return CR_OK;
cleanup:
    snprintf(err, errlen, "cuda init: %s", e.msg);
    return cr_cuda_status(e.code) == CR_E_FATAL ? CR_E_FATAL : CR_E_INTERNAL;
}

static void cuda_shutdown(void)
{
    cr_pinned_release_all();
    n_devices = 0; /* the driver releases contexts at process exit; workers are destroyed first */
}

static int cuda_device_count(void) { return n_devices; }

static void cuda_versions(int *runtime, int *driver)
{
    if (cudaRuntimeGetVersion(runtime) != cudaSuccess)
        *runtime = 0;
    if (cudaDriverGetVersion(driver) != cudaSuccess) /* 0 with no driver installed */
        *driver = 0;
}

static cr_status cuda_device_info(int index, cr_device_info *out)
{
    cr_cuda_err e = {};
    cudaDeviceProp prop;
    size_t free_b = 0, total_b = 0;
    if (index < 0 || index >= n_devices)
        return CR_E_INVALID;
    CR_CHECK(&e, cudaSetDevice(index));
    CR_CHECK(&e, cudaGetDeviceProperties(&prop, index));
    CR_CHECK(&e, cudaMemGetInfo(&free_b, &total_b));
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%.127s", prop.name);
    out->index = index;
    out->memory_total = total_b;
    out->memory_free = free_b;
    out->multiprocessors = prop.multiProcessorCount;
    out->cc_major = prop.major;
    out->cc_minor = prop.minor;
    return CR_OK;
cleanup:
    return cr_cuda_status(e.code);
}

/* Pinned (page-locked) host memory, portable to every device's context, from a cache of blocks
 * (pinned_pool.cu): uploads land in it and the worker copies them to the device directly. NULL
 * when pinning fails (the caller falls back to pageable memory, which the worker stages). */
static void *cuda_host_alloc(size_t bytes) { return cr_pinned_alloc(bytes); }
static void cuda_host_free(void *p) { cr_pinned_free(p); }
static void cuda_host_ready(void *p, size_t ready, size_t total) { cr_prefetch_ready(p, ready, total); }
static void cuda_host_usage(uint64_t *in_use, uint64_t *cached, uint64_t *staging)
{
    cr_pinned_usage(in_use, cached);
    *staging = cr_staging_bytes();
}

/* A registered shared-memory region, page-locked in place for as long as it is mapped: run()
 * then finds its tensors pinned (is_pinned in cuda_run.cu asks cudaPointerGetAttributes, which
 * says host for registered memory as for cudaHostAlloc's) and copies them without staging.
 * Portable, as the pinned cache: every device's context sees it pinned. A refusal (a driver
 * that cannot lock this mapping, memory limits) only costs the staging copy. */
static bool cuda_host_register(void *p, size_t bytes)
{
    if (cudaHostRegister(p, bytes, cudaHostRegisterPortable) == cudaSuccess)
        return true;
    cudaGetLastError(); /* not sticky: clear it, or the next call of this thread would report it */
    return false;
}

static void cuda_host_unregister(void *p)
{
    if (cudaHostUnregister(p) != cudaSuccess)
        cudaGetLastError();
}

extern "C" cr_status cr_cuda_worker_create(int device, cr_worker **out, char *err, size_t errlen);
extern "C" void cr_cuda_worker_destroy(cr_worker *w);
extern "C" cr_status cr_cuda_ipc_open(const void *handle, size_t handle_len, int device, size_t bytes,
                                      void **out, char *err, size_t errlen);
extern "C" void cr_cuda_ipc_close(void *p);
extern "C" cr_status cr_cuda_device_write(void *dst, const void *src, size_t bytes);
extern "C" void *cr_cuda_tensor_alloc(int device, size_t bytes);
extern "C" void cr_cuda_tensor_free(int device, void *p);
extern "C" cr_status cr_cuda_tensor_copy(int device, void *dst, const void *src, size_t bytes, bool to_device);

extern "C" const cr_backend cr_backend_cuda = {
    "cuda",
    CR_BACKEND_CUDA,
    cuda_init,
    cuda_shutdown,
    cuda_device_count,
    cuda_device_info,
    cr_cuda_worker_create,
    cr_cuda_worker_destroy,
    cr_cuda_run,
    cr_cuda_task_device_bytes,
    cuda_host_alloc,
    cuda_host_free,
    cuda_host_ready,
    cuda_host_usage,
    cr_pinned_release_all,
    cuda_host_register,
    cuda_host_unregister,
    cr_cuda_ipc_open,
    cr_cuda_ipc_close,
    cr_cuda_device_write,
    CR_CUDA_LANES,
    cr_cuda_batch_launch,
    cr_cuda_batch_wait,
    cr_cuda_run_launch,
    cr_cuda_run_wait,
    CR_EXEC_KEEP_BYTES,
    cuda_versions,
    NULL, /* task_host_bytes: run() allocates no host memory of its own */
    cr_sink_open,
    cr_sink_space,
    cr_sink_commit,
    cr_sink_finish,
    cr_sink_target,
    cr_sink_read,
    cr_sink_free,
    cr_sink_usage,
    cuda_device_pool_usage,
    cuda_device_trim,
    cr_cuda_tensor_alloc,
    cr_cuda_tensor_free,
    cr_cuda_tensor_copy,
};
