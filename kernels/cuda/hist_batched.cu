/* Histogram `smem-batched`: many small histograms in one launch. A service that answers
 * thousands of 1 KB histograms a second would otherwise pay a launch, a copy each way and a
 * synchronisation per histogram, each far longer than the counting. Grid row y counts histogram
 * y (jobs[y]: its own data, length and range) into privatized 32-bit bins in shared memory, as
 * `smem` does, and adds them to that histogram's counts once. The row also runs single
 * histograms of any bins the API takes: past what one block's 48 KiB holds (CR_HIST_SMEM_MAX_BINS,
 * never in a batch: those stop at CR_BATCH_MAX_BINS) it adds to the global counts directly. */
#include "kernels/cuda/hist_bin.cuh"
#include "kernels/registry.h"

template <typename T> __device__ __forceinline__ int batched_bin(T v, const cr_hist_job &, const cr_hist_params &p)
{
    return cr_hist_bin((double)v, p);
}

template <> __device__ __forceinline__ int batched_bin(unsigned char v, const cr_hist_job &j, const cr_hist_params &p)
{
    return j.identity ? (int)v : cr_hist_bin((double)v, p);
}

template <typename T, bool Shared> __global__ void hist_batched_kernel(const cr_hist_job *jobs, int bins)
{
    extern __shared__ unsigned sh_bins[];
    const cr_hist_job j = jobs[blockIdx.y];
    const cr_hist_params p = {j.lo, j.hi, j.span, j.step, j.bins, (double)j.bins / j.span};
    if (Shared) {
        for (int b = threadIdx.x; b < bins; b += blockDim.x)
            sh_bins[b] = 0;
        __syncthreads();
    }
    const T *data = (const T *)j.data;
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < j.count; i += stride) {
        int b = batched_bin(data[i], j, p);
        if (b >= 0) {
            if (Shared)
                atomicAdd(&sh_bins[b], 1u);
            else
                atomicAdd(&j.counts[b], 1ull);
        }
    }
    if (Shared) {
        __syncthreads();
        cr_hist_flush(sh_bins, bins, j.counts);
    }
}

extern "C" cudaError_t cr_hist_job_make(const cr_hist_dev *h, cr_dtype dt, cr_hist_job *out)
{
    cr_hist_params p;
    cudaError_t e = cr_hist_make_params(h, dt, &p);
    if (e != cudaSuccess)
        return e;
    *out = (cr_hist_job){h->data, (long long)h->count, p.lo, p.hi, p.span, p.step, p.bins,
                         cr_hist_is_byte_identity(h, dt) ? 1 : 0, h->counts};
    return cudaSuccess;
}

extern "C" cudaError_t cr_cuda_hist_batched(const cr_hist_job *jobs, int n, int bins, int64_t max_count, cr_dtype dt,
                                            cudaStream_t s)
{
    const int threads = 256;
    if (n < 1 || n > 65535 || bins < 1)
        return cudaErrorInvalidValue;
    /* a block per 16 elements a thread, at most 32 per histogram: small ones take one block */
    int64_t per = (max_count + threads * 16 - 1) / (threads * 16);
    dim3 grid((unsigned)(per < 1 ? 1 : per > 32 ? 32 : per), (unsigned)n);
    bool shared = bins <= CR_HIST_SMEM_MAX_BINS;
    size_t smem = shared ? (size_t)bins * sizeof(unsigned) : 0;
    return cr_hist_by_dtype(dt, [&](auto v) {
        if (shared)
            hist_batched_kernel<decltype(v), true><<<grid, threads, smem, s>>>(jobs, bins);
        else
            hist_batched_kernel<decltype(v), false><<<grid, threads, 0, s>>>(jobs, bins);
        return cudaGetLastError();
    });
}
