/* Device memory for resident tensors (backend.h: tensor_alloc, tensor_free, tensor_copy). Plain
 * cudaMalloc, not the stream-ordered pool the tasks draw from: a tensor lives for hours, and the
 * pool's release threshold (CRUNCHD_DEVICE_CACHE_MB) and its trims after the autotune are about
 * memory the tasks give back. Copies go through the pinned staging of the calling thread's device
 * context, synchronously: tensors are created and read by HTTP threads, never by workers. */
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_worker.h"

extern "C" void *cr_cuda_tensor_alloc(int device, size_t bytes)
{
    void *p = NULL;
    if (cudaSetDevice(device) != cudaSuccess || cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        cudaGetLastError(); /* out of memory is not sticky: the caller answers 507 */
        return NULL;
    }
    return p;
}

extern "C" void cr_cuda_tensor_free(int device, void *p)
{
    if (p && (cudaSetDevice(device) != cudaSuccess || cudaFree(p) != cudaSuccess))
        cudaGetLastError();
}

extern "C" cr_status cr_cuda_tensor_copy(int device, void *dst, const void *src, size_t bytes, bool to_device)
{
    cudaError_t rc = cudaSetDevice(device);
    if (rc == cudaSuccess && bytes)
        rc = cudaMemcpy(dst, src, bytes, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
    return cr_cuda_status(rc);
}
