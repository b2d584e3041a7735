/* GEMM on Hopper's warpgroup tensor-core path: `tc` (FP16/BF16 in and out, FP32 accumulation)
 * and `tc-tf32` (FP32 in and out, TF32 multiplies, FP32 accumulation) through wgmma + TMA, for
 * the shapes where TMA's rules hold. gemm_tc.cu's launcher calls it (cr_cuda_gemm_wgmma_applies,
 * then cr_cuda_gemm_wgmma_ws) and keeps its mma.sync kernels for every other case. This file alone is built for sm_90a (Makefile): wgmma and setmaxnreg exist only
 * there, so the kernel runs on compute capability 9.0 only; applies() checks the device.
 *
 * Structure (bench/NOTES-gemm.md has the figures):
 *  - a block owns a 128×256 tile of C; 3 warpgroups: warpgroup 0 is the producer (one thread
 *    issues the TMA copies; setmaxnreg gives its registers away), warpgroups 1 and 2 are the
 *    consumers, each owning 64×256 of C: 128 FP32 accumulators per thread for the whole K loop;
 *  - k-tile BK = 64 (128 bytes of k), WG_STAGES shared stages of A (128×64) and B (256×64),
 *    each filled by TMA with the 128-byte swizzle and completed on a `full` mbarrier with a
 *    transaction count; consumers give a stage back on its `empty` mbarrier once the wgmmas
 *    that read it have retired (wgmma.wait_group 1: one k-tile of MMAs stays in flight);
 *  - operands are staged in their global layout: K-major (A untransposed, B transposed) as one
 *    box of 64 k × rows, MN-major (A transposed, B untransposed) as boxes of 64 m-or-n × 64 k,
 *    one 8 KB swizzle-atom column each; wgmma's transpose bits read either, so all four
 *    transposes run here;
 *  - TMA zero-fills what lies outside the matrix, so ragged m, n and k need no code: the
 *    zeros add nothing to the sums; the epilogue masks rows and columns of C;
 *  - epilogue from registers: alpha·acc + beta·C in FP32, rounded once to the dtype (RNE),
 *    C read only when beta != 0; pairs of columns as one 32-bit access when aligned;
 *  - blocks are visited in groups of WG_GROUP tile-rows (as gemm_tc.cu) so that the resident
 *    blocks share A and B panels in L2.
 *  - TF32: the same kernel on float (k-tile 32 floats = the same 128 bytes, m64n256k8), but
 *    wgmma reads 32-bit operands K-major only: MN-major ones (A transposed, B untransposed) are
 *    first copied transposed into scratch (wg_tf32), so the kernel runs as A·Bᵀ, both K-major.
 * TMA's rules: base addresses 16-byte aligned, row strides multiples of 16 bytes (leading
 * dimensions multiples of 8 16-bit or 4 32-bit elements). The tensor maps are encoded on the host per call through
 * the runtime's driver entry point (no -lcuda) and passed by value as __grid_constant__. */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/gemm_common.cuh"
#include "kernels/cuda/smem_opt_in.cuh"

#define WG_BM 128
#define WG_BN 256
#define WG_BK 64 /* k-tile in 16-bit elements: 128 bytes of k; TF32 takes 32 (wg_elem::BK) */
#define WG_STAGES 4
#define WG_THREADS 384
#define WG_GROUP 8

static constexpr int WG_A_BYTES = WG_BM * WG_BK * 2;           /* 16 KB */
static constexpr int WG_B_BYTES = WG_BN * WG_BK * 2;           /* 32 KB */
static constexpr int WG_STAGE = WG_A_BYTES + WG_B_BYTES;       /* 48 KB */
static constexpr int WG_ATOM = 64 * WG_BK * 2;                 /* one MN-major box: 64 × 64, 8 KB */
static constexpr size_t WG_SMEM = (size_t)WG_STAGES * WG_STAGE + 1024; /* + room to align to 1 KB */

template <typename T>
struct wg_tag {
};

/* k per tile: one 128-byte swizzled row of k (64 FP16/BF16, 32 TF32), so a stage holds the same
 * bytes for every dtype and a k-step of one instruction is 32 bytes inside the row for all. */
template <typename T>
struct wg_elem {
    static constexpr int BK = 128 / (int)sizeof(T);
};

/* ---- PTX wrappers --------------------------------------------------------------------------- */

__device__ __forceinline__ uint32_t wg_saddr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void wg_bar_init(uint32_t bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void wg_bar_expect(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void wg_bar_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void wg_bar_wait(uint32_t bar, uint32_t parity)
{
    uint32_t done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}

/* 2-D tile of the tensor map at (c0 inner, c1 outer) into shared dst, completing on bar */
__device__ __forceinline__ void wg_tma(uint32_t dst, const CUtensorMap *map, uint32_t bar, int c0, int c1)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
                 "%3}], [%4];\n" ::"r"(dst),
                 "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(bar)
                 : "memory");
}

__device__ __forceinline__ void wg_fence(void) { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit(void) { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait(void)
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

/* Shared-memory matrix descriptor, 128-byte swizzle: start address, leading and stride byte
 * offsets (all >> 4), layout type 1 in bits 62-63. Every stage starts 1 KB aligned, so the
 * base-offset field stays 0. */
__device__ __forceinline__ uint64_t wg_desc(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32) |
           (1ull << 62);
}

/* The 128 FP32 accumulators of an m64n256 wgmma: the register list in the instruction and the
 * matching asm operands %0..%127 (the descriptors follow as %128, %129, the scale-d flag %130). */
#define WG_D128 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
#define WG_D128_OPS(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
    "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
    "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
    "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
    "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

/* D(64×256, FP32) += A(64×K) · B(K×256), both from shared memory, K = 16 for FP16/BF16, 8 for
 * TF32 (32 bytes of k either way). TA/TB: the instruction's transpose bits, 0 = K-major, 1 =
 * MN-major (for B that is the opposite of trans_b: B untransposed, stored k×n, is N-major).
 * TF32 has no transpose bits: both operands must be K-major (wg_go only instantiates that). */
template <int TA, int TB>
__device__ __forceinline__ void wg_mma(wg_tag<__half>, float (&d)[128], uint64_t da, uint64_t db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " WG_D128 ", %128, %129, p, 1, 1, %131, %132;\n}\n"
                 : WG_D128_OPS(d)
                 : "l"(da), "l"(db), "r"(1), "n"(TA), "n"(TB));
}

template <int TA, int TB>
__device__ __forceinline__ void wg_mma(wg_tag<__nv_bfloat16>, float (&d)[128], uint64_t da, uint64_t db)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " WG_D128 ", %128, %129, p, 1, 1, %131, %132;\n}\n"
                 : WG_D128_OPS(d)
                 : "l"(da), "l"(db), "r"(1), "n"(TA), "n"(TB));
}

template <int TA, int TB>
__device__ __forceinline__ void wg_mma(wg_tag<float>, float (&d)[128], uint64_t da, uint64_t db)
{
    static_assert(TA == 0 && TB == 0, "wgmma reads TF32 operands K-major only");
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 " WG_D128 ", %128, %129, p, 1, 1;\n}\n"
                 : WG_D128_OPS(d)
                 : "l"(da), "l"(db), "r"(1));
}

/* ---- epilogue ------------------------------------------------------------------------------- */

template <typename T>
struct wg_cvt;

template <>
struct wg_cvt<__half> {
    static __device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
    static __device__ __forceinline__ __half from_f(float x) { return __float2half_rn(x); }
    static __device__ __forceinline__ float2 load2(const __half *c) { return __half22float2(*(const __half2 *)c); }
    static __device__ __forceinline__ void store2(__half *c, float x, float y) { *(__half2 *)c = __floats2half2_rn(x, y); }
};

template <>
struct wg_cvt<__nv_bfloat16> {
    static __device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
    static __device__ __forceinline__ __nv_bfloat16 from_f(float x) { return __float2bfloat16_rn(x); }
    static __device__ __forceinline__ float2 load2(const __nv_bfloat16 *c)
    {
        return __bfloat1622float2(*(const __nv_bfloat162 *)c);
    }
    static __device__ __forceinline__ void store2(__nv_bfloat16 *c, float x, float y)
    {
        *(__nv_bfloat162 *)c = __floats2bfloat162_rn(x, y);
    }
};

template <>
struct wg_cvt<float> {
    static __device__ __forceinline__ float to_f(float x) { return x; }
    static __device__ __forceinline__ float from_f(float x) { return x; }
    static __device__ __forceinline__ float2 load2(const float *c) { return *(const float2 *)c; }
    static __device__ __forceinline__ void store2(float *c, float x, float y) { *(float2 *)c = make_float2(x, y); }
};

/* C[i][j], C[i][j+1] = alpha·acc + beta·C, rounded once into T; C read only when beta != 0. */
template <typename T>
__device__ __forceinline__ void wg_store2(T *__restrict__ c, int64_t m, int64_t n, float alpha, float beta, bool cvec,
                                          int64_t i, int64_t j, float x, float y)
{
    if (i >= m || j >= n)
        return;
    T *p = c + i * n + j;
    if (cvec && j + 1 < n) {
        float2 v = make_float2(alpha * x, alpha * y);
        if (beta != 0.f) {
            float2 o = wg_cvt<T>::load2(p);
            v.x = fmaf(beta, o.x, v.x);
            v.y = fmaf(beta, o.y, v.y);
        }
        wg_cvt<T>::store2(p, v.x, v.y);
        return;
    }
    float v = alpha * x;
    if (beta != 0.f)
        v = fmaf(beta, wg_cvt<T>::to_f(p[0]), v);
    p[0] = wg_cvt<T>::from_f(v);
    if (j + 1 < n) {
        float w = alpha * y;
        if (beta != 0.f)
            w = fmaf(beta, wg_cvt<T>::to_f(p[1]), w);
        p[1] = wg_cvt<T>::from_f(w);
    }
}

/* ---- the kernel ----------------------------------------------------------------------------- */

/* TA: A transposed (stored k×m, MN-major in shared memory); TB: B transposed (stored n×k,
 * K-major). */
template <typename T, int TA, int TB>
__global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_wgmma_kernel(const __grid_constant__ CUtensorMap ma, const __grid_constant__ CUtensorMap mb,
                      T *__restrict__ c, int64_t m, int64_t n, int64_t k, float alpha, float beta, bool cvec)
{
    extern __shared__ __align__(1024) unsigned char wg_dyn[];
    __shared__ __align__(8) uint64_t full[WG_STAGES], empty[WG_STAGES];
    const uint32_t base = (wg_saddr(wg_dyn) + 1023u) & ~1023u;
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;

    int64_t tm, tn;
    gemm_grouped_tile(WG_GROUP, gemm_cdiv(m, WG_BM), gemm_cdiv(n, WG_BN), &tm, &tn);
    const int64_t m0 = tm * WG_BM, n0 = tn * WG_BN;
    constexpr int BK = wg_elem<T>::BK;
    const int ktiles = (int)gemm_cdiv(k, BK);

    if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < WG_STAGES; s++) {
            wg_bar_init(wg_saddr(&full[s]), 1);  /* the producer's expect_tx */
            wg_bar_init(wg_saddr(&empty[s]), 2); /* one arrival per consumer warpgroup */
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {
        /* producer: 40 registers are plenty for one thread's address arithmetic */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (tid == 0) {
            for (int t = 0; t < ktiles; t++) {
                const int s = t % WG_STAGES;
                if (t >= WG_STAGES) /* the consumers gave back this stage's previous use */
                    wg_bar_wait(wg_saddr(&empty[s]), ((t / WG_STAGES) - 1) & 1);
                const uint32_t fb = wg_saddr(&full[s]), sa = base + s * WG_STAGE, sb = sa + WG_A_BYTES;
                const int k0 = t * BK;
                wg_bar_expect(fb, WG_STAGE); /* boxes partly outside still count whole (zero-filled) */
                if (!TA) {
                    wg_tma(sa, &ma, fb, k0, (int)m0);
                } else {
#pragma unroll
                    for (int j = 0; j < WG_BM / 64; j++)
                        wg_tma(sa + j * WG_ATOM, &ma, fb, (int)m0 + 64 * j, k0);
                }
                if (TB) {
                    wg_tma(sb, &mb, fb, k0, (int)n0);
                } else {
#pragma unroll
                    for (int j = 0; j < WG_BN / 64; j++)
                        wg_tma(sb + j * WG_ATOM, &mb, fb, (int)n0 + 64 * j, k0);
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        const int cw = wg - 1; /* rows cw·64.. of the block tile */
        float acc[128];
#pragma unroll
        for (int i = 0; i < 128; i++)
            acc[i] = 0.f;
        for (int t = 0; t < ktiles; t++) {
            const int s = t % WG_STAGES;
            wg_bar_wait(wg_saddr(&full[s]), (t / WG_STAGES) & 1);
            const uint32_t sa = base + s * WG_STAGE, sb = sa + WG_A_BYTES;
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < 4; kk++) { /* 4 instructions of 32 bytes of k each */
                /* K-major: rows of 128 bytes, 8-row groups 1 KB apart (SBO; LBO unused with the
                 * swizzle), k16 step = 32 bytes inside the swizzled row. MN-major: 64-wide atoms
                 * WG_ATOM apart along m or n (LBO), 8 k-rows 1 KB apart (SBO), k16 step = 16 rows */
                const uint64_t da = TA ? wg_desc(sa + cw * WG_ATOM + kk * 2048, WG_ATOM, 1024)
                                       : wg_desc(sa + cw * 64 * 128 + kk * 32, 16, 1024);
                const uint64_t db =
                    TB ? wg_desc(sb + kk * 32, 16, 1024) : wg_desc(sb + kk * 2048, WG_ATOM, 1024);
                wg_mma<TA, !TB>(wg_tag<T>(), acc, da, db); /* B untransposed is N-major */
            }
            wg_commit();
            wg_wait<1>(); /* k-tile t-1's MMAs have retired: its stage may be refilled */
            if (t > 0 && tid == 0)
                wg_bar_arrive(wg_saddr(&empty[(t - 1) % WG_STAGES]));
        }
        wg_wait<0>();

        /* accumulator layout of m64nNk16: thread (warp w, lane l) holds rows w·16 + l/4 and +8,
         * columns 8j + 2(l%4), +1 in acc[4j..4j+3] */
        const int w = tid / 32, l = tid % 32;
        const int64_t r = m0 + cw * 64 + w * 16 + l / 4;
#pragma unroll
        for (int j = 0; j < 32; j++) {
            const int64_t col = n0 + j * 8 + (l % 4) * 2;
            wg_store2<T>(c, m, n, alpha, beta, cvec, r, col, acc[4 * j], acc[4 * j + 1]);
            wg_store2<T>(c, m, n, alpha, beta, cvec, r + 8, col, acc[4 * j + 2], acc[4 * j + 3]);
        }
    }
}

/* ---- TF32: MN-major operands made K-major ----------------------------------------------------
 * wgmma has no transpose bits for 32-bit operands, so an A stored k×m (trans_a) or a B stored
 * k×n (B untransposed, the common case) is first copied transposed into scratch, K-major with
 * its rows padded to a multiple of 4 floats (TMA's 16-byte row stride), and rounded to TF32 on
 * the way (cvt.rna, as gemm_tc.cu's mma.sync path rounds); operands read straight from the
 * caller's K-major buffers reach the tensor core unrounded, which drops their low 13 bits.
 * out (cols × ldo) = round(in (rows × cols, row stride ldi))ᵀ, 32×32 tiles through shared memory
 * (padded against bank conflicts), 32×8 threads, coalesced on both sides. */
#define WG_TR 32
#define WG_TR_GROUP 32 /* tile-columns per group of the block order */

/* Blocks walk the 32×32 tiles in groups of WG_TR_GROUP tile-columns, along the columns first:
 * the ~1000 resident blocks then cover about 32×32 tiles, 1024 rows on either side, instead of
 * all of a few input rows and a thousand scattered output rows (fewer pages and DRAM rows in
 * flight at 8192-wide matrices). */
__global__ void __launch_bounds__(256) wg_transpose_tf32(const float *__restrict__ in, int64_t rows, int64_t cols,
                                                         int64_t ldi, float *__restrict__ out, int64_t ldo)
{
    __shared__ float tile[WG_TR][WG_TR + 1];
    const int64_t tx_n = gemm_cdiv(cols, WG_TR), ty_n = gemm_cdiv(rows, WG_TR), per_group = WG_TR_GROUP * ty_n;
    for (int64_t id = blockIdx.x; id < tx_n * ty_n; id += gridDim.x) {
        const int64_t grp = id / per_group, local = id % per_group;
        const int64_t width = tx_n - grp * WG_TR_GROUP < WG_TR_GROUP ? tx_n - grp * WG_TR_GROUP : WG_TR_GROUP;
        const int64_t c0 = (grp * WG_TR_GROUP + local % width) * WG_TR, r0 = (local / width) * WG_TR;
#pragma unroll
        for (int y = threadIdx.y; y < WG_TR; y += 8) {
            const int64_t r = r0 + y, c = c0 + threadIdx.x;
            float v = 0.f;
            if (r < rows && c < cols) {
                uint32_t t;
                asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(t) : "f"(in[r * ldi + c]));
                v = __uint_as_float(t);
            }
            tile[y][threadIdx.x] = v;
        }
        __syncthreads();
#pragma unroll
        for (int y = threadIdx.y; y < WG_TR; y += 8) {
            const int64_t c = c0 + y, r = r0 + threadIdx.x;
            if (c < cols && r < rows)
                out[c * ldo + r] = tile[threadIdx.x][y];
        }
        __syncthreads();
    }
}

static cudaError_t wg_transpose(const float *in, int64_t rows, int64_t cols, int64_t ldi, float *out, int64_t ldo,
                                cudaStream_t s)
{
    int64_t tiles = gemm_cdiv(cols, WG_TR) * gemm_cdiv(rows, WG_TR);
    unsigned grid = (unsigned)(tiles < INT32_MAX ? tiles : INT32_MAX);
    wg_transpose_tf32<<<grid, dim3(WG_TR, 8), 0, s>>>(in, rows, cols, ldi, out, ldo);
    return gemm_launched();
}

/* ---- host side ------------------------------------------------------------------------------ */

/* cuTensorMapEncodeTiled through the runtime (the daemon links libcudart, not libcuda); looked
 * up once (a function-local static: thread-safe initialisation). */
static PFN_cuTensorMapEncodeTiled_v12000 wg_encoder(void)
{
    static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
        void *p = nullptr;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) !=
                cudaSuccess ||
            q != cudaDriverEntryPointSuccess)
            p = nullptr;
        cudaGetLastError(); /* a failed lookup must not stay as the launch's error */
        return (PFN_cuTensorMapEncodeTiled_v12000)p;
    }();
    return fn;
}

/* A rows × cols matrix of dtype dt, row-major with row stride ld elements, read in boxes of
 * box_rows × box_cols (cols the contiguous dimension), 128-byte swizzle, zeros outside. */
static bool wg_map(CUtensorMap *map, const void *ptr, cr_dtype dt, int64_t rows, int64_t cols, int64_t ld,
                   uint32_t box_cols, uint32_t box_rows)
{
    PFN_cuTensorMapEncodeTiled_v12000 enc = wg_encoder();
    if (!enc)
        return false;
    const size_t es = dt == CR_DT_F32 ? 4 : 2;
    const CUtensorMapDataType ty = dt == CR_DT_F32   ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                   : dt == CR_DT_F16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                     : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    cuuint64_t strides[1] = {(cuuint64_t)ld * es};
    cuuint32_t box[2] = {box_cols, box_rows};
    cuuint32_t estr[2] = {1, 1};
    CUresult r = enc(map, ty, 2, const_cast<void *>(ptr), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                     CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS;
}

template <typename T, int TA, int TB>
static cudaError_t wg_go(const CUtensorMap &ma, const CUtensorMap &mb, const cr_gemm_dev *g, cudaStream_t s)
{
    int64_t blocks = gemm_cdiv(g->m, WG_BM) * gemm_cdiv(g->n, WG_BN);
    if (blocks > INT32_MAX)
        return cudaErrorInvalidConfiguration;
    static cr_smem_opt_in opted;
    cudaError_t opt = cr_opt_in_smem(opted, gemm_wgmma_kernel<T, TA, TB>, WG_SMEM);
    if (opt != cudaSuccess)
        return opt;
    bool cvec = ((uintptr_t)g->c % (2 * sizeof(T))) == 0 && g->n % 2 == 0;
    gemm_wgmma_kernel<T, TA, TB><<<(unsigned)blocks, WG_THREADS, WG_SMEM, s>>>(
        ma, mb, (T *)g->c, g->m, g->n, g->k, (float)g->alpha, (float)g->beta, cvec);
    return gemm_launched();
}

template <typename T>
static cudaError_t wg_run(const CUtensorMap &ma, const CUtensorMap &mb, const cr_gemm_dev *g, cudaStream_t s)
{
    if (!g->trans_a && !g->trans_b)
        return wg_go<T, 0, 0>(ma, mb, g, s);
    if (g->trans_a && !g->trans_b)
        return wg_go<T, 1, 0>(ma, mb, g, s);
    if (!g->trans_a && g->trans_b)
        return wg_go<T, 0, 1>(ma, mb, g, s);
    return wg_go<T, 1, 1>(ma, mb, g, s);
}

/* The size rule (bench/NOTES-gemm.md): one 128×256 tile per SM runs at about twice the rate
 * of gemm_tc.cu's mma.sync kernels on the whole chip, so wgmma gains once its tiles fill about
 * two thirds of the SMs (H200: 1024³ = 32 tiles ran at 0.75× mma.sync's speed, 2048³ = 128
 * tiles at 1.7×), and on tiny problems neither matters. TF32 uses the same rule. */
#define WG_MIN_WORK (512.0 * 512.0 * 512.0)

/* TF32 scratch: k rounded up to 4 floats (16-byte rows), each transposed operand 256-byte aligned */
static int64_t wg_k4(int64_t k) { return (k + 3) & ~(int64_t)3; }
static size_t wg_round256(size_t x) { return (x + 255) & ~(size_t)255; }
static size_t wg_scratch_a(const cr_gemm_dev *g) { return g->trans_a ? wg_round256((size_t)(g->m * wg_k4(g->k)) * 4) : 0; }
static size_t wg_scratch_b(const cr_gemm_dev *g) { return g->trans_b ? 0 : wg_round256((size_t)(g->n * wg_k4(g->k)) * 4); }

extern "C" bool cr_cuda_gemm_wgmma_applies(const cr_gemm_dev *g, cr_dtype dt, bool any_size)
{
    if (dt != CR_DT_F16 && dt != CR_DT_BF16 && dt != CR_DT_F32)
        return false;
    if (!g || g->m <= 0 || g->n <= 0 || g->k <= 0 || !g->a || !g->b || !g->c)
        return false;
    /* TMA coordinates are 32-bit */
    if (g->m > INT32_MAX - WG_BN || g->n > INT32_MAX - WG_BN || g->k > INT32_MAX - WG_BK)
        return false;
    int64_t lda = g->trans_a ? g->m : g->k, ldb = g->trans_b ? g->k : g->n;
    if (dt == CR_DT_F32) {
        /* only the K-major operands are read in place (16-byte rows); MN-major ones go through
         * the transposing copy, which takes any layout */
        if (!g->trans_a && (!gemm_aligned16(g->a) || lda % 4 != 0))
            return false;
        if (g->trans_b && (!gemm_aligned16(g->b) || ldb % 4 != 0))
            return false;
    } else if (!gemm_aligned16(g->a) || !gemm_aligned16(g->b) || (lda * 2) % 16 != 0 || (ldb * 2) % 16 != 0) {
        return false;
    }
    if (!any_size && (double)g->m * (double)g->n * (double)g->k < WG_MIN_WORK)
        return false;
    int dev = 0, major = 0, minor = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    if (major != 9 || minor != 0) /* sm_90a machine code runs on 9.0 only */
        return false;
    if (!any_size && 3 * gemm_cdiv(g->m, WG_BM) * gemm_cdiv(g->n, WG_BN) < 2 * (int64_t)sms)
        return false;
    return wg_encoder() != nullptr;
}

extern "C" size_t cr_cuda_gemm_wgmma_work_bytes(const cr_gemm_dev *g, cr_dtype dt)
{
    if (dt != CR_DT_F32 || !g || g->m <= 0 || g->n <= 0 || g->k <= 0)
        return 0;
    return wg_scratch_a(g) + wg_scratch_b(g);
}

/* TF32: the MN-major operands transposed into work (or into memory of the stream's pool when
 * work is short), then the K-major kernel on both. */
static cudaError_t wg_tf32(const cr_gemm_dev *g, void *work, size_t work_bytes, cudaStream_t s)
{
    const size_t sa = wg_scratch_a(g), sb = wg_scratch_b(g);
    const int64_t k4 = wg_k4(g->k);
    void *own = nullptr;
    char *w = (char *)work;
    if (sa + sb > 0 && (!work || work_bytes < sa + sb || !gemm_aligned16(work))) {
        cudaError_t e = cudaMallocAsync(&own, sa + sb, s);
        if (e != cudaSuccess)
            return e;
        w = (char *)own;
    }
    const void *a = g->a, *b = g->b;
    int64_t lda = g->k, ldb = g->k;
    cudaError_t e = cudaSuccess;
    if (g->trans_a) { /* stored k×m: to m×k4 */
        e = wg_transpose((const float *)g->a, g->k, g->m, g->m, (float *)w, k4, s);
        a = w, lda = k4;
    }
    if (e == cudaSuccess && !g->trans_b) { /* stored k×n: to n×k4 */
        e = wg_transpose((const float *)g->b, g->k, g->n, g->n, (float *)(w + sa), k4, s);
        b = w + sa, ldb = k4;
    }
    CUtensorMap ma, mb;
    if (e == cudaSuccess && (!wg_map(&ma, a, CR_DT_F32, g->m, g->k, lda, wg_elem<float>::BK, WG_BM) ||
                             !wg_map(&mb, b, CR_DT_F32, g->n, g->k, ldb, wg_elem<float>::BK, WG_BN)))
        e = cudaErrorNotSupported;
    if (e == cudaSuccess)
        e = wg_go<float, 0, 1>(ma, mb, g, s);
    if (own) {
        cudaError_t f = cudaFreeAsync(own, s); /* stream-ordered: after the kernel */
        if (e == cudaSuccess)
            e = f;
    }
    return e;
}

extern "C" cudaError_t cr_cuda_gemm_wgmma_ws(const cr_gemm_dev *g, cr_dtype dt, void *work, size_t work_bytes,
                                             cudaStream_t s)
{
    bool nothing;
    cudaError_t e = gemm_check(g, &nothing);
    if (e != cudaSuccess)
        return e;
    if (dt != CR_DT_F16 && dt != CR_DT_BF16 && dt != CR_DT_F32)
        return cudaErrorNotSupported;
    if (nothing)
        return cudaSuccess;
    if (!cr_cuda_gemm_wgmma_applies(g, dt, true))
        return cudaErrorNotSupported;
    if (dt == CR_DT_F32)
        return wg_tf32(g, work, work_bytes, s);
    CUtensorMap ma, mb;
    bool ok = g->trans_a ? wg_map(&ma, g->a, dt, g->k, g->m, g->m, 64, WG_BK)  /* stored k×m */
                         : wg_map(&ma, g->a, dt, g->m, g->k, g->k, WG_BK, WG_BM); /* stored m×k */
    ok = ok && (g->trans_b ? wg_map(&mb, g->b, dt, g->n, g->k, g->k, WG_BK, WG_BN) /* stored n×k */
                           : wg_map(&mb, g->b, dt, g->k, g->n, g->n, 64, WG_BK));  /* stored k×n */
    if (!ok)
        return cudaErrorNotSupported;
    if (dt == CR_DT_F16)
        return wg_run<__half>(ma, mb, g, s);
    return wg_run<__nv_bfloat16>(ma, mb, g, s);
}

extern "C" cudaError_t cr_cuda_gemm_wgmma(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s)
{
    return cr_cuda_gemm_wgmma_ws(g, dt, nullptr, 0, s);
}
