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
 * FP32: BM 128, TM 8 (64 accumulators); FP64: BM 64, TM 4 — 256 threads in both.
 *
 * Any size: rows of A past m and columns past n are zero-filled by cp.async (src-size 0), stores
 * are bounds-checked. The vector path needs n a multiple of VW and A 16-byte aligned; otherwise
 * the same kernel copies element by element (VEC = false). */
#include "kernels/cuda/ata_hist_kernels.h"

#define SYM_THREADS 256
#define SYM_BK 16
#define SYM_STAGES 3

template <typename T> struct sym_cfg {
    static constexpr int VW = 16 / sizeof(T);   /* elements per 16-byte vector */
    static constexpr int TM = 2 * VW;           /* thread tile edge */
    static constexpr int BM = 16 * TM;          /* block tile edge: 16 threads across */
    static constexpr int MIN_BLOCKS = sizeof(T) == 4 ? 2 : 3;
};

template <int BYTES> __device__ __forceinline__ void cp_async(void *smem, const void *gmem, bool valid)
{
    unsigned dst = (unsigned)__cvta_generic_to_shared(smem);
    int src_bytes = valid ? BYTES : 0;
    if constexpr (BYTES == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(src_bytes));
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(gmem), "n"(BYTES),
                     "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

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

template <typename T>
static cudaError_t run_symtile(const cr_ata_dev *t, cudaStream_t s)
{
    const T *a = (const T *)t->a;
    if (t->trans_a && t->m > 0) { /* stored Aᵀ (n×m): lay it out as A (m×n) in the scratch first */
        if (!t->work)
            return cudaErrorInvalidValue;
        cudaError_t e = cr_cuda_transpose(t->a, t->work, t->n, t->m, sizeof(T) == 4 ? CR_DT_F32 : CR_DT_F64, s);
        if (e != cudaSuccess)
            return e;
        a = (const T *)t->work;
    }
    return launch_symtile<T>(a, t->m, t->n, (T *)t->c, s);
}

extern "C" cudaError_t cr_cuda_ata_symtile(const cr_ata_dev *t, cr_dtype dt, cudaStream_t s)
{
    cudaError_t e = cr_ata_begin(t, dt);
    if (e != cudaSuccess)
        return e == cudaErrorNotReady ? cudaSuccess : e;
    return dt == CR_DT_F32 ? run_symtile<float>(t, s) : run_symtile<double>(t, s);
}

extern "C" size_t cr_cuda_ata_work_bytes(const cr_ata_dev *t, cr_dtype dt, cr_ata_launcher k)
{
    if (k != cr_cuda_ata_symtile || !t->trans_a || t->m <= 0 || t->n <= 0)
        return 0;
    return (size_t)t->m * (size_t)t->n * cr_dtype_size(dt);
}
