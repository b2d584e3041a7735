/* Histogram `global`: every element is one atomicAdd on the 64-bit counts in global memory.
 * The baseline the privatized kernels are measured against: all threads of the device contend
 * on the same few hundred addresses in L2. */
#include "hist_bin.cuh"

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

template <typename T, typename Binner>
static cudaError_t launch_global(const cr_hist_dev *h, Binner bin_of, cudaStream_t s)
{
    const int threads = 256;
    int blocks = cr_hist_grid(h->count, threads, 8);
    hist_global_kernel<T><<<blocks, threads, 0, s>>>((const T *)h->data, h->count, bin_of, h->counts);
    return cudaGetLastError();
}

extern "C" cudaError_t cr_cuda_hist_global(const cr_hist_dev *h, cr_dtype dt, cudaStream_t s)
{
    cr_hist_params p;
    cudaError_t e = cr_hist_begin(h, dt, &p, s);
    if (e != cudaSuccess)
        return e == cudaErrorNotReady ? cudaSuccess : e;
    cr_numpy_binner np = {p};
    if (cr_hist_is_byte_identity(h, dt))
        return launch_global<unsigned char>(h, cr_byte_binner{}, s);
    switch (dt) {
    case CR_DT_U8: return launch_global<unsigned char>(h, np, s);
    case CR_DT_F32: return launch_global<float>(h, np, s);
    default: return launch_global<double>(h, np, s);
    }
}
