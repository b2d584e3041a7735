/* Benchmark of the AᵀA and histogram kernels against cuBLAS / CUB, on the device machine.
 *   build/bench/ata_hist results.csv
 * AᵀA FP32 (m = n = 1024..8192): gemm (dbuf on Aᵀ·A), symtile, cuBLAS SSYRK, cuBLAS SGEMM as AᵀA.
 * AᵀA FP64 on the C2075 write-up's sizes (2000²..8000² always, then up to 18000² while the
 * fp64-seconds budget lasts, 2 minutes by default): symtile, dmma, DSYRK, DGEMM (dmma against
 * DSYRK timed in turns, below). Histograms of random bytes 1 MiB..1 GiB: global, smem,
 * smem-vec, cub, beside a device-to-device cudaMemcpy (read + write counted) measured in the
 * same run. hist_bins: 256 MiB of uniform float32 and float64 over [-1, 1], 256 to 2^20 bins (the API's default limit):
 * cub, smem-vec as dispatched and each of its paths that holds the bins (hist_smem_vec.h), and
 * global from 4096 bins; every kernel's counts are checked against CUB's.
 * Times: tools/gpu/harness.cuh (warm-up, L2 flushed before each repeat, median of the
 * repeats, fewer of them for slow runs). AᵀA rates count the full product (2·m·n²), as
 * cr_task_flops does. ratio_vs_ref = reference time / this time. SYRK is timed alone (no
 * mirror), the strictest reference. FP64: DSYRK and dmma are timed in turns (DSYRK, dmma,
 * DSYRK, dmma, ..., each launch after an L2 flush between its own events, medians of each), so
 * both see the same clock state: FP64 tensor work lowers the clock of a power-bound card (an H100
 * ran DSYRK up to 50% slower within one process), so a kernel timed alone reads the clock its
 * place in the run left it (on an H100 the old order below read dmma / DSYRK from 5% lower to
 * 18% higher than the turns, n = 2000-14000: bench/NOTES-gemm.md). The cublas-syrk row and
 * every ata_f64 ratio use the DSYRK median of the turns; DGEMM and symtile are timed alone, and
 * the old order (DSYRK alone first, dmma alone after DGEMM and symtile) is printed beside each n
 * with the configuration dmma's dispatch picked. CSV columns:
 * sweep,kernel,dtype,m,n,k_or_bytes,ms,rate,unit,ratio_vs_ref (hist_bins: n is the bins)
 * A third argument runs only the sweeps it names (comma-separated: ata_f32, ata_sym (symtile's
 * FP32 tuning variants), hist (hist_u8 and hist_dtypes), hist_bins, ata_f64); without it, all of
 * them.
 * It also prints the device's peaks and the SM clock measured before the first and after the
 * last sweep, and writes them to results.device.json for the plots (gpu_run_begin). */
#include "tools/gpu/harness.cuh"
#include <cublas_v2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>

#include "kernels/cuda/ata_hist_kernels.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/hist_bin.cuh"
#include "kernels/cuda/hist_smem_vec.h"

#define DIE_IF(cond, ...)                                                                        \
    do {                                                                                         \
        if (cond) {                                                                              \
            fprintf(stderr, __VA_ARGS__);                                                        \
            fprintf(stderr, "\n");                                                               \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

static FILE *csv;
static gpu_timer timer;

/* at most reps repeats, fewer (not under 3) once they have taken budget_ms */
template <typename Launch>
static double time_ms(const Launch &fn, int reps, double budget_ms = 3000)
{
    return gpu_time_median_ms(&timer, fn, reps, 0, budget_ms);
}

static void row(const char *sweep, const char *kernel, const char *dtype, long long m, long long n,
                long long kb, double ms, double rate, const char *unit, double ratio)
{
    fprintf(csv, "%s,%s,%s,%lld,%lld,%lld,%.6f,%.3f,%s,%.4f\n", sweep, kernel, dtype, m, n, kb, ms, rate, unit, ratio);
    fflush(csv);
    printf("%-10s %-12s %-4s m=%-6lld n=%-6lld bytes=%-11lld %10.4f ms %10.1f %s  x%.3f\n", sweep, kernel, dtype,
           m, n, kb, ms, rate, unit, ratio);
}

__global__ void fill_uniform(float *f, double *d, unsigned char *b, size_t count, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
        unsigned long long x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
        x ^= x >> 31;
        x *= 0xbf58476d1ce4e5b9ull;
        x ^= x >> 29;
        double u = (double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0;
        if (f) f[i] = (float)u;
        if (d) d[i] = u;
        if (b) b[i] = (unsigned char)(x >> 56);
    }
}

static cublasHandle_t blas;
static double best_speed[8]; /* collected target ratios */
static int bins_mismatches; /* hist_bins kernels whose counts differ from CUB's */
static double dmma_worst;   /* the lowest DSYRK time / dmma time, n <= 8000 */

static void ata_fp32(int n)
{
    int m = n;
    float *a, *c;
    CK(cudaMalloc(&a, (size_t)m * n * 4));
    CK(cudaMalloc(&c, (size_t)n * n * 4));
    fill_uniform<<<1024, 256>>>(a, NULL, NULL, (size_t)m * n, 1);
    double flops = 2.0 * m * (double)n * n;
    const float one = 1, zero = 0;
    cr_ata_dev d = {m, n, false, a, c, NULL};
    void *work = NULL; /* symtile's stream-K slots, when its plan splits tiles */
    size_t wb = cr_cuda_ata_work_bytes(&d, CR_DT_F32, cr_cuda_ata_symtile);
    if (wb)
        CK(cudaMalloc(&work, wb));
    d.work = work;
    cr_gemm_dev g = {n, n, m, true, false, 1.0, 0.0, a, a, c};
    double syrk = time_ms([&] { CK(cublasSsyrk(blas, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, n, m, &one, a, n, &zero, c, n)); }, 10);
    double sgemm = time_ms([&] { CK(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, n, n, m, &one, a, n, a, n, &zero, c, n)); }, 10);
    double gemm = time_ms([&] { CK(cr_cuda_gemm_dbuf(&g, CR_DT_F32, 0)); }, 10);
    double sym = time_ms([&] { CK(cr_cuda_ata_symtile(&d, CR_DT_F32, 0)); }, 10);
    row("ata_f32", "cublas-syrk", "f32", m, n, 0, syrk, flops / syrk / 1e6, "GFLOP/s", 1.0);
    row("ata_f32", "cublas-sgemm", "f32", m, n, 0, sgemm, flops / sgemm / 1e6, "GFLOP/s", syrk / sgemm);
    row("ata_f32", "gemm", "f32", m, n, 0, gemm, flops / gemm / 1e6, "GFLOP/s", syrk / gemm);
    row("ata_f32", "symtile", "f32", m, n, 0, sym, flops / sym / 1e6, "GFLOP/s", syrk / sym);
    if (n == 4096) {
        best_speed[0] = gemm / sym;
        best_speed[1] = syrk / sym;
    }
    CK(cudaFree(a));
    CK(cudaFree(c));
    CK(cudaFree(work));
}

/* symtile's FP32 variants (kernels/cuda/ata_symtile.cu: variant % 10 the configuration, /10 the
 * schedule, /100 the tile-rows per group) beside SSYRK, m = n: sweep ata_sym. */
extern "C" cudaError_t cr_cuda_ata_symtile_variant(const cr_ata_dev *t, cr_dtype dt, cudaStream_t s, int variant);
extern "C" size_t cr_cuda_ata_symtile_variant_work_bytes(const cr_ata_dev *t, cr_dtype dt, int variant);

static void ata_sym_variants(int n)
{
    static const int variants[] = {0, 1, 12, 22, 13, 23, 14, 24, 15, 25, 16, 26, 17, 27, 1610, 3220};
    int m = n;
    float *a, *c;
    void *work = NULL;
    CK(cudaMalloc(&a, (size_t)m * n * 4));
    CK(cudaMalloc(&c, (size_t)n * n * 4));
    fill_uniform<<<1024, 256>>>(a, NULL, NULL, (size_t)m * n, 1);
    cr_ata_dev d = {m, n, false, a, c, NULL};
    size_t wb = 0;
    for (int v : variants)
        if (cr_cuda_ata_symtile_variant_work_bytes(&d, CR_DT_F32, v) > wb)
            wb = cr_cuda_ata_symtile_variant_work_bytes(&d, CR_DT_F32, v);
    if (wb)
        CK(cudaMalloc(&work, wb));
    d.work = work;
    double flops = 2.0 * m * (double)n * n;
    const float one = 1, zero = 0;
    double syrk = time_ms([&] { CK(cublasSsyrk(blas, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, n, m, &one, a, n, &zero, c, n)); }, 10);
    row("ata_sym", "cublas-syrk", "f32", m, n, 0, syrk, flops / syrk / 1e6, "GFLOP/s", 1.0);
    for (int v : variants) {
        char name[32];
        snprintf(name, sizeof name, "symtile-v%d", v);
        double ms = time_ms([&] { CK(cr_cuda_ata_symtile_variant(&d, CR_DT_F32, 0, v)); }, 10);
        row("ata_sym", name, "f32", m, n, (long long)cr_cuda_ata_symtile_variant_work_bytes(&d, CR_DT_F32, v), ms,
            flops / ms / 1e6, "GFLOP/s", syrk / ms);
    }
    CK(cudaFree(a));
    CK(cudaFree(c));
    CK(cudaFree(work));
}

/* Medians of fa and fb timed in turns, fa fb fa fb ... (one warm-up of each first): each timed
 * launch as gpu_time_median_ms times one (L2 flushed outside the span, events around the launch),
 * so each kernel runs right after the other's launch and both see the clock state their
 * alternation sets. At most reps turns, fewer (not under 3) once the two's times add up to
 * budget_ms. */
template <typename LA, typename LB>
static void time_turns_ms(const LA &fa, const LB &fb, int reps, double budget_ms, double *ma, double *mb)
{
    fa();
    fb();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<float> va, vb;
    double spent = 0;
    for (int r = 0; r < reps; r++) {
        for (int which = 0; which < 2; which++) {
            if (timer.flush) {
                gpu_flush_l2_kernel<<<timer.flush_blocks, 256>>>(timer.flush, timer.flush_bytes / sizeof(int4));
                CK(cudaGetLastError());
            }
            CK(cudaEventRecord(timer.start, 0));
            if (which == 0)
                fa();
            else
                fb();
            CK(cudaGetLastError());
            CK(cudaEventRecord(timer.stop, 0));
            CK(cudaEventSynchronize(timer.stop));
            float x;
            CK(cudaEventElapsedTime(&x, timer.start, timer.stop));
            (which == 0 ? va : vb).push_back(x);
            spent += x;
        }
        if (r >= 2 && spent > budget_ms)
            break;
    }
    std::sort(va.begin(), va.end());
    std::sort(vb.begin(), vb.end());
    *ma = va[va.size() / 2];
    *mb = vb[vb.size() / 2];
}

/* kernels/cuda/ata_dmma.cu: the configuration dmma's dispatch takes for n (1 128² tiles, 2 64²
 * tiles, 3 pairs of 64² tiles) on the current device. */
extern "C" int cr_cuda_ata_dmma_choice(int64_t n);

static void ata_fp64(int n)
{
    int m = n;
    double *a, *c;
    CK(cudaMalloc(&a, (size_t)m * n * 8));
    CK(cudaMalloc(&c, (size_t)n * n * 8));
    fill_uniform<<<1024, 256>>>(NULL, a, NULL, (size_t)m * n, 2);
    double flops = 2.0 * m * (double)n * n;
    const double one = 1, zero = 0;
    cr_ata_dev d = {m, n, false, a, c, NULL};
    auto dsyrk = [&] { CK(cublasDsyrk(blas, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, n, m, &one, a, n, &zero, c, n)); };
    auto dmma = [&] { CK(cr_cuda_ata_dmma(&d, CR_DT_F64, 0)); };
    /* the old order first (each alone: DSYRK, DGEMM, symtile, dmma), then DSYRK and dmma in turns */
    double syrk_alone = time_ms(dsyrk, 5, 1500);
    double dgemm = time_ms([&] { CK(cublasDgemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, n, n, m, &one, a, n, a, n, &zero, c, n)); }, 5, 1500);
    double sym = time_ms([&] { CK(cr_cuda_ata_symtile(&d, CR_DT_F64, 0)); }, 5, 1500);
    double dm_alone = time_ms(dmma, 5, 1500);
    double syrk = 0, dm = 0;
    time_turns_ms(dsyrk, dmma, 10, 3000, &syrk, &dm);
    row("ata_f64", "cublas-syrk", "f64", m, n, 0, syrk, flops / syrk / 1e6, "GFLOP/s", 1.0);
    row("ata_f64", "cublas-dgemm", "f64", m, n, 0, dgemm, flops / dgemm / 1e6, "GFLOP/s", syrk / dgemm);
    row("ata_f64", "symtile", "f64", m, n, 0, sym, flops / sym / 1e6, "GFLOP/s", syrk / sym);
    row("ata_f64", "dmma", "f64", m, n, 0, dm, flops / dm / 1e6, "GFLOP/s", syrk / dm);
    static const char *cfg_name[] = {"?", "128x128 tiles", "64x64 tiles", "pairs of 64x64 tiles"};
    int cfg = cr_cuda_ata_dmma_choice(n);
    printf("ata_f64    n=%-6d dmma config: %s; in turns DSYRK %.4f / dmma %.4f ms: x%.3f; old order (alone, "
           "dmma after DGEMM and symtile) DSYRK %.4f / dmma %.4f ms: x%.3f\n",
           n, cfg_name[cfg >= 1 && cfg <= 3 ? cfg : 0], syrk, dm, syrk / dm, syrk_alone, dm_alone, syrk_alone / dm_alone);
    if (n <= 8000 && (dmma_worst == 0 || syrk / dm < dmma_worst))
        dmma_worst = syrk / dm;
    CK(cudaFree(a));
    CK(cudaFree(c));
}

static void histograms(size_t bytes, unsigned char *data, unsigned long long *counts, void *temp, size_t temp_bytes,
                       void *copy_dst)
{
    cr_hist_dev h = {(int64_t)bytes, data, 256, 0.0, 256.0, counts};
    double gb = bytes / 1e9;
    double copy = time_ms([&] { CK(cudaMemcpyAsync(copy_dst, data, bytes, cudaMemcpyDeviceToDevice, 0)); }, 20);
    double cub = time_ms([&] { size_t tb = temp_bytes; CK(cr_cuda_hist_cub(&h, CR_DT_U8, temp, &tb, 0)); }, 20);
    double vec = time_ms([&] { CK(cr_cuda_hist_smem_vec(&h, CR_DT_U8, 0)); }, 20);
    double smem = time_ms([&] { CK(cr_cuda_hist_smem(&h, CR_DT_U8, 0)); }, 10);
    double glob = time_ms([&] { CK(cr_cuda_hist_global(&h, CR_DT_U8, 0)); }, 5, 1500);
    row("hist_u8", "d2d-copy", "u8", 0, 0, bytes, copy, 2 * gb / copy * 1e3, "GB/s", cub / copy);
    row("hist_u8", "cub", "u8", 0, 0, bytes, cub, gb / cub * 1e3, "GB/s", 1.0);
    row("hist_u8", "smem-vec", "u8", 0, 0, bytes, vec, gb / vec * 1e3, "GB/s", cub / vec);
    row("hist_u8", "smem", "u8", 0, 0, bytes, smem, gb / smem * 1e3, "GB/s", cub / smem);
    row("hist_u8", "global", "u8", 0, 0, bytes, glob, gb / glob * 1e3, "GB/s", cub / glob);
    if (bytes == (512u << 20)) {
        best_speed[2] = cub / vec;
        best_speed[3] = (gb / vec) / (2 * gb / copy);
        best_speed[4] = vec;
        best_speed[5] = cub;
        best_speed[6] = 2 * gb / copy * 1e3;
    }
}

/* Every dtype's data as the daemon's histograms take it: the byte values 0..255 widened (or
 * reinterpreted, for int8: -128..127), so each type fills the same 256 bins [0, 256) (int8 only
 * the upper half). */
template <typename T>
__global__ void widen_bytes(const unsigned char *src, T *dst, size_t count)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = (T)src[i];
}

static void widen(cr_dtype dt, const unsigned char *src, void *dst, size_t count)
{
    switch (dt) {
    case CR_DT_I8: widen_bytes<<<4096, 256>>>(src, (signed char *)dst, count); break;
    case CR_DT_U16: widen_bytes<<<4096, 256>>>(src, (unsigned short *)dst, count); break;
    case CR_DT_I16: widen_bytes<<<4096, 256>>>(src, (short *)dst, count); break;
    case CR_DT_U32: widen_bytes<<<4096, 256>>>(src, (unsigned *)dst, count); break;
    case CR_DT_I32: widen_bytes<<<4096, 256>>>(src, (int *)dst, count); break;
    case CR_DT_U64: widen_bytes<<<4096, 256>>>(src, (unsigned long long *)dst, count); break;
    case CR_DT_I64: widen_bytes<<<4096, 256>>>(src, (long long *)dst, count); break;
    case CR_DT_F32: widen_bytes<<<4096, 256>>>(src, (float *)dst, count); break;
    case CR_DT_F64: widen_bytes<<<4096, 256>>>(src, (double *)dst, count); break;
    default: DIE_IF(true, "no widening to %s", cr_dtype_name(dt));
    }
    CK(cudaGetLastError());
}

/* 256 MiB of each dtype the histograms take, 256 bins: GB/s of input and the ratio to CUB
 * (HistogramEven on the same dtype), for the kernels that can keep up (global atomics cannot). */
static void hist_dtypes(unsigned char *bytes_src)
{
    const size_t bytes = (size_t)256 << 20;
    const cr_dtype dts[] = {CR_DT_U8, CR_DT_I8, CR_DT_U16, CR_DT_I16, CR_DT_U32, CR_DT_I32,
                            CR_DT_U64, CR_DT_I64, CR_DT_F32, CR_DT_F64};
    void *data, *temp;
    unsigned long long *counts;
    CK(cudaMalloc(&data, bytes));
    CK(cudaMalloc(&counts, 256 * 8));
    for (cr_dtype dt : dts) {
        size_t count = bytes / cr_dtype_size(dt), temp_bytes = 0;
        if (dt == CR_DT_U8)
            CK(cudaMemcpy(data, bytes_src, bytes, cudaMemcpyDeviceToDevice));
        else
            widen(dt, bytes_src, data, count);
        cr_hist_dev h = {(int64_t)count, data, 256, 0.0, 256.0, counts};
        CK(cr_cuda_hist_cub(&h, dt, NULL, &temp_bytes, 0));
        CK(cudaMalloc(&temp, temp_bytes));
        double gb = bytes / 1e9;
        double cub = time_ms([&] { size_t tb = temp_bytes; CK(cr_cuda_hist_cub(&h, dt, temp, &tb, 0)); }, 20);
        double vec = time_ms([&] { CK(cr_cuda_hist_smem_vec(&h, dt, 0)); }, 20);
        double smem = time_ms([&] { CK(cr_cuda_hist_smem(&h, dt, 0)); }, 10);
        const char *name = cr_dtype_name(dt);
        row("hist_dtypes", "cub", name, 0, 0, bytes, cub, gb / cub * 1e3, "GB/s", 1.0);
        row("hist_dtypes", "smem-vec", name, 0, 0, bytes, vec, gb / vec * 1e3, "GB/s", cub / vec);
        row("hist_dtypes", "smem", name, 0, 0, bytes, smem, gb / smem * 1e3, "GB/s", cub / smem);
        CK(cudaFree(temp));
    }
    CK(cudaFree(data));
    CK(cudaFree(counts));
}

static void hist_sweep(void)
{
    size_t max_bytes = (size_t)1 << 30;
    unsigned char *data;
    unsigned long long *counts;
    void *copy_dst, *temp;
    CK(cudaMalloc(&data, max_bytes));
    CK(cudaMalloc(&copy_dst, max_bytes));
    CK(cudaMalloc(&counts, 256 * 8));
    fill_uniform<<<4096, 256>>>(NULL, NULL, data, max_bytes, 3);
    cr_hist_dev h = {(int64_t)max_bytes, data, 256, 0.0, 256.0, counts};
    size_t temp_bytes = 0;
    CK(cr_cuda_hist_cub(&h, CR_DT_U8, NULL, &temp_bytes, 0));
    CK(cudaMalloc(&temp, temp_bytes));
    for (size_t mib = 1; mib <= 1024; mib *= 2)
        if (mib == 1 || mib == 4 || mib == 16 || mib == 64 || mib >= 256)
            histograms(mib << 20, data, counts, temp, temp_bytes, copy_dst);
    hist_dtypes(data);
    CK(cudaFree(data));
    CK(cudaFree(copy_dst));
    CK(cudaFree(counts));
    CK(cudaFree(temp));
}

/* One kernel of the hist_bins sweep: timed, then its counts (of the last run) against CUB's. */
template <typename Launch>
static void bins_row(const char *kernel, const char *dtype, int bins, size_t bytes, double cub_ms,
                     unsigned long long *counts, const std::vector<unsigned long long> &want, const Launch &fn,
                     int reps = 10, double budget_ms = 2000)
{
    double ms = time_ms(fn, reps, budget_ms);
    std::vector<unsigned long long> got(bins);
    CK(cudaMemcpy(got.data(), counts, bins * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    if (!want.empty() && got != want) {
        int b = 0;
        while (got[b] == want[b])
            b++;
        printf("MISMATCH hist_bins %s %s bins=%d: bin %d got %llu, cub %llu\n", kernel, dtype, bins, b, got[b], want[b]);
        bins_mismatches++;
    }
    row("hist_bins", kernel, dtype, 0, bins, (long long)bytes, ms, bytes / 1e9 / ms * 1e3, "GB/s", cub_ms / ms);
}

/* float32 and float64, 256 MiB, uniform over [-1, 1] (every bin filled evenly), bins 256..2^20. */
static void hist_bins(void)
{
    const size_t bytes = (size_t)256 << 20;
    const int max_bins = 1 << 20;
    void *data;
    unsigned long long *counts;
    CK(cudaMalloc(&data, bytes));
    CK(cudaMalloc(&counts, max_bins * sizeof(unsigned long long)));
    int dev = 0, optin = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    const int cap = optin / 4;
    for (cr_dtype dt : {CR_DT_F32, CR_DT_F64}) {
        size_t count = bytes / cr_dtype_size(dt);
        fill_uniform<<<4096, 256>>>(dt == CR_DT_F32 ? (float *)data : NULL, dt == CR_DT_F64 ? (double *)data : NULL,
                                    NULL, count, 11);
        CK(cudaGetLastError());
        const char *name = cr_dtype_name(dt);
        for (int bins : {256, 1024, 4096, 16384, 65536, 1 << 17, 1 << 18, 1 << 20}) {
            cr_hist_dev h = {(int64_t)count, data, bins, -1.0, 1.0, counts};
            size_t temp_bytes = 0;
            void *temp = NULL;
            CK(cr_cuda_hist_cub(&h, dt, NULL, &temp_bytes, 0));
            std::vector<unsigned long long> want;
            double cub = 0;
            if (cudaMalloc(&temp, temp_bytes) == cudaSuccess) {
                printf("cub %s bins=%d: %.1f MiB of temporary storage\n", name, bins, temp_bytes / 1048576.0);
                cub = time_ms([&] { size_t tb = temp_bytes; CK(cr_cuda_hist_cub(&h, dt, temp, &tb, 0)); }, 10);
                want.resize(bins);
                CK(cudaMemcpy(want.data(), counts, bins * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
                row("hist_bins", "cub", name, 0, bins, (long long)bytes, cub, bytes / 1e9 / cub * 1e3, "GB/s", 1.0);
                CK(cudaFree(temp));
            } else {
                cudaGetLastError();
                printf("cub %s bins=%d: %.1f MiB of temporary storage do not fit: no reference\n", name, bins,
                       temp_bytes / 1048576.0);
            }
            bins_row("smem-vec", name, bins, bytes, cub, counts, want,
                     [&] { CK(cr_cuda_hist_smem_vec(&h, dt, 0)); });
            if (bins <= CR_HIST_SMEM_MAX_BINS)
                bins_row("smem-vec:smem48", name, bins, bytes, cub, counts, want,
                         [&] { CK(cr_cuda_hist_smem_vec_path(&h, dt, CR_HIST_VEC_SMEM48, 0)); });
            if (bins >= 4096 && bins <= cap)
                bins_row("smem-vec:one-copy", name, bins, bytes, cub, counts, want,
                         [&] { CK(cr_cuda_hist_smem_vec_path(&h, dt, CR_HIST_VEC_ONE_COPY, 0)); });
            if (bins >= 16384)
                bins_row("smem-vec:cluster", name, bins, bytes, cub, counts, want,
                         [&] { CK(cr_cuda_hist_smem_vec_path(&h, dt, CR_HIST_VEC_CLUSTER, 0)); });
            if (bins > 8 * cap)
                bins_row("smem-vec:cluster8", name, bins, bytes, cub, counts, want,
                         [&] { CK(cr_cuda_hist_smem_vec_path(&h, dt, CR_HIST_VEC_CLUSTER8, 0)); });
            if (bins >= 4096)
                bins_row("global", name, bins, bytes, cub, counts, want,
                         [&] { CK(cr_cuda_hist_global(&h, dt, 0)); }, 5, 1000);
        }
    }
    CK(cudaFree(data));
    CK(cudaFree(counts));
}

static bool wanted(const char *only, const char *sweep)
{
    if (!only)
        return true;
    size_t n = strlen(sweep);
    for (const char *p = only; (p = strstr(p, sweep)) != NULL; p += n)
        if ((p == only || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return true;
    return false;
}

int main(int argc, char **argv)
{
    DIE_IF(argc < 2, "usage: %s results.csv [fp64-seconds [sweeps]] (FP64 sizes past 8000 run while fp64-seconds, "
                     "default 120, last)", argv[0]);
    const char *only = argc > 3 ? argv[3] : NULL;
    csv = fopen(argv[1], "w");
    DIE_IF(!csv, "cannot write %s", argv[1]);
    double fp64_budget_s = argc > 2 ? atof(argv[2]) : 120;
    fprintf(csv, "sweep,kernel,dtype,m,n,k_or_bytes,ms,rate,unit,ratio_vs_ref\n");
    gpu_timer_create(&timer);
    CK(cublasCreate(&blas));
    gpu_device dev = gpu_run_begin(stdout, argv[1]);
    if (wanted(only, "ata_f32"))
        for (int n : {1024, 2048, 3072, 4096, 6144, 8192})
            ata_fp32(n);
    if (wanted(only, "ata_sym"))
        for (int n : {1024, 2048, 3072, 4096, 6144, 8192})
            ata_sym_variants(n);
    if (wanted(only, "hist"))
        hist_sweep();
    if (wanted(only, "hist_bins"))
        hist_bins();
    time_t start = time(NULL);
    /* n <= 8000 always (the dmma target's range), larger sizes while the budget lasts */
    for (int n = 2000; n <= 18000 && wanted(only, "ata_f64") && (n <= 8000 || difftime(time(NULL), start) < fp64_budget_s);
         n += 2000)
        ata_fp64(n);
    gpu_run_end(&dev, stdout);
    fclose(csv);
    gpu_timer_destroy(&timer);
    CK(cublasDestroy(blas));
    printf("\ntargets (same run):\n");
    if (wanted(only, "ata_f32")) { /* each target only where its sweep ran */
        printf("  symtile vs gemm kernel, AᵀA FP32 n=4096: %.2fx faster (target >= 1.6)\n", best_speed[0]);
        printf("  symtile vs cuBLAS SSYRK, FP32 n=4096:     %.2fx (target >= 0.9)\n", best_speed[1]);
    }
    if (wanted(only, "hist")) {
        printf("  smem-vec vs CUB, 512 MiB u8:              %.2fx (target >= 1.1)  [%.4f ms vs %.4f ms]\n",
               best_speed[2], best_speed[4], best_speed[5]);
        printf("  smem-vec rate / D2D copy rate (%.0f GB/s): %.0f%% (target >= 80%%)\n", best_speed[6],
               best_speed[3] * 100);
    }
    if (wanted(only, "ata_f64"))
        printf("  dmma vs cuBLAS DSYRK, FP64 n<=8000, worst: %.2fx (target >= 0.8)\n", dmma_worst);
    if (wanted(only, "hist_bins"))
        printf("  hist_bins: %d kernels' counts differ from CUB's\n", bins_mismatches);
    return bins_mismatches ? 1 : 0;
}
