/* Histogram `global`: every element is one atomicAdd on the 64-bit counts in global memory.
 * The baseline the privatized kernels are measured against: all threads of the device contend
 * on the same few hundred addresses in L2. */
#include "kernels/cuda/hist_bin.cuh"

template <typename T, typename Binner>
__global__ void hist_global_kernel(const T *__restrict__ data, int64_t count, Binner bin_of,
                                   unsigned long long *counts)
{
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        int b = bin_of(data[i]);
        if (b >= 0)
            atomicAdd(&counts[b], 1ull);
    }
}

struct global_launch {
    template <typename T, typename Binner>
    static cudaError_t run(const cr_hist_dev *h, Binner bin_of, cudaStream_t s)
    {
        const int threads = 256;
        int blocks = cr_hist_grid(h->count, threads, 8);
        hist_global_kernel<T><<<blocks, threads, 0, s>>>((const T *)h->data, h->count, bin_of, h->counts);
        return cudaGetLastError();
    }
    static cudaError_t bytes(const cr_hist_dev *h, cudaStream_t s)
    {
        return run<unsigned char>(h, cr_byte_binner{}, s);
    }
};

extern "C" cudaError_t cr_cuda_hist_global(const cr_hist_dev *h, cr_dtype dt, cudaStream_t s)
{
    return cr_hist_dispatch<global_launch>(h, dt, s);
}
