/* GEMM on the tensor cores through mma.sync: `tc-tf32` (FP32 in and out, TF32 multiplies, FP32
 * accumulation) and `tc` (FP16 or BF16 in and out, FP32 accumulation, C rounded to nearest even
 * once, after alpha and beta).
 *
 * Why mma.sync and not wgmma + TMA: one kernel source covers every dtype, transpose, alignment
 * and size (TMA needs 16-byte aligned strides and a tensor map per operand; wgmma wants its
 * operands in one of its fixed shared layouts, with MN-major TF32 not allowed at all), and it
 * can be checked piece by piece against the PTX fragment tables. bench/NOTES-gemm.md has the
 * figures and what this leaves on the table against cuBLAS's wgmma kernels. Since then, `tc`
 * hands FP16/BF16 problems that TMA can read and that are big enough to gemm_wgmma.cu (wgmma +
 * TMA, sm_90a), and so does `tc-tf32` (its MN-major operands transposed into scratch first,
 * wgmma having no transpose for TF32); this kernel keeps everything else (tc_dispatch).
 *
 * Structure:
 *  - a block owns a BM×BN tile of C, each warp a WM×WN tile made of 16×8 mma tiles whose FP32
 *    accumulators stay in registers for the whole K loop;
 *  - op(A) and op(B) tiles go to shared memory in the layout they have in global memory (no
 *    transposition while staging): K-major (A untransposed, B transposed: rows of 128 bytes
 *    along k) or MN-major (A transposed, B untransposed: rows of k, BM or BN elements long).
 *    ldmatrix (.trans for 16-bit MN-major) turns either into the mma fragments; TF32 MN-major
 *    has no ldmatrix form (it transposes 16-bit halves), so those fragments are 32-bit LDS;
 *  - the 16-byte chunks of each shared row are XOR-swizzled by the row, so ldmatrix, the
 *    scalar TF32 reads and the cp.async writes each hit 32 distinct banks;
 *  - STAGES-deep cp.async pipeline, one barrier per k-tile: while the tensor cores work on tile
 *    t, tiles t+1..t+STAGES-1 are in flight. cp.async zero-fills chunks outside the matrix, so
 *    partial tiles add nothing. When a base pointer is not 16-byte aligned or a leading
 *    dimension is not a multiple of 16 bytes, the same pipeline stages through registers with
 *    per-element bounds checks instead (correct, slower);
 *  - blocks are visited in groups of TC_GROUP tile-rows (as dbuf) so resident blocks share
 *    A and B panels in L2. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/gemm_common.cuh"
#include "kernels/cuda/smem_opt_in.cuh"

#define TC_GROUP 8

/* ---- element types -------------------------------------------------------------------------- */

/* The three input types: the bits that travel (word), how many fit one 16-byte chunk (KC), the
 * mma's k per instruction (two chunks), and conversions of C. */
template <typename T>
struct tc_elem;

template <>
struct tc_elem<float> {
    typedef uint32_t word;
    static constexpr bool tf32 = true;
    static __device__ __forceinline__ float to_f(float x) { return x; }
    static __device__ __forceinline__ void store2(float *c, float x, float y) { *(float2 *)c = make_float2(x, y); }
    static __device__ __forceinline__ float2 load2(const float *c) { return *(const float2 *)c; }
    static __device__ __forceinline__ float from_f(float x) { return x; }
};

template <>
struct tc_elem<__half> {
    typedef uint16_t word;
    static constexpr bool tf32 = false;
    static __device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
    static __device__ __forceinline__ void store2(__half *c, float x, float y)
    {
        *(__half2 *)c = __floats2half2_rn(x, y);
    }
    static __device__ __forceinline__ float2 load2(const __half *c) { return __half22float2(*(const __half2 *)c); }
    static __device__ __forceinline__ __half from_f(float x) { return __float2half_rn(x); }
};

template <>
struct tc_elem<__nv_bfloat16> {
    typedef uint16_t word;
    static constexpr bool tf32 = false;
    static __device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
    static __device__ __forceinline__ void store2(__nv_bfloat16 *c, float x, float y)
    {
        *(__nv_bfloat162 *)c = __floats2bfloat162_rn(x, y);
    }
    static __device__ __forceinline__ float2 load2(const __nv_bfloat16 *c)
    {
        return __bfloat1622float2(*(const __nv_bfloat162 *)c);
    }
    static __device__ __forceinline__ __nv_bfloat16 from_f(float x) { return __float2bfloat16_rn(x); }
};

/* ---- configuration -------------------------------------------------------------------------- */

/* BM×BN block tile, WARPS_M×WARPS_N warps, STAGES shared stages, MINB blocks per SM wanted.
 * BK is fixed at 128 bytes of k (32 TF32 or 64 16-bit elements): 8 chunks per K-major row,
 * which is what the swizzle spreads over the 32 banks. */
template <typename T, int BM_, int BN_, int WARPS_M_, int WARPS_N_, int STAGES_, int MINB_>
struct tc_cfg {
    typedef T elem;
    static constexpr int ES = sizeof(T), KC = 16 / ES, BK = 8 * KC, KSTEP = 2 * KC, KSTEPS = BK / KSTEP;
    static constexpr int BM = BM_, BN = BN_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;
    static constexpr int STAGES = STAGES_, MINB = MINB_, NT = WARPS_M * WARPS_N * 32;
    static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N, MT = WM / 16, NTL = WN / 8;
    static constexpr int A_BYTES = BM * 128, B_BYTES = BN * 128, STAGE = A_BYTES + B_BYTES;
    static constexpr size_t SMEM = (size_t)STAGES * STAGE;
    static_assert(WM % 16 == 0 && WN % 16 == 0, "warp tile: whole 16×16 pieces (B fragments load in pairs)");
    static_assert(BM * ES % 128 == 0 && BN * ES % 128 == 0, "MN-major rows: whole 128-byte swizzle groups");
    static_assert(BM * 8 % NT == 0 && BN * 8 % NT == 0, "tile chunks must split evenly over the threads");
};

/* ---- PTX wrappers --------------------------------------------------------------------------- */

__device__ __forceinline__ uint32_t tc_smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* 16 bytes global -> shared, bypassing L1; src_bytes 0 writes zeros and reads nothing */
__device__ __forceinline__ void tc_cp16(uint32_t dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void tc_cp_commit(void) { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void tc_cp_wait(void)
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void tc_ldsm4(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void tc_ldsm4_t(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ uint32_t tc_lds32(uint32_t addr)
{
    uint32_t v;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr));
    return v;
}

/* FP32 -> TF32, rounded to nearest (ties away), as cuBLAS rounds its TF32 inputs: the mma
 * itself would only drop the low 13 bits */
__device__ __forceinline__ uint32_t tc_tf32(uint32_t x)
{
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(__uint_as_float(x)));
    return r;
}

/* D = A·B + D on one 16×8 tile: k = 8 for TF32, 16 for FP16/BF16 */
template <typename T>
__device__ __forceinline__ void tc_mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]);

template <>
__device__ __forceinline__ void tc_mma<float>(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2])
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <>
__device__ __forceinline__ void tc_mma<__half>(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2])
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <>
__device__ __forceinline__ void tc_mma<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2])
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* ---- shared layout -------------------------------------------------------------------------- */

/* Byte offset of chunk c (16 bytes) of row r in an operand's shared tile. K-major rows are 128
 * bytes (8 chunks) and chunk c goes to c ^ (r % 8): the 8 rows an ldmatrix reads at one chunk
 * column land in 8 distinct 16-byte bank groups. MN-major rows are BO·ES bytes; ldmatrix.trans
 * reads 8 consecutive k rows at one chunk column, so the same r % 8 serves the 16-bit types,
 * while TF32's scalar fragment reads take 4 consecutive k rows × 2 chunks at once: XOR by
 * 2·(r % 4) keeps those 8 chunks apart. XOR stays inside a 128-byte group, so each row's
 * cp.async writes stay a permutation of whole bank sets. */
template <bool KMAJOR, bool TF32, int ROWB>
__device__ __forceinline__ uint32_t tc_off(int r, int c)
{
    int x = KMAJOR || !TF32 ? (r & 7) : (r & 3) << 1;
    return (uint32_t)(r * ROWB + ((c ^ x) << 4));
}

/* ---- global -> shared ----------------------------------------------------------------------- */

/* One operand's tile (BO rows of m or n × BK of k in op() terms), K-major when KMAJOR. Each of
 * the tile's BO·8 chunks is one thread's 16-byte copy; consecutive threads take consecutive
 * chunks of a stored row, so the global reads coalesce. x is O×K in op() terms, ld as stored. */
template <typename C, int BO, bool KMAJOR>
struct tc_loader {
    typedef typename C::elem T;
    typedef typename tc_elem<T>::word W;
    static constexpr int CPR = KMAJOR ? 8 : BO * C::ES / 16; /* chunks per shared row */
    static constexpr int ROWB = CPR * 16;
    static constexpr int PER = BO * 8 / C::NT;

    /* VEC: every chunk is wholly inside or wholly outside the matrix (aligned base, ld a
     * multiple of KC), so cp.async can move it. */
    template <bool VEC>
    static __device__ __forceinline__ void load(char *stage, const T *__restrict__ x, int64_t ld, int64_t O,
                                                int64_t K, int64_t o0, int64_t k0, int tid)
    {
#pragma unroll
        for (int i = 0; i < PER; i++) {
            int e = tid + i * C::NT, r = e / CPR, c = e % CPR;
            int64_t o = KMAJOR ? o0 + r : o0 + (int64_t)c * C::KC;
            int64_t k = KMAJOR ? k0 + (int64_t)c * C::KC : k0 + r;
            char *dst = stage + tc_off<KMAJOR, tc_elem<T>::tf32, ROWB>(r, c);
            bool in = o < O && k < K;
            const T *src = KMAJOR ? x + o * ld + k : x + k * ld + o;
            if (VEC) {
                tc_cp16(tc_smem_addr(dst), in ? (const void *)src : (const void *)x, in ? 16 : 0);
            } else {
                /* element by element through registers: any alignment, any edge */
                const W *s = (const W *)src;
                union {
                    W w[C::KC];
                    uint4 v;
                } u;
#pragma unroll
                for (int j = 0; j < C::KC; j++)
                    u.w[j] = (KMAJOR ? o < O && k + j < K : k < K && o + j < O) ? s[j] : (W)0;
                *(uint4 *)dst = u.v;
            }
        }
    }
};

/* ---- shared -> fragments -------------------------------------------------------------------- */

/* A fragments of the warp's MT m-tiles for k-step ks. mma's A is "row" (m×k): K-major tiles
 * go straight through ldmatrix, MN-major 16-bit ones through ldmatrix.trans, MN-major TF32
 * as 32-bit reads of (m = g, g+8; k = t, t+4). */
template <typename C, bool KMAJOR>
__device__ __forceinline__ void tc_frag_a(uint32_t sa, int wm, int ks, int lane, uint32_t (&a)[C::MT][4])
{
    typedef typename C::elem T;
    constexpr bool TF = tc_elem<T>::tf32;
    constexpr int ROWB = KMAJOR ? 128 : C::BM * C::ES;
#pragma unroll
    for (int i = 0; i < C::MT; i++) {
        int m = wm + i * 16;
        if (KMAJOR) { /* matrices (m 0-7, k lo) (m 8-15, k lo) (m 0-7, k hi) (m 8-15, k hi) */
            tc_ldsm4(a[i], sa + tc_off<true, TF, ROWB>(m + lane % 16, ks * 2 + lane / 16));
        } else if (!TF) { /* stored k×m: matrix q holds k rows (q/2)·8.., m columns (q%2)·8.. */
            int q = lane / 8, k = ks * C::KSTEP + (q / 2) * 8 + lane % 8;
            tc_ldsm4_t(a[i], sa + tc_off<false, TF, ROWB>(k, (m + (q % 2) * 8) / C::KC));
        } else {
            int g = lane / 4, t = lane % 4, k = ks * C::KSTEP + t;
#pragma unroll
            for (int h = 0; h < 4; h++) { /* a0 (g, t) a1 (g+8, t) a2 (g, t+4) a3 (g+8, t+4) */
                int mm = m + g + (h % 2) * 8, kk = k + (h / 2) * 4;
                a[i][h] = tc_lds32(sa + tc_off<false, TF, ROWB>(kk, mm / 4) + (mm % 4) * 4);
            }
        }
        if (TF) /* K-major TF32 came through ldmatrix as raw FP32 bits: round them too */
#pragma unroll
            for (int h = 0; h < 4; h++)
                a[i][h] = tc_tf32(a[i][h]);
    }
}

/* B fragments of the warp's NTL n-tiles (in pairs). mma's B is "col" (k×n stored n-major):
 * K-major tiles (B transposed, stored n×k) go through plain ldmatrix, MN-major 16-bit ones
 * through ldmatrix.trans, MN-major TF32 as 32-bit reads of (k = t, t+4; n = g). */
template <typename C, bool KMAJOR>
__device__ __forceinline__ void tc_frag_b(uint32_t sb, int wn, int ks, int lane, uint32_t (&b)[C::NTL][2])
{
    typedef typename C::elem T;
    constexpr bool TF = tc_elem<T>::tf32;
    constexpr int ROWB = KMAJOR ? 128 : C::BN * C::ES;
#pragma unroll
    for (int j = 0; j < C::NTL; j += 2) {
        int n = wn + j * 8;
        if (KMAJOR || !TF) {
            uint32_t r[4];
            int q = lane / 8;
            if (KMAJOR) /* matrices (n lo, k lo) (n lo, k hi) (n hi, k lo) (n hi, k hi) */
                tc_ldsm4(r, sb + tc_off<true, TF, ROWB>(n + (q / 2) * 8 + lane % 8, ks * 2 + q % 2));
            else /* stored k×n: matrix q holds k rows (q%2)·8.., n columns (q/2)·8.. */
                tc_ldsm4_t(r, sb + tc_off<false, TF, ROWB>(ks * C::KSTEP + (q % 2) * 8 + lane % 8,
                                                           (n + (q / 2) * 8) / C::KC));
            b[j][0] = r[0], b[j][1] = r[1], b[j + 1][0] = r[2], b[j + 1][1] = r[3];
        } else {
            int g = lane / 4, t = lane % 4;
#pragma unroll
            for (int h = 0; h < 4; h++) { /* b0 (k t, n g), b1 (k t+4, n g), for n-tiles j, j+1 */
                int nn = n + g + (h / 2) * 8, kk = ks * C::KSTEP + t + (h % 2) * 4;
                b[j + h / 2][h % 2] = tc_lds32(sb + tc_off<false, TF, ROWB>(kk, nn / 4) + (nn % 4) * 4);
            }
        }
        if (TF)
#pragma unroll
            for (int h = 0; h < 4; h++)
                b[j + h / 2][h % 2] = tc_tf32(b[j + h / 2][h % 2]);
    }
}

/* ---- the kernel ----------------------------------------------------------------------------- */

/* C[i][j], C[i][j+1] = alpha·acc + beta·C, rounded once into T; C read only when beta != 0. */
template <typename T>
__device__ __forceinline__ void tc_store2(const gemm_args<T> &p, float alpha, float beta, bool cvec, int64_t i,
                                          int64_t j, float x, float y)
{
    if (i >= p.m || j >= p.n)
        return;
    T *c = p.c + i * p.n + j;
    if (cvec && j + 1 < p.n) {
        float2 v = make_float2(alpha * x, alpha * y);
        if (beta != 0.f) {
            float2 o = tc_elem<T>::load2(c);
            v.x = fmaf(beta, o.x, v.x);
            v.y = fmaf(beta, o.y, v.y);
        }
        tc_elem<T>::store2(c, v.x, v.y);
        return;
    }
    float v = alpha * x;
    if (beta != 0.f)
        v = fmaf(beta, tc_elem<T>::to_f(c[0]), v);
    c[0] = tc_elem<T>::from_f(v);
    if (j + 1 < p.n) {
        float w = alpha * y;
        if (beta != 0.f)
            w = fmaf(beta, tc_elem<T>::to_f(c[1]), w);
        c[1] = tc_elem<T>::from_f(w);
    }
}

template <typename C, bool TA, bool TB, bool VEC>
__global__ void __launch_bounds__(C::NT, C::MINB)
    gemm_tc_kernel(gemm_args<typename C::elem> p, float alpha, float beta, bool cvec)
{
    typedef typename C::elem T;
    /* A untransposed is m×k row-major: K-major. B transposed is stored n×k: K-major. */
    typedef tc_loader<C, C::BM, !TA> LA;
    typedef tc_loader<C, C::BN, TB> LB;
    extern __shared__ uint4 tc_smem4[];
    char *smem = (char *)tc_smem4;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int wm = (warp / C::WARPS_N) * C::WM, wn = (warp % C::WARPS_N) * C::WN;
    int64_t tm, tn;
    gemm_grouped_tile(TC_GROUP, gemm_cdiv(p.m, C::BM), gemm_cdiv(p.n, C::BN), &tm, &tn);
    const int64_t m0 = tm * C::BM, n0 = tn * C::BN;
    const int64_t ktiles = gemm_cdiv(p.k, C::BK);

    float acc[C::MT][C::NTL][4];
#pragma unroll
    for (int i = 0; i < C::MT; i++)
#pragma unroll
        for (int j = 0; j < C::NTL; j++)
#pragma unroll
            for (int h = 0; h < 4; h++)
                acc[i][j][h] = 0.f;

    /* prologue: the first STAGES-1 tiles in flight, one commit group each (empty past the end,
     * so the wait below always counts the same number of groups) */
#pragma unroll
    for (int s = 0; s < C::STAGES - 1; s++) {
        if (s < ktiles) {
            char *st = smem + s * C::STAGE;
            LA::template load<VEC>(st, p.a, p.lda, p.m, p.k, m0, (int64_t)s * C::BK, tid);
            LB::template load<VEC>(st + C::A_BYTES, p.b, p.ldb, p.n, p.k, n0, (int64_t)s * C::BK, tid);
        }
        tc_cp_commit();
    }
    for (int64_t t = 0; t < ktiles; t++) {
        /* tile t has landed for this thread; after the barrier, for every thread, and every
         * warp is done with tile t-1, whose stage the prefetch below overwrites */
        tc_cp_wait<C::STAGES - 2>();
        __syncthreads();
        int64_t nt = t + C::STAGES - 1;
        if (nt < ktiles) {
            char *st = smem + (int)(nt % C::STAGES) * C::STAGE;
            LA::template load<VEC>(st, p.a, p.lda, p.m, p.k, m0, nt * C::BK, tid);
            LB::template load<VEC>(st + C::A_BYTES, p.b, p.ldb, p.n, p.k, n0, nt * C::BK, tid);
        }
        tc_cp_commit();
        const char *cur = smem + (int)(t % C::STAGES) * C::STAGE;
        uint32_t sa = tc_smem_addr(cur), sb = tc_smem_addr(cur + C::A_BYTES);
#pragma unroll
        for (int ks = 0; ks < C::KSTEPS; ks++) {
            uint32_t af[C::MT][4], bf[C::NTL][2];
            tc_frag_a<C, !TA>(sa, wm, ks, lane, af);
            tc_frag_b<C, TB>(sb, wn, ks, lane, bf);
#pragma unroll
            for (int i = 0; i < C::MT; i++)
#pragma unroll
                for (int j = 0; j < C::NTL; j++)
                    tc_mma<T>(acc[i][j], af[i], bf[j]);
        }
    }
    tc_cp_wait<0>();

    /* accumulator (i, j): c0 c1 at (g, 2t..2t+1), c2 c3 at (g+8, 2t..2t+1) of the 16×8 tile */
    const int g = lane / 4, t4 = lane % 4;
#pragma unroll
    for (int i = 0; i < C::MT; i++)
#pragma unroll
        for (int j = 0; j < C::NTL; j++) {
            int64_t r = m0 + wm + i * 16 + g, c = n0 + wn + j * 8 + 2 * t4;
            tc_store2<T>(p, alpha, beta, cvec, r, c, acc[i][j][0], acc[i][j][1]);
            tc_store2<T>(p, alpha, beta, cvec, r + 8, c, acc[i][j][2], acc[i][j][3]);
        }
}

/* ---- launch --------------------------------------------------------------------------------- */

template <typename C, bool TA, bool TB, bool VEC>
static cudaError_t tc_go(const gemm_args<typename C::elem> &p, float alpha, float beta, cudaStream_t s)
{
    typedef typename C::elem T;
    int64_t blocks = gemm_cdiv(p.m, C::BM) * gemm_cdiv(p.n, C::BN);
    if (blocks > INT32_MAX) /* grid.x's limit; no other grid dimension is used */
        return cudaErrorInvalidConfiguration;
    static cr_smem_opt_in opted;
    if (C::SMEM > 48 * 1024) {
        cudaError_t e = cr_opt_in_smem(opted, gemm_tc_kernel<C, TA, TB, VEC>, C::SMEM);
        if (e != cudaSuccess)
            return e;
    }
    /* pairs of C elements move together when each pair is aligned to its own size */
    bool cvec = ((uintptr_t)p.c % (2 * sizeof(T))) == 0 && p.n % 2 == 0;
    gemm_tc_kernel<C, TA, TB, VEC><<<(unsigned)blocks, C::NT, C::SMEM, s>>>(p, alpha, beta, cvec);
    return gemm_launched();
}

/* cp.async needs each 16-byte chunk of a stored row aligned: the base, and every row start */
static inline bool tc_vec_ok(const void *ptr, int64_t ld, int es) { return gemm_aligned16(ptr) && (ld * es) % 16 == 0; }

template <typename C, bool TA, bool TB>
static cudaError_t tc_vec_or_not(const gemm_args<typename C::elem> &p, float alpha, float beta, cudaStream_t s)
{
    if (tc_vec_ok(p.a, p.lda, C::ES) && tc_vec_ok(p.b, p.ldb, C::ES))
        return tc_go<C, TA, TB, true>(p, alpha, beta, s);
    return tc_go<C, TA, TB, false>(p, alpha, beta, s);
}

template <typename C>
static cudaError_t tc_launch(const gemm_args<typename C::elem> &p, float alpha, float beta, cudaStream_t s)
{
    if (!p.ta && !p.tb)
        return tc_vec_or_not<C, false, false>(p, alpha, beta, s);
    if (p.ta && !p.tb)
        return tc_vec_or_not<C, true, false>(p, alpha, beta, s);
    if (!p.ta && p.tb)
        return tc_vec_or_not<C, false, true>(p, alpha, beta, s);
    return tc_vec_or_not<C, true, true>(p, alpha, beta, s);
}

/* The shipped configurations (bench/NOTES-gemm.md has the measurements):
 *   big:   128×256 block, 8 warps of 64×64, 3 stages (144 KB): one block per SM;
 *   mid:   128×128 block, 4 warps of 64×64, 3 stages (96 KB): two blocks per SM;
 *   small: 64×64 block, 4 warps of 32×32, 4 stages (64 KB): up to three blocks per SM, for C
 *          too small to give the bigger tiles a wave. */
template <typename T>
struct tc_cfgs {
    typedef tc_cfg<T, 128, 256, 2, 4, 3, 1> big;
    typedef tc_cfg<T, 128, 128, 2, 2, 3, 2> mid;
    typedef tc_cfg<T, 64, 64, 2, 2, 4, 3> small;
    /* tuning candidates (bench only, untransposed and aligned only): big with a 4th stage
     * (192 KB), and big's transpose, 256×128 */
    typedef tc_cfg<T, 128, 256, 2, 4, 4, 1> big4;
    typedef tc_cfg<T, 256, 128, 4, 2, 3, 1> tall;
};

/* A tuning candidate on the one case the benchmark times (NN, cp.async path). */
template <typename C>
static cudaError_t tc_candidate(const gemm_args<typename C::elem> &p, float alpha, float beta, cudaStream_t s)
{
    if (p.ta || p.tb || !tc_vec_ok(p.a, p.lda, C::ES) || !tc_vec_ok(p.b, p.ldb, C::ES))
        return cudaErrorNotSupported;
    return tc_go<C, false, false, true>(p, alpha, beta, s);
}

/* Blocks of configuration C resident on one SM, asked once per configuration. */
template <typename C>
static int tc_resident(void)
{
    static int cached = 0;
    if (cached == 0) {
        int n = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, gemm_tc_kernel<C, false, false, true>, C::NT,
                                                          C::SMEM) != cudaSuccess || n < 1)
            n = 1;
        cached = n;
    }
    return cached;
}

/* Predicted time in arbitrary units: whole waves × one wave's time (tile area × resident blocks
 * / the configuration's relative full-load speed), as dbuf_cost. */
template <typename C>
static double tc_cost(const gemm_args<typename C::elem> &p, int sms, double speed)
{
    int64_t blocks = gemm_cdiv(p.m, C::BM) * gemm_cdiv(p.n, C::BN);
    int64_t slots = (int64_t)sms * tc_resident<C>();
    return (double)gemm_cdiv(blocks, slots) * C::BM * C::BN * tc_resident<C>() / speed;
}

template <typename T>
static cudaError_t tc_run(const cr_gemm_dev *g, int variant, cudaStream_t s)
{
    typedef tc_cfgs<T> K;
    gemm_args<T> p = gemm_make_args<T>(g); /* alpha/beta there are unused: they travel as float */
    float alpha = (float)g->alpha, beta = (float)g->beta;
    switch (variant) {
    case 1: return tc_launch<typename K::big>(p, alpha, beta, s);
    case 2: return tc_launch<typename K::mid>(p, alpha, beta, s);
    case 3: return tc_launch<typename K::small>(p, alpha, beta, s);
    case 4: return tc_candidate<typename K::big4>(p, alpha, beta, s);
    case 5: return tc_candidate<typename K::tall>(p, alpha, beta, s);
    default: break;
    }
    int dev = 0, sms = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e != cudaSuccess)
        return e;
    double big = tc_cost<typename K::big>(p, sms, 1.0);
    double mid = tc_cost<typename K::mid>(p, sms, 0.9);
    double small = tc_cost<typename K::small>(p, sms, 0.6);
    if (big <= mid && big <= small)
        return tc_launch<typename K::big>(p, alpha, beta, s);
    if (mid <= small)
        return tc_launch<typename K::mid>(p, alpha, beta, s);
    return tc_launch<typename K::small>(p, alpha, beta, s);
}

/* The checks both entry points share; cudaErrorNotReady: nothing to launch (success). */
static cudaError_t tc_check(const cr_gemm_dev *g, bool ok_dtype, int variant)
{
    bool nothing;
    cudaError_t e = gemm_check(g, &nothing);
    if (e != cudaSuccess)
        return e;
    if (!ok_dtype)
        return cudaErrorNotSupported;
    if (nothing)
        return cudaErrorNotReady;
    if (variant < 0 || variant > 7)
        return cudaErrorInvalidValue;
    return cudaSuccess;
}

static cudaError_t tc_dispatch(const cr_gemm_dev *g, cr_dtype dt, bool tf32, int variant, void *work,
                               size_t work_bytes, cudaStream_t s)
{
    bool ok = tf32 ? dt == CR_DT_F32 : (dt == CR_DT_F16 || dt == CR_DT_BF16);
    cudaError_t e = tc_check(g, ok, variant);
    if (e == cudaErrorNotReady)
        return cudaSuccess;
    if (e != cudaSuccess)
        return e;
    /* the wgmma + TMA kernel (gemm_wgmma.cu; TF32 with its MN-major operands transposed into
     * work first) where it applies and, for the shipped choice, where the problem is big enough;
     * variant 6 takes it at any size, 7 never */
    if ((variant == 0 || variant == 6) && cr_cuda_gemm_wgmma_applies(g, dt, variant == 6))
        return cr_cuda_gemm_wgmma_ws(g, dt, work, work_bytes, s);
    if (dt == CR_DT_F32)
        return tc_run<float>(g, variant, s);
    if (dt == CR_DT_F16)
        return tc_run<__half>(g, variant, s);
    return tc_run<__nv_bfloat16>(g, variant, s);
}

extern "C" cudaError_t cr_cuda_gemm_tc_tf32(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s)
{
    return tc_dispatch(g, dt, true, 0, nullptr, 0, s);
}

extern "C" cudaError_t cr_cuda_gemm_tc_tf32_ws(const cr_gemm_dev *g, cr_dtype dt, void *work, size_t work_bytes,
                                               cudaStream_t s)
{
    return tc_dispatch(g, dt, true, 0, work, work_bytes, s);
}

extern "C" cudaError_t cr_cuda_gemm_tc(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s)
{
    return tc_dispatch(g, dt, false, 0, nullptr, 0, s);
}

/* Tuning hook for tests/gpu/gemm.cu and bench/gemm.cu only (not in cuda_kernels.h): variant 0
 * is the shipped choice, 1..3 force big, mid, small, 4..5 run the tuning candidates (NN,
 * aligned only), 6 takes the wgmma kernel wherever it applies (any size; else as 0), 7 is the
 * shipped mma.sync choice with wgmma off. F32 runs the TF32 kernels (its scratch, when wgmma
 * needs one, from the stream's memory pool). */
extern "C" cudaError_t cr_cuda_gemm_tc_variant(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s, int variant)
{
    return tc_dispatch(g, dt, dt == CR_DT_F32, variant, nullptr, 0, s);
}
