/* AᵀA `dmma`: FP64 C = AᵀA on the FP64 tensor cores (DMMA, mma.sync .f64), the upper-triangle
 * tiles only, each off-diagonal tile also written mirrored to the lower triangle (as symtile).
 *
 * Why its own kernel: symtile runs on the FP64 FMA lanes, half the rate of DMMA on Hopper, so
 * it tops out near 0.35x of cuBLAS DSYRK (which uses DMMA). On Hopper the sm_90 shapes
 * m16n8k4/m16n8k8 matter: the same kernel with m8n8k4 ran at about half their rate (H200:
 * 26 vs 44 TFLOP/s of useful work at n = 8192).
 *
 * C[i][j] = Σ_k A[k][i]·A[k][j]: tile (I, J) reads the slices A[k0.., I] and A[k0.., J]. For a
 * stored A (m×n) these are pieces of rows of A, copied k-major into shared memory ([k][i]); for
 * a stored Aᵀ (n×m, trans_a) they are pieces of its rows, copied i-major ([i][k]). Both layouts
 * are read straight into fragments (one double per register, no ldmatrix for f64), so trans_a
 * costs no transposition and no scratch.
 *
 * Fragments (PTX ISA, mma .f64, groupID g = lane/4, threadID_in_group t = lane%4): A register r
 * holds row g + 8·(r mod AM/8), k t + 4·(r div AM/8); B register r holds k t + 4r, column g; C
 * register 2h+e holds row g + 8h, column 2t + e. Which k slot a register is does not matter as
 * long as A and B agree (it only reorders the sum), so the k mapping needs no exact match.
 * Banks: rows of BM+4 (k-major) or BK+4 (i-major) doubles, ≡ 4 mod 16: the 32 lanes of a
 * fragment load (4 k × 8 rows, or 8 rows × 4 k) fall 2 per 8-byte bank, the minimum for 256
 * bytes, and each half warp on 16 distinct banks. (Pairing a lane's rows so that one 16-byte
 * load fetches two, conflict-free by the same padding, ran 2-5% slower: NOTES-gemm.md.)
 *
 * Per block: TILES (1 or 2) BM×BM tiles of C, warps of WM×WN, BK rows of A per stage for each
 * of the (up to 3) slices the tiles read, STAGES stages of cp.async in flight. Any size:
 * rows/columns outside A are zero-filled by cp.async (src-size 0), stores are bounds-checked;
 * 16-byte copies need an even row length and a 16-byte aligned A, otherwise 8-byte copies.
 *
 * Three configurations, chosen per size by the work each leaves on the busiest SM of this device
 * (cr_cuda_ata_dmma, dm_pick): 64² tiles, four blocks per SM, for most n (on an H100 the
 * fastest from n = 2500 to 12000: 0.5-6% ahead of the 128² tiles at 4000, 10-35% elsewhere);
 * pairs of 64² tiles sharing a slice (a 128×64 block with the 128² configuration's warps, two
 * blocks per SM), which covers the triangle in half-size steps: at n = 2000 it makes 264
 * blocks, exactly one wave of two blocks on each of 132 SMs, and reads A from L2 a third less
 * often than 64² tiles; and 128² tiles, one block per SM (the fewest L2 reads per tile, but on
 * an H100 slower per unit of work than both: kept for the tuning hook and other devices' costs). */
#include "kernels/cuda/ata_hist_kernels.h"
#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/smem_opt_in.cuh"

#include <limits.h>

/* One DMMA: AM×8×AK, AM ∈ {8, 16}. m8n8k4 is sm_80+, the m16n8k* shapes sm_90+ (outside the
 * anonymous namespace: the shapes not shipped stay compiled for the tuning runs, unwarned). */
template <int AM, int AK> struct cr_dmma_atom;

template <> struct cr_dmma_atom<8, 4> {
    static __device__ __forceinline__ void mma(double (&c)[2], const double (&a)[1], const double (&b)[1])
    {
        asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
            : "+d"(c[0]), "+d"(c[1])
            : "d"(a[0]), "d"(b[0]));
    }
};

template <> struct cr_dmma_atom<16, 4> {
    static __device__ __forceinline__ void mma(double (&c)[4], const double (&a)[2], const double (&b)[1])
    {
        asm("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
            : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3])
            : "d"(a[0]), "d"(a[1]), "d"(b[0]));
    }
};

template <> struct cr_dmma_atom<16, 8> {
    static __device__ __forceinline__ void mma(double (&c)[4], const double (&a)[4], const double (&b)[2])
    {
        asm("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3])
            : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
    }
};

namespace {

constexpr int DM_PAD = 4;  /* doubles: row lengths ≡ 4 mod 16, see the banks above */
constexpr int DM_GROUP = 8; /* tile rows per group of the schedule */

template <int BM_, int WM_, int WN_, int AM_, int AK_, int BK_, int STAGES_, int MINB_, int TILES_,
          int GROUP_ = DM_GROUP>
struct dm_cfg {
    static constexpr int BM = BM_, WM = WM_, WN = WN_, AM = AM_, AK = AK_, BK = BK_, STAGES = STAGES_, MINB = MINB_;
    static constexpr int TILES = TILES_;                      /* tiles of C per block */
    static constexpr int GROUP = GROUP_;                      /* tile rows per group (one tile per block) */
    static constexpr int NSL = TILES == 1 ? 2 : 3;            /* slices of A a stage holds at most */
    static constexpr int WARPS_N = BM / WN, WARPS_T = (BM / WM) * WARPS_N; /* warps per tile */
    static constexpr int THREADS = 32 * WARPS_T * TILES;
    static constexpr int MI = WM / AM, NI = WN / 8;           /* atoms per warp tile */
    static constexpr int A_REGS = AM * AK / 32, B_REGS = AK / 4, C_REGS = AM / 4;
    static constexpr int LD_K = BM + DM_PAD;                  /* k-major slice: [BK][LD_K] */
    static constexpr int LD_I = BK + DM_PAD;                  /* i-major slice: [BM][LD_I] */
    /* a slice's doubles in a stage: one tile per block sizes it for the larger layout whichever
     * the launch's (the 64² tiles' two stages fit 4 blocks per SM either way); the pairs size it
     * per layout (the i-major stages of BK 32 are 6% larger: two blocks still fit). */
    __host__ __device__ static constexpr int slice(bool trans)
    {
        return TILES == 1 && BK * LD_K < BM * LD_I ? BM * LD_I
               : TILES == 1                        ? BK * LD_K
               : trans                             ? BM * LD_I
                                                   : BK * LD_K;
    }
    __host__ __device__ static constexpr size_t smem(bool trans)
    {
        return (size_t)STAGES * NSL * slice(trans) * sizeof(double);
    }
    static_assert(BM % WM == 0 && BM % WN == 0 && WM % AM == 0 && WN % 8 == 0 && BK % AK == 0, "tiling");
    static_assert(TILES == 1 || TILES == 2, "one tile, or a pair sharing a slice");
};

/* The configurations shipped (bench/NOTES-gemm.md has the sweeps): 128² tiles, m16n8k4, BK 32,
 * 3 stages, one block per SM; 64² tiles, m16n8k8, BK 16, 2 stages, 4 blocks per SM (40 KiB of
 * shared memory and 128 registers a thread each; H100: 5-13% faster than the 3 stages that fit
 * only 3 blocks, at n = 2000-10000; 5 blocks per SM spill and ran 20-36% slower; m16n8k4 -1 to
 * +4% and BK 8 with 4 stages 0-8% slower); pairs of 64² tiles with 4 warps of 64×32 (the 128²
 * configuration's warp tile), m16n8k4, BK 32, 2 stages, two blocks per SM (H200, n = 2000:
 * 6% faster than BK 16 with 4 stages, 7% than 3, 15% than BK 8 with 8). m8n8k4 reaches only
 * about half of these shapes' rate on Hopper. */
using dm_big = dm_cfg<128, 64, 32, 16, 4, 32, 3, 1, 1>;
using dm_small = dm_cfg<64, 32, 32, 16, 8, 16, 2, 4, 1>;
using dm_pair = dm_cfg<64, 64, 32, 16, 4, 32, 2, 2, 2>;

/* What a block computes: the slices of A it loads (first column of each) and, per tile, which
 * slice gives its rows and which its columns (rows < 0: no tile there). */
struct dm_work {
    int64_t col[3];
    int ns;
    int rows[2], cols[2];
};

/* Number `t` of the triangle's nt·(nt+1)/2 tiles → (bi, bj), bi <= bj: groups of `group` tile
 * rows, each group column by column (the rows of the group at or above the diagonal), so a
 * wave of blocks spans a few tile rows and many columns rather than a whole row of tiles each. */
__device__ __forceinline__ void dm_tile_of(int64_t t, int64_t nt, int group, int64_t *bi, int64_t *bj)
{
    int64_t s0 = 0, rows = 0;
    for (;; s0 += group) {
        rows = nt - s0 < group ? nt - s0 : group;
        int64_t count = rows * nt - rows * s0 - rows * (rows - 1) / 2;
        if (t < count)
            break;
        t -= count;
    }
    for (int64_t j = s0;; j++) {
        int64_t cnt = (j < s0 + rows - 1 ? j : s0 + rows - 1) - s0 + 1;
        if (t < cnt) {
            *bi = s0 + t;
            *bj = j;
            return;
        }
        t -= cnt;
    }
}

__device__ __forceinline__ int64_t dm_slice_col(const dm_work &w, int s)
{
    return s == 0 ? w.col[0] : s == 1 ? w.col[1] : w.col[2];
}

/* One tile per block: block b is tile b of dm_tile_of. */
__device__ __forceinline__ dm_work dm_work_tile(int64_t b, int64_t nt, int bm, int group)
{
    int64_t bi, bj;
    dm_tile_of(b, nt, group, &bi, &bj);
    dm_work w;
    w.col[0] = bi * bm;
    w.col[1] = w.col[2] = bj * bm;
    w.ns = bi == bj ? 1 : 2; /* a diagonal tile is AᵢᵀAᵢ: one slice serves as both operands */
    w.rows[0] = 0;
    w.cols[0] = bi == bj ? 0 : 1;
    w.rows[1] = w.cols[1] = -1;
    return w;
}

/* Blocks of the pair schedule for nt 64-tiles per edge: the triangle's 128² squares (q = ⌈nt/2⌉
 * per edge) in dm_tile_of's order, two blocks for a square off the diagonal (64-row r with the
 * 64-columns c, c+1: r's slice read once for both tiles), one for a square on it ((r, r) and
 * (r, r+1)), then the diagonal squares' last tiles (r+1, r+1) two by two. */
__host__ __device__ __forceinline__ int64_t dm_pair_blocks(int64_t nt)
{
    int64_t q = (nt + 1) / 2, halves = nt / 2;
    return q * (q + 1) - q + (halves + 1) / 2;
}

__device__ __forceinline__ dm_work dm_work_pair(int64_t b, int64_t nt)
{
    const int64_t q = (nt + 1) / 2, main = q * (q + 1) - q;
    dm_work w;
    if (b >= main) { /* two last tiles of diagonal squares: (2x+1, 2x+1) and (2x+3, 2x+3) */
        int64_t r0 = 4 * (b - main) + 1, r1 = r0 + 2;
        w.col[0] = r0 * 64;
        w.col[1] = w.col[2] = r1 * 64;
        w.ns = r1 < nt ? 2 : 1;
        w.rows[0] = w.cols[0] = 0;
        w.rows[1] = w.cols[1] = r1 < nt ? 1 : -1;
        return w;
    }
    int64_t s0 = 0, rows = 0;
    for (;; s0 += DM_GROUP) { /* the group of squares: each has 2 blocks but its `rows` diagonal ones 1 */
        rows = q - s0 < DM_GROUP ? q - s0 : DM_GROUP;
        int64_t blocks = 2 * (rows * q - rows * s0 - rows * (rows - 1) / 2) - rows;
        if (b < blocks)
            break;
        b -= blocks;
    }
    int64_t sq_row = 0, sq_col = s0;
    for (;; sq_col++) { /* column by column; a column's diagonal square, if any, comes last */
        int64_t cnt = (sq_col < s0 + rows - 1 ? sq_col : s0 + rows - 1) - s0 + 1;
        int64_t blocks = 2 * cnt - (sq_col < s0 + rows ? 1 : 0);
        if (b < blocks) {
            sq_row = s0 + b / 2;
            break;
        }
        b -= blocks;
    }
    int64_t c0 = 2 * sq_col; /* the square's first 64-column; c0 + 1 may be past nt */
    bool second = c0 + 1 < nt;
    if (sq_row == sq_col) { /* (c0, c0) and (c0, c0+1): two slices */
        w.col[0] = c0 * 64;
        w.col[1] = w.col[2] = (c0 + 1) * 64;
        w.ns = second ? 2 : 1;
        w.rows[0] = w.cols[0] = 0;
        w.rows[1] = second ? 0 : -1;
        w.cols[1] = 1;
        return w;
    }
    w.col[0] = (2 * sq_row + (b & 1)) * 64; /* row r: (r, c0) and (r, c0+1), three slices */
    w.col[1] = c0 * 64;
    w.col[2] = (c0 + 1) * 64;
    w.ns = second ? 3 : 2;
    w.rows[0] = 0;
    w.cols[0] = 1;
    w.rows[1] = second ? 0 : -1;
    w.cols[1] = 2;
    return w;
}

/* Copies the slice of columns [col0, col0+BM) × k [k0, k0+BK) of A into dst, zeros outside A.
 * TRANS: the stored matrix is Aᵀ (n×m), dst is [BM][LD_I]; else A (m×n), dst is [BK][LD_K]. */
template <class C, bool TRANS, bool VEC>
__device__ __forceinline__ void dm_load_slice(double *dst, const double *__restrict__ a, int64_t m, int64_t n,
                                              int64_t k0, int64_t col0)
{
    constexpr int W = VEC ? 2 : 1; /* doubles per copy */
    constexpr int PER_ROW = (TRANS ? C::BK : C::BM) / W;
    constexpr int COPIES = C::BK * C::BM / W / C::THREADS;
    static_assert(C::BK * C::BM / W % C::THREADS == 0, "copies per thread");
#pragma unroll
    for (int q = 0; q < COPIES; q++) {
        int v = threadIdx.x + q * C::THREADS;
        int r = v / PER_ROW, e = (v % PER_ROW) * W;
        /* VEC: the row length is even, so a 2-vector is all inside or all outside */
        if (TRANS) {
            int64_t i = col0 + r, k = k0 + e;
            bool valid = i < n && k < m;
            cp_async<W * 8>(dst + r * C::LD_I + e, valid ? a + i * m + k : a, valid);
        } else {
            int64_t k = k0 + r, col = col0 + e;
            bool valid = k < m && col < n;
            cp_async<W * 8>(dst + r * C::LD_K + e, valid ? a + k * n + col : a, valid);
        }
    }
}

template <class C, bool TRANS, bool VEC>
__device__ __forceinline__ void dm_load_stage(double *stage, const double *__restrict__ a, int64_t m, int64_t n,
                                              int64_t k0, const dm_work &w)
{
#pragma unroll
    for (int s = 0; s < C::NSL; s++)
        if (s < w.ns)
            dm_load_slice<C, TRANS, VEC>(stage + s * C::slice(TRANS), a, m, n, k0, w.col[s]);
}

/* The warp's WM×WN part of the stage's BK-deep product, accumulated into acc. */
template <class C, bool TRANS>
__device__ __forceinline__ void dm_stage_mma(const double *sa, const double *sb, int wm0, int wn0, int g, int t,
                                             double (&acc)[C::MI][C::NI][C::C_REGS])
{
    constexpr int RH = C::AM / 8; /* A rows per register group: 1 (m8) or 2 (m16) */
#pragma unroll
    for (int ks = 0; ks < C::BK; ks += C::AK) {
        double af[C::MI][C::A_REGS], bf[C::NI][C::B_REGS];
#pragma unroll
        for (int mi = 0; mi < C::MI; mi++)
#pragma unroll
            for (int r = 0; r < C::A_REGS; r++) {
                int x = wm0 + mi * C::AM + g + 8 * (r % RH), k = ks + t + 4 * (r / RH);
                af[mi][r] = TRANS ? sa[x * C::LD_I + k] : sa[k * C::LD_K + x];
            }
#pragma unroll
        for (int ni = 0; ni < C::NI; ni++)
#pragma unroll
            for (int r = 0; r < C::B_REGS; r++) {
                int x = wn0 + ni * 8 + g, k = ks + t + 4 * r;
                bf[ni][r] = TRANS ? sb[x * C::LD_I + k] : sb[k * C::LD_K + x];
            }
#pragma unroll
        for (int mi = 0; mi < C::MI; mi++)
#pragma unroll
            for (int ni = 0; ni < C::NI; ni++)
                cr_dmma_atom<C::AM, C::AK>::mma(acc[mi][ni], af[mi], bf[ni]);
    }
}

/* Writes the warp's accumulators at (i0.., j0..) and, off the diagonal, at (j0.., i0..). CVEC: n
 * even and C 16-byte aligned, so the (j, j+1) pair of a row is one 16-byte store. */
template <class C, bool CVEC>
__device__ __forceinline__ void dm_store(double *__restrict__ c, int64_t n, const double (&acc)[C::MI][C::NI][C::C_REGS],
                                         int64_t i0, int64_t j0, int g, int t, bool mirror)
{
#pragma unroll
    for (int mi = 0; mi < C::MI; mi++)
#pragma unroll
        for (int h = 0; h < C::AM / 8; h++) {
            int64_t i = i0 + mi * C::AM + g + 8 * h;
#pragma unroll
            for (int ni = 0; ni < C::NI; ni++) {
                int64_t j = j0 + ni * 8 + 2 * t;
                double v0 = acc[mi][ni][2 * h], v1 = acc[mi][ni][2 * h + 1];
                if (i < n) {
                    if (CVEC) {
                        if (j < n)
                            *reinterpret_cast<double2 *>(c + i * n + j) = make_double2(v0, v1);
                    } else {
                        if (j < n)
                            c[i * n + j] = v0;
                        if (j + 1 < n)
                            c[i * n + j + 1] = v1;
                    }
                    if (mirror) {
                        if (j < n)
                            c[j * n + i] = v0;
                        if (j + 1 < n)
                            c[(j + 1) * n + i] = v1;
                    }
                }
            }
        }
}

template <class C, bool TRANS, bool VEC, bool CVEC>
__global__ void __launch_bounds__(C::THREADS, C::MINB)
    ata_dmma_kernel(const double *__restrict__ a, int64_t m, int64_t n, int64_t nt, double *__restrict__ c)
{
    extern __shared__ __align__(16) double dm_smem[];
    constexpr int SLICE = C::slice(TRANS), STAGE = C::NSL * SLICE;
    const dm_work w =
        C::TILES == 1 ? dm_work_tile(blockIdx.x, nt, C::BM, C::GROUP) : dm_work_pair(blockIdx.x, nt);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane >> 2, t = lane & 3;
    const int tile = C::TILES == 1 ? 0 : warp / C::WARPS_T, wt = warp % C::WARPS_T; /* its tile, place in it */
    const int wm0 = (wt / C::WARPS_N) * C::WM, wn0 = (wt % C::WARPS_N) * C::WN;
    /* the slices of this warp's tile (selects, not indexing: w stays in registers); rs < 0: the
     * block's second tile is missing */
    const int rs = tile == 0 ? w.rows[0] : w.rows[1], cs = tile == 0 ? w.cols[0] : w.cols[1];

    double acc[C::MI][C::NI][C::C_REGS];
#pragma unroll
    for (int mi = 0; mi < C::MI; mi++)
#pragma unroll
        for (int ni = 0; ni < C::NI; ni++)
#pragma unroll
            for (int r = 0; r < C::C_REGS; r++)
                acc[mi][ni][r] = 0.0;

    int64_t ktiles = (m + C::BK - 1) / C::BK;
#pragma unroll
    for (int st = 0; st < C::STAGES - 1; st++) {
        if (st < ktiles)
            dm_load_stage<C, TRANS, VEC>(dm_smem + st * STAGE, a, m, n, st * C::BK, w);
        cp_async_commit();
    }
    for (int64_t kt = 0; kt < ktiles; kt++) {
        cp_async_wait<C::STAGES - 2>();
        __syncthreads(); /* stage kt is in; every warp is done with stage kt-1, refilled below */
        int64_t next = kt + C::STAGES - 1;
        if (next < ktiles)
            dm_load_stage<C, TRANS, VEC>(dm_smem + (int)(next % C::STAGES) * STAGE, a, m, n, next * C::BK, w);
        cp_async_commit();
        const double *s = dm_smem + (int)(kt % C::STAGES) * STAGE;
        if (rs >= 0)
            dm_stage_mma<C, TRANS>(s + rs * SLICE, s + cs * SLICE, wm0, wn0, g, t, acc);
    }
    cp_async_wait<0>();
    if (rs >= 0) {
        int64_t i0 = dm_slice_col(w, rs), j0 = dm_slice_col(w, cs);
        dm_store<C, CVEC>(c, n, acc, i0 + wm0, j0 + wn0, g, t, i0 != j0);
    }
}

/* Opt in to the kernel's shared memory on this device. */
template <class C, bool TRANS, bool VEC, bool CVEC> cudaError_t dm_prepare(void)
{
    static cr_smem_opt_in opted;
    return cr_opt_in_smem(opted, ata_dmma_kernel<C, TRANS, VEC, CVEC>, C::smem(TRANS));
}

/* Blocks of the configuration's schedule for n, and the tiles per edge it passes the kernel. */
template <class C> int64_t dm_blocks(int64_t n, int64_t *nt)
{
    *nt = (n + C::BM - 1) / C::BM;
    return C::TILES == 1 ? *nt * (*nt + 1) / 2 : dm_pair_blocks(*nt);
}

template <class C, bool TRANS, bool VEC, bool CVEC>
cudaError_t dm_launch_kernel(const double *a, int64_t m, int64_t n, int64_t nt, unsigned blocks, double *c,
                             cudaStream_t s)
{
    cudaError_t e = dm_prepare<C, TRANS, VEC, CVEC>();
    if (e != cudaSuccess)
        return e;
    ata_dmma_kernel<C, TRANS, VEC, CVEC><<<blocks, C::THREADS, C::smem(TRANS), s>>>(a, m, n, nt, c);
    return cudaGetLastError();
}

template <class C> cudaError_t dm_launch(const cr_ata_dev *t, cudaStream_t s)
{
    const double *a = (const double *)t->a;
    double *c = (double *)t->c;
    int64_t nt = 0, blocks = dm_blocks<C>(t->n, &nt);
    if (blocks > INT_MAX)
        return cudaErrorInvalidValue;
    int64_t row_len = t->trans_a ? t->m : t->n; /* of the stored matrix */
    bool vec = row_len % 2 == 0 && ((uintptr_t)a & 15) == 0;
    bool cvec = t->n % 2 == 0 && ((uintptr_t)c & 15) == 0;
    unsigned grid = (unsigned)blocks;
#define DM_GO(TR, V, CV) return dm_launch_kernel<C, TR, V, CV>(a, t->m, t->n, nt, grid, c, s)
    if (t->trans_a) {
        if (vec) {
            if (cvec) DM_GO(true, true, true);
            DM_GO(true, true, false);
        }
        if (cvec) DM_GO(true, false, true);
        DM_GO(true, false, false);
    }
    if (vec) {
        if (cvec) DM_GO(false, true, true);
        DM_GO(false, true, false);
    }
    if (cvec) DM_GO(false, false, true);
    DM_GO(false, false, false);
#undef DM_GO
}

/* Relative time of a configuration on n: the most work one SM gets, ⌈blocks / SMs⌉ blocks of
 * TILES tiles of BM² (the block scheduler hands blocks to SMs as slots free, so a partial last
 * wave costs its share, not a whole wave), over the configuration's rate per unit of work:
 * `one_wave` where the grid is exactly one full wave (every SM holds its blocks per SM, or all
 * but one of them, and none are left for later), `efficiency` otherwise (measured,
 * bench/NOTES-gemm.md). A grid that leaves SMs with fewer blocks gets no bonus: a block with
 * the SM to itself runs faster than its share, which this count does not see (n = 1000, pairs
 * 68 blocks on 132 SMs: 13% slower than the 64² tiles' 136). */
template <class C> double dm_cost(int64_t n, int sms, double efficiency, double one_wave)
{
    static int per_sm; /* asked once: it depends on the kernel's resources only */
    if (per_sm == 0) {
        int r = 0;
        if (dm_prepare<C, false, true, true>() != cudaSuccess ||
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&r, ata_dmma_kernel<C, false, true, true>, C::THREADS,
                                                          C::smem(false)) != cudaSuccess) {
            cudaGetLastError(); /* not sticky: the launch reports what is really wrong */
            r = 1;
        }
        per_sm = r < 1 ? 1 : r;
    }
    int64_t nt = 0, blocks = dm_blocks<C>(n, &nt), held = (blocks + sms - 1) / sms;
    double work = (double)held * C::TILES * C::BM * C::BM;
    bool full_wave = blocks > (int64_t)sms * (per_sm - 1) && blocks <= (int64_t)sms * per_sm;
    return work / (full_wave ? one_wave : efficiency);
}

/* Configuration `v`: 1 the 128² tiles, 2 the 64² tiles, 3 the pairs; 0 the cheapest by dm_cost.
 * Rates fitted on an H100 (bench/NOTES-gemm.md, 2026-11-26 (session 6): each configuration timed
 * in turns with DSYRK, n = 1000-8000 in steps of 500, 10000, 12000): per unit of work the 64²
 * tiles (4 blocks per SM) are the fastest, the pairs 0.92 of them and the 128² tiles 0.87,
 * but pairs that make exactly one full wave (n = 2000: 264 blocks, two on each of 132 SMs) run
 * 5% faster than the 64² tiles' one wave (their shared slice: 1.5 slices read per tile, not 2).
 * So, on 132 SMs: the pairs at n = 1729-2048 (measured faster at 1800 and 2000), the 64² tiles
 * everywhere else (measured fastest at 1000, 1500 and 2500-12000); ties go to the 64² tiles,
 * then the pairs. */
cudaError_t dm_pick(int64_t n, int *v)
{
    int dev = 0, sms = 0;
    cudaError_t e;
    if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess)
        return e;
    double small = dm_cost<dm_small>(n, sms, 1.0, 1.0), pair = dm_cost<dm_pair>(n, sms, 0.92, 1.06);
    double big = dm_cost<dm_big>(n, sms, 0.87, 0.87);
    *v = small <= pair && small <= big ? 2 : pair <= big ? 3 : 1;
    return cudaSuccess;
}

cudaError_t dm_run(const cr_ata_dev *t, int v, cudaStream_t s)
{
    if (v == 0) {
        cudaError_t e = dm_pick(t->n, &v);
        if (e != cudaSuccess)
            return e;
    }
    switch (v) {
    case 1: return dm_launch<dm_big>(t, s);
    case 2: return dm_launch<dm_small>(t, s);
    case 3: return dm_launch<dm_pair>(t, s);
    default: return cudaErrorInvalidValue;
    }
}

} // namespace

/* Tuning hook (not in the header; tests/gpu/ata_hist.cu): `variant` 0 is cr_cuda_ata_dmma, 1..3
 * force the 128², 64² or pair configuration. */
extern "C" cudaError_t cr_cuda_ata_dmma_variant(const cr_ata_dev *t, cr_dtype dt, cudaStream_t s, int variant)
{
    cudaError_t e = cr_ata_begin(t, dt);
    if (e != cudaSuccess)
        return e == cudaErrorNotReady ? cudaSuccess : e;
    if (dt != CR_DT_F64)
        return cudaErrorNotSupported;
    return dm_run(t, variant, s);
}

/* Benchmark hook (bench/ata_hist.cu): the configuration variant 0 takes for n on the current
 * device (1..3 as above), 0 if the device cannot be asked. */
extern "C" int cr_cuda_ata_dmma_choice(int64_t n)
{
    int v = 0;
    return dm_pick(n, &v) == cudaSuccess ? v : 0;
}

extern "C" cudaError_t cr_cuda_ata_dmma(const cr_ata_dev *t, cr_dtype dt, cudaStream_t s)
{
    return cr_cuda_ata_dmma_variant(t, dt, s, 0);
}
