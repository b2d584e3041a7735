/* Histogram `smem-vec`: privatized bins, 16-byte loads, several vectors in flight per thread,
 * a persistent grid (a few blocks per SM) striding over the data.
 *
 * The byte fast path (U8, 256 bins) keeps 32 copies of the bins per block laid out [bin][lane]:
 * lane l of every warp only touches word bin*32 + l, which sits in bank l, so a warp's 32
 * shared atomics never conflict on a bank nor collide on an address whatever the data (all-equal
 * bytes included). 256 × 32 × 4 B = 32 KiB per block. At the end each bin's 32 copies are summed
 * (reading lane (j + bin) % 32 at step j keeps that conflict-free too) and added to the global
 * counts with one atomic per bin per block.
 *
 * Other bins, by how many (hist_smem_vec.h names the paths; the benchmark times each):
 *   - up to 12,288 (48 KiB): one copy per block, four 512-thread blocks per SM;
 *   - up to one block's opt-in shared memory (58,112 on Hopper), and up to what a cluster of
 *     WIDE_AUTO_MAX_RANKS blocks holds in distributed shared memory (116,224): hist_wide.cuh;
 *   - beyond, one 64-bit global atomic per element (the `global` kernel): with that many bins
 *     they rarely collide, and they measured faster than wider clusters or several passes.
 *
 * Bytes before the first 16-byte boundary (unaligned start) and after the last whole vector
 * (lengths not a multiple of 16) are counted one by one by the first threads of the grid. */
#include "kernels/cuda/hist_smem_vec.h"
#include "kernels/cuda/hist_wide.cuh"

#define BYTE_BINS 256
#define LANES 32
#define VEC_THREADS 512
#define VEC_UNROLL 2

__device__ __forceinline__ void count_byte(unsigned *lane_bins, unsigned b)
{
    atomicAdd(lane_bins + (b << 5), 1u);
}

__device__ __forceinline__ void count_word(unsigned *lane_bins, unsigned w)
{
    count_byte(lane_bins, w & 0xffu);
    count_byte(lane_bins, (w >> 8) & 0xffu);
    count_byte(lane_bins, (w >> 16) & 0xffu);
    count_byte(lane_bins, w >> 24);
}

__device__ __forceinline__ void count_vec(unsigned *lane_bins, uint4 v)
{
    count_word(lane_bins, v.x);
    count_word(lane_bins, v.y);
    count_word(lane_bins, v.z);
    count_word(lane_bins, v.w);
}

__global__ void __launch_bounds__(VEC_THREADS, 4)
    hist_bytes_vec_kernel(const unsigned char *__restrict__ data, int64_t count,
                          unsigned long long *counts)
{
    __shared__ __align__(16) unsigned sh[BYTE_BINS * LANES];
    for (int i = threadIdx.x; i < BYTE_BINS * LANES / 4; i += blockDim.x)
        reinterpret_cast<uint4 *>(sh)[i] = make_uint4(0, 0, 0, 0);
    __syncthreads();

    unsigned *lane_bins = sh + (threadIdx.x & (LANES - 1));
    int64_t head = cr_hist_head_elems(data, count);
    const uint4 *body = reinterpret_cast<const uint4 *>(data + head);
    int64_t nvec = (count - head) / 16;
    int64_t tail = head + nvec * 16;
    int64_t gtid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    if (gtid < head)
        count_byte(lane_bins, data[gtid]);
    if (gtid < count - tail)
        count_byte(lane_bins, data[tail + gtid]);

    int64_t i = gtid;
    for (; i + (VEC_UNROLL - 1) * stride < nvec; i += VEC_UNROLL * stride) {
        uint4 v[VEC_UNROLL]; /* all loads issued before the first atomic: bytes in flight */
#pragma unroll
        for (int u = 0; u < VEC_UNROLL; u++)
            v[u] = __ldcs(body + i + u * stride);
#pragma unroll
        for (int u = 0; u < VEC_UNROLL; u++)
            count_vec(lane_bins, v[u]);
    }
    for (; i < nvec; i += stride)
        count_vec(lane_bins, __ldcs(body + i));
    __syncthreads();

    for (int b = threadIdx.x; b < BYTE_BINS; b += blockDim.x) {
        unsigned sum = 0;
#pragma unroll 8
        for (int j = 0; j < LANES; j++)
            sum += sh[b * LANES + ((j + b) & (LANES - 1))];
        if (sum)
            atomicAdd(&counts[b], (unsigned long long)sum);
    }
}

/* General path (floats, or bytes into other bins): one privatized copy of `bins` (at most
 * CR_HIST_SMEM_MAX_BINS) per block, 16-byte loads of 16/sizeof(T) elements each. */
template <typename T, typename Binner>
__global__ void __launch_bounds__(VEC_THREADS)
    hist_vec_kernel(const T *__restrict__ data, int64_t count, int bins, Binner bin_of,
                    unsigned long long *counts)
{
    extern __shared__ unsigned sh_bins[];
    for (int b = threadIdx.x; b < bins; b += blockDim.x)
        sh_bins[b] = 0;
    __syncthreads();
    cr_hist_walk<1>(data, count, [&](T x) {
        int b = bin_of(x);
        if (b >= 0)
            atomicAdd(&sh_bins[b], 1u);
    });
    __syncthreads();
    cr_hist_flush(sh_bins, bins, counts);
}

/* AUTO past one block's shared memory: a cluster of at most WIDE_AUTO_MAX_RANKS blocks if one
 * pass of it holds the bins, else global atomics (cr_cuda_hist_smem_vec_path). */
#define VEC_ONE_PASS_CLUSTER 100

/* The path AUTO takes for `bins`: the least shared memory that holds them. */
static cudaError_t auto_path(int bins, int *path)
{
    int cap = 0;
    cudaError_t e = cr_hist_wide_capacity(&cap);
    *path = bins <= CR_HIST_SMEM_MAX_BINS ? CR_HIST_VEC_SMEM48 : bins <= cap ? CR_HIST_VEC_ONE_COPY : VEC_ONE_PASS_CLUSTER;
    return e;
}

template <int Path> struct vec_launch {
    template <typename T, typename Binner>
    static cudaError_t run(const cr_hist_dev *h, Binner bin_of, cudaStream_t s)
    {
        switch (Path) {
        case CR_HIST_VEC_SMEM48: {
            int blocks = cr_hist_grid(h->count / (16 / sizeof(T)) + 1, VEC_THREADS, 4);
            size_t smem = (size_t)h->bins * sizeof(unsigned);
            hist_vec_kernel<T><<<blocks, VEC_THREADS, smem, s>>>((const T *)h->data, h->count, h->bins,
                                                                bin_of, h->counts);
            return cudaGetLastError();
        }
        case CR_HIST_VEC_ONE_COPY: return cr_hist_wide_single<T>(h, bin_of, s);
        case VEC_ONE_PASS_CLUSTER: return cr_hist_wide_cluster<T>(h, bin_of, WIDE_AUTO_MAX_RANKS, true, s);
        case CR_HIST_VEC_CLUSTER: return cr_hist_wide_cluster<T>(h, bin_of, WIDE_MAX_RANKS, false, s);
        case CR_HIST_VEC_CLUSTER8: return cr_hist_wide_cluster<T>(h, bin_of, 8, false, s);
        default: return cudaErrorInvalidValue;
        }
    }
    /* every byte its own bin: 32 lane-private copies of the 256 bins, no binner */
    static cudaError_t bytes(const cr_hist_dev *h, cudaStream_t s)
    {
        int blocks = cr_hist_grid(h->count / 16 + 1, VEC_THREADS, 4);
        hist_bytes_vec_kernel<<<blocks, VEC_THREADS, 0, s>>>((const unsigned char *)h->data, h->count,
                                                             h->counts);
        return cudaGetLastError();
    }
};

extern "C" cudaError_t cr_cuda_hist_smem_vec_path(const cr_hist_dev *h, cr_dtype dt, cr_hist_vec_path path,
                                                  cudaStream_t s)
{
    int p = path;
    if (path == CR_HIST_VEC_AUTO) {
        cudaError_t e = auto_path(h->bins, &p);
        if (e != cudaSuccess)
            return e;
    }
    switch (p) {
    case CR_HIST_VEC_SMEM48:
        if (h->bins > CR_HIST_SMEM_MAX_BINS)
            return cudaErrorInvalidValue;
        return cr_hist_dispatch<vec_launch<CR_HIST_VEC_SMEM48>>(h, dt, s);
    case CR_HIST_VEC_ONE_COPY: {
        int cap = 0;
        cudaError_t e = cr_hist_wide_capacity(&cap);
        if (e != cudaSuccess)
            return e;
        if (h->bins > cap)
            return cudaErrorInvalidValue;
        return cr_hist_dispatch<vec_launch<CR_HIST_VEC_ONE_COPY>>(h, dt, s);
    }
    case CR_HIST_VEC_CLUSTER: return cr_hist_dispatch<vec_launch<CR_HIST_VEC_CLUSTER>>(h, dt, s);
    case CR_HIST_VEC_CLUSTER8: return cr_hist_dispatch<vec_launch<CR_HIST_VEC_CLUSTER8>>(h, dt, s);
    case VEC_ONE_PASS_CLUSTER: {
        cudaError_t e = cr_hist_dispatch<vec_launch<VEC_ONE_PASS_CLUSTER>>(h, dt, s);
        return e == cudaErrorNotReady ? cr_cuda_hist_global(h, dt, s) : e;
    }
    case CR_HIST_VEC_GLOBAL: return cr_cuda_hist_global(h, dt, s);
    default: return cudaErrorInvalidValue;
    }
}

extern "C" cudaError_t cr_cuda_hist_smem_vec(const cr_hist_dev *h, cr_dtype dt, cudaStream_t s)
{
    return cr_cuda_hist_smem_vec_path(h, dt, CR_HIST_VEC_AUTO, s);
}
