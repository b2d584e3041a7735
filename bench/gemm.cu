/* Benchmark of our own GEMM kernels against cuBLAS (SGEMM, TF32 tensor cores, DGEMM).
 *
 * usage: gemm OUT.csv [full|quick|tc|splitk|profile]
 *   full    squares 128..8192 and the V100 write-up's sweep M=N=128..16384 with K=1024, then the
 *           tensor-core sweeps (below)
 *   quick   4096³ and 8192³ only, own dbuf candidates and tc-3xtf32 (FP32 through 3xTF32 tensor-core
 *           products) vs cuBLAS SGEMM (tuning)
 *   tc      the tensor-core sweeps only: squares 1024..8192, sweep `tf32` (cublas-tf32 against
 *           tc-tf32) and `f16`, `bf16` (cuBLAS GemmEx with FP32 accumulation, through the
 *           registry's own launcher, against tc), with tc's forced tile configurations beside
 *           (tc-big, tc-mid, tc-small), tc-wgmma / tc-tf32-wgmma (the wgmma kernel at any size)
 *           and tc-mma / tc-tf32-mma (mma.sync only, `tc` before gemm_wgmma.cu), for TF32 also
 *           tc-tf32-wgmma-nt (B stored transposed: no transposing copy); ratios against the
 *           cuBLAS of the same dtype/precision
 *   splitk  dbuf's split-K: M=N = 128..2048 with K=1024 and 4096³, cuBLAS SGEMM against dbuf as
 *           the daemon runs it (`dbuf`: registry scratch, then the launcher), dbuf without scratch
 *           (`dbuf-nosplit`, as before split-K) and, up to 2048, every tile configuration forced
 *           into 1..64 K slices (`split-CFG-S`), to fit and check the choice rule; then 3072² and
 *           4096² with K=1024, 4096³ and 8192³ (no split expected: no regression)
 *   profile [V] one dbuf launch at 4096³ (for ncu), V = candidate number (0: shipped)
 * `dbuf` is the registry row as cuda_run.cu runs it (the scratch its scratch function asks for,
 * then its launcher): split-K where the rule picks it; `dbuf-nosplit` is cr_cuda_gemm_dbuf (no
 * scratch, never splits; the AᵀA `gemm` row's path).
 * Timing: tools/gpu/harness.cuh (warm-up, L2 flushed before each repeat, median of 3..30
 * repeats, as many as fit ~150 ms per kernel and shape), random inputs in [-1, 1].
 * CSV columns: sweep,kernel,dtype,m,n,k,ms,gflops,ratio_vs_cublas (ratio = cuBLAS time of the
 * same dtype and shape over this kernel's time; > 1 means faster than cuBLAS).
 * full and quick also print the device's peaks and the SM clock measured before the first and
 * after the last sweep, and write them to OUT.device.json for the plots (gpu_run_begin). */
#include "tools/gpu/harness.cuh"
#include <cublas_v2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/launchers.h"

/* tuning hooks in kernels/cuda/gemm_dbuf.cu and gemm_tc.cu (not part of the public header) */
extern "C" cudaError_t cr_cuda_gemm_dbuf_variant(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s, int variant);
extern "C" cudaError_t cr_cuda_gemm_tc_variant(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s, int variant);
extern "C" cudaError_t cr_cuda_gemm_dbuf_split(const cr_gemm_dev *g, cr_dtype dt, void *work, size_t work_bytes,
                                               cudaStream_t s, int cfg, int slices);
extern "C" cudaError_t cr_cuda_gemm_dbuf_plan(const cr_gemm_dev *g, int *cfg, int *slices);


enum { K_OWN, K_VARIANT, K_CUBLAS, K_TF32, K_REGISTRY, K_SPLIT };

typedef struct {
    const char *name;
    int kind;
    cr_gemm_launcher fn;
    int variant;
    cr_dtype dt;
    int64_t max_size; /* skip shapes with m or n above this (the slow ones) */
} bench_kernel;

static const bench_kernel all_kernels[] = {
    {"cublas", K_CUBLAS, NULL, 0, CR_DT_F32, 1 << 30},
    {"naive", K_OWN, cr_cuda_gemm_naive, 0, CR_DT_F32, 4096},
    {"regtile", K_OWN, cr_cuda_gemm_regtile, 0, CR_DT_F32, 4096},
    {"smem", K_OWN, cr_cuda_gemm_smem, 0, CR_DT_F32, 8192},
    {"blocktile", K_OWN, cr_cuda_gemm_blocktile, 0, CR_DT_F32, 1 << 30},
    {"vec", K_OWN, cr_cuda_gemm_vec, 0, CR_DT_F32, 1 << 30},
    {"dbuf", K_REGISTRY, NULL, 0, CR_DT_F32, 1 << 30},
    {"dbuf-nosplit", K_OWN, cr_cuda_gemm_dbuf, 0, CR_DT_F32, 1 << 30},
    {"dbuf-big", K_VARIANT, NULL, 1, CR_DT_F32, 1 << 30},
    {"dbuf-mid", K_VARIANT, NULL, 2, CR_DT_F32, 1 << 30},
    {"dbuf-small", K_VARIANT, NULL, 3, CR_DT_F32, 1 << 30},
    {"tc-3xtf32", K_OWN, cr_cuda_gemm_3xtf32, 0, CR_DT_F32, 1 << 30},
    {"cublas-tf32", K_TF32, NULL, 0, CR_DT_F32, 1 << 30},
    {"cublas", K_CUBLAS, NULL, 0, CR_DT_F64, 1 << 30},
    {"blocktile", K_OWN, cr_cuda_gemm_blocktile, 0, CR_DT_F64, 8192},
};
#define NKERNELS (sizeof all_kernels / sizeof all_kernels[0])

static struct {
    void *a, *b, *c;
    cublasHandle_t h, htf32;
    cublasHandle_t hx; /* default math, as the daemon's workers: the float16/bfloat16 reference */
    void *work;        /* dbuf's split-K scratch */
    size_t work_bytes;
    gpu_timer timer;
    FILE *csv;
} B;

__global__ void fill_kernel(float *x, size_t n, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        x[i] = (float)(h & 0xffffff) / 8388608.0f - 1.0f;
    }
}

__global__ void widen_kernel(const float *x, double *y, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = x[i];
}

/* Random inputs for a shape in the kernel's dtype (float64: the float32 values widened). */
static void prepare(const bench_kernel *k, int64_t m, int64_t n, int64_t kk)
{
    size_t na = (size_t)(m * kk), nb = (size_t)(kk * n), nc = (size_t)(m * n);
    static unsigned seed = 1;
    fill_kernel<<<1024, 256>>>((float *)B.a, na, seed++);
    fill_kernel<<<1024, 256>>>((float *)B.b, nb, seed++);
    fill_kernel<<<1024, 256>>>((float *)B.c, nc, seed++);
    CK(cudaGetLastError());
    if (k->dt == CR_DT_F64) { /* same values, widened through a scratch buffer */
        size_t sz[3] = {na, nb, nc};
        void *p[3] = {B.a, B.b, B.c};
        for (int i = 0; i < 3; i++) {
            double *tmp;
            CK(cudaMalloc((void **)&tmp, sz[i] * 8));
            widen_kernel<<<1024, 256>>>((const float *)p[i], tmp, sz[i]);
            CK(cudaGetLastError());
            CK(cudaMemcpy(p[i], tmp, sz[i] * 8, cudaMemcpyDeviceToDevice));
            CK(cudaFree(tmp));
        }
    }
    CK(cudaDeviceSynchronize());
}

/* ---- tensor-core sweeps -------------------------------------------------------------------- */

/* random 16-bit inputs, same generator as fill_kernel, rounded to nearest */
template <typename T>
__global__ void fill16_kernel(T *x, size_t n, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        float v = (float)(h & 0xffffff) / 8388608.0f - 1.0f;
        x[i] = (T)v;
    }
}

static void fill_dt(cr_dtype dt, void *x, size_t n, unsigned seed)
{
    if (dt == CR_DT_F32)
        fill_kernel<<<1024, 256>>>((float *)x, n, seed);
    else if (dt == CR_DT_F16)
        fill16_kernel<__half><<<1024, 256>>>((__half *)x, n, seed);
    else
        fill16_kernel<__nv_bfloat16><<<1024, 256>>>((__nv_bfloat16 *)x, n, seed);
    CK(cudaGetLastError());
}

enum { TC_CUBLAS, TC_OWN }; /* the cuBLAS of the sweep's precision, or tc (variant 0..7) */
#define TC_V 10               /* rows per size: cuBLAS, tc's variants 0..7, TF32 wgmma with B transposed */

/* One call of a tensor-core sweep's kernel: C = A·B, no transposes, alpha 1, beta 0. */
static void tc_launch(int kind, int variant, cr_dtype dt, int64_t m, int64_t n, int64_t kk)
{
    if (kind == TC_OWN) {
        /* variant 8: the wgmma kernel (6) with B stored transposed (n×k, K-major): for TF32 the
         * same GEMM without the transposing copy of B, so the difference to 6 is its cost */
        cr_gemm_dev g = {m, n, kk, false, variant == 8, 1.0, 0.0, B.a, B.b, B.c};
        CK(cr_cuda_gemm_tc_variant(&g, dt, 0, variant == 8 ? 6 : variant));
    } else if (dt == CR_DT_F32) { /* TF32 tensor cores, as the cublas-tf32 row */
        float al = 1.f, be = 0.f;
        CK(cublasSgemm(B.htf32, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m, (int)kk, &al, (const float *)B.b, (int)n,
                       (const float *)B.a, (int)kk, &be, (float *)B.c, (int)n));
    } else { /* the registry's cublas row: cublasGemmEx, FP32 accumulation */
        cr_gemm_task t = {m, n, kk, false, false, 1.0, 0.0, B.a, B.b, NULL, B.c};
        CK(cr_cublas_gemm_batched(B.hx, &t, dt, false, B.a, B.b, B.c, 1));
    }
}

typedef struct {
    const char *sweep;
    cr_dtype dt;
    double ms4[TC_V], ms8[TC_V]; /* cuBLAS, then tc's variants 0.. at 4096³ and 8192³ */
} tc_sweep;

/* variant v-1 of cr_cuda_gemm_tc_variant: the shipped choice, its three tile configurations,
 * two tuning candidates (bench/NOTES-gemm.md), then for FP16/BF16 the wgmma kernel at any size
 * (tc-wgmma) and the mma.sync choice with wgmma off (tc-mma, what `tc` was before gemm_wgmma.cu);
 * TF32 also times its wgmma kernel on a B stored transposed (tc-tf32-wgmma-nt: no transposing
 * copy; 16-bit types skip that row, NULL) */
static const char *const tc_names[2][TC_V] = {
    {"cublas-tf32", "tc-tf32", "tc-tf32-big", "tc-tf32-mid", "tc-tf32-small", "tc-tf32-big4", "tc-tf32-tall",
     "tc-tf32-wgmma", "tc-tf32-mma", "tc-tf32-wgmma-nt"},
    {"cublas", "tc", "tc-big", "tc-mid", "tc-small", "tc-big4", "tc-tall", "tc-wgmma", "tc-mma", NULL}};

static void bench_tc_sweep(tc_sweep *sw)
{
    static const int64_t sq[] = {1024, 2048, 3072, 4096, 6144, 8192};
    static unsigned seed = 1000;
    for (size_t i = 0; i < sizeof sq / sizeof sq[0]; i++) {
        int64_t s = sq[i];
        size_t ne = (size_t)(s * s);
        fill_dt(sw->dt, B.a, ne, seed++);
        fill_dt(sw->dt, B.b, ne, seed++);
        CK(cudaDeviceSynchronize());
        double ref = 0;
        for (int v = 0; v < TC_V; v++) {
            if (!tc_names[sw->dt != CR_DT_F32][v])
                continue;
            int kind = v == 0 ? TC_CUBLAS : TC_OWN, variant = v == 0 ? 0 : v - 1;
            double ms = gpu_time_median_ms(&B.timer, [&] { tc_launch(kind, variant, sw->dt, s, s, s); }, 30, 0, 150.0);
            if (v == 0)
                ref = ms;
            fprintf(B.csv, "%s,%s,%s,%lld,%lld,%lld,%.4f,%.1f,%.3f\n", sw->sweep, tc_names[sw->dt != CR_DT_F32][v],
                    cr_dtype_name(sw->dt), (long long)s, (long long)s, (long long)s, ms, 2.0 * s * s * s / (ms * 1e6),
                    ref / ms);
            fflush(B.csv);
            if (s == 4096)
                sw->ms4[v] = ms;
            if (s == 8192)
                sw->ms8[v] = ms;
        }
        fprintf(stderr, "%s %lld done\n", sw->sweep, (long long)s);
    }
}

static void print_tc(const tc_sweep *sw, int n)
{
    printf("\ntensor cores          4096^3: ms  TFLOP/s  vs cuBLAS    8192^3: ms  TFLOP/s  vs cuBLAS\n");
    for (int i = 0; i < n; i++)
        for (int v = 0; v < TC_V; v++)
            if (tc_names[sw[i].dt != CR_DT_F32][v])
                printf("%-5s %-14s %10.3f %8.1f %8.3f %13.3f %8.1f %8.3f\n", sw[i].sweep,
                       tc_names[sw[i].dt != CR_DT_F32][v], sw[i].ms4[v], 2.0 * 4096 * 4096 * 4096 / (sw[i].ms4[v] * 1e9),
                       sw[i].ms4[0] / sw[i].ms4[v], sw[i].ms8[v], 2.0 * 8192.0 * 8192 * 8192 / (sw[i].ms8[v] * 1e9),
                       sw[i].ms8[0] / sw[i].ms8[v]);
}

/* dbuf as the daemon runs its registry row (cuda_run.cu): the scratch bytes the row's scratch
 * function asks for the task, then the launcher with them (NULL when 0) */
static void launch_registry(int64_t m, int64_t n, int64_t kk)
{
    cr_task t;
    memset(&t, 0, sizeof t);
    t.op = CR_OP_GEMM;
    t.dtype = CR_DT_F32;
    t.u.gemm = cr_gemm_task{m, n, kk, false, false, 1.0, 0.0, B.a, B.b, NULL, B.c};
    size_t bytes = (size_t)cr_cuda_scratch_gemm_dbuf(&t);
    if (bytes > B.work_bytes)
        CK(cudaErrorMemoryAllocation);
    cr_exec x;
    memset(&x, 0, sizeof x);
    x.stream = 0;
    cr_cuda_err e;
    memset(&e, 0, sizeof e);
    cr_cuda_launch l = {&x, &t, {B.a, B.b, NULL}, B.c, bytes ? B.work : NULL, bytes, &e};
    CK((cudaError_t)cr_cuda_launch_gemm_dbuf(&l));
}

static void launch(const bench_kernel *k, int64_t m, int64_t n, int64_t kk)
{
    cr_gemm_dev g = {m, n, kk, false, false, 1.0, 0.0, B.a, B.b, B.c};
    if (k->kind == K_OWN) {
        CK(k->fn(&g, k->dt, 0));
    } else if (k->kind == K_REGISTRY) {
        launch_registry(m, n, kk);
    } else if (k->kind == K_SPLIT) { /* variant = configuration (1..3) · 100 + slices */
        CK(cr_cuda_gemm_dbuf_split(&g, k->dt, B.work, B.work_bytes, 0, k->variant / 100, k->variant % 100));
    } else if (k->kind == K_VARIANT) {
        CK(cr_cuda_gemm_dbuf_variant(&g, k->dt, 0, k->variant));
    } else if (k->dt == CR_DT_F64) {
        double al = 1.0, be = 0.0;
        CK(cublasDgemm(B.h, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m, (int)kk, &al, (const double *)B.b,
                       (int)n, (const double *)B.a, (int)kk, &be, (double *)B.c, (int)n));
    } else { /* row-major C = A·B as column-major Cᵀ = Bᵀ·Aᵀ, no copies */
        float al = 1.f, be = 0.f;
        CK(cublasSgemm(k->kind == K_TF32 ? B.htf32 : B.h, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m, (int)kk, &al,
                       (const float *)B.b, (int)n, (const float *)B.a, (int)kk, &be, (float *)B.c, (int)n));
    }
}

/* repeats: as many as fit ~150 ms per kernel and shape, 3 to 30 */
static double time_kernel(const bench_kernel *k, int64_t m, int64_t n, int64_t kk)
{
    return gpu_time_median_ms(&B.timer, [&] { launch(k, m, n, kk); }, 30, 0, 150.0);
}

#define MAXROW 16
typedef struct {
    const bench_kernel *k;
    double ms;
} result;

/* The rows the ratios are taken against and reported for, by what they run (not their names). */
static bool is_sgemm(const bench_kernel *k) { return k->kind == K_CUBLAS && k->dt == CR_DT_F32; }
static bool is_dbuf(const bench_kernel *k) { return k->kind == K_REGISTRY; }
static bool is_fast_own(const bench_kernel *k)
{
    return is_dbuf(k) ||
           (k->kind == K_OWN && (k->fn == cr_cuda_gemm_vec || k->fn == cr_cuda_gemm_dbuf || k->fn == cr_cuda_gemm_3xtf32));
}

/* all kernels (of the mask) on one shape; ratio against cuBLAS of the same dtype */
static int bench_shape(const char *sweep, int64_t m, int64_t n, int64_t kk, const bool *use, result *out)
{
    int cnt = 0;
    double ref[2] = {0, 0};
    cr_dtype last = CR_DT_COUNT;
    for (size_t i = 0; i < NKERNELS; i++) {
        const bench_kernel *k = &all_kernels[i];
        if (!use[i] || m > k->max_size || n > k->max_size)
            continue;
        if (k->dt != last) {
            prepare(k, m, n, kk);
            last = k->dt;
        }
        double ms = time_kernel(k, m, n, kk);
        if (k->kind == K_CUBLAS)
            ref[k->dt == CR_DT_F64] = ms;
        double r = ref[k->dt == CR_DT_F64];
        double gf = 2.0 * m * n * kk / (ms * 1e6);
        fprintf(B.csv, "%s,%s,%s,%lld,%lld,%lld,%.4f,%.1f,%.3f\n", sweep, k->name, cr_dtype_name(k->dt),
                (long long)m, (long long)n, (long long)kk, ms, gf, r > 0 ? r / ms : 0.0);
        fflush(B.csv);
        if (cnt < MAXROW)
            out[cnt++] = (result){k, ms};
    }
    return cnt;
}

static void print_table(int64_t s, const result *r, int cnt)
{
    double ref = 0;
    for (int i = 0; i < cnt; i++)
        if (is_sgemm(r[i].k))
            ref = r[i].ms;
    printf("\n%lld^3            ms    TFLOP/s  vs cuBLAS SGEMM\n", (long long)s);
    for (int i = 0; i < cnt; i++)
        printf("%-13s %s %8.3f %8.2f %8.3f\n", r[i].k->name, cr_dtype_name(r[i].k->dt), r[i].ms,
               2.0 * s * s * s / (r[i].ms * 1e9), ref / r[i].ms);
}

/* One size of the splitk sweep: cuBLAS, dbuf (registry path), dbuf-nosplit, and with `forced`
 * every configuration at 2..32 slices that fits the scratch. Prints one summary line. */
static void splitk_size(int64_t m, int64_t n, int64_t kk, bool forced)
{
    static const char *const cfg_name[4] = {"auto", "big", "mid", "small"};
    static const int slices[] = {1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64};
    const bench_kernel fixed[3] = {{"cublas", K_CUBLAS, NULL, 0, CR_DT_F32, 1 << 30},
                                   {"dbuf", K_REGISTRY, NULL, 0, CR_DT_F32, 1 << 30},
                                   {"dbuf-nosplit", K_OWN, cr_cuda_gemm_dbuf, 0, CR_DT_F32, 1 << 30}};
    prepare(&fixed[0], m, n, kk);
    double ms[3], best = 1e30;
    char best_name[32] = "-";
    for (int i = 0; i < 3; i++) {
        ms[i] = time_kernel(&fixed[i], m, n, kk);
        fprintf(B.csv, "splitk,%s,float32,%lld,%lld,%lld,%.4f,%.1f,%.3f\n", fixed[i].name, (long long)m, (long long)n,
                (long long)kk, ms[i], 2.0 * m * n * kk / (ms[i] * 1e6), ms[0] / ms[i]);
    }
    for (int c = 1; forced && c <= 3; c++)
        for (size_t j = 0; j < sizeof slices / sizeof slices[0]; j++) {
            if ((size_t)(slices[j] * m * n) * sizeof(float) > B.work_bytes)
                continue;
            char name[32];
            snprintf(name, sizeof name, "split-%s-%d", cfg_name[c], slices[j]);
            bench_kernel k = {name, K_SPLIT, NULL, c * 100 + slices[j], CR_DT_F32, 1 << 30};
            double t = time_kernel(&k, m, n, kk);
            fprintf(B.csv, "splitk,%s,float32,%lld,%lld,%lld,%.4f,%.1f,%.3f\n", name, (long long)m, (long long)n,
                    (long long)kk, t, 2.0 * m * n * kk / (t * 1e6), ms[0] / t);
            if (t < best)
                best = t, snprintf(best_name, sizeof best_name, "%s", name);
        }
    fflush(B.csv);
    cr_gemm_dev g = {m, n, kk, false, false, 1.0, 0.0, B.a, B.b, B.c};
    int cfg = 0, sl = 0;
    CK(cr_cuda_gemm_dbuf_plan(&g, &cfg, &sl));
    printf("splitk %5lld %5lld %5lld %9.4f %9.4f %6.3f  %-5s %2d %12.4f %6.3f  %-16s %9.4f\n", (long long)m, (long long)n,
           (long long)kk, ms[0], ms[1], ms[0] / ms[1], cfg_name[cfg], sl, ms[2], ms[0] / ms[2], best_name,
           forced ? best : 0.0);
}

static void bench_splitk(void)
{
    static const int64_t sw[] = {128, 256, 512, 768, 1024, 1536, 2048};
    printf("\nsplitk     M     N     K  cublas ms   dbuf ms  speed  plan   S  nosplit ms  speed  best forced       ms\n");
    for (size_t i = 0; i < sizeof sw / sizeof sw[0]; i++)
        splitk_size(sw[i], sw[i], 1024, true);
    splitk_size(3072, 3072, 1024, false);
    splitk_size(4096, 4096, 1024, false);
    splitk_size(4096, 4096, 4096, false);
    splitk_size(8192, 8192, 8192, false);
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "gemm.csv";
    const char *mode = argc > 2 ? argv[2] : "full";
    /* 16384² of float64 = 2 GiB for C; A and B at most 16384×1024 or 8192² */
    CK(cudaMalloc(&B.a, (size_t)8192 * 8192 * 8));
    CK(cudaMalloc(&B.b, (size_t)8192 * 8192 * 8));
    CK(cudaMalloc(&B.c, (size_t)16384 * 16384 * 8));
    CK(cublasCreate(&B.h));
    CK(cublasCreate(&B.htf32));
    CK(cublasSetMathMode(B.h, CUBLAS_PEDANTIC_MATH)); /* exact FP32: no tensor-core shortcut */
    CK(cublasSetMathMode(B.htf32, CUBLAS_TF32_TENSOR_OP_MATH));
    CK(cublasCreate(&B.hx));
    B.work_bytes = (size_t)1 << 30; /* forced splits: up to 64 slices of a 2048² C */
    CK(cudaMalloc(&B.work, B.work_bytes));
    /* tc-tf32's wgmma path takes its scratch from the stream's pool, as in the daemon
     * (backend_cuda.cu): keep the pool's memory across synchronizations, as it does */
    cudaMemPool_t pool;
    uint64_t keep = UINT64_MAX;
    CK(cudaDeviceGetDefaultMemPool(&pool, 0));
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));

    if (!strcmp(mode, "profile")) {
        gpu_print_clocks(stdout); /* no CSV to put a sidecar beside; ncu sets its own clocks (base) */
        /* argv[3]: which dbuf (0 the shipped one, 1.. the candidates) */
        bench_kernel k = {"dbuf-v", K_VARIANT, NULL, argc > 3 ? atoi(argv[3]) : 0, CR_DT_F32, 1 << 30};
        prepare(&k, 4096, 4096, 4096);
        launch(&k, 4096, 4096, 4096);
        CK(cudaDeviceSynchronize());
        return 0;
    }
    B.csv = fopen(path, "w");
    if (!B.csv) {
        perror(path);
        return 2;
    }
    gpu_timer_create(&B.timer);
    fprintf(B.csv, "sweep,kernel,dtype,m,n,k,ms,gflops,ratio_vs_cublas\n");
    gpu_device dev = gpu_run_begin(stdout, path);
    bool use_all[NKERNELS], use_fast[NKERNELS];
    for (size_t i = 0; i < NKERNELS; i++) {
        use_all[i] = true;
        use_fast[i] = all_kernels[i].kind != K_OWN || is_fast_own(&all_kernels[i]);
        if (all_kernels[i].dt == CR_DT_F64 || all_kernels[i].kind == K_TF32)
            use_fast[i] = false;
    }
    result r4[MAXROW], r8[MAXROW];
    int n4 = 0, n8 = 0;
    tc_sweep tcs[3] = {{"tf32", CR_DT_F32, {0}, {0}}, {"f16", CR_DT_F16, {0}, {0}}, {"bf16", CR_DT_BF16, {0}, {0}}};
    if (!strcmp(mode, "splitk")) {
        bench_splitk();
        gpu_run_end(&dev, stdout);
        fclose(B.csv);
        gpu_timer_destroy(&B.timer);
        return 0;
    }
    if (!strcmp(mode, "tc")) {
        for (int i = 0; i < 3; i++)
            bench_tc_sweep(&tcs[i]);
        gpu_run_end(&dev, stdout);
        print_tc(tcs, 3);
        fclose(B.csv);
        gpu_timer_destroy(&B.timer);
        return 0;
    }
    if (!strcmp(mode, "quick")) {
        n4 = bench_shape("square", 4096, 4096, 4096, use_fast, r4);
        n8 = bench_shape("square", 8192, 8192, 8192, use_fast, r8);
    } else {
        static const int64_t sq[] = {128, 256, 512, 1024, 2048, 4096, 8192};
        for (size_t i = 0; i < sizeof sq / sizeof sq[0]; i++) {
            result r[MAXROW];
            int c = bench_shape("square", sq[i], sq[i], sq[i], use_all, r);
            if (sq[i] == 4096)
                memcpy(r4, r, sizeof r), n4 = c;
            if (sq[i] == 8192)
                memcpy(r8, r, sizeof r), n8 = c;
            fprintf(stderr, "square %lld done\n", (long long)sq[i]);
        }
        static const int64_t sw[] = {128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384};
        printf("\nsweep K=1024     M=N   cublas ms   dbuf ms  dbuf/cublas(speed)\n");
        for (size_t i = 0; i < sizeof sw / sizeof sw[0]; i++) {
            result r[MAXROW];
            int c = bench_shape("k1024", sw[i], sw[i], 1024, use_all, r);
            double cu = 0, db = 0;
            for (int j = 0; j < c; j++) {
                if (is_sgemm(r[j].k))
                    cu = r[j].ms;
                if (is_dbuf(r[j].k))
                    db = r[j].ms;
            }
            printf("sweep K=1024 %7lld %10.3f %9.3f %8.3f\n", (long long)sw[i], cu, db, cu / db);
        }
        for (int i = 0; i < 3; i++)
            bench_tc_sweep(&tcs[i]);
    }
    gpu_run_end(&dev, stdout);
    print_table(4096, r4, n4);
    print_table(8192, r8, n8);
    if (strcmp(mode, "quick"))
        print_tc(tcs, 3);
    fclose(B.csv);
    gpu_timer_destroy(&B.timer);
    return 0;
}
