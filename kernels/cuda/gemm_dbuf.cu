/* GEMM, double-buffered and warp-tiled: our fastest FP32 kernel (exact FP32 FFMA, no tensor
 * cores).
 *
 * Structure (see bench/NOTES-gemm.md for the measurements behind each choice):
 *  - a block owns a BM×BN tile of C (256×128 for large C, smaller tiles where those fill the
 *    SMs better: dbuf_auto); each warp owns a WM×WN warp tile and each thread a (4·QM)×(4·QN)
 *    register tile (16×8 at 256×128), split into 4×4 quadrants 4·LM rows / 4·LN
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
#include "kernels/cuda/gemm_common.cuh"

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

/* A thread's cursor over its share of one operand's tiles (same split as gemm_tile_fetch):
 * the pointers and the o-bounds are worked out once, so each k-tile costs one pointer add
 * and one k comparison per group instead of 64-bit index arithmetic (registers are the
 * scarce resource at 2 blocks of 256 threads per SM). */
template <int BO, int BK, int NT, bool KCONTIG>
struct dbuf_src {
    static constexpr int PT = gemm_tile_shape<BO, BK, NT>::per_thread;
    const float *ptr[PT];
    int krow[PT];  /* the group's k offset inside a tile */
    int o_rem[PT]; /* how many of the group's 4 o positions exist: 0..4 */
    int64_t step;  /* floats from one k-tile to the next */
};

template <int BO, int BK, int NT, bool KCONTIG>
__device__ __forceinline__ void dbuf_src_init(dbuf_src<BO, BK, NT, KCONTIG> &s, const float *x, int64_t ld,
                                              int64_t O, int64_t o0, int tid)
{
#pragma unroll
    for (int g = 0; g < s.PT; g++) {
        int e = tid + g * NT;
        int64_t o = KCONTIG ? o0 + e / (BK / 4) : o0 + (e % (BO / 4)) * 4;
        int kk = KCONTIG ? (e % (BK / 4)) * 4 : e / (BO / 4);
        int64_t rem = O - o;
        s.o_rem[g] = rem <= 0 ? 0 : rem >= 4 ? 4 : (int)rem;
        s.krow[g] = kk;
        /* out-of-range rows never dereference; clamp so the pointer stays inside the matrix */
        s.ptr[g] = x + (KCONTIG ? (rem > 0 ? o : 0) * ld + kk : (int64_t)kk * ld + (rem > 0 ? o : 0));
    }
    s.step = KCONTIG ? BK : BK * ld;
}

/* Fetch the k-tile starting at k0 into v and advance the cursor. */
template <int BO, int BK, int NT, bool KCONTIG, bool VEC>
__device__ __forceinline__ void dbuf_fetch(dbuf_src<BO, BK, NT, KCONTIG> &s, int64_t K, int64_t k0,
                                           float4 (&v)[gemm_tile_shape<BO, BK, NT>::per_thread])
{
#pragma unroll
    for (int g = 0; g < s.PT; g++) {
        int64_t kk = k0 + s.krow[g];
        const float *src = s.ptr[g];
        float4 r = make_float4(0.f, 0.f, 0.f, 0.f);
        if (VEC) {
            if (s.o_rem[g] > 0 && kk < K)
                r = __ldg((const float4 *)src);
        } else if (KCONTIG) {
            if (s.o_rem[g] > 0) {
                if (kk + 0 < K) r.x = __ldg(src + 0);
                if (kk + 1 < K) r.y = __ldg(src + 1);
                if (kk + 2 < K) r.z = __ldg(src + 2);
                if (kk + 3 < K) r.w = __ldg(src + 3);
            }
        } else if (kk < K) {
            if (s.o_rem[g] > 0) r.x = __ldg(src + 0);
            if (s.o_rem[g] > 1) r.y = __ldg(src + 1);
            if (s.o_rem[g] > 2) r.z = __ldg(src + 2);
            if (s.o_rem[g] > 3) r.w = __ldg(src + 3);
        }
        v[g] = r;
        s.ptr[g] = src + s.step;
    }
}


/* This thread's fragments for one k: 4·QM values of op(A), 4·QN of op(B), as float4 reads
 * of the k-major tiles. */
template <typename C>
__device__ __forceinline__ void dbuf_frag(const float *sa, const float *sb, int am, int bn, int kk,
                                          float (&av)[4 * C::QM], float (&bv)[4 * C::QN])
{
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
}

template <typename C>
__device__ __forceinline__ void dbuf_outer(const float (&av)[4 * C::QM], const float (&bv)[4 * C::QN],
                                           float (&acc)[4 * C::QM][4 * C::QN])
{
#pragma unroll
    for (int r = 0; r < 4 * C::QM; r++)
#pragma unroll
        for (int c = 0; c < 4 * C::QN; c++)
            acc[r][c] = fmaf(av[r], bv[c], acc[r][c]);
}

/* One k-tile of outer products from shared memory into the register tile. */
template <typename C>
__device__ __forceinline__ void dbuf_compute(const float *sa, const float *sb, int am, int bn,
                                             float (&acc)[4 * C::QM][4 * C::QN])
{
#pragma unroll
    for (int kk = 0; kk < C::BK; kk++) {
        float av[4 * C::QM], bv[4 * C::QN];
        dbuf_frag<C>(sa, sb, am, bn, kk, av, bv);
        dbuf_outer<C>(av, bv, acc);
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

/* Prefetch the next k-tile into registers, compute this one, store, one barrier. (A form that
 * also double-buffered the fragments across the barrier measured 11% slower: NOTES-gemm.md.) */
template <typename C, bool TA, bool TB, bool VEC>
__device__ __forceinline__ void dbuf_mainloop(const gemm_args<float> &p, float *smem, int tid, int am, int bn,
                                                 int64_t m0, int64_t n0, float (&acc)[4 * C::QM][4 * C::QN])
{
    dbuf_src<C::BM, C::BK, C::NT, !TA> sa;
    dbuf_src<C::BN, C::BK, C::NT, TB> sb;
    dbuf_src_init(sa, p.a, p.lda, p.m, m0, tid);
    dbuf_src_init(sb, p.b, p.ldb, p.n, n0, tid);
    float4 va[sa.PT], vb[sb.PT];
    const int64_t ktiles = gemm_cdiv(p.k, C::BK);
    dbuf_fetch<C::BM, C::BK, C::NT, !TA, VEC>(sa, p.k, 0, va);
    dbuf_fetch<C::BN, C::BK, C::NT, TB, VEC>(sb, p.k, 0, vb);
    gemm_tile_store<C::BM, C::BK, C::NT, !TA>(smem, tid, va);
    gemm_tile_store<C::BN, C::BK, C::NT, TB>(smem + C::BK * C::LA, tid, vb);
    __syncthreads();
    for (int64_t t = 0; t < ktiles; t++) {
        float *cur = smem + (t & 1) * C::STAGE;
        float *nxt = smem + ((t + 1) & 1) * C::STAGE;
        bool more = t + 1 < ktiles;
        if (more) { /* issue the next tile's loads now; they land while we compute */
            dbuf_fetch<C::BM, C::BK, C::NT, !TA, VEC>(sa, p.k, (t + 1) * C::BK, va);
            dbuf_fetch<C::BN, C::BK, C::NT, TB, VEC>(sb, p.k, (t + 1) * C::BK, vb);
        }
        dbuf_compute<C>(cur, cur + C::BK * C::LA, am, bn, acc);
        if (more) { /* the other stage was last read before the previous barrier: free */
            gemm_tile_store<C::BM, C::BK, C::NT, !TA>(nxt, tid, va);
            gemm_tile_store<C::BN, C::BK, C::NT, TB>(nxt + C::BK * C::LA, tid, vb);
        }
        __syncthreads();
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
    gemm_grouped_tile(GEMM_GROUP, gemm_cdiv(p.m, C::BM), gemm_cdiv(p.n, C::BN), &tm, &tn);
    const int64_t m0 = tm * C::BM, n0 = tn * C::BN;

    float acc[4 * C::QM][4 * C::QN];
#pragma unroll
    for (int r = 0; r < 4 * C::QM; r++)
#pragma unroll
        for (int c = 0; c < 4 * C::QN; c++)
            acc[r][c] = 0.f;
    if (p.k > 0)
        dbuf_mainloop<C, TA, TB, VEC>(p, smem, tid, am, bn, m0, n0, acc);
    dbuf_epilogue<C>(p, cvec, m0 + am, n0 + bn, acc);
}

template <typename C, bool TA, bool TB, bool VEC>
static cudaError_t dbuf_go(const gemm_args<float> &p, cudaStream_t s)
{
    int64_t blocks = gemm_cdiv(p.m, C::BM) * gemm_cdiv(p.n, C::BN);
    if (blocks > INT32_MAX)
        return cudaErrorInvalidConfiguration;
    /* over 48 KB needs an opt-in, once per kernel (it costs ~0.1 ms of host time per call) */
    static bool opted_in = false;
    if (C::SMEM > 48 * 1024 && !opted_in) {
        cudaError_t e = cudaFuncSetAttribute(gemm_dbuf_kernel<C, TA, TB, VEC>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SMEM);
        if (e != cudaSuccess)
            return e;
        opted_in = true;
    }
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

/* The shipped configurations (bench/NOTES-gemm.md has the measurements):
 *              BM   BN   BK warps  LM QM QN minB
 * big:   256×128 tile, 256 threads of 16×8: the fastest at 4096³/8192³ (fewest shared loads
 *        per FMA: 6 float4 per 128 FMAs), one block per SM (245 registers).
 * mid:   128×128 tile, 128 threads of 16×8, two blocks per SM.
 * small: 64×64×8 tile, 64 threads of 8×8, six blocks per SM: for small C, where only many
 *        blocks fill the SMs, and where its finer waves beat big's (dbuf_auto). */
typedef dbuf_cfg<256, 128, 16, 4, 2, 4, 4, 2, 1> dbuf_big;
typedef dbuf_cfg<128, 128, 8, 2, 2, 4, 4, 2, 2> dbuf_mid;
typedef dbuf_cfg<64, 64, 8, 1, 2, 8, 2, 2, 6> dbuf_small;

/* Blocks of configuration C that fit on one SM at once (registers, shared memory), asked
 * once: the answer depends on the kernel's resources only (one GPU type per process). */
template <typename C>
static int dbuf_resident(void)
{
    static int cached = 0; /* a race writes the same value twice: harmless */
    if (cached == 0) {
        int n = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, gemm_dbuf_kernel<C, false, false, true>, C::NT,
                                                          C::SMEM) != cudaSuccess || n < 1)
            n = 1;
        cached = n;
    }
    return cached;
}

/* Predicted time of configuration C, in arbitrary units: whole waves of resident blocks times
 * the time of one wave (a block's tile area × blocks sharing an SM / the configuration's
 * measured full-load speed, relative to big). Wave quantization is what matters between
 * 1000² and 4000²: a 3072² C is 288 big tiles = 2.2 waves on 132 SMs, 27% of the last wave
 * idle, while small tiles fill 2.9 waves. */
template <typename C>
static double dbuf_cost(const gemm_args<float> &p, int sms, double speed)
{
    int64_t blocks = gemm_cdiv(p.m, C::BM) * gemm_cdiv(p.n, C::BN);
    int64_t slots = (int64_t)sms * dbuf_resident<C>();
    double waves = (double)gemm_cdiv(blocks, slots);
    return waves * C::BM * C::BN * dbuf_resident<C>() / speed;
}

/* Pick the configuration with the least predicted time. Speeds measured at 8192³ on the
 * H100 (bench/NOTES-gemm.md): big 49.7, mid 47.8, small 44.3 TFLOP/s. */
static cudaError_t dbuf_auto(const gemm_args<float> &p, cudaStream_t s)
{
    int dev = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess)
        return e;
    double big = dbuf_cost<dbuf_big>(p, sms, 1.0);
    double mid = dbuf_cost<dbuf_mid>(p, sms, 0.96);
    double small = dbuf_cost<dbuf_small>(p, sms, 0.89);
    if (big <= mid && big <= small)
        return dbuf_launch<dbuf_big>(p, s);
    if (mid <= small)
        return dbuf_launch<dbuf_mid>(p, s);
    return dbuf_launch<dbuf_small>(p, s);
}

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
    if (variant < 0 || variant > 3)
        return cudaErrorInvalidValue;
    *p = gemm_make_args<float>(g);
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
    return dbuf_auto(p, s);
}

/* Tuning hook for bench/gemm.cu only (not in cuda_kernels.h): variant 0 is the shipped
 * choice, 1..3 force big, mid, small (so that tests/gpu/gemm.cu checks each of them). */
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
    case 0: return dbuf_auto(p, s);
    case 1: return dbuf_launch<dbuf_big>(p, s);
    case 2: return dbuf_launch<dbuf_mid>(p, s);
    case 3: return dbuf_launch<dbuf_small>(p, s);
    default: return cudaErrorInvalidValue;
    }
}
