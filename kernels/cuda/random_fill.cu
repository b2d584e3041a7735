/* The cuda backend's fill_random (backend.h): a generated operand made where the job will read
 * it, in device memory, by the generator the host uses too (kernels/random.h), so an 8192^3
 * comparison on generated operands uploads nothing and its numbers are the cpu backend's. */
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_worker.h"
#include "kernels/random.h"

#define FILL_THREADS 256
#define FILL_BLOCKS_MAX 8192

/* Each element from its own index: a grid-stride loop, so any count fits any grid. */
__global__ void random_fill_kernel(void *p, uint64_t count, cr_dtype dt, bool normal, uint64_t key)
{
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride)
        cr_random_store(p, i, dt, normal, key);
}

extern "C" cr_status cr_cuda_fill_random(int device, void *p, uint64_t count, cr_dtype dt, bool normal, uint64_t seed,
                                         char *err, size_t errlen)
{
    if (device < 0) { /* host memory: the host's loop */
        cr_random_fill_host(p, count, dt, normal, seed);
        return CR_OK;
    }
    cr_cuda_err e = {};
    cudaStream_t s = NULL;
    uint64_t blocks = (count + FILL_THREADS - 1) / FILL_THREADS;
    CR_CHECK(&e, cudaSetDevice(device));
    /* its own stream, never the legacy default one, which would wait for every worker's work */
    CR_CHECK(&e, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    if (count) {
        random_fill_kernel<<<(unsigned)(blocks < FILL_BLOCKS_MAX ? blocks : FILL_BLOCKS_MAX), FILL_THREADS, 0, s>>>(
            p, count, dt, normal, cr_random_key(seed));
        CR_CHECK(&e, cudaGetLastError());
    }
    CR_CHECK(&e, cudaStreamSynchronize(s));
cleanup:
    if (s)
        cudaStreamDestroy(s);
    if (e.code != cudaSuccess)
        snprintf(err, errlen, "%s", e.msg);
    return cr_cuda_status(e.code);
}
