/* Histograms with more bins than one block's default 48 KiB of shared memory holds (12,288
 * 32-bit counters): privatised counters still, never global atomics per element.
 *
 *   - Up to the opt-in limit of one block (227 KiB on Hopper: 58,112 bins) a block of 1024
 *     threads per SM keeps one copy of every bin, as the 48 KiB path does.
 *   - Beyond it, a thread-block cluster (Hopper's distributed shared memory) shares one copy of
 *     the bins among its 2..16 blocks: block `r` of a cluster of R holds the bins b with
 *     b % R == r, at word b / R (R a power of two: a mask and a shift, no division). Every
 *     thread bins its element as before and adds 1 to the owning block's counter through
 *     `mapa` + a shared::cluster atomic, which stays on the SM-to-SM network instead of going to
 *     L2. 16 blocks of 227 KiB hold 929,792 bins. The remote adds cap the rate, the more the
 *     wider the cluster (R - 1 of R adds leave the SM): on an H200, float32 at ~155 G
 *     elements/s with R = 2, ~87 G/s with R = 4, ~78 G/s with R = 8, against ~100 G/s for one
 *     global atomic per element; so smem-vec's dispatch stops at WIDE_AUTO_MAX_RANKS
 *     (bench/NOTES-hist.md).
 *   - Beyond 16 blocks (a million bins and up) the bins can be cut into windows of R × 58,112
 *     and the data walked once per window, each pass counting only its window's elements
 *     (slower still: for the benchmark and the tests).
 * At the end of a launch each block adds its nonzero counters to the 64-bit counts with one
 * global atomic each. Counts are exact whatever the path: only where an element is counted
 * changes, never which bin it is in (the Binner decides that, as in every kernel). */
#ifndef CRUNCHD_HIST_WIDE_CUH
#define CRUNCHD_HIST_WIDE_CUH

#include <cooperative_groups.h>

#include "kernels/cuda/hist_bin.cuh"
#include "kernels/cuda/hist_walk.cuh"

#define WIDE_THREADS 1024
#define WIDE_UNROLL 2
#define WIDE_MAX_RANKS 16
#define WIDE_AUTO_MAX_RANKS 2 /* the widest cluster measured faster than global atomics */

/* One launch's share of the bins: [base, base + window), spread over 1 << ranks_log2 blocks of
 * `slice` counters each. */
struct cr_wide_pass {
    int base, window, ranks_log2, slice;
};

template <typename T, typename Binner, bool Cluster>
__global__ void __launch_bounds__(WIDE_THREADS, 1)
    hist_wide_kernel(const T *__restrict__ data, int64_t count, cr_wide_pass ps, Binner bin_of,
                     unsigned long long *counts)
{
    namespace cg = cooperative_groups;
    extern __shared__ unsigned sh_bins[];
    for (int o = threadIdx.x; o < ps.slice; o += blockDim.x)
        sh_bins[o] = 0;
    unsigned rank = 0;
    if constexpr (Cluster) {
        cg::cluster_group cluster = cg::this_cluster();
        rank = cluster.block_rank();
        cluster.sync(); /* every block's counters zeroed before anyone adds to them */
    } else {
        __syncthreads();
    }
    const unsigned mask = (1u << ps.ranks_log2) - 1;
    cr_hist_walk<WIDE_UNROLL>(data, count, [&](T x) {
        unsigned l = (unsigned)(bin_of(x) - ps.base); /* ignored (-1) wraps far past the window */
        if (l < (unsigned)ps.window) {
            if constexpr (Cluster) { /* mapa, then an add whose old value nobody reads (an explicit
                                      * PTX red.shared::cluster measured the same) */
                unsigned *owner = cg::this_cluster().map_shared_rank(sh_bins, l & mask);
                atomicAdd(owner + (l >> ps.ranks_log2), 1u);
            } else {
                atomicAdd(&sh_bins[l], 1u);
            }
        }
    });
    if constexpr (Cluster)
        cg::this_cluster().sync(); /* all adds landed; no block leaves while others write to it */
    else
        __syncthreads();
    for (int o = threadIdx.x; o < ps.slice; o += blockDim.x) {
        unsigned c = sh_bins[o];
        if (c)
            atomicAdd(&counts[(int64_t)ps.base + ((int64_t)o << ps.ranks_log2) + rank], (unsigned long long)c);
    }
}

/* Bins one block can hold with the opt-in shared memory of the current device. */
static inline cudaError_t cr_hist_wide_capacity(int *words)
{
    int dev = 0, optin = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    *words = optin / (int)sizeof(unsigned);
    return e;
}

/* One block per SM, one copy of all bins (bins <= capacity). */
template <typename T, typename Binner>
static cudaError_t cr_hist_wide_single(const cr_hist_dev *h, Binner bin_of, cudaStream_t s)
{
    auto kern = hist_wide_kernel<T, Binner, false>;
    size_t smem = (size_t)h->bins * sizeof(unsigned);
    int per_sm = 0;
    cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e == cudaSuccess)
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, WIDE_THREADS, smem);
    if (e != cudaSuccess)
        return e;
    int blocks = cr_hist_grid(h->count / (16 / sizeof(T)) + 1, WIDE_THREADS, per_sm > 0 ? per_sm : 1);
    cr_wide_pass ps = {0, h->bins, 0, h->bins};
    kern<<<blocks, WIDE_THREADS, smem, s>>>((const T *)h->data, h->count, ps, bin_of, h->counts);
    return cudaGetLastError();
}

/* Clusters of R blocks sharing the bins, as many windows of R × capacity as the bins need.
 * max_ranks caps R (the benchmark compares cluster sizes; the dispatch passes 16). With
 * one_pass, cudaErrorNotReady (and nothing launched) when one window cannot hold the bins. */
template <typename T, typename Binner>
static cudaError_t cr_hist_wide_cluster(const cr_hist_dev *h, Binner bin_of, int max_ranks, bool one_pass,
                                        cudaStream_t s)
{
    auto kern = hist_wide_kernel<T, Binner, true>;
    int cap = 0;
    cudaError_t e = cr_hist_wide_capacity(&cap);
    if (e != cudaSuccess)
        return e;
    if (cap < 1024)
        return cudaErrorNotSupported;
    int ranks = 2;
    while (ranks < max_ranks && (int64_t)ranks * cap < h->bins)
        ranks *= 2;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    cudaLaunchConfig_t cfg = {};
    cfg.blockDim = dim3(WIDE_THREADS);
    cfg.stream = s;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    int clusters = 0, slice = 0;
    /* The widest cluster the device runs (16 is beyond the portable 8: not every part has it). */
    for (;; ranks /= 2) {
        int64_t per_rank = ((int64_t)h->bins + ranks - 1) / ranks;
        slice = (int)(per_rank < cap ? per_rank : cap);
        cfg.dynamicSmemBytes = (size_t)slice * sizeof(unsigned);
        cfg.gridDim = dim3(ranks);
        attr[0].val.clusterDim.x = ranks;
        attr[0].val.clusterDim.y = 1;
        attr[0].val.clusterDim.z = 1;
        e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)cfg.dynamicSmemBytes);
        if (e == cudaSuccess && ranks > 8)
            e = cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
        if (e == cudaSuccess)
            e = cudaOccupancyMaxActiveClusters(&clusters, kern, &cfg);
        if (e == cudaSuccess && clusters > 0)
            break;
        if (ranks <= 2)
            return e != cudaSuccess ? e : cudaErrorNotSupported;
        cudaGetLastError(); /* a refused size is not sticky: try the next smaller */
    }
    int log2r = 0;
    while ((1 << log2r) < ranks)
        log2r++;
    int64_t want = cr_hist_grid(h->count / (16 / sizeof(T)) + 1, WIDE_THREADS, 1);
    int64_t groups = (want + ranks - 1) / ranks;
    cfg.gridDim = dim3((unsigned)((groups < clusters ? groups : clusters) * ranks));
    int window = ranks * slice;
    if (one_pass && window < h->bins)
        return cudaErrorNotReady;
    for (int64_t base = 0; base < h->bins; base += window) {
        int64_t left = h->bins - base;
        cr_wide_pass ps = {(int)base, (int)(left < window ? left : window), log2r, slice};
        e = cudaLaunchKernelEx(&cfg, kern, (const T *)h->data, h->count, ps, bin_of, h->counts);
        if (e != cudaSuccess)
            return e;
    }
    return cudaSuccess;
}

#endif
