/* AᵀA `symtile`: C = AᵀA computed tile by tile on the upper triangle only, each off-diagonal tile
 * also written mirrored to the lower triangle, so about half the FLOPs of a full product.
 *
 * C[i][j] = Σ_k A[k][i]·A[k][j] reads, for a tile (I, J), the slices A[k0.., I] and A[k0.., J]:
 * both are pieces of rows of A, contiguous in i and j, so they land in shared memory already in
 * the k-major layout the inner product wants (no transposition, 16-byte cp.async copies).
 *
 * Per block: a BM×BM tile of C, BK rows of A per stage, STAGES stages of cp.async in flight.
 * Per thread: a TM×TM register tile made of 2×2 quads of VW×VW (VW = one 16-byte vector of T),
 * the quads BM/2 apart so that every shared-memory read is a 16-byte vector and a warp (4×8
 * threads) touches few distinct addresses: one wavefront per read.
 * FP64: BM 64, TM 4, 256 threads. (FP32 with BM 128, TM 8 is tuning variant 1 only: FP32 runs
 * the s32 kernel below, whose header says how.)
 *
 * Any size: rows of A past m and columns past n are zero-filled by cp.async (src-size 0), stores
 * are bounds-checked. The vector path needs n a multiple of VW and A 16-byte aligned; otherwise
 * the same kernel copies element by element (VEC = false). */
#include "kernels/cuda/ata_hist_kernels.h"
#include "kernels/cuda/cp_async.cuh"

#define SYM_THREADS 256
#define SYM_BK 16
#define SYM_STAGES 3

template <typename T> struct sym_cfg {
    static constexpr int VW = 16 / sizeof(T);   /* elements per 16-byte vector */
    static constexpr int TM = 2 * VW;           /* thread tile edge */
    static constexpr int BM = 16 * TM;          /* block tile edge: 16 threads across */
    static constexpr int MIN_BLOCKS = sizeof(T) == 4 ? 2 : 3;
};

/* Upper-triangle tile number `t` → (bi, bj), bi <= bj, row by row. */
__device__ __forceinline__ void tile_of(int64_t t, int64_t nt, int64_t *bi, int64_t *bj)
{
    int64_t row = 0;
    while (t >= nt - row) {
        t -= nt - row;
        row++;
    }
    *bi = row;
    *bj = row + t;
}

/* Copies A[k0 .. k0+BK) × [col0 .. col0+BM) into dst[BK][BM], zeros outside A. */
template <typename T, bool VEC>
__device__ __forceinline__ void load_slice(T *dst, const T *__restrict__ a, int64_t m, int64_t n,
                                           int64_t k0, int64_t col0)
{
    using C = sym_cfg<T>;
    constexpr int W = VEC ? C::VW : 1;             /* elements per copy */
    constexpr int PER_ROW = C::BM / W;
    constexpr int COPIES = SYM_BK * PER_ROW / SYM_THREADS;
#pragma unroll
    for (int q = 0; q < COPIES; q++) {
        int v = threadIdx.x + q * SYM_THREADS;
        int kk = v / PER_ROW, cc = (v % PER_ROW) * W;
        int64_t k = k0 + kk, col = col0 + cc;
        bool valid = k < m && col < n; /* VEC: n % VW == 0, so a vector is all in or all out */
        const T *src = valid ? a + k * n + col : a;
        cp_async<W * sizeof(T)>(dst + kk * C::BM + cc, src, valid);
    }
}

template <typename T, bool VEC>
__device__ __forceinline__ void store_vec(T *dst, const T *v, int64_t n, int64_t col)
{
    constexpr int VW = sym_cfg<T>::VW;
    if (VEC) {
        if (col < n)
            *reinterpret_cast<uint4 *>(dst) = *reinterpret_cast<const uint4 *>(v);
    } else {
#pragma unroll
        for (int e = 0; e < VW; e++)
            if (col + e < n)
                dst[e] = v[e];
    }
}

/* Writes the thread's TM×TM results at (row0.., col0..) and, off the diagonal, at the mirror. */
template <typename T, bool VEC>
__device__ __forceinline__ void store_tile(T *__restrict__ c, int64_t n, const T (&acc)[sym_cfg<T>::TM][sym_cfg<T>::TM],
                                           int64_t i0, int64_t j0, int ty, int tx, bool mirror)
{
    using C = sym_cfg<T>;
#pragma unroll
    for (int qi = 0; qi < 2; qi++)
#pragma unroll
        for (int ii = 0; ii < C::VW; ii++) {
            int64_t i = i0 + qi * (C::BM / 2) + ty * C::VW + ii;
            if (i >= n)
                continue;
#pragma unroll
            for (int qj = 0; qj < 2; qj++) {
                int64_t j = j0 + qj * (C::BM / 2) + tx * C::VW;
                store_vec<T, VEC>(c + i * n + j, &acc[qi * C::VW + ii][qj * C::VW], n, j);
            }
        }
    if (!mirror)
        return;
#pragma unroll
    for (int qj = 0; qj < 2; qj++)
#pragma unroll
        for (int jj = 0; jj < C::VW; jj++) {
            int64_t j = j0 + qj * (C::BM / 2) + tx * C::VW + jj;
            if (j >= n)
                continue;
#pragma unroll
            for (int qi = 0; qi < 2; qi++) {
                int64_t i = i0 + qi * (C::BM / 2) + ty * C::VW;
                T col[C::VW];
#pragma unroll
                for (int ii = 0; ii < C::VW; ii++)
                    col[ii] = acc[qi * C::VW + ii][qj * C::VW + jj];
                store_vec<T, VEC>(c + j * n + i, col, n, i);
            }
        }
}

template <typename T, bool VEC>
__global__ void __launch_bounds__(SYM_THREADS, sym_cfg<T>::MIN_BLOCKS)
    ata_symtile_kernel(const T *__restrict__ a, int64_t m, int64_t n, int64_t nt, T *__restrict__ c)
{
    using C = sym_cfg<T>;
    __shared__ __align__(16) T as[SYM_STAGES][SYM_BK][C::BM];
    __shared__ __align__(16) T bs[SYM_STAGES][SYM_BK][C::BM];

    int64_t bi, bj;
    tile_of(blockIdx.x, nt, &bi, &bj);
    int64_t i0 = bi * C::BM, j0 = bj * C::BM;
    bool diagonal = bi == bj;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int tx = (warp & 1) * 8 + (lane & 7); /* a warp covers 4 rows × 8 columns of threads */
    int ty = (warp >> 1) * 4 + (lane >> 3);

    T acc[C::TM][C::TM];
#pragma unroll
    for (int x = 0; x < C::TM; x++)
#pragma unroll
        for (int y = 0; y < C::TM; y++)
            acc[x][y] = 0;

    int64_t ktiles = (m + SYM_BK - 1) / SYM_BK;
#pragma unroll
    for (int st = 0; st < SYM_STAGES - 1; st++) {
        if (st < ktiles) {
            load_slice<T, VEC>(&as[st][0][0], a, m, n, st * SYM_BK, i0);
            if (!diagonal)
                load_slice<T, VEC>(&bs[st][0][0], a, m, n, st * SYM_BK, j0);
        }
        cp_async_commit();
    }

    for (int64_t kt = 0; kt < ktiles; kt++) {
        cp_async_wait<SYM_STAGES - 2>();
        __syncthreads(); /* stage kt is in; every thread is done with stage kt-1 */
        int64_t next = kt + SYM_STAGES - 1;
        if (next < ktiles) {
            int st = (int)(next % SYM_STAGES);
            load_slice<T, VEC>(&as[st][0][0], a, m, n, next * SYM_BK, i0);
            if (!diagonal)
                load_slice<T, VEC>(&bs[st][0][0], a, m, n, next * SYM_BK, j0);
        }
        cp_async_commit();

        int st = (int)(kt % SYM_STAGES);
        const T(*sa)[C::BM] = as[st];
        const T(*sb)[C::BM] = diagonal ? as[st] : bs[st]; /* a diagonal tile is AᵢᵀAᵢ: one slice */
#pragma unroll
        for (int kk = 0; kk < SYM_BK; kk++) {
            T ra[C::TM], rb[C::TM];
#pragma unroll
            for (int q = 0; q < 2; q++) {
                *reinterpret_cast<uint4 *>(&ra[q * C::VW]) =
                    *reinterpret_cast<const uint4 *>(&sa[kk][q * (C::BM / 2) + ty * C::VW]);
                *reinterpret_cast<uint4 *>(&rb[q * C::VW]) =
                    *reinterpret_cast<const uint4 *>(&sb[kk][q * (C::BM / 2) + tx * C::VW]);
            }
#pragma unroll
            for (int x = 0; x < C::TM; x++)
#pragma unroll
                for (int y = 0; y < C::TM; y++)
                    acc[x][y] += ra[x] * rb[y];
        }
    }
    cp_async_wait<0>();
    store_tile<T, VEC>(c, n, acc, i0, j0, ty, tx, !diagonal);
}

/* ---- FP32: 16×8 threads, stream-K over the triangle's tiles (bench/NOTES-gemm.md, "AᵀA symtile")
 *
 * A block owns a 128×128 tile of C as dbuf's "mid" GEMM does: 4 warps of 64×64, each thread a
 * 16×8 register tile of 4×2 quads 16 rows / 32 columns apart, so a k step costs 6 float4 shared
 * reads per 128 FMAs (the FP32 template above: 4 per 64) and a warp's reads hit one wavefront.
 * Both slices of A arrive k-major as they are in memory, by cp.async, STAGES deep, one barrier
 * per k-tile, no staging registers; two blocks per SM.
 *
 * Work is counted in units of (tile, k-tile), tiles in the grouped triangle order of s32_tile.
 * Blocks 0 .. dp-1 each take one whole tile (dp = tiles: plain tiling). The blocks after them
 * share the units of the tiles after dp evenly, [dp·kt + x·U'/B', dp·kt + (x+1)·U'/B'), so that
 * the last partial wave becomes one full wave of equal blocks (stream-K on the tail), each
 * spanning at most two tiles. A segment that starts a tile at k = 0 writes C directly (the
 * whole sum: the upper tile and its mirror; a part: the upper tile only); a segment starting
 * inside a tile (only a shared block's first) writes the block's slot in the scratch.
 * ata_s32_fixup then adds, per split tile, the slots of the following blocks to C in block order
 * (a fixed order: bit-reproducible, no atomics) and writes the mirror. */
struct s32_args {
    const float *a;
    float *c, *part;  /* part: one BT×BT slot per block after dp */
    int64_t m, n, tiles, units;
    int64_t dp;        /* blocks 0 .. dp-1 take tile b whole; the rest share the later tiles */
    int nt, kt, group; /* tiles per edge, k-tiles per tile, tile-rows per group */
};

template <int BK_, int STAGES_, int UK_>
struct s32_cfg {
    static constexpr int BT = 128, NT = 128;  /* tile edge, threads: 2×2 warps of 64×64 */
    static constexpr int LM = 4, LN = 8;      /* a warp's lanes: 4 rows × 8 columns */
    static constexpr int BK = BK_, STAGES = STAGES_;
    static constexpr int UK = UK_;            /* k steps unrolled: the loop's code size */
    static_assert(BK % UK == 0, "unroll must divide the k-tile");
    static constexpr int SLICE = BK * BT;     /* floats of one operand's k-tile */
    static constexpr size_t SMEM = (size_t)STAGES * 2 * SLICE * sizeof(float);
};

/* Tile number t → (bi, bj), bi <= bj: groups of `group` tile-rows, column by column inside a
 * group (its first `group` columns are a small triangle), so blocks running together share a few
 * row slices of A and a run of column slices instead of each wanting its own. */
__host__ __device__ static inline void s32_tile(int64_t t, int nt, int group, int *bi, int *bj)
{
    int r0 = 0, g = group < nt ? group : nt;
    for (;;) {
        int64_t count = (int64_t)g * (g + 1) / 2 + (int64_t)g * (nt - r0 - g);
        if (t < count)
            break;
        t -= count;
        r0 += g;
        g = group < nt - r0 ? group : nt - r0;
    }
    int64_t tri = (int64_t)g * (g + 1) / 2;
    if (t < tri) {
        int col = 0;
        while ((int64_t)(col + 1) * (col + 2) / 2 <= t)
            col++;
        *bj = r0 + col;
        *bi = r0 + (int)(t - (int64_t)col * (col + 1) / 2);
    } else {
        t -= tri;
        *bj = r0 + g + (int)(t / g);
        *bi = r0 + (int)(t % g);
    }
}

/* A[k0 .. k0+BK) × [col0 .. col0+BT) into dst[BK][BT], zeros outside A. */
template <typename C, bool VEC>
__device__ __forceinline__ void s32_load(float *dst, const float *__restrict__ a, int64_t m, int64_t n, int64_t k0,
                                         int64_t col0)
{
    constexpr int W = VEC ? 4 : 1, PER_ROW = C::BT / W, RPP = C::NT / PER_ROW;
    static_assert(C::NT % PER_ROW == 0 && C::BK % RPP == 0, "copies must split evenly");
    const int kk0 = threadIdx.x / PER_ROW, cc = (threadIdx.x % PER_ROW) * W;
    const int64_t col = col0 + cc;
#pragma unroll
    for (int q = 0; q < C::BK / RPP; q++) {
        int kk = kk0 + q * RPP;
        int64_t k = k0 + kk;
        bool valid = col < n && k < m; /* VEC: n % 4 == 0, a vector is all in or all out */
        cp_async<W * 4>(dst + kk * C::BT + cc, valid ? a + k * n + col : a, valid);
    }
}

/* One stage: the row slice (i0) and, off the diagonal, the column slice (j0). */
template <typename C, bool VEC>
__device__ __forceinline__ void s32_load_stage(float *stage, const s32_args &p, int kt, int64_t i0, int64_t j0,
                                               bool diag)
{
    s32_load<C, VEC>(stage, p.a, p.m, p.n, (int64_t)kt * C::BK, i0);
    if (!diag)
        s32_load<C, VEC>(stage + C::SLICE, p.a, p.m, p.n, (int64_t)kt * C::BK, j0);
}

template <typename C>
__device__ __forceinline__ void s32_compute(const float *sa, const float *sb, int am, int bn, float (&acc)[16][8])
{
#pragma unroll 1
    for (int k0 = 0; k0 < C::BK; k0 += C::UK)
#pragma unroll
    for (int kk = k0; kk < k0 + C::UK; kk++) {
        float av[16], bv[8];
#pragma unroll
        for (int q = 0; q < 4; q++) {
            float4 v = *(const float4 *)&sa[kk * C::BT + am + q * 4 * C::LM];
            av[4 * q] = v.x, av[4 * q + 1] = v.y, av[4 * q + 2] = v.z, av[4 * q + 3] = v.w;
        }
#pragma unroll
        for (int q = 0; q < 2; q++) {
            float4 v = *(const float4 *)&sb[kk * C::BT + bn + q * 4 * C::LN];
            bv[4 * q] = v.x, bv[4 * q + 1] = v.y, bv[4 * q + 2] = v.z, bv[4 * q + 3] = v.w;
        }
        /* odd rows run their columns backwards, as dbuf_outer does (gemm_dbuf.cu): each row starts
         * on the bv value the previous one ended on, still in the operand reuse cache */
#pragma unroll
        for (int r = 0; r < 16; r++)
#pragma unroll
            for (int cc = 0; cc < 8; cc++) {
                const int c = (r & 1) ? 7 - cc : cc;
                acc[r][c] = fmaf(av[r], bv[c], acc[r][c]);
            }
    }
}

/* acc = Σ over k-tiles [kb, ke) of tile (i0, j0). Leaves every stage free for the next segment. */
template <typename C, bool VEC>
__device__ __forceinline__ void s32_segment(const s32_args &p, float *smem, int kb, int ke, int64_t i0, int64_t j0,
                                            bool diag, int am, int bn, float (&acc)[16][8])
{
#pragma unroll
    for (int r = 0; r < 16; r++)
#pragma unroll
        for (int c = 0; c < 8; c++)
            acc[r][c] = 0.f;
#pragma unroll
    for (int st = 0; st < C::STAGES - 1; st++) {
        if (kb + st < ke)
            s32_load_stage<C, VEC>(smem + st * 2 * C::SLICE, p, kb + st, i0, j0, diag);
        cp_async_commit();
    }
    int rd = 0, wr = C::STAGES - 1;
    for (int kt = kb; kt < ke; kt++) {
        cp_async_wait<C::STAGES - 2>();
        __syncthreads(); /* stage rd is in; every thread is done with the stage wr overwrites */
        if (kt + C::STAGES - 1 < ke)
            s32_load_stage<C, VEC>(smem + wr * 2 * C::SLICE, p, kt + C::STAGES - 1, i0, j0, diag);
        cp_async_commit();
        const float *sa = smem + rd * 2 * C::SLICE;
        s32_compute<C>(sa, diag ? sa : sa + C::SLICE, am, bn, acc); /* diagonal: AᵢᵀAᵢ, one slice */
        rd = rd + 1 == C::STAGES ? 0 : rd + 1;
        wr = wr + 1 == C::STAGES ? 0 : wr + 1;
    }
    cp_async_wait<0>();
    __syncthreads();
}

/* c[i][j .. j+3], the in-bounds ones (VEC: n % 4 == 0 and j % 4 == 0, so all four or none). */
template <bool VEC>
__device__ __forceinline__ void s32_put4(float *c, int64_t n, int64_t i, int64_t j, float4 v)
{
    if (i >= n)
        return;
    float *d = c + i * n + j;
    if (VEC) {
        if (j < n)
            *(float4 *)d = v;
        return;
    }
    if (j + 0 < n) d[0] = v.x;
    if (j + 1 < n) d[1] = v.y;
    if (j + 2 < n) d[2] = v.z;
    if (j + 3 < n) d[3] = v.w;
}

template <bool VEC>
__device__ __forceinline__ float4 s32_get4(const float *c, int64_t n, int64_t i, int64_t j)
{
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (i >= n)
        return v;
    const float *d = c + i * n + j;
    if (VEC)
        return j < n ? *(const float4 *)d : v;
    if (j + 0 < n) v.x = d[0];
    if (j + 1 < n) v.y = d[1];
    if (j + 2 < n) v.z = d[2];
    if (j + 3 < n) v.w = d[3];
    return v;
}

/* The thread's rows am + 16q + r and columns bn + 32q + c of the tile. */
template <typename C, bool VEC>
__device__ __forceinline__ void s32_store_upper(float *c, int64_t n, int64_t i0, int64_t j0, int am, int bn,
                                                const float (&acc)[16][8])
{
#pragma unroll
    for (int r = 0; r < 16; r++)
#pragma unroll
        for (int q = 0; q < 2; q++)
            s32_put4<VEC>(c, n, i0 + am + (r / 4) * 4 * C::LM + r % 4, j0 + bn + q * 4 * C::LN,
                          make_float4(acc[r][4 * q], acc[r][4 * q + 1], acc[r][4 * q + 2], acc[r][4 * q + 3]));
}

template <typename C, bool VEC>
__device__ __forceinline__ void s32_store_mirror(float *c, int64_t n, int64_t i0, int64_t j0, int am, int bn,
                                                 const float (&acc)[16][8])
{
#pragma unroll
    for (int col = 0; col < 8; col++)
#pragma unroll
        for (int q = 0; q < 4; q++)
            s32_put4<VEC>(c, n, j0 + bn + (col / 4) * 4 * C::LN + col % 4, i0 + am + q * 4 * C::LM,
                          make_float4(acc[4 * q][col], acc[4 * q + 1][col], acc[4 * q + 2][col], acc[4 * q + 3][col]));
}

template <typename C>
__device__ __forceinline__ void s32_store_slot(float *slot, int am, int bn, const float (&acc)[16][8])
{
#pragma unroll
    for (int r = 0; r < 16; r++)
#pragma unroll
        for (int q = 0; q < 2; q++)
            *(float4 *)&slot[(am + (r / 4) * 4 * C::LM + r % 4) * C::BT + bn + q * 4 * C::LN] =
                make_float4(acc[r][4 * q], acc[r][4 * q + 1], acc[r][4 * q + 2], acc[r][4 * q + 3]);
}

/* Block b's units [*u, *u_end): a whole tile below dp, else an even share of the units after
 * dp's tiles among the blocks after dp. */
__device__ __forceinline__ void s32_units(const s32_args &p, int64_t b, int64_t blocks, int64_t *u, int64_t *u_end)
{
    if (b < p.dp) {
        *u = b * p.kt;
        *u_end = *u + p.kt;
        return;
    }
    int64_t base = p.dp * p.kt, us = p.units - base, bs = blocks - p.dp;
    *u = base + (b - p.dp) * us / bs;
    *u_end = base + (b - p.dp + 1) * us / bs;
}

template <typename C, bool VEC>
__global__ void __launch_bounds__(C::NT, 2) ata_s32_kernel(s32_args p)
{
    extern __shared__ float4 s32_smem4[];
    float *smem = (float *)s32_smem4;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int am = (warp / 2) * 64 + (lane / C::LN) * 4; /* first row and column of this thread */
    const int bn = (warp % 2) * 64 + (lane % C::LN) * 4;
    int64_t u, u_end;
    s32_units(p, blockIdx.x, gridDim.x, &u, &u_end);
    float acc[16][8];
    while (u < u_end) {
        int64_t t = u / p.kt;
        int kb = (int)(u - t * p.kt);
        int ke = (int)(u_end - t * p.kt < p.kt ? u_end - t * p.kt : p.kt);
        int bi, bj;
        s32_tile(t, p.nt, p.group, &bi, &bj);
        int64_t i0 = (int64_t)bi * C::BT, j0 = (int64_t)bj * C::BT;
        s32_segment<C, VEC>(p, smem, kb, ke, i0, j0, bi == bj, am, bn, acc);
        if (kb > 0) {
            s32_store_slot<C>(p.part + ((int64_t)blockIdx.x - p.dp) * C::BT * C::BT, am, bn, acc);
        } else {
            s32_store_upper<C, VEC>(p.c, p.n, i0, j0, am, bn, acc);
            if (ke == p.kt && bi != bj)
                s32_store_mirror<C, VEC>(p.c, p.n, i0, j0, am, bn, acc);
        }
        u = t * p.kt + ke;
    }
}

/* Per split tile: C's upper tile (the k = 0 part) plus the slots of the blocks after the first,
 * in block order; then the tile and its mirror. A thread takes a 4×4 quad; a warp's 8×4 quads
 * store 64 contiguous bytes per row of the tile and 128 per row of the mirror. */
#define S32_FIX_THREADS 256
template <typename C, bool VEC>
__global__ void __launch_bounds__(S32_FIX_THREADS) ata_s32_fixup(s32_args p, int64_t blocks)
{
    constexpr int QW = C::BT / 4, PER_TILE = QW * QW / S32_FIX_THREADS;
    const int64_t t = p.dp + blockIdx.x / PER_TILE; /* tiles below dp: their block wrote them */
    /* the shared part: block dp + x starts at unit base + x·us/bs; the first and last block
     * holding a unit of t */
    const int64_t base = p.dp * p.kt, us = p.units - base, bs = blocks - p.dp;
    const int64_t first = t * p.kt - base, last = first + p.kt - 1;
    const int64_t b_lo = p.dp + ((first + 1) * bs - 1) / us, b_hi = p.dp + ((last + 1) * bs - 1) / us;
    if (b_lo == b_hi)
        return; /* one block did the whole tile and wrote it */
    const int quad = (blockIdx.x % PER_TILE) * S32_FIX_THREADS + threadIdx.x, w = quad / 32, lane = quad % 32;
    const int qr = (w / (QW / 4)) * 8 + lane % 8, qc = (w % (QW / 4)) * 4 + lane / 8;
    int bi, bj;
    s32_tile(t, p.nt, p.group, &bi, &bj);
    const int64_t i = (int64_t)bi * C::BT + qr * 4, j = (int64_t)bj * C::BT + qc * 4;
    float4 v[4];
#pragma unroll
    for (int e = 0; e < 4; e++)
        v[e] = s32_get4<VEC>(p.c, p.n, i + e, j);
    for (int64_t b = b_lo + 1; b <= b_hi; b++) {
        const float *slot = p.part + (b - p.dp) * C::BT * C::BT + (qr * 4) * C::BT + qc * 4;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            float4 s = *(const float4 *)&slot[e * C::BT];
            v[e].x += s.x, v[e].y += s.y, v[e].z += s.z, v[e].w += s.w;
        }
    }
#pragma unroll
    for (int e = 0; e < 4; e++)
        s32_put4<VEC>(p.c, p.n, i + e, j, v[e]);
    if (bi == bj)
        return;
    s32_put4<VEC>(p.c, p.n, j + 0, i, make_float4(v[0].x, v[1].x, v[2].x, v[3].x));
    s32_put4<VEC>(p.c, p.n, j + 1, i, make_float4(v[0].y, v[1].y, v[2].y, v[3].y));
    s32_put4<VEC>(p.c, p.n, j + 2, i, make_float4(v[0].z, v[1].z, v[2].z, v[3].z));
    s32_put4<VEC>(p.c, p.n, j + 3, i, make_float4(v[0].w, v[1].w, v[2].w, v[3].w));
}

/* The configurations (bench/NOTES-gemm.md has the measurements): k-tile depth × stages. */
typedef s32_cfg<16, 3, 16> s32_k16s3;   /* 48 KB a block, the k-tile fully unrolled */
typedef s32_cfg<16, 3, 4> s32_k16s3u4;  /* 4 k steps unrolled: a quarter of the code */
typedef s32_cfg<32, 3, 4> s32_k32s3u4;  /* 96 KB */
typedef s32_cfg<8, 4, 8> s32_k8s4;      /* 32 KB */
typedef s32_cfg<16, 4, 4> s32_k16s4u4;  /* 64 KB */
typedef s32_cfg<16, 3, 8> s32_k16s3u8;
#define S32_GROUP 8

/* Opt in to more than 48 KB of shared memory (once per kernel) and ask how many blocks fit an
 * SM (once: it depends on the kernel's resources only, one GPU type per process). */
template <typename C, bool VEC>
static cudaError_t s32_prepare(int *resident)
{
    static int cached = 0; /* a race writes the same values twice: harmless */
    if (cached == 0) {
        if (C::SMEM > 48 * 1024) {
            cudaError_t e = cudaFuncSetAttribute(ata_s32_kernel<C, VEC>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 (int)C::SMEM);
            if (e != cudaSuccess)
                return e;
        }
        int r = 0;
        cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&r, ata_s32_kernel<C, VEC>, C::NT, C::SMEM);
        if (e != cudaSuccess)
            return e;
        cached = r < 1 ? 1 : r;
    }
    *resident = cached;
    return cudaSuccess;
}

enum { S32_AUTO = 0, S32_TILES = 1, S32_STREAM = 2 };

struct s32_plan {
    s32_args p;
    int64_t blocks; /* == tiles: plain tiling; more: the last tiles shared, with a fixup */
};

/* Plain tiling costs whole waves of whole tiles. The alternative keeps every full wave but the
 * last as whole tiles (all their blocks walk k in step, so they share A's rows in L2) and spreads
 * the remaining r tiles' units evenly over one wave of blocks ("stream-K" on the tail; with one
 * wave, on everything): (waves-1)·kt + ⌈r·kt/slots⌉ + 1 k-tiles (the +1: a block's second tile
 * restarts the pipeline), plus the fixup pass (slots read, r tiles read and written twice, at
 * ~2.5 TB/s, and ~5 µs of launch). A k-tile's time at full load assumes 75% of the FMA peak at
 * 1.98 GHz (dbuf's measured efficiency; only its ratio to the fixup matters). The tail is
 * shared when that predicts at least 1% less (on the H200: n = 1024..3072, 6144 and 8192 share,
 * 4096's two full waves do not; NOTES-gemm.md). */
template <typename C>
static s32_plan s32_make_plan(int64_t m, int64_t n, int mode, int group, int sms, int resident)
{
    s32_plan pl;
    s32_args &p = pl.p;
    p.m = m;
    p.n = n;
    p.nt = (int)((n + C::BT - 1) / C::BT);
    p.tiles = (int64_t)p.nt * (p.nt + 1) / 2;
    p.kt = (int)(m > 0 ? (m + C::BK - 1) / C::BK : 1); /* m = 0: one all-zero k-tile writes the zeros */
    p.units = p.tiles * p.kt;
    p.group = group > 0 ? group : S32_GROUP;
    int64_t slots = (int64_t)sms * resident, waves = (p.tiles + slots - 1) / slots;
    int64_t dp = (waves - 1) * slots, tail = p.tiles - dp;
    int64_t shared = slots < tail * p.kt ? slots : tail * p.kt; /* never an empty block */
    double kt_s = (double)C::BT * C::BT * C::BK * 2.0 * resident / (128 * 2 * 1.98e9 * 0.75);
    double tiles_s = (double)waves * p.kt * kt_s;
    double fix_bytes = (double)shared * C::BT * C::BT * 4 + 4.0 * (double)tail * C::BT * C::BT * 4;
    double tail_s = ((double)(waves - 1) * p.kt + (double)((tail * p.kt + shared - 1) / shared) + 1) * kt_s +
                    fix_bytes / 2.5e12 + 5e-6;
    bool split = mode == S32_STREAM || (mode == S32_AUTO && tail_s < 0.99 * tiles_s);
    p.dp = split && shared > tail ? dp : p.tiles;
    pl.blocks = p.dp < p.tiles ? dp + shared : p.tiles;
    return pl;
}

template <typename C>
static size_t s32_slot_bytes(const s32_plan &pl)
{
    return pl.p.dp < pl.p.tiles ? (size_t)(pl.blocks - pl.p.dp) * C::BT * C::BT * sizeof(float) : 0;
}

/* The plan takes the vector kernel's residency for both paths, so that the scratch asked for
 * before the launch (cr_cuda_ata_work_bytes) matches the launch's plan whatever its alignment. */
template <typename C>
static cudaError_t s32_plan_for(int64_t m, int64_t n, int mode, int group, s32_plan *pl)
{
    int dev = 0, sms = 0, resident = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess)
        e = s32_prepare<C, true>(&resident);
    if (e != cudaSuccess)
        return e;
    *pl = s32_make_plan<C>(m, n, mode, group, sms, resident);
    if (pl->blocks > 0x7fffffff || pl->p.tiles * (C::BT * C::BT / 16 / S32_FIX_THREADS) > 0x7fffffff)
        return cudaErrorInvalidValue;
    return cudaSuccess;
}

/* part: scratch of s32_slot_bytes, or NULL (then plain tiling whatever the plan said). */
template <typename C, bool VEC>
static cudaError_t s32_launch(const float *a, int64_t m, int64_t n, float *c, float *part, int mode, int group,
                              cudaStream_t s)
{
    s32_plan pl;
    int resident = 0;
    cudaError_t e = s32_plan_for<C>(m, n, mode, group, &pl);
    if (e == cudaSuccess)
        e = s32_prepare<C, VEC>(&resident); /* the opt-in of this path's kernel */
    if (e != cudaSuccess)
        return e;
    if (!part)
        pl.blocks = pl.p.dp = pl.p.tiles;
    pl.p.a = a;
    pl.p.c = c;
    pl.p.part = part;
    ata_s32_kernel<C, VEC><<<(unsigned)pl.blocks, C::NT, C::SMEM, s>>>(pl.p);
    e = cudaGetLastError();
    if (e != cudaSuccess || pl.p.dp == pl.p.tiles)
        return e;
    unsigned fix_blocks = (unsigned)((pl.p.tiles - pl.p.dp) * (C::BT * C::BT / 16 / S32_FIX_THREADS));
    ata_s32_fixup<C, VEC><<<fix_blocks, S32_FIX_THREADS, 0, s>>>(pl.p, pl.blocks);
    return cudaGetLastError();
}

template <typename C>
static cudaError_t s32_vec_or_not(const float *a, int64_t m, int64_t n, float *c, float *part, int mode, int group,
                                  cudaStream_t s)
{
    if (n % 4 == 0 && ((uintptr_t)a & 15) == 0 && ((uintptr_t)c & 15) == 0)
        return s32_launch<C, true>(a, m, n, c, part, mode, group, s);
    return s32_launch<C, false>(a, m, n, c, part, mode, group, s);
}

/* Scratch slots the FP32 plan of `variant` needs (0 for plain tiling). */
template <typename C>
static size_t s32_variant_slot_bytes(int64_t m, int64_t n, int mode, int group)
{
    s32_plan pl;
    if (s32_plan_for<C>(m, n, mode, group, &pl) != cudaSuccess) {
        cudaGetLastError();
        return 0; /* no device here: the launch would fail anyway */
    }
    return s32_slot_bytes<C>(pl);
}

/* ---- launchers ---- */

template <typename T>
static cudaError_t launch_symtile(const T *a, int64_t m, int64_t n, T *c, cudaStream_t s)
{
    using C = sym_cfg<T>;
    int64_t nt = (n + C::BM - 1) / C::BM;
    int64_t tiles = nt * (nt + 1) / 2;
    if (tiles > 0x7fffffff)
        return cudaErrorInvalidValue;
    bool vec = n % C::VW == 0 && ((uintptr_t)a & 15) == 0 && ((uintptr_t)c & 15) == 0;
    if (vec)
        ata_symtile_kernel<T, true><<<(unsigned)tiles, SYM_THREADS, 0, s>>>(a, m, n, nt, c);
    else
        ata_symtile_kernel<T, false><<<(unsigned)tiles, SYM_THREADS, 0, s>>>(a, m, n, nt, c);
    return cudaGetLastError();
}

/* Tuning variants (bench/ata_hist.cu, tests/gpu/ata_hist.cu): variant % 10 picks the FP32 kernel
 * (0 the shipped one, 1 the 8×8-thread template kernel above, 2..7 the s32 configurations),
 * (variant / 10) % 10 the schedule (0 as planned, 1 plain tiling, 2 the last wave's tiles shared
 * among a wave of blocks: stream-K on the tail) and variant / 100
 * the tile-rows per group (0: S32_GROUP). FP64 always runs the template kernel. */
#define S32_SHIPPED_CFG 7 /* k16s3u8: the best or within 3% of it at every n measured */
struct sym_variant {
    int cfg, mode, group;
};

static sym_variant sym_variant_of(int variant)
{
    sym_variant v = {variant % 10, (variant / 10) % 10, variant / 100};
    if (v.cfg == 0)
        v.cfg = S32_SHIPPED_CFG;
    return v;
}

static cudaError_t s32_run(const sym_variant &v, const float *a, int64_t m, int64_t n, float *c, float *part,
                           cudaStream_t s)
{
    switch (v.cfg) {
    case 2: return s32_vec_or_not<s32_k16s3>(a, m, n, c, part, v.mode, v.group, s);
    case 3: return s32_vec_or_not<s32_k16s3u4>(a, m, n, c, part, v.mode, v.group, s);
    case 4: return s32_vec_or_not<s32_k32s3u4>(a, m, n, c, part, v.mode, v.group, s);
    case 5: return s32_vec_or_not<s32_k8s4>(a, m, n, c, part, v.mode, v.group, s);
    case 6: return s32_vec_or_not<s32_k16s4u4>(a, m, n, c, part, v.mode, v.group, s);
    case 7: return s32_vec_or_not<s32_k16s3u8>(a, m, n, c, part, v.mode, v.group, s);
    default: return cudaErrorInvalidValue;
    }
}

static size_t s32_slots(const sym_variant &v, int64_t m, int64_t n)
{
    switch (v.cfg) {
    case 2: return s32_variant_slot_bytes<s32_k16s3>(m, n, v.mode, v.group);
    case 3: return s32_variant_slot_bytes<s32_k16s3u4>(m, n, v.mode, v.group);
    case 4: return s32_variant_slot_bytes<s32_k32s3u4>(m, n, v.mode, v.group);
    case 5: return s32_variant_slot_bytes<s32_k8s4>(m, n, v.mode, v.group);
    case 6: return s32_variant_slot_bytes<s32_k16s4u4>(m, n, v.mode, v.group);
    case 7: return s32_variant_slot_bytes<s32_k16s3u8>(m, n, v.mode, v.group);
    default: return 0;
    }
}

/* The scratch: a stored Aᵀ laid out as A first (256-byte rounded), then the stream-K slots. */
static size_t sym_trans_bytes(const cr_ata_dev *t, size_t es)
{
    return t->trans_a && t->m > 0 ? ((size_t)t->m * (size_t)t->n * es + 255) & ~(size_t)255 : 0;
}

static size_t sym_work_bytes(const cr_ata_dev *t, cr_dtype dt, int variant)
{
    if ((dt != CR_DT_F32 && dt != CR_DT_F64) || t->m < 0 || t->n <= 0)
        return 0;
    size_t bytes = sym_trans_bytes(t, cr_dtype_size(dt));
    sym_variant v = sym_variant_of(variant);
    if (dt == CR_DT_F32 && v.cfg != 1)
        bytes += s32_slots(v, t->m, t->n);
    return bytes;
}

static cudaError_t run_symtile(const cr_ata_dev *t, cr_dtype dt, int variant, cudaStream_t s)
{
    const void *a = t->a;
    size_t tb = sym_trans_bytes(t, cr_dtype_size(dt));
    if (tb) { /* stored Aᵀ (n×m): lay it out as A (m×n) in the scratch first */
        if (!t->work)
            return cudaErrorInvalidValue;
        cudaError_t e = cr_cuda_transpose(t->a, t->work, t->n, t->m, dt, s);
        if (e != cudaSuccess)
            return e;
        a = t->work;
    }
    if (dt == CR_DT_F64)
        return launch_symtile<double>((const double *)a, t->m, t->n, (double *)t->c, s);
    sym_variant v = sym_variant_of(variant);
    if (v.cfg == 1)
        return launch_symtile<float>((const float *)a, t->m, t->n, (float *)t->c, s);
    float *part = t->work ? (float *)((char *)t->work + tb) : NULL; /* NULL: no stream-K */
    return s32_run(v, (const float *)a, t->m, t->n, (float *)t->c, part, s);
}

extern "C" cudaError_t cr_cuda_ata_symtile_variant(const cr_ata_dev *t, cr_dtype dt, cudaStream_t s, int variant)
{
    cudaError_t e = cr_ata_begin(t, dt);
    if (e != cudaSuccess)
        return e == cudaErrorNotReady ? cudaSuccess : e;
    if (variant < 0)
        return cudaErrorInvalidValue;
    return run_symtile(t, dt, variant, s);
}

extern "C" size_t cr_cuda_ata_symtile_variant_work_bytes(const cr_ata_dev *t, cr_dtype dt, int variant)
{
    return variant < 0 ? 0 : sym_work_bytes(t, dt, variant);
}

extern "C" cudaError_t cr_cuda_ata_symtile(const cr_ata_dev *t, cr_dtype dt, cudaStream_t s)
{
    return cr_cuda_ata_symtile_variant(t, dt, s, 0);
}

/* The plan behind the slots asks the current device (SM count, clock, residency): call it with
 * the device current that the launch will run on. */
extern "C" size_t cr_cuda_ata_work_bytes(const cr_ata_dev *t, cr_dtype dt, cr_ata_launcher k)
{
    if (k != cr_cuda_ata_symtile)
        return 0;
    return sym_work_bytes(t, dt, 0);
}
