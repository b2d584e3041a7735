/* Histogram `smem`: each block counts into its own copy of the bins in shared memory (atomics
 * there are cheap and contend only within the block), then adds its copy to the global counts
 * once. One element per thread per step, plain loads. Bins beyond what shared memory holds fall
 * back to global atomics. */
#include "kernels/cuda/hist_bin.cuh"

template <typename T, typename Binner>
__global__ void hist_smem_kernel(const T *__restrict__ data, int64_t count, int bins, Binner bin_of,
                                 unsigned long long *counts)
{
    extern __shared__ unsigned sh_bins[];
    for (int b = threadIdx.x; b < bins; b += blockDim.x)
        sh_bins[b] = 0;
    __syncthreads();
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        int b = bin_of(data[i]);
        if (b >= 0)
            atomicAdd(&sh_bins[b], 1u);
    }
    __syncthreads();
    cr_hist_flush(sh_bins, bins, counts);
}

struct smem_launch {
    template <typename T, typename Binner>
    static cudaError_t run(const cr_hist_dev *h, Binner bin_of, cudaStream_t s)
    {
        const int threads = 512;
        int blocks = cr_hist_grid(h->count, threads, 4);
        size_t smem = (size_t)h->bins * sizeof(unsigned);
        hist_smem_kernel<T><<<blocks, threads, smem, s>>>((const T *)h->data, h->count, h->bins, bin_of,
                                                          h->counts);
        return cudaGetLastError();
    }
    static cudaError_t bytes(const cr_hist_dev *h, cudaStream_t s)
    {
        return run<unsigned char>(h, cr_byte_binner{}, s);
    }
};

extern "C" cudaError_t cr_cuda_hist_smem(const cr_hist_dev *h, cr_dtype dt, cudaStream_t s)
{
    if (h->bins > CR_HIST_SMEM_MAX_BINS)
        return cr_cuda_hist_global(h, dt, s);
    return cr_hist_dispatch<smem_launch>(h, dt, s);
}
