/* The cuda worker: its streams and everything bound to each (cuBLAS handle, events, pinned
 * staging), created once and reused for every task the worker runs. */
#include <stdlib.h>
#include <string.h>

#include <atomic>

#include "kernels/cuda/cuda_worker.h"
#include "kernels/cuda/pinned_pool.h"

static std::atomic<uint64_t> staging_total{0};

uint64_t cr_staging_bytes(void) { return staging_total; }

/* Best effort: after a sticky fault these fail too, and there is nothing left to do. */
static void exec_release(cr_exec *x)
{
    if (x->dev)
        cudaFree(x->dev);
    if (x->blas)
        cublasDestroy(x->blas);
    for (int i = 0; i < EV_COUNT; i++)
        if (x->ev[i])
            cudaEventDestroy(x->ev[i]);
    if (x->stream)
        cudaStreamDestroy(x->stream);
    cr_exec_unstage(x);
    if (x->kept) {
        cudaFreeHost(x->kept);
        staging_total -= x->kept_bytes;
    }
}

static void worker_release(cr_worker *w)
{
    exec_release(&w->x);
    for (int l = 0; l < CR_CUDA_LANES; l++)
        exec_release(&w->lane[l].x);
    free(w);
}

static cudaError_t exec_create(cr_exec *x, cr_cuda_err *e)
{
    CR_CHECK(e, cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking));
    for (int i = 0; i < EV_COUNT; i++)
        CR_CHECK(e, cudaEventCreate(&x->ev[i]));
    CR_CHECK(e, cublasCreate(&x->blas));
    CR_CHECK(e, cublasSetStream(x->blas, x->stream));
    CR_CHECK(e, cublasSetMathMode(x->blas, CR_CUBLAS_MATH));
cleanup:
    return e->code;
}

/* The first cuBLAS call of a process loads the library's kernels (~100 ms): pay it here, at
 * start-up, not in the first request. */
static cudaError_t warm_cublas(cr_exec *x, cr_cuda_err *e)
{
    float *d = NULL;
    const float one = 1.0f, zero = 0.0f;
    CR_CHECK(e, cudaMallocAsync((void **)&d, 3 * 4 * sizeof(float), x->stream));
    CR_CHECK(e, cudaMemsetAsync(d, 0, 3 * 4 * sizeof(float), x->stream));
    CR_CHECK(e, cublasSgemm(x->blas, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, d, 2, d + 4, 2, &zero, d + 8, 2));
    CR_CHECK(e, cudaStreamSynchronize(x->stream));
cleanup:
    if (d)
        cudaFreeAsync(d, x->stream);
    return e->code;
}

extern "C" cr_status cr_cuda_worker_create(int device, cr_worker **out, char *err, size_t errlen)
{
    cr_cuda_err e = {};
    cudaDeviceProp prop;
    cr_worker *w = (cr_worker *)calloc(1, sizeof *w);
    if (!w) {
        snprintf(err, errlen, "out of host memory creating a cuda worker");
        return CR_E_NOMEM_HOST;
    }
    w->device = device;
    CR_CHECK(&e, cudaSetDevice(device));
    CR_CHECK(&e, cudaGetDeviceProperties(&prop, device));
    snprintf(w->device_name, sizeof w->device_name, "%.127s", prop.name);
    CR_CHECK(&e, exec_create(&w->x, &e));
    for (int l = 0; l < CR_CUDA_LANES; l++)
        CR_CHECK(&e, exec_create(&w->lane[l].x, &e));
    CR_CHECK(&e, cudaDeviceGetDefaultMemPool(&w->pool, device));
    CR_CHECK(&e, warm_cublas(&w->x, &e));
    *out = w;
    return CR_OK;
cleanup:
    snprintf(err, errlen, "cuda worker on device %d: %s", device, e.msg);
    cr_status st = cr_cuda_status(e.code);
    worker_release(w);
    return st == CR_E_FATAL ? st : (st == CR_E_NOMEM_DEVICE ? st : CR_E_INTERNAL);
}

extern "C" void cr_cuda_worker_destroy(cr_worker *w)
{
    if (!w)
        return;
    cudaSetDevice(w->device);
    cudaStreamSynchronize(w->x.stream);
    for (int l = 0; l < CR_CUDA_LANES; l++)
        cudaStreamSynchronize(w->lane[l].x.stream);
    worker_release(w);
}

static cudaError_t grow_kept(cr_exec *x, size_t bytes)
{
    if (bytes <= x->kept_bytes)
        return cudaSuccess;
    size_t grown = x->kept_bytes * 2 > bytes ? x->kept_bytes * 2 : bytes; /* fewer regrowths */
    grown = grown < CR_EXEC_STAGE_KEEP_BYTES ? grown : CR_EXEC_STAGE_KEEP_BYTES;
    void *p = NULL;
    cudaError_t e = cudaHostAlloc(&p, grown, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        cudaGetLastError();
        if (grown == bytes || (e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable)) != cudaSuccess)
            return e;
        grown = bytes;
    }
    if (x->kept) {
        cudaFreeHost(x->kept);
        staging_total -= x->kept_bytes;
    }
    x->kept = p;
    x->kept_bytes = grown;
    staging_total += grown;
    return cudaSuccess;
}

cudaError_t cr_exec_stage(cr_exec *x, size_t bytes)
{
    cr_exec_unstage(x);
    if (bytes <= CR_EXEC_STAGE_KEEP_BYTES) {
        cudaError_t e = grow_kept(x, bytes);
        if (e == cudaSuccess) {
            x->pinned = x->kept;
            x->pinned_bytes = bytes;
        }
        return e;
    }
    if (!(x->pinned = cr_pinned_alloc(bytes)))
        return cudaErrorMemoryAllocation;
    x->pinned_bytes = bytes;
    staging_total += bytes;
    return cudaSuccess;
}

void cr_exec_unstage(cr_exec *x)
{
    if (x->pinned && x->pinned != x->kept) {
        cr_pinned_free(x->pinned);
        staging_total -= x->pinned_bytes;
    }
    x->pinned = NULL;
    x->pinned_bytes = 0;
}

void cr_exec_timings(const cr_worker *w, const cr_exec *x, bool measured, cr_timings *tm)
{
    float ms[EV_COUNT] = {0};
    for (int i = 1; measured && i < EV_COUNT; i++)
        if (cudaEventElapsedTime(&ms[i], x->ev[i - 1], x->ev[i]) != cudaSuccess)
            ms[i] = 0;
    *tm = (cr_timings){x->copies_in ? ms[EV_H2D] : 0, ms[EV_KERNEL], x->copies_out ? ms[EV_D2H] : 0, "", w->device};
    snprintf(tm->device, sizeof tm->device, "%s", w->device_name);
}

/* Errors after which the context is unusable: every later call fails the same way. */
static bool is_sticky(cudaError_t e)
{
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorContextIsDestroyed:
    case cudaErrorDevicesUnavailable:
        return true;
    default:
        return false;
    }
}

cr_status cr_cuda_status(cudaError_t e)
{
    if (e == cudaSuccess)
        return CR_OK;
    if (is_sticky(e))
        return CR_E_FATAL;
    cudaGetLastError(); /* clear it; if it comes straight back, it was sticky after all */
    if (is_sticky(cudaPeekAtLastError()))
        return CR_E_FATAL;
    switch (e) {
    case cudaErrorMemoryAllocation: return CR_E_NOMEM_DEVICE;
    case cudaErrorNotSupported: return CR_E_UNSUPPORTED;
    case cudaErrorInvalidValue: return CR_E_INVALID;
    default: return CR_E_INTERNAL;
    }
}

#ifdef CRUNCHD_FAULT_INJECTION
static bool injected_oom(void)
{
    static int permille = -1;
    static unsigned seed = 12345;
    if (permille < 0) {
        const char *v = getenv("CRUNCHD_FAULT_DEVICE_OOM_PERMILLE");
        permille = v ? atoi(v) : 0;
    }
    /* a data race on seed only changes which allocations fail */
    return permille > 0 && (int)(rand_r(&seed) % 1000) < permille;
}
#endif

cudaError_t cr_cuda_pool_alloc(void **p, size_t bytes, cudaMemPool_t pool, cudaStream_t s)
{
#ifdef CRUNCHD_FAULT_INJECTION
    if (injected_oom())
        return cudaErrorMemoryAllocation;
#endif
    return cudaMallocFromPoolAsync(p, bytes, pool, s);
}

cudaError_t cr_exec_device(cr_worker *w, cr_exec *x, size_t bytes, char **dev, bool *owned)
{
    *dev = NULL;
    *owned = bytes > CR_EXEC_KEEP_BYTES;
    if (*owned) {
        cudaError_t e = cr_cuda_pool_alloc((void **)dev, bytes, w->pool, x->stream);
        if (e != cudaSuccess)
            *dev = NULL;
        return e;
    }
#ifdef CRUNCHD_FAULT_INJECTION
    if (injected_oom()) /* as often as when every task allocated */
        return cudaErrorMemoryAllocation;
#endif
    if (bytes > x->dev_bytes) {
        size_t grown = 2 * x->dev_bytes < CR_EXEC_KEEP_BYTES ? 2 * x->dev_bytes : CR_EXEC_KEEP_BYTES;
        grown = grown > bytes ? grown : bytes;
        char *p = NULL;
        cudaError_t e = cudaMallocFromPoolAsync((void **)&p, grown, w->pool, x->stream);
        if (e != cudaSuccess)
            return e;
        if (x->dev)
            cudaFreeAsync(x->dev, x->stream);
        x->dev = p;
        x->dev_bytes = grown;
    }
    *dev = x->dev;
    return cudaSuccess;
}
