/* GEMM, double-buffered and warp-tiled: our fastest FP32 kernel (exact FP32 FFMA, no tensor
 * cores).
 *
 * Structure (see bench/NOTES-gemm.md for the measurements behind each choice):
 *  - a block owns a BM×BN tile of C (256×128 for large C, smaller tiles where those fill the
 *    SMs better: dbuf_plan_for); each warp owns a WM×WN warp tile and each thread a (4·QM)×(4·QN)
 *    register tile (16×8 at 256×128), split into 4×4 quadrants 4·LM rows / 4·LN
 *    columns apart. Within a warp, the LM×LN lanes then read consecutive float4 of the
 *    k-major shared tiles: no bank conflicts, and lanes sharing rows get broadcasts.
 *  - two shared-memory stages: while the block computes on stage t, each thread already has
 *    the global loads of stage t+1 in flight (into registers) and stores them into the other
 *    stage afterwards (big: one group per k step over the tile's last steps), so global
 *    latency hides behind a whole tile of FMAs and one barrier per k-tile suffices.
 *  - big's FFMA order is chosen for the operand reuse caches (dbuf_outer; ptxas keeps it): with
 *    the spread stores, that closed most of big's gap to cuBLAS's FFMA kernel.
 *  - op(A) and op(B) both live k-major in shared memory (gemm_common.cuh): the transposes
 *    are handled while staging, by template, so the inner loop is the same for all four
 *    trans_a/trans_b combinations.
 *  - blocks are visited in groups of GEMM_GROUP tile-rows (a 1-D grid, remapped) so that the
 *    blocks resident at one time share A and B panels in L2 instead of streaming all of B.
 *  - float4 global loads and C stores when the pointers and leading dimensions allow; any
 *    other case takes the checked scalar path (still correct, slower). FP32 only.
 *  - split-K for small C with long K (a grid under one wave, each block walking all of K): with
 *    a workspace (the registry row's scratch), grid row y computes K slice y of every tile into
 *    workspace slice y, and a second kernel sums the slices in the fixed order 0..S-1, then
 *    applies alpha and beta·C: bit-identical run to run, no atomics. dbuf_plan_for says when and
 *    how many slices; without a workspace (or too small a one) it never splits.
 *  - tail stream-K for big without a split: with a workspace that holds its slots, the whole
 *    waves run as above and the last partial wave's tiles are shared among one full wave of
 *    blocks, fixed up in block order (gemm_dbuf_sk_kernel, dbuf_sk_fixup, dbuf_sk_make). */
#include "kernels/cuda/gemm_common.cuh"
#include "kernels/cuda/smem_opt_in.cuh"

#define GEMM_GROUP 8

/* IL: the main loop of bench/NOTES-gemm.md's 2026-11-26 section (FFMAs row by row with the
 * columns serpentine, the next tile's staged groups stored one per k step between them). Big
 * only: it made big 4% faster; mid gained 4% at 4096³ but lost 23% at 1000³ (a block alone on
 * its SM, where the earlier stores wait on the global loads), and small lost 12% at 4096³. */
template <int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_, int LM_, int QM_, int QN_, int MINB_, bool IL_>
struct dbuf_cfg {
    static constexpr int BM = BM_, BN = BN_, BK = BK_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;
    static constexpr int LM = LM_, LN = 32 / LM_, QM = QM_, QN = QN_, MINB = MINB_;
    static constexpr bool IL = IL_;
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

/* One k step's outer product. ptxas keeps a row's av[r] in the operand reuse cache across the
 * row; with IL, odd rows run their columns backwards, so each row also starts on the bv value
 * the previous row ended on (still cached). That more than halves the FFMAs that read all three
 * operands from the register file, two of them from one bank (277 -> 130 of 2048 per k-tile at
 * big; ncu's dispatch_stall per instruction fell with it, 0.18 -> 0.12 where measured). */
template <typename C>
__device__ __forceinline__ void dbuf_outer(const float (&av)[4 * C::QM], const float (&bv)[4 * C::QN],
                                           float (&acc)[4 * C::QM][4 * C::QN])
{
#pragma unroll
    for (int r = 0; r < 4 * C::QM; r++)
#pragma unroll
        for (int cc = 0; cc < 4 * C::QN; cc++) {
            const int c = (C::IL && (r & 1)) ? 4 * C::QN - 1 - cc : cc;
            acc[r][c] = fmaf(av[r], bv[c], acc[r][c]);
        }
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

/* dbuf_compute, with the next tile's staged groups stored into nxt one per k step over the last
 * steps, between FFMAs: bunched after them, most of the 18 stores of a big k-tile held the warp
 * 4 cycles each (ptxas's issue spacing for shared stores). */
template <typename C, bool TA, bool TB>
__device__ __forceinline__ void dbuf_compute_store(const float *cur, float *nxt, int tid, int am, int bn,
                                                   const float4 (&va)[gemm_tile_shape<C::BM, C::BK, C::NT>::per_thread],
                                                   const float4 (&vb)[gemm_tile_shape<C::BN, C::BK, C::NT>::per_thread],
                                                   float (&acc)[4 * C::QM][4 * C::QN])
{
    constexpr int PA = gemm_tile_shape<C::BM, C::BK, C::NT>::per_thread;
    constexpr int PB = gemm_tile_shape<C::BN, C::BK, C::NT>::per_thread;
    constexpr int FIRST = C::BK - 1 - PA - PB; /* k step of the first store */
    static_assert(FIRST >= 0, "one k step per staged group");
#pragma unroll
    for (int kk = 0; kk < C::BK; kk++) {
        float av[4 * C::QM], bv[4 * C::QN];
        dbuf_frag<C>(cur, cur + C::BK * C::LA, am, bn, kk, av, bv);
#pragma unroll
        for (int g = 0; g < PA; g++)
            if (kk == FIRST + g)
                gemm_tile_store_group<C::BM, C::BK, C::NT, !TA>(nxt, tid, g, va[g]);
#pragma unroll
        for (int g = 0; g < PB; g++)
            if (kk == FIRST + PA + g)
                gemm_tile_store_group<C::BN, C::BK, C::NT, TB>(nxt + C::BK * C::LA, tid, g, vb[g]);
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
        if (C::IL) {
            /* unconditional: on the last tile this stores stale values into the stage nobody
             * reads again, and keeps the stores free of a branch inside the k steps */
            dbuf_compute_store<C, TA, TB>(cur, nxt, tid, am, bn, va, vb, acc);
        } else {
            dbuf_compute<C>(cur, cur + C::BK * C::LA, am, bn, acc);
            if (more) { /* the other stage was last read before the previous barrier: free */
                gemm_tile_store<C::BM, C::BK, C::NT, !TA>(nxt, tid, va);
                gemm_tile_store<C::BN, C::BK, C::NT, TB>(nxt + C::BK * C::LA, tid, vb);
            }
        }
        __syncthreads();
    }
}
/* Split-K: grid row y computes K slice y (kspan elements, a multiple of BK; the last one may be
 * shorter) of its tile, unscaled, into workspace slice y (m×n, dense). Seen from the block this
 * is the GEMM of that k-range alone with alpha 1 and beta 0, so the main loop is unchanged.
 * Moving the base pointers by a multiple of BK (so of 4 floats) along k keeps the float4
 * alignment the host checked for the whole matrices (k-contiguous: +k0; otherwise +k0·ld with
 * ld % 4 == 0 on the VEC path). */
template <bool TA, bool TB>
__device__ __forceinline__ void dbuf_slice(gemm_args<float> &p, float *work, int64_t kspan)
{
    const int64_t s = blockIdx.y, k0 = s * kspan;
    p.a += TA ? k0 * p.lda : k0;
    p.b += TB ? k0 : k0 * p.ldb;
    p.k = p.k - k0 < kspan ? p.k - k0 : kspan;
    p.c = work + s * p.m * p.n;
    p.alpha = 1.f; /* 1·acc is exact: the partial is the raw sum */
    p.beta = 0.f;  /* the workspace is never read here */
}

/* This thread's first row and column in its block's tile: consecutive lanes take consecutive
 * columns. */
template <typename C> __device__ __forceinline__ void dbuf_thread_origin(int tid, int *am, int *bn)
{
    const int lane = tid % 32, warp = tid / 32;
    *am = (warp / C::WARPS_N) * C::WM + (lane / C::LN) * 4;
    *bn = (warp % C::WARPS_N) * C::WN + (lane % C::LN) * 4;
}

template <typename C> __device__ __forceinline__ void dbuf_zero(float (&acc)[4 * C::QM][4 * C::QN])
{
#pragma unroll
    for (int r = 0; r < 4 * C::QM; r++)
#pragma unroll
        for (int c = 0; c < 4 * C::QN; c++)
            acc[r][c] = 0.f;
}

template <typename C, bool TA, bool TB, bool VEC, bool SPLIT>
__global__ void __launch_bounds__(C::NT, C::MINB)
    gemm_dbuf_kernel(gemm_args<float> p, bool cvec, float *work, int64_t kspan)
{
    extern __shared__ float4 dbuf_smem4[];
    float *smem = (float *)dbuf_smem4;
    if (SPLIT)
        dbuf_slice<TA, TB>(p, work, kspan);
    const int tid = threadIdx.x;
    int am, bn;
    dbuf_thread_origin<C>(tid, &am, &bn);
    int64_t tm, tn;
    gemm_grouped_tile(GEMM_GROUP, gemm_cdiv(p.m, C::BM), gemm_cdiv(p.n, C::BN), &tm, &tn);
    const int64_t m0 = tm * C::BM, n0 = tn * C::BN;

    float acc[4 * C::QM][4 * C::QN];
    dbuf_zero<C>(acc);
    if (p.k > 0)
        dbuf_mainloop<C, TA, TB, VEC>(p, smem, tid, am, bn, m0, n0, acc);
    if (SPLIT) /* the reduction may be launched now; it still waits for this grid to finish */
        asm volatile("griddepcontrol.launch_dependents;");
    dbuf_epilogue<C>(p, cvec, m0 + am, n0 + bn, acc);
}

/* The second pass of split-K: C = alpha·(W[0] + W[1] + ... + W[S-1]) + beta·C over the m·n
 * elements (C is dense, so one flat index), the slices always added in the order 0, 1, ..., S-1
 * by one thread per element (or float4): the same bits on every run, no atomics. C is read only
 * when beta != 0 (it may hold NaN otherwise). The partials sit in L2: each thread loads up to
 * DBUF_REDUCE_BATCH of them before the first add, so an element costs ceil(S / 16) L2 round
 * trips, not S. */
#define DBUF_REDUCE_BATCH 16

__device__ __forceinline__ float dbuf_add(float a, float b) { return a + b; }
__device__ __forceinline__ float4 dbuf_add(float4 a, float4 b)
{
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

/* alpha·acc, then + beta·C, as gemm_store and gemm_store4 do */
__device__ __forceinline__ void dbuf_put(float *c, float acc, float alpha, float beta)
{
    float r = alpha * acc;
    if (beta != 0.f)
        r += beta * *c;
    *c = r;
}
__device__ __forceinline__ void dbuf_put(float4 *c, float4 acc, float alpha, float beta)
{
    float4 r = make_float4(alpha * acc.x, alpha * acc.y, alpha * acc.z, alpha * acc.w);
    if (beta != 0.f) {
        float4 o = *c;
        r.x += beta * o.x, r.y += beta * o.y, r.z += beta * o.z, r.w += beta * o.w;
    }
    *c = r;
}

/* ---- Stream-K on the last wave (big only; bench/NOTES-gemm.md "Tail stream-K") ----------------
 * Work is (tile, k-tile) units, tiles in dbuf's grouped order. The first dp tiles (whole waves)
 * run as today, gemm_dbuf_kernel over a grid of dp blocks (the same kernel, so its code is
 * untouched). The units of the remaining tiles are shared evenly among `bs` blocks of
 * gemm_dbuf_sk_kernel (one full wave), each spanning at most two tiles. A segment covering a
 * whole tile writes C with the usual epilogue; any other segment writes its raw partial sum to a
 * BM×BN slot: slot 2x for block x's segment starting inside a tile, 2x+1 for one starting at
 * k = 0 and ending inside it. dbuf_sk_fixup then sums, per shared tile, the head's slot and the
 * slots of the following blocks in block order and writes alpha·sum + beta·C once (C read only
 * when beta != 0): fixed order, no atomics, bit-identical reruns. */
struct dbuf_sk_args {
    float *part;          /* 2·bs slots of BM·BN floats */
    int64_t dp, tiles, kt; /* tiles run whole, all tiles, k-tiles per tile */
    int64_t bs;           /* blocks sharing the tail */
};

template <typename C, bool TA, bool TB, bool VEC>
__global__ void __launch_bounds__(C::NT, C::MINB)
    gemm_dbuf_sk_kernel(gemm_args<float> p, bool cvec, dbuf_sk_args s)
{
    extern __shared__ float4 dbuf_smem4[];
    float *smem = (float *)dbuf_smem4;
    const int tid = threadIdx.x;
    int am, bn;
    dbuf_thread_origin<C>(tid, &am, &bn);
    const int64_t tiles_m = gemm_cdiv(p.m, C::BM), tiles_n = gemm_cdiv(p.n, C::BN);
    const int64_t x = blockIdx.x, base = s.dp * s.kt, us = (s.tiles - s.dp) * s.kt;
    int64_t u = base + x * us / s.bs;
    const int64_t u_end = base + (x + 1) * us / s.bs;
    while (u < u_end) {
        const int64_t t = u / s.kt, kb = u - t * s.kt;
        const int64_t ke = u_end - t * s.kt < s.kt ? u_end - t * s.kt : s.kt;
        int64_t tm, tn;
        gemm_grouped_tile_of(GEMM_GROUP, tiles_m, tiles_n, t, &tm, &tn);
        const int64_t m0 = tm * C::BM, n0 = tn * C::BN;
        gemm_args<float> q = p;
        const int64_t k0 = kb * C::BK;
        q.a += TA ? k0 * p.lda : k0;
        q.b += TB ? k0 : k0 * p.ldb;
        q.k = p.k - k0 < (ke - kb) * C::BK ? p.k - k0 : (ke - kb) * C::BK;
        float acc[4 * C::QM][4 * C::QN];
        dbuf_zero<C>(acc);
        dbuf_mainloop<C, TA, TB, VEC>(q, smem, tid, am, bn, m0, n0, acc);
        if (kb == 0 && ke == s.kt) {
            dbuf_epilogue<C>(p, cvec, m0 + am, n0 + bn, acc);
        } else {
            float *slot = s.part + (2 * x + (kb > 0 ? 0 : 1)) * (int64_t)(C::BM * C::BN);
#pragma unroll
            for (int r = 0; r < 4 * C::QM; r++)
#pragma unroll
                for (int qq = 0; qq < C::QN; qq++)
                    *(float4 *)&slot[(am + (r / 4) * 4 * C::LM + r % 4) * C::BN + bn + qq * 4 * C::LN] =
                        make_float4(acc[r][4 * qq], acc[r][4 * qq + 1], acc[r][4 * qq + 2], acc[r][4 * qq + 3]);
        }
        u = t * s.kt + ke;
    }
}

/* One thread per 4 consecutive elements of a row of a shared tile (BM·BN/4/256 blocks a tile). */
#define DBUF_FIX_THREADS 256
template <typename C>
__global__ void __launch_bounds__(DBUF_FIX_THREADS) dbuf_sk_fixup(gemm_args<float> p, bool cvec, dbuf_sk_args s)
{
    constexpr int PER_TILE = C::BM * C::BN / 4 / DBUF_FIX_THREADS;
    const int64_t t = s.dp + blockIdx.x / PER_TILE;
    const int64_t base = s.dp * s.kt, us = (s.tiles - s.dp) * s.kt;
    const int64_t first = t * s.kt - base, last = first + s.kt - 1;
    /* block x holds units [x·us/bs, (x+1)·us/bs): the blocks of the tile's first and last unit */
    const int64_t b_lo = ((first + 1) * s.bs - 1) / us, b_hi = ((last + 1) * s.bs - 1) / us;
    if (b_lo == b_hi)
        return; /* one block did the whole tile and wrote it */
    const int e = ((blockIdx.x % PER_TILE) * DBUF_FIX_THREADS + threadIdx.x) * 4;
    const int r = e / C::BN, c = e % C::BN;
    int64_t tm, tn;
    gemm_grouped_tile_of(GEMM_GROUP, gemm_cdiv(p.m, C::BM), gemm_cdiv(p.n, C::BN), t, &tm, &tn);
    const int64_t i = tm * C::BM + r, j = tn * C::BN + c;
    if (i >= p.m || j >= p.n)
        return;
    float4 v = *(const float4 *)&s.part[(2 * b_lo + 1) * (int64_t)(C::BM * C::BN) + e];
    for (int64_t b = b_lo + 1; b <= b_hi; b++)
        v = dbuf_add(v, *(const float4 *)&s.part[2 * b * (int64_t)(C::BM * C::BN) + e]);
    gemm_store4(p, cvec, i, j, v);
}

/* T: float, or float4 when the workspace and C are 16-byte aligned and m·n % 4 == 0. stride:
 * elements of T from one slice to the next. */
template <typename T>
__global__ void __launch_bounds__(256) dbuf_reduce_kernel(const T *__restrict__ work, int slices, int64_t stride,
                                                          float alpha, float beta, T *__restrict__ c)
{
    /* launched as a programmatic dependent of the split GEMM (dbuf_reduce): it starts while the
     * GEMM's last blocks finish, and waits here until the whole grid is done and its partials
     * are visible */
    asm volatile("griddepcontrol.wait;" ::: "memory");
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < stride; i += step) {
        T acc = work[i];
        for (int s0 = 1; s0 < slices; s0 += DBUF_REDUCE_BATCH) {
            T v[DBUF_REDUCE_BATCH];
#pragma unroll
            for (int j = 0; j < DBUF_REDUCE_BATCH; j++)
                if (s0 + j < slices)
                    v[j] = work[(s0 + j) * stride + i];
#pragma unroll
            for (int j = 0; j < DBUF_REDUCE_BATCH; j++)
                if (s0 + j < slices)
                    acc = dbuf_add(acc, v[j]);
        }
        dbuf_put(c + i, acc, alpha, beta);
    }
}

/* How a launch splits K: `slices` slices of kspan elements (1: no split, work unused). */
typedef struct {
    float *work;
    int64_t slices, kspan;
    int sms;
} dbuf_split;

/* The reduction as a programmatic dependent launch of the split GEMM on the same stream; where
 * the attribute is refused, a plain launch (stream order alone). */
template <typename T>
static cudaError_t dbuf_reduce_launch(const T *work, int slices, int64_t stride, float alpha, float beta, T *c,
                                      int sms, cudaStream_t s)
{
    const int64_t cap = (int64_t)sms * 8, want = gemm_cdiv(stride, 256);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(want < cap ? want : cap));
    cfg.blockDim = dim3(256);
    cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    if (cudaLaunchKernelEx(&cfg, dbuf_reduce_kernel<T>, work, slices, stride, alpha, beta, c) == cudaSuccess)
        return cudaSuccess;
    (void)cudaGetLastError(); /* not sticky: a launch refused for its configuration */
    dbuf_reduce_kernel<T><<<cfg.gridDim, cfg.blockDim, 0, s>>>(work, slices, stride, alpha, beta, c);
    return gemm_launched();
}

static cudaError_t dbuf_reduce(const gemm_args<float> &p, const dbuf_split &sp, cudaStream_t s)
{
    const int64_t mn = p.m * p.n;
    if (gemm_aligned16(sp.work) && gemm_aligned16(p.c) && mn % 4 == 0)
        return dbuf_reduce_launch<float4>((const float4 *)sp.work, (int)sp.slices, mn / 4, p.alpha, p.beta,
                                          (float4 *)p.c, sp.sms, s);
    return dbuf_reduce_launch<float>(sp.work, (int)sp.slices, mn, p.alpha, p.beta, p.c, sp.sms, s);
}

template <typename C, bool TA, bool TB, bool VEC, bool SPLIT>
static cudaError_t dbuf_go(const gemm_args<float> &p, const dbuf_split &sp, cudaStream_t s)
{
    int64_t blocks = gemm_cdiv(p.m, C::BM) * gemm_cdiv(p.n, C::BN);
    if (blocks > INT32_MAX)
        return cudaErrorInvalidConfiguration;
    static cr_smem_opt_in opted;
    if (C::SMEM > 48 * 1024) {
        cudaError_t e = cr_opt_in_smem(opted, gemm_dbuf_kernel<C, TA, TB, VEC, SPLIT>, C::SMEM);
        if (e != cudaSuccess)
            return e;
    }
    const dim3 grid((unsigned)blocks, SPLIT ? (unsigned)sp.slices : 1u);
    const bool cvec = gemm_vec_ok(SPLIT ? sp.work : p.c, p.n); /* slice s starts s·m·n floats in */
    gemm_dbuf_kernel<C, TA, TB, VEC, SPLIT><<<grid, C::NT, C::SMEM, s>>>(p, cvec, sp.work, sp.kspan);
    cudaError_t e = gemm_launched();
    if (e != cudaSuccess || !SPLIT)
        return e;
    return dbuf_reduce(p, sp, s);
}

template <typename C, bool TA, bool TB>
static cudaError_t dbuf_vec_or_not(const gemm_args<float> &p, const dbuf_split &sp, cudaStream_t s)
{
    bool vec = gemm_vec_ok(p.a, p.lda) && gemm_vec_ok(p.b, p.ldb);
    if (sp.slices > 1)
        return vec ? dbuf_go<C, TA, TB, true, true>(p, sp, s) : dbuf_go<C, TA, TB, false, true>(p, sp, s);
    return vec ? dbuf_go<C, TA, TB, true, false>(p, sp, s) : dbuf_go<C, TA, TB, false, false>(p, sp, s);
}

template <typename C>
static cudaError_t dbuf_launch(const gemm_args<float> &p, const dbuf_split &sp, cudaStream_t s)
{
    if (!p.ta && !p.tb)
        return dbuf_vec_or_not<C, false, false>(p, sp, s);
    if (p.ta && !p.tb)
        return dbuf_vec_or_not<C, true, false>(p, sp, s);
    if (!p.ta && p.tb)
        return dbuf_vec_or_not<C, false, true>(p, sp, s);
    return dbuf_vec_or_not<C, true, true>(p, sp, s);
}

/* The shipped configurations (bench/NOTES-gemm.md has the measurements):
 *              BM   BN   BK warps  LM QM QN minB IL
 * big:   256×128 tile, 256 threads of 16×8: the fastest at 4096³/8192³ (fewest shared loads
 *        per FMA: 6 float4 per 128 FMAs), one block per SM (248 registers).
 * mid:   128×128 tile, 128 threads of 16×8, two blocks per SM.
 * small: 64×64×8 tile, 64 threads of 8×8, six blocks per SM: for small C, where only many
 *        blocks fill the SMs, and where its finer waves beat big's (dbuf_plan_for). */
typedef dbuf_cfg<256, 128, 16, 4, 2, 4, 4, 2, 1, true> dbuf_big;
typedef dbuf_cfg<128, 128, 8, 2, 2, 4, 4, 2, 2, false> dbuf_mid;
typedef dbuf_cfg<64, 64, 8, 1, 2, 8, 2, 2, 6, false> dbuf_small;
enum { DBUF_AUTO, DBUF_BIG, DBUF_MID, DBUF_SMALL };

/* Blocks of configuration C that fit on one SM at once (registers, shared memory), asked
 * once: the answer depends on the kernel's resources only (one GPU type per process). */
template <typename C>
static int dbuf_resident(void)
{
    static int cached = 0; /* a race writes the same value twice: harmless */
    if (cached == 0) {
        int n = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, gemm_dbuf_kernel<C, false, false, true, false>,
                                                          C::NT, C::SMEM) != cudaSuccess ||
            n < 1)
            n = 1;
        cached = n;
    }
    return cached;
}

/* Predicted time of configuration C without a split, in arbitrary units: whole waves of
 * resident blocks times the time of one wave (a block's tile area × blocks sharing an SM / the
 * configuration's measured full-load speed, relative to big). Wave quantization is what matters
 * between 1000² and 4000²: a 3072² C is 288 big tiles = 2.2 waves on 132 SMs, 27% of the last
 * wave idle, while small tiles fill 2.9 waves. */
template <typename C>
static double dbuf_cost(const gemm_args<float> &p, int sms, double speed)
{
    int64_t blocks = gemm_cdiv(p.m, C::BM) * gemm_cdiv(p.n, C::BN);
    int64_t slots = (int64_t)sms * dbuf_resident<C>();
    double waves = (double)gemm_cdiv(blocks, slots);
    return waves * C::BM * C::BN * dbuf_resident<C>() / speed;
}

/* A launch's configuration and K split (dbuf_plan_for). */
typedef struct {
    int cfg;               /* DBUF_BIG, DBUF_MID or DBUF_SMALL */
    int64_t slices, kspan; /* slices 1: no split, kspan = K */
} dbuf_plan;

/* Slices of ceil(ktiles / want) k-tiles each: no slice empty, so there may be fewer than want. */
template <typename C>
static dbuf_plan dbuf_slices(const gemm_args<float> &p, int cfg, int64_t want)
{
    const int64_t ktiles = gemm_cdiv(p.k, C::BK);
    const int64_t per = ktiles > 0 && want > 1 ? gemm_cdiv(ktiles, want) : (ktiles > 0 ? ktiles : 1);
    dbuf_plan pl = {cfg, ktiles > 0 ? gemm_cdiv(ktiles, per) : 1, per * C::BK};
    return pl;
}

/* ---- split-K: when and how many slices ------------------------------------------------------
 * Considered only where the plan above leaves the GPU under one wave (its tiles fewer than its
 * resident slots) and a workspace is given. There every configuration and slice count is timed
 * by a model of the sub-wave regime, in microseconds, fitted to the forced (configuration,
 * slices) sweep at M=N=128..2048, K=1024 on an H200 (bench/gemm.cu `splitk`, 294 timings,
 * rms error 8%; bench/NOTES-gemm.md):
 *  - whole waves: the resident blocks' FMAs at the configuration's speed (DBUF_FMA_US per SM,
 *    scaled by dbuf_split_speed) plus DBUF_WAVE_US (first loads, epilogue, block start);
 *  - a last partial wave of b blocks on its busiest SM runs at the speed its warps reach: full
 *    from DBUF_FULL_WARPS warps, proportionally less below (two warps alone are issue-bound);
 *  - split-K adds the reduction: DBUF_REDUCE_US (its launch and latency) and DBUF_FLOAT_US per
 *    float through L2 per SM (the S partials written and read back, C written once).
 * The plan without a split is timed the same way and kept unless a split beats it. */
#define DBUF_FMA_US 188e3 /* FMAs per µs of one SM at big's speed (49.7 TFLOP/s on 132 SMs) */
#define DBUF_FULL_WARPS 4.0
#define DBUF_WAVE_US 2.0
#define DBUF_REDUCE_US 6.0
#define DBUF_FLOAT_US (18.0 / DBUF_FMA_US)
/* Limits: every slice keeps at least DBUF_MIN_KTILES k-tiles, at most DBUF_MAX_SLICES slices
 * (48 and 64 measured no faster than 32 at 128²×1024) and DBUF_MAX_WORK bytes of partials. */
#define DBUF_MIN_KTILES 4
#define DBUF_MAX_SLICES 32
#define DBUF_MAX_WORK ((int64_t)64 << 20)

/* speed relative to big in the sub-wave regime (K = 1024 fit; the small tile re-reads A and B
 * from L2 four times as often per FMA as big) */
static double dbuf_split_speed(int cfg) { return cfg == DBUF_BIG ? 1.0 : cfg == DBUF_MID ? 0.9 : 0.7; }

template <typename C>
static double dbuf_time_us(const gemm_args<float> &p, int sms, const dbuf_plan &pl)
{
    const int res = dbuf_resident<C>();
    const int64_t blocks = gemm_cdiv(p.m, C::BM) * gemm_cdiv(p.n, C::BN) * pl.slices;
    const int64_t slots = (int64_t)sms * res, full = blocks / slots, rest = blocks % slots;
    const double block = (double)C::BM * C::BN * (double)pl.kspan / (DBUF_FMA_US * dbuf_split_speed(pl.cfg));
    double t = (double)full * (res * block + DBUF_WAVE_US);
    if (rest > 0) {
        const int64_t b = gemm_cdiv(rest, sms);
        const double busy = (double)b * (C::NT / 32) / DBUF_FULL_WARPS;
        t += b * block / (busy < 1.0 ? busy : 1.0) + DBUF_WAVE_US;
    }
    if (pl.slices > 1)
        t += DBUF_REDUCE_US + DBUF_FLOAT_US * (double)(2 * pl.slices + 1) * (double)(p.m * p.n) / sms;
    return t;
}

static double dbuf_plan_us(const gemm_args<float> &p, int sms, const dbuf_plan &pl)
{
    switch (pl.cfg) {
    case DBUF_BIG: return dbuf_time_us<dbuf_big>(p, sms, pl);
    case DBUF_MID: return dbuf_time_us<dbuf_mid>(p, sms, pl);
    default: return dbuf_time_us<dbuf_small>(p, sms, pl);
    }
}

template <typename C>
static bool dbuf_under_wave(const gemm_args<float> &p, int sms)
{
    return gemm_cdiv(p.m, C::BM) * gemm_cdiv(p.n, C::BN) < (int64_t)sms * dbuf_resident<C>();
}

/* The slice counts worth a look for C: 2 up to the limits, none when C alone fills a wave. */
template <typename C>
static int64_t dbuf_max_slices(const gemm_args<float> &p, int sms)
{
    if (p.k <= 0 || !dbuf_under_wave<C>(p, sms))
        return 1;
    int64_t top = gemm_cdiv(p.k, C::BK) / DBUF_MIN_KTILES;
    const int64_t by_work = DBUF_MAX_WORK / (p.m * p.n * (int64_t)sizeof(float));
    top = top < by_work ? top : by_work;
    return top < DBUF_MAX_SLICES ? top : DBUF_MAX_SLICES;
}

/* Replace *best by C split into `want` slices (every count from 2 to the limits when want is
 * 0) where that is predicted faster. */
template <typename C>
static void dbuf_try_split(const gemm_args<float> &p, int sms, int cfg, int64_t want, dbuf_plan *best,
                           double *best_us)
{
    const int64_t lo = want > 0 ? want : 2, hi = want > 0 ? want : dbuf_max_slices<C>(p, sms);
    for (int64_t w = lo; w <= hi; w++) {
        dbuf_plan pl = dbuf_slices<C>(p, cfg, w);
        if (pl.slices != w && want == 0)
            continue; /* the same split as a smaller count */
        const double t = dbuf_plan_us(p, sms, pl);
        if (t < *best_us)
            *best = pl, *best_us = t;
    }
}

/* Plan p: cfg DBUF_AUTO or the one configuration allowed (tuning hooks); force_slices 0: the
 * rule's choice, 1: no split, more: that many slices (fewer where K has fewer k-tiles).
 * 1. Without a split, the configuration with the least whole-waves cost (dbuf_cost; speeds
 *    measured at 8192³ on the H100: big 49.7, mid 47.8, small 44.3 TFLOP/s; ties: the larger).
 * 2. With a workspace and that plan under one wave, split-K where the sub-wave model says so. */
static cudaError_t dbuf_plan_for(const gemm_args<float> &p, bool split, int cfg, int64_t force_slices,
                                 dbuf_plan *best, int *sms)
{
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess)
        return e;
    const bool big = cfg == DBUF_AUTO || cfg == DBUF_BIG, mid = cfg == DBUF_AUTO || cfg == DBUF_MID;
    const bool small = cfg == DBUF_AUTO || cfg == DBUF_SMALL;
    const double cb = big ? dbuf_cost<dbuf_big>(p, *sms, 1.0) : 1e300;
    const double cm = mid ? dbuf_cost<dbuf_mid>(p, *sms, 0.96) : 1e300;
    const double cs = small ? dbuf_cost<dbuf_small>(p, *sms, 0.89) : 1e300;
    if (cb <= cm && cb <= cs)
        *best = dbuf_slices<dbuf_big>(p, DBUF_BIG, 1);
    else if (cm <= cs)
        *best = dbuf_slices<dbuf_mid>(p, DBUF_MID, 1);
    else
        *best = dbuf_slices<dbuf_small>(p, DBUF_SMALL, 1);
    if (force_slices == 1 || (force_slices == 0 && !split))
        return cudaSuccess;
    const bool under = best->cfg == DBUF_BIG   ? dbuf_under_wave<dbuf_big>(p, *sms)
                       : best->cfg == DBUF_MID ? dbuf_under_wave<dbuf_mid>(p, *sms)
                                               : dbuf_under_wave<dbuf_small>(p, *sms);
    if (force_slices == 0 && !under)
        return cudaSuccess;
    double t = force_slices > 1 ? 1e300 : dbuf_plan_us(p, *sms, *best);
    if (big)
        dbuf_try_split<dbuf_big>(p, *sms, DBUF_BIG, force_slices, best, &t);
    if (mid)
        dbuf_try_split<dbuf_mid>(p, *sms, DBUF_MID, force_slices, best, &t);
    if (small)
        dbuf_try_split<dbuf_small>(p, *sms, DBUF_SMALL, force_slices, best, &t);
    return cudaSuccess;
}

static int64_t dbuf_work_of(const gemm_args<float> &p, const dbuf_plan &pl)
{
    return pl.slices > 1 ? pl.slices * p.m * p.n * (int64_t)sizeof(float) : 0;
}

static cudaError_t dbuf_run(const gemm_args<float> &p, const dbuf_plan &pl, int sms, void *work, cudaStream_t s)
{
    const dbuf_split sp = {(float *)work, pl.slices, pl.kspan, sms};
    switch (pl.cfg) {
    case DBUF_BIG: return dbuf_launch<dbuf_big>(p, sp, s);
    case DBUF_MID: return dbuf_launch<dbuf_mid>(p, sp, s);
    case DBUF_SMALL: return dbuf_launch<dbuf_small>(p, sp, s);
    default: return cudaErrorInvalidValue;
    }
}

/* ---- tail stream-K: plan and launch (big, no split) ------------------------------------------
 * bs == 0: not shared (run dbuf_big's whole tiles as before). The rule, as symtile's
 * s32_make_plan: whole tiles cost waves·kt k-tiles; sharing the last wave costs
 * (waves-1)·kt + ⌈tail·kt/bs⌉ + 1 k-tiles (the +1: a second tile's pipeline restart) plus the
 * fixup (the slots written and read back, the shared tiles of C read and written, at 2.5 TB/s)
 * and DBUF_SK_US of launches; a k-tile timed at DBUF_FMA_US. Shared when that predicts >= 1%
 * less. Measured (H100, NOTES-gemm.md "Tail stream-K"): the real gain is about half of this
 * prediction, because whole tiles' partial last wave runs faster than a full one (about
 * (0.5 + 0.5·fill) of its time); refitting the rule with that term is still to do. */
#define DBUF_SK_US 8.0
typedef struct {
    int64_t dp, tiles, kt, bs;
} dbuf_sk_plan;

enum { DBUF_SK_AUTO = 0, DBUF_SK_NEVER = 1, DBUF_SK_FORCE = 2 };

static dbuf_sk_plan dbuf_sk_make(const gemm_args<float> &p, int sms, int mode)
{
    typedef dbuf_big C;
    dbuf_sk_plan k = {0, 0, 0, 0};
    if (mode == DBUF_SK_NEVER || p.k <= 0)
        return k;
    const int64_t tiles = gemm_cdiv(p.m, C::BM) * gemm_cdiv(p.n, C::BN), kt = gemm_cdiv(p.k, C::BK);
    const int64_t slots = (int64_t)sms * dbuf_resident<C>();
    const int64_t waves = gemm_cdiv(tiles, slots), dp = (waves - 1) * slots, tail = tiles - dp;
    const int64_t bs = slots < tail * kt ? slots : tail * kt;
    if (bs <= tail || tiles > INT32_MAX)
        return k; /* one unit per tile (kt == 1): nothing to share */
    const double tile = (double)C::BM * C::BN * 4.0;
    const double kt_us = (double)C::BM * C::BN * C::BK / DBUF_FMA_US;
    const double tiles_us = (double)waves * kt * kt_us;
    const double fix_us = ((double)(bs + tail) * 2.0 * tile + 2.0 * (double)tail * tile) / 2.5e6 + DBUF_SK_US;
    const double tail_us = ((double)(waves - 1) * kt + (double)gemm_cdiv(tail * kt, bs) + 1.0) * kt_us + fix_us;
    if (mode == DBUF_SK_AUTO && !(tail_us < 0.99 * tiles_us))
        return k;
    k.dp = dp, k.tiles = tiles, k.kt = kt, k.bs = bs;
    return k;
}

static int64_t dbuf_sk_bytes(const dbuf_sk_plan &k)
{
    return k.bs > 0 ? 2 * k.bs * (int64_t)dbuf_big::BM * dbuf_big::BN * (int64_t)sizeof(float) : 0;
}

template <typename C, bool TA, bool TB, bool VEC>
static cudaError_t dbuf_sk_go(const gemm_args<float> &p, const dbuf_sk_plan &k, float *work, cudaStream_t s,
                              int parts)
{
    static cr_smem_opt_in whole, shared;
    cudaError_t opt = cr_opt_in_smem(whole, gemm_dbuf_kernel<C, TA, TB, VEC, false>, C::SMEM);
    if (opt == cudaSuccess)
        opt = cr_opt_in_smem(shared, gemm_dbuf_sk_kernel<C, TA, TB, VEC>, C::SMEM);
    if (opt != cudaSuccess)
        return opt;
    const bool cvec = gemm_vec_ok(p.c, p.n);
    if (k.dp > 0 && (parts & 1)) { /* the whole waves: today's kernel over the first dp tiles of the same order */
        gemm_dbuf_kernel<C, TA, TB, VEC, false><<<(unsigned)k.dp, C::NT, C::SMEM, s>>>(p, cvec, NULL, 0);
        cudaError_t e = gemm_launched();
        if (e != cudaSuccess)
            return e;
    }
    if (!(parts & 2))
        return cudaSuccess;
    const dbuf_sk_args a = {work, k.dp, k.tiles, k.kt, k.bs};
    gemm_dbuf_sk_kernel<C, TA, TB, VEC><<<(unsigned)k.bs, C::NT, C::SMEM, s>>>(p, cvec, a);
    cudaError_t e = gemm_launched();
    if (e != cudaSuccess)
        return e;
    constexpr int PER_TILE = C::BM * C::BN / 4 / DBUF_FIX_THREADS;
    dbuf_sk_fixup<C><<<(unsigned)((k.tiles - k.dp) * PER_TILE), DBUF_FIX_THREADS, 0, s>>>(p, cvec, a);
    return gemm_launched();
}

template <bool TA, bool TB>
static cudaError_t dbuf_sk_vec_or_not(const gemm_args<float> &p, const dbuf_sk_plan &k, float *work, cudaStream_t s,
                                      int parts)
{
    if (gemm_vec_ok(p.a, p.lda) && gemm_vec_ok(p.b, p.ldb))
        return dbuf_sk_go<dbuf_big, TA, TB, true>(p, k, work, s, parts);
    return dbuf_sk_go<dbuf_big, TA, TB, false>(p, k, work, s, parts);
}

/* parts: 1 the whole waves, 2 the shared tail and its fixup, 3 both (anything but 3: timing only) */
static cudaError_t dbuf_sk_run(const gemm_args<float> &p, const dbuf_sk_plan &k, void *work, cudaStream_t s,
                               int parts = 3)
{
    float *w = (float *)work;
    if (!p.ta && !p.tb)
        return dbuf_sk_vec_or_not<false, false>(p, k, w, s, parts);
    if (p.ta && !p.tb)
        return dbuf_sk_vec_or_not<true, false>(p, k, w, s, parts);
    if (!p.ta && p.tb)
        return dbuf_sk_vec_or_not<false, true>(p, k, w, s, parts);
    return dbuf_sk_vec_or_not<true, true>(p, k, w, s, parts);
}

/* The tail plan for a launch whose plan is pl: only big without a split. */
static dbuf_sk_plan dbuf_sk_for(const gemm_args<float> &p, const dbuf_plan &pl, int sms, int mode)
{
    dbuf_sk_plan none = {0, 0, 0, 0};
    return pl.cfg == DBUF_BIG && pl.slices == 1 ? dbuf_sk_make(p, sms, mode) : none;
}

/* The shipped choice: split K only into a workspace that holds the plan's partials; with none,
 * or one too small (the caller sized it for another GPU), the best plan without a split. Big
 * without a split shares its last wave (tail stream-K) where the rule says so and the workspace
 * holds the slots (16-byte aligned); otherwise whole tiles as before. */
static cudaError_t dbuf_auto(const gemm_args<float> &p, void *work, size_t work_bytes, cudaStream_t s)
{
    dbuf_plan pl;
    int sms = 0;
    cudaError_t e = dbuf_plan_for(p, work != NULL, DBUF_AUTO, 0, &pl, &sms);
    if (e == cudaSuccess && (uint64_t)dbuf_work_of(p, pl) > work_bytes)
        e = dbuf_plan_for(p, false, DBUF_AUTO, 0, &pl, &sms);
    if (e != cudaSuccess)
        return e;
    if (work != NULL && gemm_aligned16(work)) {
        const dbuf_sk_plan k = dbuf_sk_for(p, pl, sms, DBUF_SK_AUTO);
        if (k.bs > 0 && (uint64_t)dbuf_sk_bytes(k) <= work_bytes)
            return dbuf_sk_run(p, k, work, s);
    }
    return dbuf_run(p, pl, sms, work, s);
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

/* With the registry row's scratch (cr_cuda_gemm_dbuf_work_bytes): split-K where the plan wants
 * it and the workspace holds it. */
extern "C" cudaError_t cr_cuda_gemm_dbuf_ws(const cr_gemm_dev *g, cr_dtype dt, void *work, size_t work_bytes,
                                            cudaStream_t s)
{
    gemm_args<float> p;
    cudaError_t e = dbuf_pick(g, dt, 0, &p);
    if (e == cudaErrorNotReady)
        return cudaSuccess;
    if (e != cudaSuccess)
        return e;
    return dbuf_auto(p, work, work_bytes, s);
}

/* No workspace: never splits (the AᵀA `gemm` row runs this way). */
extern "C" cudaError_t cr_cuda_gemm_dbuf(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s)
{
    return cr_cuda_gemm_dbuf_ws(g, dt, NULL, 0, s);
}

/* The workspace cr_cuda_gemm_dbuf_ws uses for g on the current device: the split-K partials, or
 * the tail stream-K slots, or 0 when it needs none (or cannot run g at all). Pointers in g are not looked at. */
extern "C" size_t cr_cuda_gemm_dbuf_work_bytes(const cr_gemm_dev *g, cr_dtype dt)
{
    if (!g || dt != CR_DT_F32 || g->m <= 0 || g->n <= 0 || g->k <= 0)
        return 0;
    cr_gemm_dev shape = *g;
    shape.a = shape.b = shape.c = (void *)16; /* gemm_check wants pointers; nothing reads them */
    gemm_args<float> p;
    dbuf_plan pl;
    int sms = 0;
    if (dbuf_pick(&shape, dt, 0, &p) != cudaSuccess ||
        dbuf_plan_for(p, true, DBUF_AUTO, 0, &pl, &sms) != cudaSuccess)
        return 0;
    if (pl.slices > 1)
        return (size_t)dbuf_work_of(p, pl);
    return (size_t)dbuf_sk_bytes(dbuf_sk_for(p, pl, sms, DBUF_SK_AUTO)); /* the tail's slots, or 0 */
}

/* Tuning and test hook (bench/gemm.cu, tests/gpu/gemm.cu): configuration cfg (0: the model's
 * choice, 1..3: big, mid, small) with `slices` K slices (0: the model's count for that
 * configuration; 1: no split; more: that many, fewer where K has fewer k-tiles). The partials
 * must fit work_bytes: cudaErrorInvalidValue otherwise. */
extern "C" cudaError_t cr_cuda_gemm_dbuf_split(const cr_gemm_dev *g, cr_dtype dt, void *work, size_t work_bytes,
                                               cudaStream_t s, int cfg, int slices)
{
    gemm_args<float> p;
    cudaError_t e = dbuf_pick(g, dt, cfg, &p);
    if (e == cudaErrorNotReady)
        return cudaSuccess;
    if (e != cudaSuccess)
        return e;
    if (slices < 0)
        return cudaErrorInvalidValue;
    dbuf_plan pl;
    int sms = 0;
    e = dbuf_plan_for(p, true, cfg, slices, &pl, &sms);
    if (e != cudaSuccess)
        return e;
    if ((uint64_t)dbuf_work_of(p, pl) > work_bytes)
        return cudaErrorInvalidValue;
    return dbuf_run(p, pl, sms, work, s);
}

/* Tuning hook for bench/gemm.cu only (not in cuda_kernels.h): variant 0 is the shipped
 * choice without a workspace, 1..3 force big, mid, small (so that tests/gpu/gemm.cu checks
 * each of them). */
extern "C" cudaError_t cr_cuda_gemm_dbuf_variant(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s,
                                                 int variant)
{
    return cr_cuda_gemm_dbuf_split(g, dt, NULL, 0, s, variant, 1);
}

/* Bench hook: what cr_cuda_gemm_dbuf_ws picks for g with a workspace large enough (cfg 1..3 as
 * above, slices 1: no split). */
extern "C" cudaError_t cr_cuda_gemm_dbuf_plan(const cr_gemm_dev *g, int *cfg, int *slices)
{
    gemm_args<float> p;
    cudaError_t e = dbuf_pick(g, CR_DT_F32, 0, &p);
    if (e != cudaSuccess)
        return e;
    dbuf_plan pl;
    int sms = 0;
    e = dbuf_plan_for(p, true, DBUF_AUTO, 0, &pl, &sms);
    *cfg = pl.cfg;
    *slices = (int)pl.slices;
    return e;
}

/* Test and bench hook (not in cuda_kernels.h): big's schedule forced. mode 0: as
 * cr_cuda_gemm_dbuf_ws; 1: big, whole tiles (today's path, no split); 2: big with the last wave
 * shared whatever the rule says (whole tiles where K has one k-tile); 3 and 4: mode 2's whole
 * waves alone, its shared tail (and fixup) alone: for timing the parts, C left incomplete. The slots must fit
 * work_bytes (cr_cuda_gemm_dbuf_tail_bytes): cudaErrorInvalidValue otherwise. */
extern "C" cudaError_t cr_cuda_gemm_dbuf_tail(const cr_gemm_dev *g, cr_dtype dt, void *work, size_t work_bytes,
                                              cudaStream_t s, int mode)
{
    gemm_args<float> p;
    cudaError_t e = dbuf_pick(g, dt, mode == 0 ? 0 : DBUF_BIG, &p);
    if (e == cudaErrorNotReady)
        return cudaSuccess;
    if (e != cudaSuccess)
        return e;
    if (mode == 0)
        return dbuf_auto(p, work, work_bytes, s);
    if (mode < 0 || mode > 4)
        return cudaErrorInvalidValue;
    dbuf_plan pl;
    int sms = 0;
    e = dbuf_plan_for(p, false, DBUF_BIG, 1, &pl, &sms);
    if (e != cudaSuccess)
        return e;
    const dbuf_sk_plan k = dbuf_sk_for(p, pl, sms, mode >= 2 ? DBUF_SK_FORCE : DBUF_SK_NEVER);
    if (k.bs == 0)
        return dbuf_run(p, pl, sms, NULL, s);
    if ((uint64_t)dbuf_sk_bytes(k) > work_bytes || !gemm_aligned16(work))
        return cudaErrorInvalidValue;
    return dbuf_sk_run(p, k, work, s, mode == 3 ? 1 : mode == 4 ? 2 : 3);
}

/* The slots cr_cuda_gemm_dbuf_tail(mode) needs for g (0: none). */
extern "C" size_t cr_cuda_gemm_dbuf_tail_bytes(const cr_gemm_dev *g, int mode)
{
    if (!g || g->m <= 0 || g->n <= 0 || g->k <= 0)
        return 0;
    if (mode == 0)
        return cr_cuda_gemm_dbuf_work_bytes(g, CR_DT_F32);
    cr_gemm_dev shape = *g;
    shape.a = shape.b = shape.c = (void *)16;
    gemm_args<float> p;
    dbuf_plan pl;
    int sms = 0;
    if (dbuf_pick(&shape, CR_DT_F32, DBUF_BIG, &p) != cudaSuccess ||
        dbuf_plan_for(p, false, DBUF_BIG, 1, &pl, &sms) != cudaSuccess)
        return 0;
    return (size_t)dbuf_sk_bytes(dbuf_sk_for(p, pl, sms, mode >= 2 ? DBUF_SK_FORCE : DBUF_SK_NEVER));
}
