/* Histogram `cub`: CUB's DeviceHistogram::HistogramEven, the reference.
 *
 * Bytes with 256 bins go to CUB as they are. Other bins and floats go through a transform
 * iterator that hands CUB numpy's bin index (hist_bin.cuh; -1 for ignored values) as an int
 * sample over integer levels [0, bins): CUB's own float binning has an exclusive upper bound
 * (x == hi would be lost) and does not round like numpy at the edges, integers bin exactly.
 *
 * CUB counts in 32 bits (as it is benchmarked); the data goes through in chunks of at most 2^31
 * elements so no counter can wrap, and each chunk's counts are added to the 64-bit output. The
 * caller's scratch holds CUB's temporary storage followed by the 32-bit counters.
 *
 * Past 256 bins CUB privatizes in global memory: its temporary storage is one copy of the bins
 * per block of a full grid (1.6 GiB at 2^20 bins on an H200, ~400 blocks of 4 MiB; 25 GiB at
 * 2^24, the --max-bins ceiling). Chunks are halved until that fits CUB_TEMP_CAP (fewer tiles, fewer
 * blocks): slow at such sizes, but it answers where it would otherwise not fit the card. */
#include <cub/device/device_histogram.cuh>
#include <thrust/iterator/transform_iterator.h>

#include "kernels/cuda/hist_bin.cuh"

#define CHUNK_ELEMS ((int64_t)1 << 31)
#define CUB_TEMP_CAP ((size_t)4 << 30)
#define MIN_CHUNK_ELEMS ((int64_t)1 << 16)

struct numpy_bin_index {
    cr_hist_params p;
    template <typename T> __host__ __device__ int operator()(T v) const { return cr_hist_bin((double)v, p); }
};

__global__ void add_counts_kernel(const unsigned *chunk, int bins, unsigned long long *counts)
{
    for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < bins; b += gridDim.x * blockDim.x)
        counts[b] += chunk[b];
}

static size_t align_up(size_t x) { return (x + 255) & ~(size_t)255; }

/* One CUB call over elements [first, first + n) of the samples; temp == NULL asks the size. */
template <typename T>
static cudaError_t cub_chunk(const cr_hist_dev *h, const cr_hist_params &p, bool identity,
                             int64_t first, int64_t n, void *temp, size_t *temp_bytes,
                             unsigned *chunk_counts, cudaStream_t s)
{
    const T *data = (const T *)h->data + first;
    if (identity)
        return cub::DeviceHistogram::HistogramEven(temp, *temp_bytes, (const unsigned char *)data,
                                                   chunk_counts, 257, 0, 256, n, s);
    auto it = thrust::make_transform_iterator(data, numpy_bin_index{p});
    return cub::DeviceHistogram::HistogramEven(temp, *temp_bytes, it, chunk_counts, h->bins + 1, 0,
                                               h->bins, n, s);
}

/* The chunk length (and CUB's storage for it): the longest, at most CHUNK_ELEMS, whose storage
 * fits CUB_TEMP_CAP. */
template <typename T>
static cudaError_t cub_chunk_elems(const cr_hist_dev *h, const cr_hist_params &p, bool identity, int64_t *elems,
                                   size_t *cub_bytes, cudaStream_t s)
{
    int64_t n = h->count < CHUNK_ELEMS ? h->count : CHUNK_ELEMS;
    if (n < 1)
        n = 1;
    for (;;) {
        cudaError_t e = cub_chunk<T>(h, p, identity, 0, n, NULL, cub_bytes, NULL, s);
        if (e != cudaSuccess)
            return e;
        if (*cub_bytes <= CUB_TEMP_CAP || n <= MIN_CHUNK_ELEMS)
            break;
        n = (n + 1) / 2;
    }
    *elems = n;
    return cudaSuccess;
}

template <typename T>
static cudaError_t run_cub(const cr_hist_dev *h, const cr_hist_params &p, bool identity, void *temp,
                           size_t *temp_bytes, cudaStream_t s)
{
    int64_t chunk = 0;
    size_t cub_bytes = 0;
    cudaError_t e = cub_chunk_elems<T>(h, p, identity, &chunk, &cub_bytes, s);
    if (e != cudaSuccess)
        return e;
    size_t need = align_up(cub_bytes) + (size_t)h->bins * sizeof(unsigned);
    if (!temp) {
        *temp_bytes = need;
        return cudaSuccess;
    }
    if (*temp_bytes < need)
        return cudaErrorInvalidValue;
    unsigned *chunk_counts = (unsigned *)((char *)temp + align_up(cub_bytes));
    for (int64_t first = 0; first < h->count; first += chunk) {
        int64_t n = h->count - first < chunk ? h->count - first : chunk;
        size_t bytes = cub_bytes;
        e = cub_chunk<T>(h, p, identity, first, n, temp, &bytes, chunk_counts, s);
        if (e != cudaSuccess)
            return e;
        int threads = 256, blocks = (h->bins + threads - 1) / threads;
        add_counts_kernel<<<blocks < 1024 ? blocks : 1024, threads, 0, s>>>(chunk_counts, h->bins,
                                                                           h->counts);
        if ((e = cudaGetLastError()) != cudaSuccess)
            return e;
    }
    return cudaSuccess;
}

extern "C" cudaError_t cr_cuda_hist_cub(const cr_hist_dev *h, cr_dtype dt, void *temp,
                                        size_t *temp_bytes, cudaStream_t s)
{
    cr_hist_params p;
    cudaError_t e;
    if (!temp) { /* size query: validate without touching the device */
        if (!cr_hist_dtype_ok(dt))
            return cudaErrorNotSupported;
        if ((e = cr_hist_make_params(h, dt, &p)) != cudaSuccess)
            return e;
    } else {
        e = cr_hist_begin(h, dt, &p, s);
        if (e != cudaSuccess)
            return e == cudaErrorNotReady ? cudaSuccess : e;
    }
    bool identity = cr_hist_is_byte_identity(h, dt);
    return cr_hist_by_dtype(dt, [&](auto v) { return run_cub<decltype(v)>(h, p, identity, temp, temp_bytes, s); });
}
