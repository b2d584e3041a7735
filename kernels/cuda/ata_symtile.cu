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
#include "kernels/cuda/smem_opt_in.cuh"

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

/* The blocks holding units of shared tile t: block dp + x starts at unit base + x·us/bs. Equal
 * when one block did the whole tile and wrote it. */
__device__ __forceinline__ void s32_tile_blocks(const s32_args &p, int64_t t, int64_t blocks, int64_t *b_lo,
                                                int64_t *b_hi)
{
    const int64_t base = p.dp * p.kt, us = p.units - base, bs = blocks - p.dp;
    const int64_t first = t * p.kt - base, last = first + p.kt - 1;
    *b_lo = p.dp + ((first + 1) * bs - 1) / us;
    *b_hi = p.dp + ((last + 1) * bs - 1) / us;
}

/* The 4×4 quad of C at (i, j): C's value (the k = 0 part) plus the slots of blocks b_lo+1..b_hi
 * in block order (a slot of `slot_elems` floats, rows of `row`, the quad at `qoff`), written back
 * and, when mirror, transposed at (j, i). */
template <bool VEC>
__device__ __forceinline__ void s32_fix_quad(const s32_args &p, int64_t i, int64_t j, int64_t b_lo, int64_t b_hi,
                                             int64_t slot_elems, int row, int64_t qoff, bool mirror)
{
    float4 v[4];
#pragma unroll
    for (int e = 0; e < 4; e++)
        v[e] = s32_get4<VEC>(p.c, p.n, i + e, j);
    for (int64_t b = b_lo + 1; b <= b_hi; b++) {
        const float *slot = p.part + (b - p.dp) * slot_elems + qoff;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            float4 s = *(const float4 *)&slot[e * row];
            v[e].x += s.x, v[e].y += s.y, v[e].z += s.z, v[e].w += s.w;
        }
    }
#pragma unroll
    for (int e = 0; e < 4; e++)
        s32_put4<VEC>(p.c, p.n, i + e, j, v[e]);
    if (!mirror)
        return;
    s32_put4<VEC>(p.c, p.n, j + 0, i, make_float4(v[0].x, v[1].x, v[2].x, v[3].x));
    s32_put4<VEC>(p.c, p.n, j + 1, i, make_float4(v[0].y, v[1].y, v[2].y, v[3].y));
    s32_put4<VEC>(p.c, p.n, j + 2, i, make_float4(v[0].z, v[1].z, v[2].z, v[3].z));
    s32_put4<VEC>(p.c, p.n, j + 3, i, make_float4(v[0].w, v[1].w, v[2].w, v[3].w));
}

template <typename C, bool VEC>
__global__ void __launch_bounds__(S32_FIX_THREADS) ata_s32_fixup(s32_args p, int64_t blocks)
{
    constexpr int QW = C::BT / 4, PER_TILE = QW * QW / S32_FIX_THREADS;
    const int64_t t = p.dp + blockIdx.x / PER_TILE; /* tiles below dp: their block wrote them */
    int64_t b_lo, b_hi;
    s32_tile_blocks(p, t, blocks, &b_lo, &b_hi);
    if (b_lo == b_hi)
        return;
    const int quad = (blockIdx.x % PER_TILE) * S32_FIX_THREADS + threadIdx.x, w = quad / 32, lane = quad % 32;
    const int qr = (w / (QW / 4)) * 8 + lane % 8, qc = (w % (QW / 4)) * 4 + lane / 8;
    int bi, bj;
    s32_tile(t, p.nt, p.group, &bi, &bj);
    s32_fix_quad<VEC>(p, (int64_t)bi * C::BT + qr * 4, (int64_t)bj * C::BT + qc * 4, b_lo, b_hi,
                      (int64_t)C::BT * C::BT, C::BT, (int64_t)(qr * 4) * C::BT + qc * 4, bi != bj);
}

/* The configurations (bench/NOTES-gemm.md has the measurements): k-tile depth × stages. */
typedef s32_cfg<16, 3, 16> s32_k16s3;   /* 48 KB a block, the k-tile fully unrolled */
typedef s32_cfg<16, 3, 4> s32_k16s3u4;  /* 4 k steps unrolled: a quarter of the code */
typedef s32_cfg<32, 3, 4> s32_k32s3u4;  /* 96 KB */
typedef s32_cfg<8, 4, 8> s32_k8s4;      /* 32 KB */
typedef s32_cfg<16, 4, 4> s32_k16s4u4;  /* 64 KB */
typedef s32_cfg<16, 3, 8> s32_k16s3u8;
#define S32_GROUP 8

/* Opt in to more than 48 KB of shared memory (on this device) and ask how many blocks fit an
 * SM (once: it depends on the kernel's resources only, one GPU type per process). */
template <typename C, bool VEC>
static cudaError_t s32_prepare(int *resident)
{
    static cr_smem_opt_in opted;
    static int cached = 0; /* a race writes the same values twice: harmless */
    if (C::SMEM > 48 * 1024) {
        cudaError_t e = cr_opt_in_smem(opted, ata_s32_kernel<C, VEC>, C::SMEM);
        if (e != cudaSuccess)
            return e;
    }
    if (cached == 0) {
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
/* The split decision of a plan whose tiles, k-tiles and slots are set: see above. `area` is a
 * tile's elements (a k-tile's FMAs per k step), `bk` its depth. */
static void s32_schedule(s32_plan &pl, int mode, int64_t slots, int resident, double area, int bk)
{
    s32_args &p = pl.p;
    int64_t waves = (p.tiles + slots - 1) / slots;
    int64_t dp = (waves - 1) * slots, tail = p.tiles - dp;
    int64_t shared = slots < tail * p.kt ? slots : tail * p.kt; /* never an empty block */
    double kt_s = area * bk * 2.0 * resident / (128 * 2 * 1.98e9 * 0.75);
    double tiles_s = (double)waves * p.kt * kt_s;
    double fix_bytes = (double)shared * area * 4 + 4.0 * (double)tail * area * 4;
    double tail_s = ((double)(waves - 1) * p.kt + (double)((tail * p.kt + shared - 1) / shared) + 1) * kt_s +
                    fix_bytes / 2.5e12 + 5e-6;
    bool split = mode == S32_STREAM || (mode == S32_AUTO && tail_s < 0.99 * tiles_s);
    p.dp = split && shared > tail ? dp : p.tiles;
    pl.blocks = p.dp < p.tiles ? dp + shared : p.tiles;
}

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
    s32_schedule(pl, mode, (int64_t)sms * resident, resident, (double)C::BT * C::BT, C::BK);
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

/* ---- FP32 wide: 256×128 tiles of 8 warps (dbuf big's tiling), for large n ----------------------
 * bench/NOTES-gemm.md ("AᵀA symtile ... wide tiles"). The 128² kernel above runs two blocks of 4
 * warps per SM; at 8192 ncu saw no eligible warp in 23% of its cycles against 12.5% for dbuf big
 * (one block of 8 warps, 256×128), and 128² tiles read a third more bytes per FMA. This kernel
 * is dbuf big's block, warp and thread tiling (4×2 warps of 64×64, 16×8 per thread in 4×2 quads,
 * serpentine FFMA rows) on tiles of the triangle:
 *  - C is cut in 128-wide blocks, 128·b.. (b < nb = ⌈n/128⌉), grouped in bands of two rows of
 *    blocks (256 rows). A full tile is band r × block column c for c ≥ 2r+1: 256 rows × 128
 *    columns, all above the diagonal but for c = 2r+1, whose lower half is the diagonal block
 *    D(2r+1) (computed whole: it is its own mirror). The even diagonal blocks D(2r) that remain
 *    go two to a "pair" tile: D(4x) in the upper 128 rows, D(4x+2) in the lower (none when
 *    that is past n). Together the tiles cover the upper triangle's 128-blocks exactly once, with
 *    nothing computed twice but the lower halves of the diagonal blocks, as the 128² kernel does.
 *  - both operands are column slices of A, k-major as in memory: a stage is BK rows of 384
 *    floats, the 256 row-slice columns (for a full tile A[.., 256r ..+256), for a pair tile
 *    A[.., 512x ..+128) then A[.., 512x+256 ..+128)) then the 128 of the column slice
 *    (A[.., 128c ..+128); a pair tile loads none: each half reads its B fragments from its own
 *    128 columns of the row slice). No transposition, so every copy is a 16-byte one.
 *  - the work split is the 128² kernel's: (tile, k-tile) units, whole tiles in full waves, the
 *    last wave's tiles shared by a full wave of blocks, a fixup in block order (s32_units,
 *    s32_schedule); one block per SM, so a slot is 256×128.
 *  - the vector path only (n % 4 == 0, A and C 16-byte aligned); anything else runs the 128²
 *    kernel. LOAD 0: global loads into registers a tile ahead, stored to the other of two
 *    stages one group per k step over steps 9..14 (dbuf big's loop); LOAD 1: cp.async, STAGES
 *    deep. */
template <int LOAD_, int STAGES_, int BK_ = 16, int UK_ = BK_>
struct s32w_cfg {
    static constexpr int BM = 256, BN = 128, BK = BK_, NT = 256; /* 4×2 warps of 64×64 */
    static constexpr int UK = UK_;                              /* k steps unrolled (LOAD 1) */
    static constexpr int RA = NT / (BM / 4), RB = NT / (BN / 4); /* k rows a pass of copies covers */
    static constexpr int BT = 128;                              /* a slot's row length */
    static constexpr int LM = 4, LN = 8;
    static constexpr int LS = BM + BN; /* floats per k row of a stage */
    static constexpr int STAGE = BK * LS;
    static constexpr int LOAD = LOAD_, STAGES = LOAD_ == 0 ? 2 : STAGES_;
    static constexpr size_t SMEM = (size_t)STAGES * STAGE * sizeof(float);
    static constexpr int PA = BK * BM / 4 / NT, PB = BK * BN / 4 / NT; /* float4 groups a thread moves */
};

/* Tile t of the wide cover: full tiles band by band (band r: block columns 2r+1 .. nb-1), then
 * the pair tiles. Returns the per-thread geometry for a thread whose rows start at `am`. */
struct s32w_geom {
    int64_t ca0, ca1, cb; /* first columns of A for the row slice's two halves and the column slice */
    bool pair;
    int bi, bj;           /* full: band, block column; pair: x */
};

__host__ __device__ static inline int64_t s32w_tiles(int nb)
{
    int64_t full = 0;
    for (int r = 0; 2 * r + 1 < nb; r++)
        full += nb - 2 * r - 1;
    int bands = (nb + 1) / 2;
    return full + (bands + 1) / 2;
}

/* group > 0: the full tiles in groups of `group` bands, column by column inside a group (as
 * s32_tile orders the 128² tiles), so that the blocks of a wave share a few row slices and a run
 * of column slices of A */
__device__ __forceinline__ s32w_geom s32w_tile(int64_t t, int nb, int group)
{
    s32w_geom g;
    int r = -1, c = 0;
    if (group <= 0) {
        for (int q = 0; 2 * q + 1 < nb; q++) {
            int64_t f = nb - 2 * q - 1;
            if (t < f) {
                r = q;
                c = 2 * q + 1 + (int)t;
                break;
            }
            t -= f;
        }
    } else {
        for (int r0 = 0; r < 0 && 2 * r0 + 1 < nb; r0 += group) {
            const int r1 = r0 + group - 1; /* the group's last band */
            int64_t f = 0;
            for (int q = r0; q <= r1 && 2 * q + 1 < nb; q++)
                f += nb - 2 * q - 1;
            if (t >= f) {
                t -= f;
                continue;
            }
            for (int col = 2 * r0 + 1; col < nb; col++) {
                const int hi = (col - 1) / 2 < r1 ? (col - 1) / 2 : r1; /* bands r0 .. hi reach col */
                if (t <= hi - r0) {
                    r = r0 + (int)t;
                    c = col;
                    break;
                }
                t -= hi - r0 + 1;
            }
        }
    }
    if (r >= 0) {
        g.pair = false;
        g.bi = r;
        g.bj = c;
        g.ca0 = (int64_t)r * 256;
        g.ca1 = g.ca0 + 128;
        g.cb = (int64_t)c * 128;
        return g;
    }
    g.pair = true;
    g.bi = (int)t;
    g.bj = 0;
    g.ca0 = t * 512;
    g.ca1 = g.ca0 + 256;
    g.cb = 0;
    return g;
}

/* Where the thread's register tile lands in C: rows i0 + am + .., columns j0 + bn + ..; mirror:
 * also write the transpose (not for diagonal blocks, which hold both halves already). boff: the
 * offset of the B fragments in a stage row. R is the tile-local first row of the 128-row half. */
__device__ __forceinline__ void s32w_place(const s32w_geom &g, int R, int64_t *i0, int64_t *j0, bool *mirror,
                                           int *boff)
{
    const bool lower = R >= 128;
    if (g.pair) {
        const int64_t d = lower ? g.ca1 : g.ca0; /* the diagonal block's first row and column */
        *i0 = d - (lower ? 128 : 0);
        *j0 = d;
        *mirror = false;
        *boff = lower ? 128 : 0;
    } else {
        *i0 = g.ca0;
        *j0 = g.cb;
        *mirror = !(lower && g.bj == 2 * g.bi + 1);
        *boff = 256;
    }
}

template <typename C>
__device__ __forceinline__ void s32w_frag(const float *cur, int boff, int am, int bn, int kk, float (&av)[16],
                                          float (&bv)[8])
{
#pragma unroll
    for (int q = 0; q < 4; q++) {
        float4 v = *(const float4 *)&cur[kk * C::LS + am + q * 4 * C::LM];
        av[4 * q] = v.x, av[4 * q + 1] = v.y, av[4 * q + 2] = v.z, av[4 * q + 3] = v.w;
    }
#pragma unroll
    for (int q = 0; q < 2; q++) {
        float4 v = *(const float4 *)&cur[kk * C::LS + boff + bn + q * 4 * C::LN];
        bv[4 * q] = v.x, bv[4 * q + 1] = v.y, bv[4 * q + 2] = v.z, bv[4 * q + 3] = v.w;
    }
}

/* odd rows run their columns backwards (dbuf_outer's order, for the operand reuse caches) */
__device__ __forceinline__ void s32w_outer(const float (&av)[16], const float (&bv)[8], float (&acc)[16][8])
{
#pragma unroll
    for (int r = 0; r < 16; r++)
#pragma unroll
        for (int cc = 0; cc < 8; cc++) {
            const int c = (r & 1) ? 7 - cc : cc;
            acc[r][c] = fmaf(av[r], bv[c], acc[r][c]);
        }
}

/* The thread's copies: A groups at stage rows ka + 4g, column oa of the stage (a float4); B groups
 * at rows kb + 8g, column 256 + ob. pa/pb point at the copy's first row of the next k-tile to
 * fetch (A's start when the column is outside A: never read then); rem = m − that k-tile's first
 * k. Kept small: with a tile's loads in flight across its FMAs the loop needs ~240 registers,
 * and where it needs more ptxas sinks the loads to the end of the tile. */
template <typename C>
struct s32w_src {
    const float *pa[C::PA], *pb[C::PB]; /* each group's own pointer, as dbuf's cursor keeps them */
    int krow_a, krow_b;         /* the groups' first k offset inside a k-tile */
    bool oka, okb;              /* the column is inside A (and, for B, the tile has a column slice) */
};

/* pointers at the segment's first k-tile; k below is counted from there (K = m − its first k) */
template <typename C>
__device__ __forceinline__ s32w_src<C> s32w_src_init(const s32_args &p, const s32w_geom &g, int kt0)
{
    const int tid = threadIdx.x, ka = tid / (C::BM / 4), oa = (tid % (C::BM / 4)) * 4;
    const int kb = tid / (C::BN / 4), ob = (tid % (C::BN / 4)) * 4;
    s32w_src<C> s;
    const int64_t ca = (oa < 128 ? g.ca0 : g.ca1 - 128) + oa, cb = g.cb + ob, k0 = (int64_t)kt0 * C::BK;
    s.oka = ca < p.n;
    s.okb = !g.pair && cb < p.n;
    s.krow_a = ka;
    s.krow_b = kb;
#pragma unroll
    for (int q = 0; q < C::PA; q++)
        s.pa[q] = p.a + (s.oka ? (k0 + ka + C::RA * q) * p.n + ca : 0);
#pragma unroll
    for (int q = 0; q < C::PB; q++)
        s.pb[q] = p.a + (s.okb ? (k0 + kb + C::RB * q) * p.n + cb : 0);
    return s;
}

/* the k-tile whose first k is k0 (from the segment's start), K rows left from there */
template <typename C>
__device__ __forceinline__ void s32w_fetch(s32w_src<C> &s, int64_t step, int64_t K, int64_t k0, float4 (&va)[C::PA],
                                           float4 (&vb)[C::PB])
{
#pragma unroll
    for (int g = 0; g < C::PA; g++) {
        const int64_t kk = k0 + s.krow_a + C::RA * g;
        const float *src = s.pa[g];
        float4 r = make_float4(0.f, 0.f, 0.f, 0.f);
        if (s.oka && kk < K)
            r = __ldg((const float4 *)src);
        va[g] = r;
        s.pa[g] = src + step; /* past A when the column is outside: never read */
    }
#pragma unroll
    for (int g = 0; g < C::PB; g++) {
        const int64_t kk = k0 + s.krow_b + C::RB * g;
        const float *src = s.pb[g];
        float4 r = make_float4(0.f, 0.f, 0.f, 0.f);
        if (s.okb && kk < K)
            r = __ldg((const float4 *)src);
        vb[g] = r;
        s.pb[g] = src + step;
    }
}

/* cp.async of one k-tile into a stage (LOAD 1): one pointer per operand, the groups at offsets */
template <typename C>
__device__ __forceinline__ void s32w_copy(float *stage, s32w_src<C> &s, const s32_args &p, int64_t K, int64_t k0)
{
    const int tid = threadIdx.x;
    const int64_t step = C::BK * p.n;
#pragma unroll
    for (int g = 0; g < C::PA; g++) {
        const bool ok = s.oka && k0 + s.krow_a + C::RA * g < K;
        cp_async<16>(&stage[(s.krow_a + C::RA * g) * C::LS + (tid % (C::BM / 4)) * 4],
                     ok ? s.pa[0] + C::RA * g * p.n : p.a, ok);
    }
#pragma unroll
    for (int g = 0; g < C::PB; g++) {
        const bool ok = s.okb && k0 + s.krow_b + C::RB * g < K;
        cp_async<16>(&stage[(s.krow_b + C::RB * g) * C::LS + C::BM + (tid % (C::BN / 4)) * 4],
                     ok ? s.pb[0] + C::RB * g * p.n : p.a, ok);
    }
    s.pa[0] += step;
    s.pb[0] += step;
}

template <typename C>
__device__ __forceinline__ void s32w_put_a(float *stage, int g, float4 v)
{
    const int tid = threadIdx.x;
    *(float4 *)&stage[(tid / (C::BM / 4) + C::RA * g) * C::LS + (tid % (C::BM / 4)) * 4] = v;
}

template <typename C>
__device__ __forceinline__ void s32w_put_b(float *stage, int g, float4 v)
{
    const int tid = threadIdx.x;
    *(float4 *)&stage[(tid / (C::BN / 4) + C::RB * g) * C::LS + C::BM + (tid % (C::BN / 4)) * 4] = v;
}

/* One k-tile's FMAs on stage cur, the next k-tile's staged groups stored into nxt one per k step
 * over steps 9..14 (dbuf_compute_store's placement) */
template <typename C>
__device__ __forceinline__ void s32w_compute_store(const float *cur, float *nxt, int boff, int am, int bn,
                                                   const float4 (&va)[C::PA], const float4 (&vb)[C::PB],
                                                   float (&acc)[16][8])
{
    constexpr int FIRST = C::BK - 1 - C::PA - C::PB;
#pragma unroll
    for (int kk = 0; kk < C::BK; kk++) {
        float av[16], bv[8];
        s32w_frag<C>(cur, boff, am, bn, kk, av, bv);
#pragma unroll
        for (int q = 0; q < C::PA; q++)
            if (kk == FIRST + q)
                s32w_put_a<C>(nxt, q, va[q]);
#pragma unroll
        for (int q = 0; q < C::PB; q++)
            if (kk == FIRST + C::PA + q)
                s32w_put_b<C>(nxt, q, vb[q]);
        s32w_outer(av, bv, acc);
    }
}

/* acc = Σ over k-tiles [kb, ke) of the tile. Leaves the stages free for the next segment. */
template <typename C>
__device__ __forceinline__ void s32w_segment(const s32_args &p, float *smem, int kb, int ke, int64_t t, int am, int bn,
                                             float (&acc)[16][8])
{
    int boff;
    s32w_src<C> s;
    {
        const s32w_geom g = s32w_tile(t, p.nt, p.group);
        int64_t i0, j0;
        bool mirror;
        s32w_place(g, am, &i0, &j0, &mirror, &boff);
        s = s32w_src_init<C>(p, g, kb);
    }
#pragma unroll
    for (int r = 0; r < 16; r++)
#pragma unroll
        for (int c = 0; c < 8; c++)
            acc[r][c] = 0.f;
    const int64_t K = p.m - (int64_t)kb * C::BK, ktiles = ke - kb, step = C::BK * p.n;
    if (C::LOAD == 0) {
        float4 va[C::PA], vb[C::PB];
        s32w_fetch<C>(s, step, K, 0, va, vb);
#pragma unroll
        for (int q = 0; q < C::PA; q++)
            s32w_put_a<C>(smem, q, va[q]);
#pragma unroll
        for (int q = 0; q < C::PB; q++)
            s32w_put_b<C>(smem, q, vb[q]);
        __syncthreads();
        for (int64_t i = 0; i < ktiles; i++) {
            float *cur = smem + (i & 1) * C::STAGE;
            float *nxt = smem + ((i + 1) & 1) * C::STAGE;
            bool more = i + 1 < ktiles;
            if (more) /* the next tile's loads, in flight during this tile's FMAs */
                s32w_fetch<C>(s, step, K, (i + 1) * C::BK, va, vb);
            /* unconditional: on the last tile this stores stale values into the stage nobody reads
             * before the barrier, as dbuf big does */
            s32w_compute_store<C>(cur, nxt, boff, am, bn, va, vb, acc);
            __syncthreads();
        }
    } else {
#pragma unroll
        for (int st = 0; st < C::STAGES - 1; st++) {
            if (st < ktiles)
                s32w_copy<C>(smem + st * C::STAGE, s, p, K, (int64_t)st * C::BK);
            cp_async_commit();
        }
        int rd = 0, wr = C::STAGES - 1;
        for (int64_t i = 0; i < ktiles; i++) {
            cp_async_wait<C::STAGES - 2>();
            __syncthreads();
            if (i + C::STAGES - 1 < ktiles)
                s32w_copy<C>(smem + wr * C::STAGE, s, p, K, (i + C::STAGES - 1) * C::BK);
            cp_async_commit();
            const float *cur = smem + rd * C::STAGE;
#pragma unroll 1
            for (int k0 = 0; k0 < C::BK; k0 += C::UK)
#pragma unroll
                for (int kk = k0; kk < k0 + C::UK; kk++) {
                    float av[16], bv[8];
                    s32w_frag<C>(cur, boff, am, bn, kk, av, bv);
                    s32w_outer(av, bv, acc);
                }
            rd = rd + 1 == C::STAGES ? 0 : rd + 1;
            wr = wr + 1 == C::STAGES ? 0 : wr + 1;
        }
        cp_async_wait<0>();
        __syncthreads();
    }
}

template <typename C>
__global__ void __launch_bounds__(C::NT, 1) ata_s32w_kernel(s32_args p)
{
    extern __shared__ float4 s32w_smem4[];
    float *smem = (float *)s32w_smem4;
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
        s32w_segment<C>(p, smem, kb, ke, t, am, bn, acc);
        const s32w_geom g = s32w_tile(t, p.nt, p.group); /* again: not kept live across the k loop */
        int64_t i0, j0;
        bool mirror;
        int boff;
        s32w_place(g, am, &i0, &j0, &mirror, &boff);
        if (kb > 0) {
            s32_store_slot<C>(p.part + ((int64_t)blockIdx.x - p.dp) * C::BM * C::BN, am, bn, acc);
        } else {
            s32_store_upper<C, true>(p.c, p.n, i0, j0, am, bn, acc);
            if (ke == p.kt && mirror)
                s32_store_mirror<C, true>(p.c, p.n, i0, j0, am, bn, acc);
        }
        u = t * p.kt + ke;
    }
}

/* ata_s32_fixup for the wide tiles: a thread per 4×4 quad of a 256×128 tile, 8 blocks a tile. */
template <typename C>
__global__ void __launch_bounds__(S32_FIX_THREADS) ata_s32w_fixup(s32_args p, int64_t blocks)
{
    constexpr int QC = C::BN / 4, PER_TILE = (C::BM / 4) * QC / S32_FIX_THREADS;
    const int64_t t = p.dp + blockIdx.x / PER_TILE;
    int64_t b_lo, b_hi;
    s32_tile_blocks(p, t, blocks, &b_lo, &b_hi);
    if (b_lo == b_hi)
        return;
    const int quad = (blockIdx.x % PER_TILE) * S32_FIX_THREADS + threadIdx.x, w = quad / 32, lane = quad % 32;
    const int qr = (w / (QC / 4)) * 8 + lane % 8, qc = (w % (QC / 4)) * 4 + lane / 8;
    const s32w_geom g = s32w_tile(t, p.nt, p.group);
    int64_t i0, j0;
    bool mirror;
    int boff;
    s32w_place(g, qr * 4, &i0, &j0, &mirror, &boff);
    s32_fix_quad<true>(p, i0 + qr * 4, j0 + qc * 4, b_lo, b_hi, (int64_t)C::BM * C::BN, C::BN,
                       (int64_t)(qr * 4) * C::BN + qc * 4, mirror);
}

typedef s32w_cfg<0, 2> s32w_regs;  /* dbuf big's loop: 48 KB */
typedef s32w_cfg<1, 3> s32w_cp3;   /* cp.async, 3 stages: 72 KB */
typedef s32w_cfg<1, 4> s32w_cp4;   /* cp.async, 4 stages: 96 KB */
typedef s32w_cfg<1, 3, 32, 16> s32w_cp3k32; /* BK 32, 3 stages: 144 KB, 16 k steps unrolled */
typedef s32w_cfg<1, 2, 32, 16> s32w_cp2k32; /* BK 32, 2 stages: 96 KB */
typedef s32w_cfg<1, 5> s32w_cp5;   /* 120 KB */
typedef s32w_cfg<1, 6> s32w_cp6;   /* 144 KB */

/* cfg 8 (LOAD 0) or 9 with sub-configuration sub (0 cp3, 1 cp4, 2 cp3k32, 3 cp2k32, 4 cp5, 5 cp6):
 * F's template call on the configuration */
template <typename F> static auto s32w_with(int cfg, int sub, F f)
{
    if (cfg == 8)
        return f(s32w_regs());
    switch (sub) {
    case 1: return f(s32w_cp4());
    case 2: return f(s32w_cp3k32());
    case 3: return f(s32w_cp2k32());
    case 4: return f(s32w_cp5());
    case 5: return f(s32w_cp6());
    default: return f(s32w_cp3());
    }
}

template <typename C>
static cudaError_t s32w_prepare(int *resident)
{
    static cr_smem_opt_in opted;
    static int cached = 0;
    if (C::SMEM > 48 * 1024) {
        cudaError_t e = cr_opt_in_smem(opted, ata_s32w_kernel<C>, C::SMEM);
        if (e != cudaSuccess)
            return e;
    }
    if (cached == 0) {
        int r = 0;
        cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&r, ata_s32w_kernel<C>, C::NT, C::SMEM);
        if (e != cudaSuccess)
            return e;
        cached = r < 1 ? 1 : r;
    }
    *resident = cached;
    return cudaSuccess;
}

template <typename C>
static cudaError_t s32w_plan_for(int64_t m, int64_t n, int mode, int group, s32_plan *pl)
{
    int dev = 0, sms = 0, resident = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess)
        e = s32w_prepare<C>(&resident);
    if (e != cudaSuccess)
        return e;
    s32_args &p = pl->p;
    p.m = m;
    p.n = n;
    p.nt = (int)((n + 127) / 128); /* 128-blocks per edge */
    p.tiles = s32w_tiles(p.nt);
    p.kt = (int)(m > 0 ? (m + C::BK - 1) / C::BK : 1);
    p.units = p.tiles * p.kt;
    p.group = group;
    s32_schedule(*pl, mode, (int64_t)sms * resident, resident, (double)C::BM * C::BN, C::BK);
    if (pl->blocks > 0x7fffffff || p.tiles * 8 > 0x7fffffff)
        return cudaErrorInvalidValue;
    return cudaSuccess;
}

template <typename C>
static size_t s32w_slot_bytes(int64_t m, int64_t n, int mode, int group)
{
    s32_plan pl;
    if (s32w_plan_for<C>(m, n, mode, group, &pl) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return pl.p.dp < pl.p.tiles ? (size_t)(pl.blocks - pl.p.dp) * C::BM * C::BN * sizeof(float) : 0;
}

/* The vector path only: the caller checked n % 4 == 0 and the alignment of A and C. */
template <typename C>
static cudaError_t s32w_launch(const float *a, int64_t m, int64_t n, float *c, float *part, int mode, int group,
                               cudaStream_t s)
{
    s32_plan pl;
    cudaError_t e = s32w_plan_for<C>(m, n, mode, group, &pl);
    if (e != cudaSuccess)
        return e;
    if (!part)
        pl.blocks = pl.p.dp = pl.p.tiles;
    pl.p.a = a;
    pl.p.c = c;
    pl.p.part = part;
    ata_s32w_kernel<C><<<(unsigned)pl.blocks, C::NT, C::SMEM, s>>>(pl.p);
    e = cudaGetLastError();
    if (e != cudaSuccess || pl.p.dp == pl.p.tiles)
        return e;
    unsigned fix_blocks = (unsigned)((pl.p.tiles - pl.p.dp) * (C::BM * C::BN / 16 / S32_FIX_THREADS));
    ata_s32w_fixup<C><<<fix_blocks, S32_FIX_THREADS, 0, s>>>(pl.p, pl.blocks);
    return cudaGetLastError();
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
 * (0 the shipped choice, s32_resolve; 1 the 8×8-thread template kernel above, 2..7 the s32
 * configurations, 8 and 9 the wide kernel: 8 register-staged, 9 cp.async), (variant / 10) % 10
 * the schedule (0 as planned, 1 plain tiling, 2 the last wave's tiles shared among a wave of
 * blocks: stream-K on the tail) and variant / 100 the tile-rows per group (0: S32_GROUP); for
 * 8 and 9, variant / 100 = 100·sub + bands per group (0: band by band), sub the cp.async
 * configuration of s32w_with. FP64 always runs the template kernel. */
#define S32_SHIPPED_CFG 7 /* k16s3u8 (the 128² kernel below S32W_MIN_N): the best or within 3% of it at every n measured */
struct sym_variant {
    int cfg, mode, group;
};

static sym_variant sym_variant_of(int variant)
{
    sym_variant v = {variant % 10, (variant / 10) % 10, variant / 100};
    return v; /* cfg 0: s32_resolve picks by size */
}

/* The shipped choice (NOTES-gemm.md, "wide tiles", 2026-11-26/27): from S32W_MIN_N on (where
 * n % 4 == 0) the wide kernel, cp.async 4 stages deep (c9, sub 1), tiles band by band; below, the
 * 128² kernel (k16s3u8). On the H100 (m = n) the wide one ran at 0.78× of its speed at n = 1024,
 * 0.94× at 1280, 1.07× at 1536, 1.08× at 1792, 1.11× at 2048 and 1.14-1.15× from 3072 to 8192. Its
 * launcher falls back to the 128² kernel when A or C is not 16-byte aligned. */
#define S32W_MIN_N 1536
#define S32W_SHIPPED_GROUP 100 /* sub 1 (cp4), g 0 */
static sym_variant s32_resolve(const sym_variant &v, int64_t n)
{
    if (v.cfg != 0)
        return v;
    if (n % 4 == 0 && n >= S32W_MIN_N)
        return sym_variant{9, v.mode, S32W_SHIPPED_GROUP};
    return sym_variant{S32_SHIPPED_CFG, v.mode, v.group};
}

static cudaError_t s32_run(const sym_variant &asked, const float *a, int64_t m, int64_t n, float *c, float *part,
                           cudaStream_t s)
{
    const sym_variant v = s32_resolve(asked, n);
    const int cfg = v.cfg;
    switch (cfg) {
    case 2: return s32_vec_or_not<s32_k16s3>(a, m, n, c, part, v.mode, v.group, s);
    case 3: return s32_vec_or_not<s32_k16s3u4>(a, m, n, c, part, v.mode, v.group, s);
    case 4: return s32_vec_or_not<s32_k32s3u4>(a, m, n, c, part, v.mode, v.group, s);
    case 5: return s32_vec_or_not<s32_k8s4>(a, m, n, c, part, v.mode, v.group, s);
    case 6: return s32_vec_or_not<s32_k16s4u4>(a, m, n, c, part, v.mode, v.group, s);
    case 7: return s32_vec_or_not<s32_k16s3u8>(a, m, n, c, part, v.mode, v.group, s);
    case 8:
    case 9:
        if (n % 4 != 0 || ((uintptr_t)a & 15) != 0 || ((uintptr_t)c & 15) != 0) /* the wide kernel's vector path only */
            return s32_vec_or_not<s32_k16s3u8>(a, m, n, c, part, v.mode, 0, s);
        return s32w_with(cfg, v.group / 100, [&](auto k) {
            return s32w_launch<decltype(k)>(a, m, n, c, part, v.mode, v.group % 100, s);
        });
    default: return cudaErrorInvalidValue;
    }
}

static size_t s32_slots(const sym_variant &asked, int64_t m, int64_t n)
{
    const sym_variant v = s32_resolve(asked, n);
    const int cfg = v.cfg;
    switch (cfg) {
    case 2: return s32_variant_slot_bytes<s32_k16s3>(m, n, v.mode, v.group);
    case 3: return s32_variant_slot_bytes<s32_k16s3u4>(m, n, v.mode, v.group);
    case 4: return s32_variant_slot_bytes<s32_k32s3u4>(m, n, v.mode, v.group);
    case 5: return s32_variant_slot_bytes<s32_k8s4>(m, n, v.mode, v.group);
    case 6: return s32_variant_slot_bytes<s32_k16s4u4>(m, n, v.mode, v.group);
    case 7: return s32_variant_slot_bytes<s32_k16s3u8>(m, n, v.mode, v.group);
    case 8:
    case 9: { /* either kernel may run: the wide one needs A and C aligned, unknown here */
        size_t w = s32w_with(cfg, v.group / 100,
                             [&](auto k) { return s32w_slot_bytes<decltype(k)>(m, n, v.mode, v.group % 100); });
        size_t t = s32_variant_slot_bytes<s32_k16s3u8>(m, n, v.mode, 0);
        return n % 4 == 0 && w > t ? w : t;
    }
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
