/* GPU correctness test of our own GEMM kernels (kernels/cuda/gemm_*.cu).
 *
 * For every kernel × dtype it supports × size × (trans, alpha, beta, alignment) case: fresh
 * random inputs, C poisoned with NaN before the run (or holding the input C when beta != 0),
 * reference = cuBLAS DGEMM on the inputs upcast to float64, compared by
 * ‖out − ref‖_F / ‖ref‖_F and max|out − ref| / max|ref| against a tolerance that grows with
 * sqrt(K). A NaN anywhere (an unwritten element) fails. Unaligned cases offset every device
 * pointer by one element, so the float4 paths must fall back. Prints one line per case and
 * "gpu_gemm: N passed, M failed"; exit status 1 on any failure.
 *
 * Tensor-core kernels (gemm_tc.cu) and cuBLAS's float16/bfloat16 path (launchers.cu's
 * cr_cublas_gemm_batched, as the registry's `cublas` row and the batcher call it) run the same
 * grid plus sizes that straddle their tiles (33, 255, 513) and long K (4099 unaligned, 4104
 * on the cp.async path). Their inputs are exact in the reference (the 16-bit values upcast);
 * the tolerance allows the rounding each one is entitled to (tol_for). `tc` takes its wgmma
 * kernel (gemm_wgmma.cu) only for big problems; `tc-wgmma` takes it wherever TMA can read the
 * operands, and `wgmma` (forced_wgmma) calls it directly on shapes with ragged tile edges;
 * `tc-tf32` takes the TF32 wgmma path for big problems, `tc-tf32-wgmma` wherever it applies,
 * and `wgmma-tf32` is forced_wgmma in F32.
 *
 * dbuf's split-K (small C, long K: partials of K slices into a workspace, summed in a fixed order)
 * runs every shape above plus split_shapes × split_combos in four ways: dbuf-ws is the registry
 * row as the daemon runs it (scratch() bytes, then the launcher), dbuf-ws-short the same with one
 * byte of scratch too few (it must fall back to no split), dbuf-split-big/-mid/-small force 3, 5
 * and 7 slices with each tile configuration. check_split_rule also checks that the rule does split
 * the split shapes and that two runs through the split path are bit-identical.
 *
 * usage: gpu_gemm [NAME...]: only the named entries (`wgmma` / `wgmma-tf32` for the forced
 * wgmma cases, `batch` for the cuBLAS batch check); no names: everything. */
#include "tools/gpu/harness.cuh"
#include <cublas_v2.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/launchers.h"

/* tuning hook in kernels/cuda/gemm_dbuf.cu: force one of dbuf's tile configurations, which
 * the size-based choice would otherwise only reach at some sizes */
extern "C" cudaError_t cr_cuda_gemm_dbuf_variant(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s, int variant);
static cudaError_t dbuf_big(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s) { return cr_cuda_gemm_dbuf_variant(g, dt, s, 1); }
static cudaError_t dbuf_mid(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s) { return cr_cuda_gemm_dbuf_variant(g, dt, s, 2); }
static cudaError_t dbuf_small(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s) { return cr_cuda_gemm_dbuf_variant(g, dt, s, 3); }
/* dbuf's split-K (gemm_dbuf.cu): as the daemon runs it (dbuf_ws: the registry row's launcher with
 * the scratch its scratch function asks for; dbuf_ws_short: one byte less, so it must fall back
 * to no split), and forced into an odd number of K slices with each tile configuration, so that
 * every shape of the grid takes the split path and its reduction */
extern "C" cudaError_t cr_cuda_gemm_dbuf_split(const cr_gemm_dev *g, cr_dtype dt, void *work, size_t work_bytes,
                                               cudaStream_t s, int cfg, int slices);
static cudaError_t dbuf_ws(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s);
static cudaError_t dbuf_ws_short(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s);
static cudaError_t dbuf_split_big(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s);
static cudaError_t dbuf_split_mid(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s);
static cudaError_t dbuf_split_small(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s);
/* dbuf big's tail stream-K (gemm_dbuf.cu): mode 2 shares the last wave's tiles among one wave of
 * blocks whatever the rule says (dbuf-tail), into G.work */
extern "C" cudaError_t cr_cuda_gemm_dbuf_tail(const cr_gemm_dev *g, cr_dtype dt, void *work, size_t work_bytes,
                                              cudaStream_t s, int mode);
extern "C" size_t cr_cuda_gemm_dbuf_tail_bytes(const cr_gemm_dev *g, int mode);
static cudaError_t dbuf_tail(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s);

/* the same for gemm_tc.cu: 1..3 force its big, mid, small tiles (F32 runs the TF32 kernel) */
extern "C" cudaError_t cr_cuda_gemm_tc_variant(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s, int variant);
static cudaError_t tc_big(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s) { return cr_cuda_gemm_tc_variant(g, dt, s, 1); }
static cudaError_t tc_mid(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s) { return cr_cuda_gemm_tc_variant(g, dt, s, 2); }
static cudaError_t tc_small(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s) { return cr_cuda_gemm_tc_variant(g, dt, s, 3); }
/* 6: tc with the wgmma kernel wherever TMA can read the operands, at any size (else mma.sync) */
static cudaError_t tc_wgmma(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s) { return cr_cuda_gemm_tc_variant(g, dt, s, 6); }

static cudaError_t cublas_ex(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s);

/* Which dtypes an entry runs, and so which tolerance it gets (tol_for). */
enum { KT_F32, KT_F32_F64, KT_TF32, KT_HALF };

typedef struct {
    const char *name;
    cr_gemm_launcher fn;
    int kind;
    bool slow; /* skip the largest sizes in F64 */
} kernel_entry;

static const kernel_entry kernels[] = {
    {"naive", cr_cuda_gemm_naive, KT_F32_F64, true},   {"regtile", cr_cuda_gemm_regtile, KT_F32_F64, true},
    {"smem", cr_cuda_gemm_smem, KT_F32_F64, false},    {"blocktile", cr_cuda_gemm_blocktile, KT_F32_F64, false},
    {"vec", cr_cuda_gemm_vec, KT_F32, false},          {"dbuf", cr_cuda_gemm_dbuf, KT_F32, false},
    {"dbuf-big", dbuf_big, KT_F32, false},             {"dbuf-mid", dbuf_mid, KT_F32, false},
    {"dbuf-small", dbuf_small, KT_F32, false},         {"dbuf-ws", dbuf_ws, KT_F32, false},
    {"dbuf-ws-short", dbuf_ws_short, KT_F32, false},   {"dbuf-split-big", dbuf_split_big, KT_F32, false},
    {"dbuf-split-mid", dbuf_split_mid, KT_F32, false}, {"dbuf-split-small", dbuf_split_small, KT_F32, false},
    {"dbuf-tail", dbuf_tail, KT_F32, false},
    {"tc-tf32", cr_cuda_gemm_tc_tf32, KT_TF32, false}, {"tc-3xtf32", cr_cuda_gemm_3xtf32, KT_F32, false},
    {"tc-tf32-big", tc_big, KT_TF32, false},           {"tc-tf32-mid", tc_mid, KT_TF32, false},
    {"tc-tf32-small", tc_small, KT_TF32, false},       {"tc", cr_cuda_gemm_tc, KT_HALF, false},
    {"tc-big", tc_big, KT_HALF, false},                {"tc-mid", tc_mid, KT_HALF, false},
    {"tc-small", tc_small, KT_HALF, false},            {"cublas", cublas_ex, KT_HALF, false},
    {"tc-wgmma", tc_wgmma, KT_HALF, false},            {"tc-tf32-wgmma", tc_wgmma, KT_TF32, false},
};

/* cr_cuda_gemm_wgmma called directly (forced_wgmma): it must take every aligned case */
static const kernel_entry wgmma_entry = {"wgmma", cr_cuda_gemm_wgmma, KT_HALF, false};
/* the same for F32 (TF32 multiplies; MN-major operands transposed into pool scratch first) */
static const kernel_entry wgmma_tf32_entry = {"wgmma-tf32", cr_cuda_gemm_wgmma, KT_TF32, false};

#define MAXN ((size_t)8192 * 8192 + 16) /* elements per buffer (C of 8192×8192×1024), with room for an offset */

static struct {
    void *a, *b, *c;          /* inputs and output in the tested dtype */
    double *da, *db, *dr;     /* upcast inputs and the reference */
    double *part;             /* per-block partial sums of the comparison */
    void *work;               /* dbuf's split-K workspace */
    size_t work_bytes;
    cublasHandle_t h;
    cublasHandle_t hx; /* the cuBLAS under test (default math, as a worker's handle) */
    int batch;         /* cublas_ex: 1, or 2 to take the strided-batched path */
    unsigned seed;
    int passed, failed;
} G;

/* splitmix-style hash: reproducible, different for every (seed, index) */
__device__ static double rnd(unsigned seed, size_t i)
{
    unsigned long long x = (unsigned long long)i * 0x9E3779B97F4A7C15ull + seed * 0xD1B54A32D192ED03ull + 1;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 33;
    return (double)(x >> 11) * (2.0 / 9007199254740992.0) - 1.0; /* [-1, 1) */
}

/* double <-> element, rounded to nearest (the 16-bit types have no plain casts from double) */
template <typename T>
__device__ static T from_d(double v) { return (T)v; }
template <>
__device__ __half from_d<__half>(double v) { return __double2half(v); }
template <>
__device__ __nv_bfloat16 from_d<__nv_bfloat16>(double v) { return __double2bfloat16(v); }
template <typename T>
__device__ static double to_d(T v) { return (double)v; }
template <>
__device__ double to_d<__half>(__half v) { return (double)__half2float(v); }
template <>
__device__ double to_d<__nv_bfloat16>(__nv_bfloat16 v) { return (double)__bfloat162float(v); }

/* x gets random values of dtype T, and up gets the same values in float64 */
template <typename T>
__global__ void fill_kernel(T *x, double *up, size_t n, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        T v = from_d<T>(rnd(seed, i));
        x[i] = v;
        up[i] = to_d(v);
    }
}

template <typename T>
__global__ void nan_kernel(T *x, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = from_d<T>(NAN);
}

static size_t esize(cr_dtype dt) { return dt == CR_DT_F64 ? 8 : dt == CR_DT_F32 ? 4 : 2; }

static void poison(cr_dtype dt, void *x, size_t n, unsigned blocks)
{
    if (dt == CR_DT_F32)
        nan_kernel<float><<<blocks, 256>>>((float *)x, n);
    else if (dt == CR_DT_F64)
        nan_kernel<double><<<blocks, 256>>>((double *)x, n);
    else if (dt == CR_DT_F16)
        nan_kernel<__half><<<blocks, 256>>>((__half *)x, n);
    else
        nan_kernel<__nv_bfloat16><<<blocks, 256>>>((__nv_bfloat16 *)x, n);
}

#define CMP_BLOCKS 512
#define CMP_THREADS 256

/* per block: sum (o-r)^2, sum r^2, max |o-r|, max |r|, count of non-finite outputs */
template <typename T>
__global__ void cmp_kernel(const T *out, const double *ref, size_t n, double *part)
{
    __shared__ double s[5][CMP_THREADS];
    double d2 = 0, r2 = 0, dm = 0, rm = 0, bad = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        double o = to_d(out[i]), r = ref[i], d = fabs(o - r);
        if (!isfinite(o)) {
            bad += 1;
            continue;
        }
        d2 += d * d;
        r2 += r * r;
        dm = fmax(dm, d);
        rm = fmax(rm, fabs(r));
    }
    int t = threadIdx.x;
    s[0][t] = d2, s[1][t] = r2, s[2][t] = dm, s[3][t] = rm, s[4][t] = bad;
    __syncthreads();
    for (int w = CMP_THREADS / 2; w > 0; w /= 2) {
        if (t < w) {
            s[0][t] += s[0][t + w];
            s[1][t] += s[1][t + w];
            s[2][t] = fmax(s[2][t], s[2][t + w]);
            s[3][t] = fmax(s[3][t], s[3][t + w]);
            s[4][t] += s[4][t + w];
        }
        __syncthreads();
    }
    if (t < 5)
        part[blockIdx.x * 5 + t] = s[t][0];
}

static unsigned blocks_for(size_t n)
{
    size_t b = (n + 255) / 256;
    return (unsigned)(b < 1024 ? (b ? b : 1) : 1024);
}

static void fill(cr_dtype dt, void *x, double *up, size_t n)
{
    unsigned seed = ++G.seed;
    if (dt == CR_DT_F32)
        fill_kernel<float><<<blocks_for(n), 256>>>((float *)x, up, n, seed);
    else if (dt == CR_DT_F64)
        fill_kernel<double><<<blocks_for(n), 256>>>((double *)x, up, n, seed);
    else if (dt == CR_DT_F16)
        fill_kernel<__half><<<blocks_for(n), 256>>>((__half *)x, up, n, seed);
    else
        fill_kernel<__nv_bfloat16><<<blocks_for(n), 256>>>((__nv_bfloat16 *)x, up, n, seed);
    CK(cudaGetLastError());
}

typedef struct {
    int64_t m, n, k;
    bool ta, tb;
    double alpha, beta;
    bool unaligned;
} gcase;

/* reference: row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ */
static void reference(const gcase *c, const double *a, const double *b, double *r)
{
    int lda = (int)(c->ta ? c->m : c->k), ldb = (int)(c->tb ? c->k : c->n);
    CK(cublasDgemm(G.h, c->tb ? CUBLAS_OP_T : CUBLAS_OP_N, c->ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)c->n,
                   (int)c->m, (int)c->k, &c->alpha, b, ldb, a, lda, &c->beta, r, (int)c->n));
}

static void compare(cr_dtype dt, const void *out, size_t n, double res[5])
{
    if (dt == CR_DT_F32)
        cmp_kernel<float><<<CMP_BLOCKS, CMP_THREADS>>>((const float *)out, G.dr, n, G.part);
    else if (dt == CR_DT_F64)
        cmp_kernel<double><<<CMP_BLOCKS, CMP_THREADS>>>((const double *)out, G.dr, n, G.part);
    else if (dt == CR_DT_F16)
        cmp_kernel<__half><<<CMP_BLOCKS, CMP_THREADS>>>((const __half *)out, G.dr, n, G.part);
    else
        cmp_kernel<__nv_bfloat16><<<CMP_BLOCKS, CMP_THREADS>>>((const __nv_bfloat16 *)out, G.dr, n, G.part);
    CK(cudaGetLastError());
    static double h[CMP_BLOCKS * 5];
    CK(cudaMemcpy(h, G.part, sizeof h, cudaMemcpyDeviceToHost));
    memset(res, 0, 5 * sizeof(double));
    for (int i = 0; i < CMP_BLOCKS; i++) {
        res[0] += h[i * 5 + 0];
        res[1] += h[i * 5 + 1];
        res[2] = fmax(res[2], h[i * 5 + 2]);
        res[3] = fmax(res[3], h[i * 5 + 3]);
        res[4] += h[i * 5 + 4];
    }
}

static void report(bool ok, const char *kname, cr_dtype dt, const gcase *c, const char *what)
{
    printf("%s %-13s %s m=%lld n=%lld k=%lld %c%c alpha=%g beta=%g%s: %s\n", ok ? "PASS" : "FAIL", kname,
           cr_dtype_name(dt), (long long)c->m, (long long)c->n, (long long)c->k, c->ta ? 'T' : 'N',
           c->tb ? 'T' : 'N', c->alpha, c->beta, c->unaligned ? " unaligned" : "", what);
    if (ok)
        G.passed++;
    else
        G.failed++;
}

/* Tolerances on ‖out − ref‖/‖ref‖ (rel) and max|out − ref|/max|ref| (relmax), the reference
 * being exact arithmetic on the exact inputs:
 *  - FP32 / FP64 kernels: accumulation error only, growing with sqrt(K);
 *  - TF32: each input rounded to a 10-bit mantissa (relative error up to 2^-11, rms 2^-11/√3
 *    per operand, so ~4e-4 per product, not shrinking with K): 1.5e-3, plus FP32 accumulation;
 *  - FP16 / BF16: inputs exact, FP32 accumulation, then C rounded once to the dtype: at most half
 *    an ulp, 2^-11 (FP16) or 2^-8 (BF16) of |c| per element; the rms is under that. */
static void tol_for(const kernel_entry *ke, cr_dtype dt, int64_t k, double *rel, double *relmax)
{
    double sk = sqrt((double)k);
    if (dt == CR_DT_F64) {
        *rel = 1e-13 * sk + 1e-14, *relmax = 4 * *rel;
    } else if (dt == CR_DT_F16 || dt == CR_DT_BF16) {
        double u = dt == CR_DT_F16 ? 1.0 / 2048 : 1.0 / 256;
        *rel = u + 1e-5 * sk, *relmax = 2 * u + 4e-5 * sk;
    } else if (ke->kind == KT_TF32) {
        *rel = 1.5e-3 + 1e-5 * sk, *relmax = 4 * *rel;
    } else {
        *rel = 1e-5 * sk + 1e-6, *relmax = 4 * *rel;
    }
}

static void run_case(const kernel_entry *ke, cr_dtype dt, const gcase *c)
{
    size_t es = esize(dt), off = c->unaligned ? 1 : 0;
    size_t na = (size_t)(c->m * c->k), nb = (size_t)(c->k * c->n), nc = (size_t)(c->m * c->n);
    char *a = (char *)G.a + off * es, *b = (char *)G.b + off * es, *cc = (char *)G.c + off * es;
    fill(dt, a, G.da, na);
    fill(dt, b, G.db, nb);
    if (c->beta != 0.0)
        fill(dt, cc, G.dr, nc); /* input C, and the reference starts from it */
    else
        poison(dt, cc, nc, blocks_for(nc)); /* must not be read, and every element written */
    CK(cudaGetLastError());
    if (c->beta == 0.0)
        nan_kernel<double><<<blocks_for(nc), 256>>>(G.dr, nc); /* DGEMM with beta 0 ignores it */
    reference(c, G.da, G.db, G.dr);
    cr_gemm_dev g = {c->m, c->n, c->k, c->ta, c->tb, c->alpha, c->beta, a, b, cc};
    cudaError_t e = ke->fn(&g, dt, 0);
    cudaError_t e2 = cudaDeviceSynchronize();
    if (e != cudaSuccess || e2 != cudaSuccess) {
        char msg[160];
        snprintf(msg, sizeof msg, "launch %s, sync %s", cudaGetErrorString(e), cudaGetErrorString(e2));
        report(false, ke->name, dt, c, msg);
        if (e2 != cudaSuccess)
            exit(3); /* a sticky device fault: nothing after this is trustworthy */
        return;
    }
    double r[5];
    compare(dt, cc, nc, r);
    /* Errors are relative to C, or to the size of the terms summed into it when C is smaller
     * (their RMS with inputs uniform in [-1, 1)): a 1x1x1 alpha·a·b + beta·c that cancels would
     * otherwise hold a TF32 kernel to more digits than its rounded inputs have. */
    double terms = fabs(c->alpha) * sqrt((double)c->k) / 3.0 + fabs(c->beta) / sqrt(3.0);
    double den = fmax(r[1], (double)nc * terms * terms), denmax = fmax(r[3], terms);
    double rel = den > 0 ? sqrt(r[0] / den) : sqrt(r[0]);
    double relmax = denmax > 0 ? r[2] / denmax : r[2];
    double tol, tolmax;
    tol_for(ke, dt, c->k, &tol, &tolmax);
    bool ok = r[4] == 0 && rel <= tol && relmax <= tolmax;
    char msg[160];
    snprintf(msg, sizeof msg, "rel %.2e max %.2e tol %.1e/%.1e nonfinite %.0f", rel, relmax, tol, tolmax, r[4]);
    report(ok, ke->name, dt, c, msg);
}

/* A kernel must refuse a dtype it lacks rather than compute garbage. */
static void check_refusal(const kernel_entry *ke, cr_dtype dt)
{
    gcase c = {8, 8, 8, false, false, 1.0, 0.0, false};
    cr_gemm_dev g = {8, 8, 8, false, false, 1.0, 0.0, G.a, G.b, G.c};
    cudaError_t e = ke->fn(&g, dt, 0);
    report(e == cudaErrorNotSupported, ke->name, dt, &c, "must answer cudaErrorNotSupported");
    cudaGetLastError();
}

/* Same input twice must give bit-identical output: a moving result is a race (or, for split-K,
 * partials summed in whatever order they arrive). */
static void check_repeatable_mnk(const kernel_entry *ke, cr_dtype dt, int64_t m, int64_t nn, int64_t k)
{
    gcase c = {m, nn, k, false, false, 1.0, 0.0, false};
    size_t n = (size_t)(m * nn), es = esize(dt);
    fill(dt, G.a, G.da, (size_t)(m * k));
    fill(dt, G.b, G.db, (size_t)(k * nn));
    cr_gemm_dev g = {m, nn, k, false, false, 1.0, 0.0, G.a, G.b, G.c};
    char *h1 = (char *)malloc(n * es), *h2 = (char *)malloc(n * es);
    if (!h1 || !h2)
        exit(2);
    CK(ke->fn(&g, dt, 0));
    CK(cudaMemcpy(h1, G.c, n * es, cudaMemcpyDeviceToHost));
    poison(dt, G.c, n, blocks_for(n));
    CK(ke->fn(&g, dt, 0));
    CK(cudaMemcpy(h2, G.c, n * es, cudaMemcpyDeviceToHost));
    report(memcmp(h1, h2, n * es) == 0, ke->name, dt, &c, "two runs bit-identical");
    free(h1);
    free(h2);
}

static void check_repeatable(const kernel_entry *ke, cr_dtype dt, int64_t s) { check_repeatable_mnk(ke, dt, s, s, s); }

static const int64_t cubes[] = {1, 7, 31, 64, 127, 128, 129, 1000, 1023};
static const int64_t odd_shapes[][3] = {{257, 130, 67},  {300, 200, 1},   {1, 513, 77},
                                        {129, 1, 1000}, {67, 1031, 260}, {2048, 2048, 129}};

/* (ta, tb, alpha, beta, unaligned) combinations run at every size */
static const struct { bool ta, tb; double alpha, beta; bool unaligned; } combos[] = {
    {false, false, 1.0, 0.0, false}, {true, false, 1.5, 0.5, false}, {false, true, -0.75, 0.0, false},
    {true, true, 1.0, -2.0, false},  {false, false, 1.0, 0.25, true}, {true, true, 0.5, 0.0, true},
};

static void run_shape(const kernel_entry *ke, cr_dtype dt, int64_t m, int64_t n, int64_t k)
{
    for (size_t i = 0; i < sizeof combos / sizeof combos[0]; i++) {
        gcase c = {m, n, k, combos[i].ta, combos[i].tb, combos[i].alpha, combos[i].beta, combos[i].unaligned};
        run_case(ke, dt, &c);
    }
}

/* tensor-core tiles are 64..256 wide and 32/64 deep: sizes on both sides of them, long K with
 * and without 16-byte rows (4104 elements are; 4099 are not) */
static const int64_t tc_cubes[] = {33, 255, 256, 257, 513};
static const int64_t tc_shapes[][3] = {{127, 255, 4099}, {264, 136, 4104}, {1, 7, 4099},
                                       {513, 129, 8},    {8, 8, 9},        {136, 520, 72}};

/* small C, long K: shapes dbuf's rule splits (odd sizes, K not a multiple of slices × tile, a
 * single element with K = 4096), each with every transpose and beta, beta 0 over NaN C, and
 * unaligned pointers (scalar loads, scalar reduction) */
static const int64_t split_shapes[][3] = {
    {128, 128, 1024}, {67, 129, 1031}, {768, 768, 1024}, {1, 1, 4096}, {300, 200, 5000}, {33, 517, 2053}};
static const struct { bool ta, tb; double alpha, beta; bool unaligned; } split_combos[] = {
    {false, false, 1.0, 0.0, false}, {true, false, 1.5, 0.5, false}, {false, true, -0.75, 0.0, false},
    {true, true, 1.0, -2.0, false},  {false, false, 0.5, 1.0, false}, {true, false, 1.0, 0.0, false},
    {false, true, 2.0, -0.5, false}, {true, true, -1.0, 0.0, false},  {false, false, 1.0, 0.25, true},
    {true, false, 0.5, 0.0, true},   {false, true, 1.0, 1.0, true},   {true, true, 0.5, 0.0, true},
};

static bool is_dbuf_entry(const kernel_entry *ke) { return !strncmp(ke->name, "dbuf", 4); }

/* the daemon's view of a GEMM problem (cuda_run.cu fills it from the request) */
static cr_task gemm_task_of(const cr_gemm_dev *g, cr_dtype dt)
{
    cr_task t;
    memset(&t, 0, sizeof t);
    t.op = CR_OP_GEMM;
    t.dtype = dt;
    t.u.gemm = cr_gemm_task{g->m, g->n, g->k, g->trans_a, g->trans_b, g->alpha, g->beta, g->a, g->b,
                              g->beta != 0.0 ? g->c : NULL, g->c};
    return t;
}

/* dbuf as cuda_run.cu runs its registry row: scratch() bytes asked for the task, then the
 * launcher with a launch holding those bytes (NULL when 0), less `cut` bytes of them */
static cudaError_t dbuf_registry(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s, size_t cut)
{
    cr_task t = gemm_task_of(g, dt);
    size_t bytes = (size_t)cr_cuda_scratch_gemm_dbuf(&t);
    if (bytes > G.work_bytes)
        return cudaErrorMemoryAllocation;
    bytes = bytes > cut ? bytes - cut : 0;
    cr_exec x;
    memset(&x, 0, sizeof x);
    x.stream = s;
    cr_cuda_err e;
    memset(&e, 0, sizeof e);
    cr_cuda_launch l = {&x, &t, {g->a, g->b, NULL}, g->c, bytes ? G.work : NULL, bytes, &e};
    return (cudaError_t)cr_cuda_launch_gemm_dbuf(&l);
}

static cudaError_t dbuf_ws(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s) { return dbuf_registry(g, dt, s, 0); }
static cudaError_t dbuf_ws_short(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s) { return dbuf_registry(g, dt, s, 1); }
static cudaError_t dbuf_split_big(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s)
{
    return cr_cuda_gemm_dbuf_split(g, dt, G.work, G.work_bytes, s, 1, 3);
}
static cudaError_t dbuf_split_mid(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s)
{
    return cr_cuda_gemm_dbuf_split(g, dt, G.work, G.work_bytes, s, 2, 5);
}
static cudaError_t dbuf_split_small(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s)
{
    return cr_cuda_gemm_dbuf_split(g, dt, G.work, G.work_bytes, s, 3, 7);
}

static cudaError_t dbuf_tail(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s)
{
    return cr_cuda_gemm_dbuf_tail(g, dt, G.work, G.work_bytes, s, 2);
}

/* big with a partial last wave (on 132 SMs: 144 tiles of 256×128 with each of the 12 tail tiles
 * in 11 parts; 144 tiles with 19 k-tiles; 150 tiles with 4 k-tiles: 72 blocks of one unit; 289
 * tiles: two whole waves then 25 tiles over 132 blocks), odd sizes, run with split_combos */
static const int64_t tail_shapes[][3] = {{2300, 2000, 517}, {1999, 2177, 300}, {2560, 1920, 64}, {4100, 2050, 1000}};

/* dbuf-tail must actually share (the slots it asks for are non-zero), give the same bits twice,
 * and the registry's rule must take the tail schedule at 4096³ and 8192³ (report only: the rule
 * may refuse on a GPU whose last wave is nearly full). */
static void check_tail(const kernel_entry *ke)
{
    for (size_t i = 0; i < sizeof tail_shapes / sizeof tail_shapes[0]; i++) {
        gcase c = {tail_shapes[i][0], tail_shapes[i][1], tail_shapes[i][2], false, false, 1.0, 0.0, false};
        cr_gemm_dev g = {c.m, c.n, c.k, false, false, 1.0, 0.0, G.a, G.b, G.c};
        size_t bytes = cr_cuda_gemm_dbuf_tail_bytes(&g, 2);
        char msg[96];
        snprintf(msg, sizeof msg, "forced tail slots %zu bytes: shares", bytes);
        report(bytes > 0, ke->name, CR_DT_F32, &c, msg);
        check_repeatable_mnk(ke, CR_DT_F32, c.m, c.n, c.k);
    }
    const int64_t sq[] = {4096, 8192};
    for (size_t i = 0; i < 2; i++) {
        cr_gemm_dev g = {sq[i], sq[i], sq[i], false, false, 1.0, 0.0, G.a, G.b, G.c};
        cr_task t = gemm_task_of(&g, CR_DT_F32);
        printf("note: registry scratch at %lld^3: %llu bytes (%s)\n", (long long)sq[i],
               (unsigned long long)cr_cuda_scratch_gemm_dbuf(&t),
               cr_cuda_scratch_gemm_dbuf(&t) ? "tail shared" : "whole tiles");
    }
}

/* The rule must split the split shapes (with the scratch the registry asks for), and the same
 * inputs must give the same bits twice through the split path. */
static void check_split_rule(const kernel_entry *ke)
{
    for (size_t i = 0; i < sizeof split_shapes / sizeof split_shapes[0]; i++) {
        gcase c = {split_shapes[i][0], split_shapes[i][1], split_shapes[i][2], false, false, 1.0, 0.0, false};
        cr_gemm_dev g = {c.m, c.n, c.k, false, false, 1.0, 0.0, G.a, G.b, G.c};
        cr_task t = gemm_task_of(&g, CR_DT_F32);
        uint64_t bytes = cr_cuda_scratch_gemm_dbuf(&t);
        char msg[96];
        snprintf(msg, sizeof msg, "registry scratch %llu bytes (%.1f slices): splits", (unsigned long long)bytes,
                 (double)bytes / (4.0 * (double)(c.m * c.n)));
        report(bytes > 0, ke->name, CR_DT_F32, &c, msg);
    }
    check_repeatable_mnk(ke, CR_DT_F32, 768, 768, 1024);
    check_repeatable_mnk(ke, CR_DT_F32, 67, 129, 1031);
}

static void run_kernel(const kernel_entry *ke, cr_dtype dt)
{
    for (size_t i = 0; i < sizeof cubes / sizeof cubes[0]; i++)
        run_shape(ke, dt, cubes[i], cubes[i], cubes[i]);
    for (size_t i = 0; i < sizeof odd_shapes / sizeof odd_shapes[0]; i++)
        run_shape(ke, dt, odd_shapes[i][0], odd_shapes[i][1], odd_shapes[i][2]);
    if (is_dbuf_entry(ke) && dt == CR_DT_F32)
        for (size_t i = 0; i < sizeof split_shapes / sizeof split_shapes[0]; i++)
            for (size_t j = 0; j < sizeof split_combos / sizeof split_combos[0]; j++) {
                gcase c = {split_shapes[i][0], split_shapes[i][1], split_shapes[i][2], split_combos[j].ta,
                           split_combos[j].tb, split_combos[j].alpha, split_combos[j].beta, split_combos[j].unaligned};
                run_case(ke, dt, &c);
            }
    if (ke->fn == dbuf_tail || ke->fn == dbuf_ws)
        for (size_t i = 0; i < sizeof tail_shapes / sizeof tail_shapes[0]; i++)
            for (size_t j = 0; j < sizeof split_combos / sizeof split_combos[0]; j++) {
                gcase c = {tail_shapes[i][0], tail_shapes[i][1], tail_shapes[i][2], split_combos[j].ta,
                           split_combos[j].tb, split_combos[j].alpha, split_combos[j].beta, split_combos[j].unaligned};
                run_case(ke, dt, &c);
            }
    if (ke->kind == KT_TF32 || ke->kind == KT_HALF) {
        for (size_t i = 0; i < sizeof tc_cubes / sizeof tc_cubes[0]; i++)
            run_shape(ke, dt, tc_cubes[i], tc_cubes[i], tc_cubes[i]);
        for (size_t i = 0; i < sizeof tc_shapes / sizeof tc_shapes[0]; i++)
            run_shape(ke, dt, tc_shapes[i][0], tc_shapes[i][1], tc_shapes[i][2]);
    }
    /* the big square: once plain, once with every flag, the slow ones in F32 only */
    if (dt == CR_DT_F32 || !ke->slow) {
        gcase big = {4096, 4096, 4096, false, false, 1.0, 0.0, false};
        run_case(ke, dt, &big);
        gcase big2 = {4096, 4096, 4096, true, true, -1.0, 0.5, false};
        run_case(ke, dt, &big2);
    }
    /* m or n of 0: nothing to do, success */
    cr_gemm_dev z = {0, 5, 5, false, false, 1.0, 0.0, G.a, G.b, G.c};
    gcase zc = {0, 5, 5, false, false, 1.0, 0.0, false};
    report(ke->fn(&z, dt, 0) == cudaSuccess, ke->name, dt, &zc, "empty C is a no-op");
}

/* The registry's cuBLAS path for float16/bfloat16 (GemmEx, or StridedBatchedEx when G.batch is
 * 2: then the same problem twice, at strides of one matrix, the second copy's output checked). */
static cudaError_t cublas_ex(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s)
{
    if (dt != CR_DT_F16 && dt != CR_DT_BF16)
        return cudaErrorNotSupported;
    if (g->m == 0 || g->n == 0)
        return cudaSuccess;
    cr_gemm_task t = {g->m, g->n, g->k, g->trans_a, g->trans_b, g->alpha, g->beta, g->a, g->b,
                      g->beta != 0.0 ? g->c : NULL, g->c};
    if (cublasSetStream(G.hx, s) != CUBLAS_STATUS_SUCCESS)
        return cudaErrorUnknown;
    return cr_cublas_gemm_batched(G.hx, &t, dt, false, g->a, g->b, g->c, 1) == CUBLAS_STATUS_SUCCESS
               ? cudaSuccess
               : cudaErrorUnknown;
}

/* cr_cublas_gemm_batched over 2 problems: the second one's inputs are copies of the first's, so
 * both outputs must match the one reference. */
static void check_batched(cr_dtype dt, int64_t m, int64_t n, int64_t k, bool ta, bool tb, double beta)
{
    gcase c = {m, n, k, ta, tb, 1.25, beta, false};
    size_t es = esize(dt), na = (size_t)(m * k), nb = (size_t)(k * n), nc = (size_t)(m * n);
    char *a = (char *)G.a, *b = (char *)G.b, *cc = (char *)G.c;
    fill(dt, a, G.da, na);
    fill(dt, b, G.db, nb);
    if (beta != 0.0)
        fill(dt, cc, G.dr, nc);
    else
        poison(dt, cc, nc, blocks_for(nc));
    CK(cudaMemcpy(a + na * es, a, na * es, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(b + nb * es, b, nb * es, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(cc + nc * es, cc, nc * es, cudaMemcpyDeviceToDevice));
    if (beta == 0.0)
        nan_kernel<double><<<blocks_for(nc), 256>>>(G.dr, nc);
    reference(&c, G.da, G.db, G.dr);
    cr_gemm_task t = {m, n, k, ta, tb, c.alpha, beta, a, b, beta != 0.0 ? cc : NULL, cc};
    CK(cublasSetStream(G.hx, 0));
    CK(cr_cublas_gemm_batched(G.hx, &t, dt, false, a, b, cc, 2));
    CK(cudaDeviceSynchronize());
    kernel_entry ke = {"cublas-batch2", NULL, KT_HALF, false};
    double tol, tolmax;
    tol_for(&ke, dt, k, &tol, &tolmax);
    for (int i = 0; i < 2; i++) {
        double r[5];
        compare(dt, cc + i * nc * es, nc, r);
        double rel = r[1] > 0 ? sqrt(r[0] / r[1]) : sqrt(r[0]), relmax = r[3] > 0 ? r[2] / r[3] : r[2];
        char msg[160];
        snprintf(msg, sizeof msg, "batch item %d: rel %.2e max %.2e tol %.1e/%.1e nonfinite %.0f", i, rel, relmax,
                 tol, tolmax, r[4]);
        report(r[4] == 0 && rel <= tol && relmax <= tolmax, ke.name, dt, &c, msg);
    }
}

/* The wgmma kernel forced (cr_cuda_gemm_wgmma itself, not through tc's size rule) on shapes with
 * ragged m, n and k edges against its 128×256×64 tiles, the big squares, every transpose,
 * alpha/beta with an input C; it must refuse (cudaErrorNotSupported) what TMA cannot read. */
static const int64_t wg_shapes[][3] = {{264, 136, 4104}, {1000, 1000, 1000}, {4096, 4096, 4096}, {8192, 8192, 1024},
                                       {8, 8, 8},        {136, 264, 72},     {64, 256, 64},      {200, 520, 136},
                                       {2048, 2048, 1032}, {520, 1000, 8},   {1032, 8, 2056},    {129, 264, 72},
                                       {1, 8, 8},        {257, 1, 4104}};
static const struct { bool ta, tb; double alpha, beta; } wg_combos[] = {
    {false, false, 1.0, 0.0}, {true, false, 1.5, 0.5}, {false, true, -0.75, 0.0}, {true, true, 1.0, -2.0},
    {false, false, 0.5, 1.0}, {true, false, 1.0, 0.0}, {false, true, 2.0, -0.5},  {true, true, -1.0, 0.0},
};

static void forced_wgmma(const kernel_entry *ke, cr_dtype dt)
{
    for (size_t i = 0; i < sizeof wg_shapes / sizeof wg_shapes[0]; i++)
        for (size_t j = 0; j < sizeof wg_combos / sizeof wg_combos[0]; j++) {
            gcase c = {wg_shapes[i][0], wg_shapes[i][1], wg_shapes[i][2], wg_combos[j].ta, wg_combos[j].tb,
                       wg_combos[j].alpha, wg_combos[j].beta, false};
            /* odd m or n: only the transposes whose stored rows run along k (or the even side) */
            cr_gemm_dev g = {c.m, c.n, c.k, c.ta, c.tb, c.alpha, c.beta, G.a, G.b, G.c};
            if (!cr_cuda_gemm_wgmma_applies(&g, dt, true))
                continue;
            run_case(ke, dt, &c);
        }
    /* what TMA cannot take: an unaligned base, a leading dimension not a multiple of 8 (16-bit)
     * or 4 (TF32) elements; A untransposed is read in place in both */
    gcase u = {256, 256, 256, false, false, 1.0, 0.0, true};
    cr_gemm_dev g = {256, 256, 256, false, false, 1.0, 0.0, (char *)G.a + esize(dt), G.b, G.c};
    report(cr_cuda_gemm_wgmma(&g, dt, 0) == cudaErrorNotSupported, ke->name, dt, &u,
           "unaligned A: must answer cudaErrorNotSupported");
    gcase o = {256, 256, 257, false, false, 1.0, 0.0, false};
    cr_gemm_dev g2 = {256, 256, 257, false, false, 1.0, 0.0, G.a, G.b, G.c};
    report(cr_cuda_gemm_wgmma(&g2, dt, 0) == cudaErrorNotSupported, ke->name, dt, &o,
           "k=257 rows: must answer cudaErrorNotSupported");
    cudaGetLastError();
    check_refusal(ke, CR_DT_F64);
    check_repeatable(ke, dt, 1024);
}

/* argv: names of the entries to run (a kernel of the table, `wgmma` for the forced wgmma cases,
 * `batch` for the cuBLAS batch check); none: all. */
static int g_argc;
static char **g_argv;
static bool wanted(const char *name)
{
    bool any = false;
    for (int i = 1; i < g_argc; i++) {
        any = true;
        if (!strcmp(g_argv[i], name))
            return true;
    }
    return !any;
}

int main(int argc, char **argv)
{
    g_argc = argc, g_argv = argv;
    CK(cudaMalloc(&G.a, MAXN * 8));
    CK(cudaMalloc(&G.b, MAXN * 8));
    CK(cudaMalloc(&G.c, MAXN * 8));
    CK(cudaMalloc((void **)&G.da, MAXN * 8));
    CK(cudaMalloc((void **)&G.db, MAXN * 8));
    CK(cudaMalloc((void **)&G.dr, MAXN * 8));
    CK(cudaMalloc((void **)&G.part, CMP_BLOCKS * 5 * sizeof(double)));
    G.work_bytes = MAXN * 8; /* forced splits at 4096³: up to 7 slices of C */
    CK(cudaMalloc(&G.work, G.work_bytes));
    CK(cublasCreate(&G.h));
    /* the reference must be true FP64, never a tensor-core shortcut */
    CK(cublasSetMathMode(G.h, CUBLAS_PEDANTIC_MATH));
    CK(cublasCreate(&G.hx));
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
        const kernel_entry *ke = &kernels[i];
        if (!wanted(ke->name))
            continue;
        if (ke->kind == KT_HALF) {
            run_kernel(ke, CR_DT_F16);
            run_kernel(ke, CR_DT_BF16);
            check_refusal(ke, CR_DT_F64);
            if (ke->fn == cr_cuda_gemm_tc) /* the variant hook and cublas run F32 elsewhere */
                check_refusal(ke, CR_DT_F32);
        } else {
            run_kernel(ke, CR_DT_F32);
            if (ke->kind == KT_F32_F64)
                run_kernel(ke, CR_DT_F64);
            else
                check_refusal(ke, CR_DT_F64);
            if (ke->fn == cr_cuda_gemm_tc_tf32) {
                check_refusal(ke, CR_DT_F16);
                check_refusal(ke, CR_DT_BF16);
            }
        }
        check_refusal(ke, CR_DT_I32);
    }
    for (size_t i = 4; i < sizeof kernels / sizeof kernels[0]; i++) {
        if (kernels[i].fn == cublas_ex || !wanted(kernels[i].name))
            continue;
        if (kernels[i].kind == KT_HALF) {
            check_repeatable(&kernels[i], CR_DT_F16, 1023);
            check_repeatable(&kernels[i], CR_DT_BF16, 1023);
        } else {
            check_repeatable(&kernels[i], CR_DT_F32, 1023);
        }
    }
    if (wanted("dbuf-ws")) {
        const kernel_entry *ws = NULL;
        for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
            if (kernels[i].fn == dbuf_ws)
                ws = &kernels[i];
        check_split_rule(ws);
        check_repeatable_mnk(ws, CR_DT_F32, 4096, 4096, 4096); /* the rule's tail schedule, if taken */
    }
    if (wanted("dbuf-tail")) {
        for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
            if (kernels[i].fn == dbuf_tail)
                check_tail(&kernels[i]);
    }
    if (wanted("wgmma")) {
        forced_wgmma(&wgmma_entry, CR_DT_F16);
        forced_wgmma(&wgmma_entry, CR_DT_BF16);
    }
    if (wanted("wgmma-tf32"))
        forced_wgmma(&wgmma_tf32_entry, CR_DT_F32);
    if (wanted("batch")) {
        check_batched(CR_DT_F16, 127, 65, 33, false, false, 0.0);
        check_batched(CR_DT_BF16, 64, 96, 200, true, true, -0.5);
    }
    cublasDestroy(G.hx);
    cublasDestroy(G.h);
    printf("gpu_gemm: %d passed, %d failed\n", G.passed, G.failed);
    return G.failed ? 1 : 0;
}
