/* Shared by the histogram kernels: the bin a value falls in, with numpy.histogram's semantics,
 * and the few launch helpers every histogram launcher repeats. */
#ifndef CRUNCHD_HIST_BIN_CUH
#define CRUNCHD_HIST_BIN_CUH

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <type_traits>

#include "kernels/cuda/ata_hist_kernels.h"
#include "kernels/hist_range.h"

/* Equal bins over [lo, hi]. numpy widens an empty range to [lo-0.5, hi+0.5]. */
typedef struct {
    double lo, hi, span, step;
    int32_t bins;
    double inv; /* bins / span: the device's first guess multiplies (cr_hist_bin) */
} cr_hist_params;

/* numpy's histogram for uniform bins (numpy/lib/_histograms_impl.py): a first guess from
 * ((x - lo) / span) * bins, then one correction step against the edges np.linspace would give
 * (i * step + lo, last edge exactly hi), so values on an edge land where numpy puts them:
 * 0.3 in 10 bins over [0, 1] goes to bin 2, because linspace's edge 3 is 0.30000000000000004.
 * Explicit _rn intrinsics keep the compiler from fusing into FMAs that numpy does not do. */
__host__ __device__ inline double cr_hist_edge(const cr_hist_params &p, int i)
{
#ifdef __CUDA_ARCH__
    return i >= p.bins ? p.hi : __dadd_rn(__dmul_rn((double)i, p.step), p.lo);
#else
    volatile double prod = (double)i * p.step; /* volatile: no FMA contraction on the host either */
    return i >= p.bins ? p.hi : prod + p.lo;
#endif
}

/* The bin of x, or -1 when numpy ignores it (outside [lo, hi], NaN). numpy's answer is the bin
 * whose linspace edges hold x, found from any first guess within one bin of it by the one
 * correction step: so the device guesses with a multiply by bins / span instead of numpy's
 * FP64 division (a few ulps apart, never a bin), which had bounded every dtype but the byte
 * path to ~300 G elements/s on an H200. */
__host__ __device__ inline int cr_hist_bin(double x, const cr_hist_params &p)
{
    if (!(x >= p.lo && x <= p.hi))
        return -1;
#ifdef __CUDA_ARCH__
    double f = __dmul_rn(__dsub_rn(x, p.lo), p.inv);
#else
    volatile double q = (x - p.lo) / p.span;
    double f = q * (double)p.bins;
#endif
    int i = (int)f;
    if (i >= p.bins)
        i = p.bins - 1;
    if (x < cr_hist_edge(p, i))
        i--;
    else if (i != p.bins - 1 && x >= cr_hist_edge(p, i + 1))
        i++;
    return i;
}

/* numpy's checks on the range (kernels/hist_range.h, as every decoder applies them) and at
 * least one bin. */
static inline cudaError_t cr_hist_make_params(const cr_hist_dev *h, cr_dtype dt, cr_hist_params *p)
{
    double lo = h->lo, hi = h->hi;
    if (h->bins < 1 || cr_hist_range_fix(&lo, &hi, dt) != CR_RANGE_OK)
        return cudaErrorInvalidValue;
    p->lo = lo;
    p->hi = hi;
    p->span = hi - lo;
    p->step = p->span / (double)h->bins;
    p->bins = h->bins;
    p->inv = (double)h->bins / p->span;
    return cudaSuccess;
}

/* Element loads as double; the template picks the dtype. */
template <typename T> __device__ __forceinline__ double cr_hist_value(T v) { return (double)v; }

/* Bins a value of T: either each byte its own bin, or numpy's rule. */
struct cr_byte_binner {
    __device__ __forceinline__ int operator()(unsigned char v) const { return v; }
};
struct cr_numpy_binner {
    cr_hist_params p;
    template <typename T> __device__ __forceinline__ int operator()(T v) const
    {
        return cr_hist_bin((double)v, p);
    }
};

/* Integers of up to 32 bits over integer edges a power of two apart (the common "count each
 * value" histograms: 256 bins over [0, 256], 64 over [-128, 128]): the edges are exact, so
 * numpy's bin is the offset shifted down, with no float64 on the way. */
struct cr_int_binner {
    long long lo;
    unsigned long long span;
    int shift, bins;
    template <typename T> __device__ __forceinline__ int operator()(T v) const
    {
        long long d = (long long)v - lo;
        if (d < 0 || (unsigned long long)d > span)
            return -1;
        int b = (int)(d >> shift);
        return b < bins ? b : bins - 1; /* hi itself is in the last bin */
    }
};

/* Whether p's bins suit cr_int_binner for data of dt, and it filled. */
static inline bool cr_hist_int_binner(cr_dtype dt, const cr_hist_params &p, cr_int_binner *out)
{
    bool narrow_int = dt == CR_DT_U8 || dt == CR_DT_I8 || dt == CR_DT_U16 || dt == CR_DT_I16 ||
                      dt == CR_DT_U32 || dt == CR_DT_I32;
    const double limit = 4294967296.0; /* lo, hi and span well inside int64 */
    if (!narrow_int || !(fabs(p.lo) <= limit && fabs(p.hi) <= limit) || p.lo != floor(p.lo) || p.hi != floor(p.hi))
        return false;
    unsigned long long span = (unsigned long long)(p.hi - p.lo);
    for (int shift = 0; shift < 33; shift++)
        if (((unsigned long long)p.bins << shift) == span) {
            *out = cr_int_binner{(long long)p.lo, span, shift, p.bins};
            return true;
        }
    return false;
}

/* f(T{}) for the element type T of dt, the one place a histogram dtype becomes a C++ type:
 * every kernel takes every dtype the CPU backend takes (floats, and integers of 8 to 64 bits
 * binned as float64, as numpy bins them). cudaErrorNotSupported for anything else. */
template <typename F> static inline cudaError_t cr_hist_by_dtype(cr_dtype dt, F f)
{
    switch (dt) {
    case CR_DT_U8: return f((unsigned char)0);
    case CR_DT_I8: return f((signed char)0);
    case CR_DT_U16: return f((uint16_t)0);
    case CR_DT_I16: return f((int16_t)0);
    case CR_DT_U32: return f((uint32_t)0);
    case CR_DT_I32: return f((int32_t)0);
    case CR_DT_U64: return f((uint64_t)0);
    case CR_DT_I64: return f((int64_t)0);
    case CR_DT_F32: return f(0.0f);
    case CR_DT_F64: return f(0.0);
    default: return cudaErrorNotSupported;
    }
}

static inline bool cr_hist_dtype_ok(cr_dtype dt)
{
    return cr_hist_by_dtype(dt, [](auto) { return cudaSuccess; }) == cudaSuccess;
}

/* Common start of every launcher: validate, zero the counts, nothing more to do when empty.
 * Returns cudaErrorNotReady (never otherwise returned by a launcher) to say "done, no launch". */
static inline cudaError_t cr_hist_begin(const cr_hist_dev *h, cr_dtype dt, cr_hist_params *p,
                                        cudaStream_t s)
{
    if (!cr_hist_dtype_ok(dt))
        return cudaErrorNotSupported;
    if (h->count < 0 || (h->count > 0 && !h->data) || !h->counts)
        return cudaErrorInvalidValue;
    cudaError_t e = cr_hist_make_params(h, dt, p);
    if (e != cudaSuccess)
        return e;
    e = cudaMemsetAsync(h->counts, 0, (size_t)h->bins * sizeof(unsigned long long), s);
    if (e != cudaSuccess)
        return e;
    return h->count == 0 ? cudaErrorNotReady : cudaSuccess;
}

/* The dispatch every kernel's entry point shares: cr_hist_begin (an empty input is done once
 * the counts are zeroed), then the kernel's Launch for the data's type with numpy's binner, or
 * Launch::bytes when each byte is its own bin. Launch has
 *   template <typename T, typename Binner> static cudaError_t run(h, Binner, stream);
 *   static cudaError_t bytes(h, stream);                                                    */
template <typename Launch>
static cudaError_t cr_hist_dispatch(const cr_hist_dev *h, cr_dtype dt, cudaStream_t s)
{
    cr_hist_params p;
    cudaError_t e = cr_hist_begin(h, dt, &p, s);
    if (e != cudaSuccess)
        return e == cudaErrorNotReady ? cudaSuccess : e;
    cr_numpy_binner np = {p};
    cr_int_binner ib;
    if (cr_hist_is_byte_identity(h, dt))
        return Launch::bytes(h, s);
    if (cr_hist_int_binner(dt, p, &ib))
        return cr_hist_by_dtype(dt, [&](auto v) {
            using T = decltype(v);
            if constexpr (std::is_integral<T>::value && sizeof(T) <= 4)
                return Launch::template run<T>(h, ib, s);
            else
                return cudaErrorNotSupported; /* cr_hist_int_binner took none of these */
        });
    return cr_hist_by_dtype(dt, [&](auto v) { return Launch::template run<decltype(v)>(h, np, s); });
}

/* Blocks for a grid-stride loop: enough to fill every SM `per_sm` times, fewer for small data. */
static inline int cr_hist_grid(int64_t work_items, int threads, int per_sm)
{
    int dev = 0, sms = 132;
    if (cudaGetDevice(&dev) == cudaSuccess)
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    int64_t want = (work_items + threads - 1) / threads;
    int64_t cap = (int64_t)sms * per_sm;
    if (want < 1)
        want = 1;
    return (int)(want < cap ? want : cap);
}

/* Adds a block's privatized 32-bit bins into the 64-bit global counts. */
__device__ __forceinline__ void cr_hist_flush(const unsigned *sh, int bins, unsigned long long *counts)
{
    for (int b = threadIdx.x; b < bins; b += blockDim.x)
        if (sh[b])
            atomicAdd(&counts[b], (unsigned long long)sh[b]);
}

/* Bins that fit one privatized copy in shared memory (48 KiB, no opt-in needed). */
#define CR_HIST_SMEM_MAX_BINS (48 * 1024 / 4)

#endif
