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
 * bytes, and each half warp on 16 distinct banks.
 *
 * Per block: a BM×BM tile of C, warps of WM×WN, BK rows of A per stage, STAGES stages of
 * cp.async in flight. Any size: rows/columns outside A are zero-filled by cp.async (src-size
 * 0), stores are bounds-checked; 16-byte copies need an even row length and a 16-byte aligned
 * A, otherwise 8-byte copies. Tiles are visited in groups of DM_GROUP tile rows, column by
 * column, so that the blocks in flight share few slices of A (L2 reuse). The tile edge (64 or
 * 128) is chosen per size by the waves each would take on this device (cr_cuda_ata_dmma). */
#include "kernels/cuda/ata_hist_kernels.h"
#include "kernels/cuda/cp_async.cuh"

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

template <int BM_, int WM_, int WN_, int AM_, int AK_, int BK_, int STAGES_, int MINB_> struct dm_cfg {
    static constexpr int BM = BM_, WM = WM_, WN = WN_, AM = AM_, AK = AK_, BK = BK_, STAGES = STAGES_, MINB = MINB_;
    static constexpr int WARPS_N = BM / WN, THREADS = 32 * (BM / WM) * WARPS_N;
    static constexpr int MI = WM / AM, NI = WN / 8;           /* atoms per warp tile */
    static constexpr int A_REGS = AM * AK / 32, B_REGS = AK / 4, C_REGS = AM / 4;
    static constexpr int LD_K = BM + DM_PAD;                  /* k-major slice: [BK][LD_K] */
    static constexpr int LD_I = BK + DM_PAD;                  /* i-major slice: [BM][LD_I] */
    static constexpr int SLICE = BK * LD_K > BM * LD_I ? BK * LD_K : BM * LD_I;
    static constexpr size_t SMEM = (size_t)STAGES * 2 * SLICE * sizeof(double);
    static_assert(BM % WM == 0 && BM % WN == 0 && WM % AM == 0 && WN % 8 == 0 && BK % AK == 0, "tiling");
};

/* The configurations shipped (H200 sweep, bench/NOTES-gemm.md): 128² tiles, m16n8k4, BK 32, 3
 * stages, one block per SM; and 64² tiles, m16n8k8, BK 16, 3 stages, 4 blocks per SM, for the
 * sizes where 128² tiles leave SMs idle (n = 2000: 136 tiles on 132 SMs). m8n8k4 reaches only
 * about half of these shapes' rate on Hopper. */
using dm_big = dm_cfg<128, 64, 32, 16, 4, 32, 3, 1>;
using dm_small = dm_cfg<64, 32, 32, 16, 8, 16, 3, 4>;

/* Tile number `t` → (bi, bj), bi <= bj: groups of DM_GROUP tile rows, each group column by
 * column (the rows of the group at or above the diagonal), so a wave of blocks spans a few tile
 * rows and many columns rather than a whole row of tiles each. */
__device__ __forceinline__ void dm_tile_of(int64_t t, int64_t nt, int64_t *bi, int64_t *bj)
{
    int64_t s0 = 0, rows = 0;
    for (;; s0 += DM_GROUP) {
        rows = nt - s0 < DM_GROUP ? nt - s0 : DM_GROUP;
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

/* Element (x, k) of a slice: x a row or column of the tile, k within the stage. */
template <class C, bool TRANS> __device__ __forceinline__ double dm_at(const double *s, int x, int k)
{
    return TRANS ? s[x * C::LD_I + k] : s[k * C::LD_K + x];
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
            for (int r = 0; r < C::A_REGS; r++)
                af[mi][r] = dm_at<C, TRANS>(sa, wm0 + mi * C::AM + g + 8 * (r % RH), ks + t + 4 * (r / RH));
#pragma unroll
        for (int ni = 0; ni < C::NI; ni++)
#pragma unroll
            for (int r = 0; r < C::B_REGS; r++)
                bf[ni][r] = dm_at<C, TRANS>(sb, wn0 + ni * 8 + g, ks + t + 4 * r);
#pragma unroll
        for (int mi = 0; mi < C::MI; mi++)
#pragma unroll
            for (int ni = 0; ni < C::NI; ni++)
                cr_dmma_atom<C::AM, C::AK>::mma(acc[mi][ni], af[mi], bf[ni]);
    }
}

/* Writes the warp's accumulators at (i, j) and, off the diagonal, at (j, i). CVEC: n even and
 * C 16-byte aligned, so the (j, j+1) pair of a row is one 16-byte store. */
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
    int64_t bi, bj;
    dm_tile_of(blockIdx.x, nt, &bi, &bj);
    int64_t i0 = bi * C::BM, j0 = bj * C::BM;
    bool diagonal = bi == bj; /* AᵢᵀAᵢ: one slice serves as both operands */
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int g = lane >> 2, t = lane & 3;
    int wm0 = (warp / C::WARPS_N) * C::WM, wn0 = (warp % C::WARPS_N) * C::WN;

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
        if (st < ktiles) {
            double *s = dm_smem + st * 2 * C::SLICE;
            dm_load_slice<C, TRANS, VEC>(s, a, m, n, st * C::BK, i0);
            if (!diagonal)
                dm_load_slice<C, TRANS, VEC>(s + C::SLICE, a, m, n, st * C::BK, j0);
        }
        cp_async_commit();
    }
    for (int64_t kt = 0; kt < ktiles; kt++) {
        cp_async_wait<C::STAGES - 2>();
        __syncthreads(); /* stage kt is in; every warp is done with stage kt-1, refilled below */
        int64_t next = kt + C::STAGES - 1;
        if (next < ktiles) {
            double *s = dm_smem + (int)(next % C::STAGES) * 2 * C::SLICE;
            dm_load_slice<C, TRANS, VEC>(s, a, m, n, next * C::BK, i0);
            if (!diagonal)
                dm_load_slice<C, TRANS, VEC>(s + C::SLICE, a, m, n, next * C::BK, j0);
        }
        cp_async_commit();
        const double *sa = dm_smem + (int)(kt % C::STAGES) * 2 * C::SLICE;
        dm_stage_mma<C, TRANS>(sa, diagonal ? sa : sa + C::SLICE, wm0, wn0, g, t, acc);
    }
    cp_async_wait<0>();
    dm_store<C, CVEC>(c, n, acc, i0 + wm0, j0 + wn0, g, t, !diagonal);
}

template <class C, bool TRANS, bool VEC, bool CVEC>
cudaError_t dm_launch_kernel(const double *a, int64_t m, int64_t n, int64_t nt, unsigned tiles, double *c,
                             cudaStream_t s)
{
    auto kernel = ata_dmma_kernel<C, TRANS, VEC, CVEC>;
    static bool opted_in; /* once per kernel (one GPU type per process); a race sets it twice */
    if (!opted_in) {
        cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SMEM);
        if (e != cudaSuccess)
            return e;
        opted_in = true;
    }
    kernel<<<tiles, C::THREADS, C::SMEM, s>>>(a, m, n, nt, c);
    return cudaGetLastError();
}

template <class C> cudaError_t dm_launch(const cr_ata_dev *t, cudaStream_t s)
{
    const double *a = (const double *)t->a;
    double *c = (double *)t->c;
    int64_t nt = (t->n + C::BM - 1) / C::BM;
    int64_t tiles = nt * (nt + 1) / 2;
    if (tiles > INT_MAX)
        return cudaErrorInvalidValue;
    int64_t row_len = t->trans_a ? t->m : t->n; /* of the stored matrix */
    bool vec = row_len % 2 == 0 && ((uintptr_t)a & 15) == 0;
    bool cvec = t->n % 2 == 0 && ((uintptr_t)c & 15) == 0;
    unsigned grid = (unsigned)tiles;
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

/* Relative time of a configuration on n: waves × the work one SM holds per wave (the blocks it
 * runs at once, the grid's share when that is fewer), over the share of DMMA's rate the
 * configuration reaches (measured, bench/NOTES-gemm.md). */
template <class C> double dm_cost(int64_t n, int sms, double efficiency)
{
    static int per_sm; /* asked once: it depends on the kernel's resources only */
    if (per_sm == 0) {
        int r = 0;
        if (cudaFuncSetAttribute(ata_dmma_kernel<C, false, true, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)C::SMEM) != cudaSuccess ||
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&r, ata_dmma_kernel<C, false, true, true>, C::THREADS,
                                                          C::SMEM) != cudaSuccess) {
            cudaGetLastError(); /* not sticky: the launch reports what is really wrong */
            r = 1;
        }
        per_sm = r < 1 ? 1 : r;
    }
    int64_t nt = (n + C::BM - 1) / C::BM, tiles = nt * (nt + 1) / 2, slots = (int64_t)sms * per_sm;
    int64_t waves = (tiles + slots - 1) / slots, held = (tiles + sms - 1) / sms;
    return (double)waves * (double)(held < per_sm ? held : per_sm) * C::BM * C::BM / efficiency;
}

} // namespace

extern "C" cudaError_t cr_cuda_ata_dmma(const cr_ata_dev *t, cr_dtype dt, cudaStream_t s)
{
    cudaError_t e = cr_ata_begin(t, dt);
    if (e != cudaSuccess)
        return e == cudaErrorNotReady ? cudaSuccess : e;
    if (dt != CR_DT_F64)
        return cudaErrorNotSupported;
    int dev = 0, sms = 0;
    if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess)
        return e;
    if (dm_cost<dm_small>(t->n, sms, 0.85) < dm_cost<dm_big>(t->n, sms, 1.0))
        return dm_launch<dm_small>(t, s);
    return dm_launch<dm_big>(t, s);
}
