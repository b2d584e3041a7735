/* GEMM, double-buffered and warp-tiled: our fastest FP32 kernel (exact FP32 FFMA, no tensor
 * cores).
 *
 * Structure (see bench/NOTES-gemm.md for the measurements behind each choice):
 *  - a block of 256 threads owns a BM×BN tile of C; 8 warps each own a WM×WN warp tile and
 *    each thread a (4·QM)×(4·QN) register tile, split into 4×4 quadrants 4·LM rows / 4·LN
 *    columns apart. Within a warp, the LM×LN lanes then read consecutive float4 of the
 *    k-major shared tiles: no bank conflicts, and lanes sharing rows get broadcasts.
 *  - two shared-memory stages: while the block computes on stage t, each thread already has
 *    the global loads of stage t+1 in flight (into registers) and stores them into the other
 *    stage afterwards, so global latency hides behind a whole tile of FMAs and one barrier
 *    per k-tile suffices.
 *  - op(A) and op(B) both live k-major in shared memory (gemm_common.cuh): the transposes
 *    are handled while staging, by template, so the inner loop is the same for all four
 *    trans_a/trans_b combinations.
 *  - blocks are visited in groups of GEMM_GROUP tile-rows (a 1-D grid, remapped) so that the
 *    blocks resident at one time share A and B panels in L2 instead of streaming all of B.
 *  - float4 global loads and C stores when the pointers and leading dimensions allow; any
 *    other case takes the checked scalar path (still correct, slower). FP32 only. */
#include "gemm_common.cuh"

#define GEMM_GROUP 8

template <int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_, int LM_, int QM_, int QN_, int MINB_>
struct dbuf_cfg {
    static constexpr int BM = BM_, BN = BN_, BK = BK_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;
    static constexpr int LM = LM_, LN = 32 / LM_, QM = QM_, QN = QN_, MINB = MINB_;
    static constexpr int NT = WARPS_M * WARPS_N * 32;
    static constexpr int WM = QM * 4 * LM, WN = QN * 4 * LN;
    static constexpr int LA = BM + GEMM_PAD, LB = BN + GEMM_PAD;
    static constexpr int STAGE = BK * (LA + LB); /* floats per stage */
    static constexpr size_t SMEM = 2 * STAGE * sizeof(float);
    static_assert(WARPS_M * WM == BM && WARPS_N * WN == BN, "warp tiles must cover the block");
};

/* Which tile of C this block owns: groups of GEMM_GROUP tile-rows, column-major inside a
 * group, so consecutive blocks reuse the same B panel and a few A panels. */
__device__ __forceinline__ void dbuf_tile(int64_t tiles_m, int64_t tiles_n, int64_t *tm, int64_t *tn)
{
    int64_t bid = blockIdx.x;
    int64_t per_group = (int64_t)GEMM_GROUP * tiles_n;
    int64_t first = bid / per_group * GEMM_GROUP;
    int64_t rows = tiles_m - first < GEMM_GROUP ? tiles_m - first : GEMM_GROUP;
    int64_t in = bid % per_group;
    *tm = first + in % rows;
    *tn = in / rows;
}

/* One k-tile of outer products from shared memory into the register tile. */
template <typename C>
__device__ __forceinline__ void dbuf_compute(const float *sa, const float *sb, int am, int bn,
                                             float (&acc)[4 * C::QM][4 * C::QN])
{
#pragma unroll
    for (int kk = 0; kk < C::BK; kk++) {
        float av[4 * C::QM], bv[4 * C::QN];
#pragma unroll
        for (int q = 0; q < C::QM; q++) {
            float4 v = *(const float4 *)&sa[kk * C::LA + am + q * 4 * C::LM];
            av[4 * q + 0] = v.x, av[4 * q + 1] = v.y, av[4 * q + 2] = v.z, av[4 * q + 3] = v.w;
        }
#pragma unroll
        for (int q = 0; q < C::QN; q++) {
            float4 v = *(const float4 *)&sb[kk * C::LB + bn + q * 4 * C::LN];
            bv[4 * q + 0] = v.x, bv[4 * q + 1] = v.y, bv[4 * q + 2] = v.z, bv[4 * q + 3] = v.w;
        }
#pragma unroll
        for (int r = 0; r < 4 * C::QM; r++)
#pragma unroll
            for (int c = 0; c < 4 * C::QN; c++)
                acc[r][c] = fmaf(av[r], bv[c], acc[r][c]);
    }
}

template <typename C>
__device__ __forceinline__ void dbuf_epilogue(const gemm_args<float> &p, bool cvec, int64_t i0,
                                              int64_t j0, const float (&acc)[4 * C::QM][4 * C::QN])
{
#pragma unroll
    for (int r = 0; r < 4 * C::QM; r++) {
        int64_t i = i0 + (r / 4) * 4 * C::LM + r % 4;
#pragma unroll
        for (int q = 0; q < C::QN; q++)
            gemm_store4(p, cvec, i, j0 + q * 4 * C::LN,
                        make_float4(acc[r][4 * q], acc[r][4 * q + 1], acc[r][4 * q + 2], acc[r][4 * q + 3]));
    }
}

template <typename C, bool TA, bool TB, bool VEC>
__global__ void __launch_bounds__(C::NT, C::MINB) gemm_dbuf_kernel(gemm_args<float> p, bool cvec)
{
    extern __shared__ float4 dbuf_smem4[];
    float *smem = (float *)dbuf_smem4;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int lm = lane / C::LN, ln = lane % C::LN; /* consecutive lanes: consecutive columns */
    const int am = (warp / C::WARPS_N) * C::WM + lm * 4; /* this thread's first row in the tile */
    const int bn = (warp % C::WARPS_N) * C::WN + ln * 4; /* and first column */
    int64_t tm, tn;
    dbuf_tile(gemm_cdiv(p.m, C::BM), gemm_cdiv(p.n, C::BN), &tm, &tn);
    const int64_t m0 = tm * C::BM, n0 = tn * C::BN;

    float acc[4 * C::QM][4 * C::QN];
#pragma unroll
    for (int r = 0; r < 4 * C::QM; r++)
#pragma unroll
        for (int c = 0; c < 4 * C::QN; c++)
            acc[r][c] = 0.f;

    float4 va[gemm_tile_shape<C::BM, C::BK, C::NT>::per_thread];
    float4 vb[gemm_tile_shape<C::BN, C::BK, C::NT>::per_thread];
    const int64_t ktiles = gemm_cdiv(p.k, C::BK);
    if (ktiles > 0) {
        gemm_tile_fetch<C::BM, C::BK, C::NT, !TA, VEC>(p.a, p.lda, p.m, p.k, m0, 0, tid, va);
        gemm_tile_fetch<C::BN, C::BK, C::NT, TB, VEC>(p.b, p.ldb, p.n, p.k, n0, 0, tid, vb);
        gemm_tile_store<C::BM, C::BK, C::NT, !TA>(smem, tid, va);
        gemm_tile_store<C::BN, C::BK, C::NT, TB>(smem + C::BK * C::LA, tid, vb);
        __syncthreads();
    }
    for (int64_t t = 0; t < ktiles; t++) {
        float *cur = smem + (t & 1) * C::STAGE;
        float *nxt = smem + ((t + 1) & 1) * C::STAGE;
        bool more = t + 1 < ktiles;
        if (more) { /* issue the next tile's loads now; they land while we compute */
            int64_t k0 = (t + 1) * C::BK;
            gemm_tile_fetch<C::BM, C::BK, C::NT, !TA, VEC>(p.a, p.lda, p.m, p.k, m0, k0, tid, va);
            gemm_tile_fetch<C::BN, C::BK, C::NT, TB, VEC>(p.b, p.ldb, p.n, p.k, n0, k0, tid, vb);
        }
        dbuf_compute<C>(cur, cur + C::BK * C::LA, am, bn, acc);
        if (more) { /* the other stage was last read before the previous barrier: free */
            gemm_tile_store<C::BM, C::BK, C::NT, !TA>(nxt, tid, va);
            gemm_tile_store<C::BN, C::BK, C::NT, TB>(nxt + C::BK * C::LA, tid, vb);
        }
        __syncthreads();
    }
    dbuf_epilogue<C>(p, cvec, m0 + am, n0 + bn, acc);
}

template <typename C, bool TA, bool TB, bool VEC>
static cudaError_t dbuf_go(const gemm_args<float> &p, cudaStream_t s)
{
    int64_t blocks = gemm_cdiv(p.m, C::BM) * gemm_cdiv(p.n, C::BN);
    if (blocks > INT32_MAX)
        return cudaErrorInvalidConfiguration;
    cudaError_t e = cudaFuncSetAttribute(gemm_dbuf_kernel<C, TA, TB, VEC>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SMEM);
    if (e != cudaSuccess)
        return e;
    gemm_dbuf_kernel<C, TA, TB, VEC><<<(unsigned)blocks, C::NT, C::SMEM, s>>>(p, gemm_vec_ok(p.c, p.n));
    return gemm_launched();
}

template <typename C, bool TA, bool TB>
static cudaError_t dbuf_vec_or_not(const gemm_args<float> &p, cudaStream_t s)
{
    if (gemm_vec_ok(p.a, p.lda) && gemm_vec_ok(p.b, p.ldb))
        return dbuf_go<C, TA, TB, true>(p, s);
    return dbuf_go<C, TA, TB, false>(p, s);
}

template <typename C>
static cudaError_t dbuf_launch(const gemm_args<float> &p, cudaStream_t s)
{
    if (!p.ta && !p.tb)
        return dbuf_vec_or_not<C, false, false>(p, s);
    if (p.ta && !p.tb)
        return dbuf_vec_or_not<C, true, false>(p, s);
    if (!p.ta && p.tb)
        return dbuf_vec_or_not<C, false, true>(p, s);
    return dbuf_vec_or_not<C, true, true>(p, s);
}

/* The shipped configuration, and the candidates bench/gemm.cu compares it with. */
typedef dbuf_cfg<128, 128, 8, 2, 4, 8, 2, 2, 2> dbuf_main;
typedef dbuf_cfg<128, 128, 16, 2, 4, 8, 2, 2, 2> dbuf_bk16;
typedef dbuf_cfg<128, 256, 8, 2, 4, 8, 2, 4, 1> dbuf_128x256;
typedef dbuf_cfg<256, 128, 8, 4, 2, 4, 4, 2, 1> dbuf_256x128;
typedef dbuf_cfg<128, 128, 8, 4, 2, 4, 2, 2, 2> dbuf_w32x64;

static cudaError_t dbuf_pick(const cr_gemm_dev *g, cr_dtype dt, int variant, gemm_args<float> *p)
{
    bool nothing;
    cudaError_t e = gemm_check(g, &nothing);
    if (e != cudaSuccess)
        return e;
    if (dt != CR_DT_F32)
        return cudaErrorNotSupported;
    if (nothing)
        return cudaErrorNotReady; /* nothing to launch: the caller answers success */
    *p = gemm_make_args<float>(g);
    /* tuning candidates are built for the common untransposed, aligned case only */
    if (variant != 0 && (p->ta || p->tb || !gemm_vec_ok(p->a, p->lda) || !gemm_vec_ok(p->b, p->ldb)))
        return cudaErrorNotSupported;
    return cudaSuccess;
}

extern "C" cudaError_t cr_cuda_gemm_dbuf(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s)
{
    gemm_args<float> p;
    cudaError_t e = dbuf_pick(g, dt, 0, &p);
    if (e == cudaErrorNotReady)
        return cudaSuccess;
    if (e != cudaSuccess)
        return e;
    return dbuf_launch<dbuf_main>(p, s);
}

/* Tuning hook for bench/gemm.cu only (not in cuda_kernels.h): variant 0 is the shipped
 * kernel, 1.. the candidates above, untransposed aligned inputs only. */
extern "C" cudaError_t cr_cuda_gemm_dbuf_variant(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s,
                                                 int variant)
{
    gemm_args<float> p;
    cudaError_t e = dbuf_pick(g, dt, variant, &p);
    if (e == cudaErrorNotReady)
        return cudaSuccess;
    if (e != cudaSuccess)
        return e;
    switch (variant) {
    case 0: return dbuf_launch<dbuf_main>(p, s);
    case 1: return dbuf_go<dbuf_bk16, false, false, true>(p, s);
    case 2: return dbuf_go<dbuf_128x256, false, false, true>(p, s);
    case 3: return dbuf_go<dbuf_256x128, false, false, true>(p, s);
    case 4: return dbuf_go<dbuf_w32x64, false, false, true>(p, s);
    default: return cudaErrorInvalidValue;
    }
}
