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
 * Bytes before the first 16-byte boundary (unaligned start) and after the last whole vector
 * (lengths not a multiple of 16) are counted one by one by the first threads of the grid. */
#include "kernels/cuda/hist_bin.cuh"

#define BYTE_BINS 256
#define LANES 32
#define VEC_THREADS 512
#define VEC_UNROLL 2

/* Elements before the first 16-byte boundary; all of them when the pointer is not even aligned
 * to its element (then no vector load is possible). */
template <typename T> __device__ __forceinline__ int64_t head_elems(const T *p, int64_t count)
{
    uintptr_t a = (uintptr_t)p;
    int64_t h = (a % sizeof(T)) ? count : (int64_t)(((16 - (a & 15)) & 15) / sizeof(T));
    return h < count ? h : count;
}

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
    int64_t head = head_elems(data, count);
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

/* General path (floats, or bytes into other bins): one privatized copy of `bins`, 16-byte loads
 * of 16/sizeof(T) elements each. */
template <typename T, typename Binner>
__global__ void __launch_bounds__(VEC_THREADS)
    hist_vec_kernel(const T *__restrict__ data, int64_t count, int bins, Binner bin_of,
                    unsigned long long *counts)
{
    constexpr int per_vec = 16 / sizeof(T);
    union vec { uint4 raw; T e[per_vec]; };
    extern __shared__ unsigned sh_bins[];
    for (int b = threadIdx.x; b < bins; b += blockDim.x)
        sh_bins[b] = 0;
    __syncthreads();

    int64_t head = head_elems(data, count);
    const uint4 *body = reinterpret_cast<const uint4 *>(data + head);
    int64_t nvec = (count - head) / per_vec;
    int64_t tail = head + nvec * per_vec;
    int64_t gtid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = gtid; i < head; i += stride) { /* a loop: head is everything if misaligned */
        int b = bin_of(data[i]);
        if (b >= 0)
            atomicAdd(&sh_bins[b], 1u);
    }
    if (gtid < count - tail) {
        int b = bin_of(data[tail + gtid]);
        if (b >= 0)
            atomicAdd(&sh_bins[b], 1u);
    }
    for (int64_t i = gtid; i < nvec; i += stride) {
        vec v;
        v.raw = __ldcs(body + i);
#pragma unroll
        for (int e = 0; e < per_vec; e++) {
            int b = bin_of(v.e[e]);
            if (b >= 0)
                atomicAdd(&sh_bins[b], 1u);
        }
    }
    __syncthreads();
    cr_hist_flush(sh_bins, bins, counts);
}

struct vec_launch {
    template <typename T, typename Binner>
    static cudaError_t run(const cr_hist_dev *h, Binner bin_of, cudaStream_t s)
    {
        int blocks = cr_hist_grid(h->count / (16 / sizeof(T)) + 1, VEC_THREADS, 4);
        size_t smem = (size_t)h->bins * sizeof(unsigned);
        hist_vec_kernel<T><<<blocks, VEC_THREADS, smem, s>>>((const T *)h->data, h->count, h->bins,
                                                            bin_of, h->counts);
        return cudaGetLastError();
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

extern "C" cudaError_t cr_cuda_hist_smem_vec(const cr_hist_dev *h, cr_dtype dt, cudaStream_t s)
{
    if (h->bins > CR_HIST_SMEM_MAX_BINS)
        return cr_cuda_hist_global(h, dt, s);
    return cr_hist_dispatch<vec_launch>(h, dt, s);
}
