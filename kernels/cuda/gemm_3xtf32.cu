/* `tc-3xtf32`: FP32 GEMM on the tensor cores with FP32's accuracy (3xTF32).
 *
 * Each input x is split into two TF32 numbers, big = tf32(x) and small = tf32(x - big): together
 * they hold x to about 2^-22 relative, as a float does (2^-24). Then
 *     A·B ≈ As·Bb + Ab·Bs + Ab·Bb
 * (the As·Bs term is below FP32's rounding). Each product of two TF32 numbers is exact in FP32
 * and the tensor cores accumulate in FP32, so the result has SGEMM's error at TF32's speed / 3.
 *
 * The three products are one GEMM with K tripled: a split kernel writes A' = [As | Ab | Ab]
 * (m × 3k) and B'ᵀ = [Bb | Bs | Bb] (n × 3k) into scratch, both K-major with rows padded to 16
 * bytes, which is the layout the wgmma + TMA kernel of tc-tf32 reads in place (gemm_wgmma.cu;
 * elsewhere its mma.sync kernel, gemm_tc.cu). The small cross terms come first in K so the
 * accumulator adds them while it is still small.
 *
 * Inf and NaN: the split of Inf would give Inf - Inf = NaN, and a zero small part times Inf is
 * NaN too, so a row of A or column of B holding a non-finite value is flagged by the split and
 * its outputs are recomputed afterwards by a plain FP32 dot product (fix-up kernel; a single
 * flag read when nothing is flagged), which propagates as SGEMM does. */
#include <math.h>

#include "kernels/cuda/gemm_common.cuh"

#define X3_TILE 32
#define X3_ROWS 8 /* threads per tile column: 32 × 8 threads, 4 elements each */

/* what the scratch holds, in this order, each part 256-byte aligned */
typedef struct {
    int64_t kp;       /* row length of A' and B'ᵀ: 3k rounded up to 4 floats */
    size_t a_bytes, b_bytes, flag_bytes;
} x3_layout;

static size_t x3_round256(size_t x) { return (x + 255) & ~(size_t)255; }

static x3_layout x3_plan(const cr_gemm_dev *g)
{
    x3_layout l;
    l.kp = (3 * g->k + 3) & ~(int64_t)3;
    l.a_bytes = x3_round256((size_t)g->m * (size_t)l.kp * sizeof(float));
    l.b_bytes = x3_round256((size_t)g->n * (size_t)l.kp * sizeof(float));
    /* [0]: anything flagged; then one int per row of A, one per column of B */
    l.flag_bytes = x3_round256((size_t)(1 + g->m + g->n) * sizeof(int));
    return l;
}

__device__ __forceinline__ float x3_tf32(float x)
{
    uint32_t t;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(t) : "f"(x));
    return __uint_as_float(t);
}

/* big and small TF32 parts of a finite x; big never rounds up past FLT_MAX (then truncated) */
__device__ __forceinline__ void x3_split(float x, float *big, float *small)
{
    float b = x3_tf32(x);
    if (isinf(b))
        b = __uint_as_float(__float_as_uint(x) & 0xffffe000u);
    *big = b;
    *small = x3_tf32(x - b); /* exact: x and b share their leading bits */
}

/* One operand into its split form: out row r (r < rows) of length kp holds
 *   [first(v) for v in row] [second(v)] [big(v)] [zeros up to kp]
 * where row r of the operand is src[r][0..k) (TRANS false) or src[0..k)[r] (TRANS true), and
 * first/second are (small, big) for A and (big, small) for B (small_first). A non-finite value
 * is copied as is into every segment and flags its row (flags[1 + r]) and flags[0]. */
template <bool TRANS>
__global__ void __launch_bounds__(X3_TILE *X3_ROWS)
    x3_split_kernel(const float *__restrict__ src, int64_t ld, int64_t rows, int64_t k, bool small_first,
                    float *__restrict__ out, int64_t kp, int *__restrict__ flags, int64_t flag_base)
{
    __shared__ float tile[X3_TILE][X3_TILE + 1];
    const int64_t tiles_r = gemm_cdiv(rows, X3_TILE), tiles_k = gemm_cdiv(k, X3_TILE);
    for (int64_t id = blockIdx.x; id < tiles_r * tiles_k; id += gridDim.x) {
        const int64_t r0 = id / tiles_k * X3_TILE, k0 = id % tiles_k * X3_TILE;
        /* read in the source's own order (coalesced): tile[row - r0][kk - k0] */
        for (int y = threadIdx.y; y < X3_TILE; y += X3_ROWS) {
            int64_t r = r0 + (TRANS ? threadIdx.x : y), kk = k0 + (TRANS ? y : threadIdx.x);
            float v = 0.f;
            if (r < rows && kk < k)
                v = TRANS ? src[kk * ld + r] : src[r * ld + kk];
            tile[TRANS ? threadIdx.x : y][TRANS ? y : threadIdx.x] = v;
        }
        __syncthreads();
        for (int y = threadIdx.y; y < X3_TILE; y += X3_ROWS) {
            const int64_t r = r0 + y, kk = k0 + threadIdx.x;
            if (r >= rows)
                continue;
            float *row = out + r * kp;
            if (kk < k) {
                float v = tile[y][threadIdx.x], big = v, small = 0.f;
                if (isfinite(v)) {
                    x3_split(v, &big, &small);
                } else {
                    flags[0] = 1;
                    flags[flag_base + r] = 1;
                }
                row[kk] = small_first ? small : big;
                row[k + kk] = small_first ? big : small;
                row[2 * k + kk] = big;
                if (kk == k - 1) /* the row's padding: at most 3 floats */
                    for (int64_t q = 3 * k; q < kp; q++)
                        row[q] = 0.f;
            }
        }
        __syncthreads();
    }
}

/* Outputs in a flagged row of A or column of B, recomputed in plain FP32: the only place an Inf
 * or NaN input reaches C. A grid of a few blocks that return at once when flags[0] is 0. */
__global__ void __launch_bounds__(256) x3_fixup_kernel(gemm_args<float> p, const int *__restrict__ flags)
{
    if (!flags[0])
        return;
    const int *row_bad = flags + 1, *col_bad = flags + 1 + p.m;
    const int64_t total = p.m * p.n;
    for (int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; id < total;
         id += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = id / p.n, j = id % p.n;
        if (!row_bad[i] && !col_bad[j])
            continue;
        float acc = 0.f;
        for (int64_t kk = 0; kk < p.k; kk++)
            acc = fmaf(gemm_a_at(p, i, kk), gemm_b_at(p, kk, j), acc);
        gemm_store(p, i, j, acc);
    }
}

template <bool TRANS>
static cudaError_t x3_split_launch(const float *src, int64_t ld, int64_t rows, int64_t k, bool small_first, float *out,
                            int64_t kp, int *flags, int64_t flag_base, cudaStream_t s)
{
    const int64_t tiles = gemm_cdiv(rows, X3_TILE) * gemm_cdiv(k, X3_TILE);
    const unsigned grid = (unsigned)(tiles < (1 << 20) ? tiles : (1 << 20));
    x3_split_kernel<TRANS><<<grid, dim3(X3_TILE, X3_ROWS), 0, s>>>(src, ld, rows, k, small_first, out, kp, flags,
                                                                   flag_base);
    return gemm_launched();
}

extern "C" size_t cr_cuda_gemm_3xtf32_work_bytes(const cr_gemm_dev *g, cr_dtype dt)
{
    if (dt != CR_DT_F32 || !g || g->m <= 0 || g->n <= 0 || g->k <= 0)
        return 0;
    x3_layout l = x3_plan(g);
    return l.a_bytes + l.b_bytes + l.flag_bytes;
}

/* The split operands and the flags in w (big enough, 256-byte aligned), then the GEMM. */
static cudaError_t x3_run(const cr_gemm_dev *g, char *w, cudaStream_t s)
{
    const x3_layout l = x3_plan(g);
    float *a3 = (float *)w, *b3 = (float *)(w + l.a_bytes);
    int *flags = (int *)(w + l.a_bytes + l.b_bytes);
    const gemm_args<float> p = gemm_make_args<float>(g);
    cudaError_t e = cudaMemsetAsync(flags, 0, (size_t)(1 + g->m + g->n) * sizeof(int), s);
    /* A' row i is op(A) row i: stored m×k (in place) or k×m (transposed) */
    if (e == cudaSuccess)
        e = g->trans_a ? x3_split_launch<true>(p.a, p.lda, g->m, g->k, true, a3, l.kp, flags, 1, s)
                       : x3_split_launch<false>(p.a, p.lda, g->m, g->k, true, a3, l.kp, flags, 1, s);
    /* B'ᵀ row j is op(B) column j: stored n×k (in place) or k×n (transposed) */
    if (e == cudaSuccess)
        e = g->trans_b ? x3_split_launch<false>(p.b, p.ldb, g->n, g->k, false, b3, l.kp, flags, 1 + g->m, s)
                       : x3_split_launch<true>(p.b, p.ldb, g->n, g->k, false, b3, l.kp, flags, 1 + g->m, s);
    if (e != cudaSuccess)
        return e;
    const cr_gemm_dev g3 = {g->m, g->n, l.kp, false, true, g->alpha, g->beta, a3, b3, g->c};
    e = cr_cuda_gemm_tc_tf32_ws(&g3, CR_DT_F32, NULL, 0, s); /* K-major both: no scratch needed */
    if (e != cudaSuccess)
        return e;
    x3_fixup_kernel<<<264, 256, 0, s>>>(p, flags);
    return gemm_launched();
}

extern "C" cudaError_t cr_cuda_gemm_3xtf32_ws(const cr_gemm_dev *g, cr_dtype dt, void *work, size_t work_bytes,
                                              cudaStream_t s)
{
    bool nothing;
    cudaError_t e = gemm_check_f32(g, dt, &nothing);
    if (e != cudaSuccess || nothing)
        return e;
    if (g->k == 0) /* C = beta·C: no products to split */
        return cr_cuda_gemm_tc_tf32(g, dt, s);
    const size_t need = cr_cuda_gemm_3xtf32_work_bytes(g, dt);
    void *own = NULL;
    if (!work || work_bytes < need || ((uintptr_t)work & 255) != 0) {
        if ((e = cudaMallocAsync(&own, need, s)) != cudaSuccess)
            return e;
        work = own;
    }
    e = x3_run(g, (char *)work, s);
    if (own) {
        cudaError_t f = cudaFreeAsync(own, s); /* stream-ordered: after the kernels */
        if (e == cudaSuccess)
            e = f;
    }
    return e;
}

extern "C" cudaError_t cr_cuda_gemm_3xtf32(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s)
{
    return cr_cuda_gemm_3xtf32_ws(g, dt, NULL, 0, s);
}
