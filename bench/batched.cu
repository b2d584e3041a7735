/* Benchmark of stacks (issue 35): the own batched GEMM (registry row `batched`, gemm_batched.cu)
 * against cuBLAS's strided-batched GEMM (what the `cublas` row runs on a stack with a common stride)
 * on stacks that fill the GPU, FP32 and FP64.
 *
 * usage: batched OUT.csv [quick|tune]
 *   square 8, 16, 32, 64, 128, 256 at counts that make each stack ~400 MB of FP32 (500,000 x 8²,
 *   100,000 x 16², 32,768 x 32², 8,192 x 64², 2,048 x 128², 512 x 256²), non-square and odd shapes,
 *   and a broadcast A ((1,m,k)@(b,k,n): stride 0 for cuBLAS, one matrix for ours); quick: FP32 only;
 *   tune: the shapes whose products fit a block whole, with every tuning variant of the kernel
 *   (batched-vN: cr_cuda_gemm_batched_variant; batched is variant 0, the one the row runs).
 *   Last, the issue's floor term: 8,192 64x64 float32 products, strided-batched, kernel only.
 * Timing: tools/gpu/harness.cuh (warm-up, L2 flushed before each repeat, median of up to 50
 * repeats within ~200 ms), random inputs in [-1, 1). Every shape is checked: the own result against
 * cuBLAS's, max|diff| / max|cuBLAS| under 1e-5 (FP32) or 1e-12 (FP64); a mismatch fails the run.
 * The floor of each shape is the larger of its bytes (A, B read once, C written once) over the
 * device-to-device copy rate measured here, and its flops over the FP32/FP64 peak at the rated clock.
 * CSV: sweep,kernel,dtype,m,n,k,count,ms,gflops,gbs,floor_ms,ratio_vs_cublas (cuBLAS's time over
 * this kernel's: > 1 is faster than cuBLAS). OUT.device.json: the device and its peaks. */
#include "tools/gpu/harness.cuh"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_worker.h"

/* tuning hook in kernels/cuda/gemm_batched.cu (not part of the public header) */
extern "C" cudaError_t cr_cuda_gemm_batched_variant(const cr_gemm_dev *g, const cr_stack *s, cr_dtype dt,
                                                    cudaStream_t st, int variant);
#define VARIANTS 7

typedef struct {
    const char *sweep;
    int64_t m, n, k, count;
    bool bcast_a; /* (1,m,k)@(b,k,n) */
} shape;

static const shape shapes[] = {
    {"square", 8, 8, 8, 500000, false},      {"square", 16, 16, 16, 100000, false},
    {"square", 32, 32, 32, 32768, false},    {"square", 64, 64, 64, 8192, false},
    {"square", 128, 128, 128, 2048, false},  {"square", 256, 256, 256, 512, false},
    {"odd", 17, 33, 9, 100000, false},       {"odd", 33, 33, 33, 32768, false},
    {"odd", 255, 7, 33, 10000, false},       {"odd", 1, 64, 64, 20000, false},
    {"odd", 100, 100, 100, 2048, false},     {"odd", 129, 129, 129, 1024, false},
    {"odd", 64, 32, 128, 8192, false},       {"odd", 128, 16, 64, 8192, false},
    {"bcast", 32, 32, 32, 32768, true},      {"bcast", 64, 64, 64, 8192, true},
};

static struct {
    void *a, *b, *c_own, *c_ref;
    size_t bytes;
    cublasHandle_t h;
    gpu_timer timer;
    FILE *csv;
    double copy_gbs;
    gpu_device dev;
    int mismatches;
} S;

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

__global__ void fill64_kernel(double *x, size_t n, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        x[i] = (double)(h & 0xffffff) / 8388608.0 - 1.0;
    }
}

static void fill(cr_dtype dt, void *x, size_t n, unsigned seed)
{
    if (dt == CR_DT_F32)
        fill_kernel<<<1024, 256>>>((float *)x, n, seed);
    else
        fill64_kernel<<<1024, 256>>>((double *)x, n, seed);
    CK(cudaGetLastError());
}

/* The stack of a shape: one batch dimension; A one matrix for all when bcast_a. */
static cr_stack stack_of(const shape &s)
{
    cr_stack st;
    int nrank[3] = {1, 1, -1};
    int64_t ndims[3][CR_STACK_DIMS] = {{s.bcast_a ? 1 : s.count}, {s.count}, {0}};
    cr_stack_plan(&st, 1, &s.count, nrank, ndims);
    return st;
}

/* cuBLAS strided-batched, row-major as the registry's launcher calls it: Cᵀ = Bᵀ·Aᵀ. */
static void cublas_run(const shape &s, cr_dtype dt, void *c)
{
    int m = (int)s.m, n = (int)s.n, k = (int)s.k;
    long long sa = s.bcast_a ? 0 : s.m * s.k, sb = s.k * s.n, sc = s.m * s.n;
    if (dt == CR_DT_F64) {
        const double one = 1.0, zero = 0.0;
        CK(cublasDgemmStridedBatched(S.h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, (const double *)S.b, n, sb,
                                     (const double *)S.a, k, sa, &zero, (double *)c, n, sc, (int)s.count));
    } else {
        const float one = 1.f, zero = 0.f;
        CK(cublasSgemmStridedBatched(S.h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, (const float *)S.b, n, sb,
                                     (const float *)S.a, k, sa, &zero, (float *)c, n, sc, (int)s.count));
    }
}

static void own_run(const shape &s, cr_dtype dt, const cr_stack *st, void *c, int variant = 0)
{
    cr_gemm_dev g = {s.m, s.n, s.k, false, false, 1.0, 0.0, S.a, S.b, c};
    CK(cr_cuda_gemm_batched_variant(&g, st, dt, 0, variant));
}

/* max|own - ref| / max|ref| over the whole stack, on the host. */
static double compare(size_t n, cr_dtype dt)
{
    size_t es = cr_dtype_size(dt);
    std::vector<char> x(n * es), y(n * es);
    CK(cudaMemcpy(x.data(), S.c_own, n * es, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(y.data(), S.c_ref, n * es, cudaMemcpyDeviceToHost));
    double diff = 0, top = 0;
    for (size_t i = 0; i < n; i++) {
        double a = dt == CR_DT_F64 ? ((double *)x.data())[i] : ((float *)x.data())[i];
        double b = dt == CR_DT_F64 ? ((double *)y.data())[i] : ((float *)y.data())[i];
        double d = fabs(a - b);
        if (!(d <= diff))
            diff = d; /* NaN sticks */
        top = fmax(top, fabs(b));
    }
    return top > 0 ? diff / top : diff;
}

static void row(const shape &s, const char *kernel, cr_dtype dt, double ms, double floor_ms, double ref_ms)
{
    double flops = 2.0 * s.m * s.n * s.k * s.count, es = (double)cr_dtype_size(dt);
    double bytes = es * (s.m * s.k * (s.bcast_a ? 1 : s.count) + (double)(s.k * s.n + s.m * s.n) * s.count);
    fprintf(S.csv, "%s,%s,%s,%lld,%lld,%lld,%lld,%.5f,%.1f,%.1f,%.5f,%.3f\n", s.sweep, kernel, cr_dtype_name(dt),
            (long long)s.m, (long long)s.n, (long long)s.k, (long long)s.count, ms, flops / (ms * 1e6),
            bytes / (ms * 1e6), floor_ms, ref_ms / ms);
    fflush(S.csv);
}

/* The larger of the bytes over the measured copy rate and the flops over the peak. */
static double floor_ms(const shape &s, cr_dtype dt)
{
    double es = (double)cr_dtype_size(dt), flops = 2.0 * s.m * s.n * s.k * s.count;
    double bytes = es * (s.m * s.k * (s.bcast_a ? 1 : s.count) + (double)(s.k * s.n + s.m * s.n) * s.count);
    double peak = dt == CR_DT_F64 ? S.dev.fp64 : S.dev.fp32; /* GFLOP/s; DGEMM may use the FP64 tensor cores */
    double a = bytes / (S.copy_gbs * 1e6), b = peak > 0 ? flops / (peak * 1e6) : 0;
    return a > b ? a : b;
}

static void bench_shape(const shape &s, cr_dtype dt, double *own_out, double *ref_out, bool tune = false)
{
    size_t es = cr_dtype_size(dt), na = (size_t)(s.m * s.k * (s.bcast_a ? 1 : s.count));
    size_t nb = (size_t)(s.k * s.n * s.count), nc = (size_t)(s.m * s.n * s.count);
    if ((na > nb ? na : nb) * es > S.bytes || nc * es > S.bytes) {
        fprintf(stderr, "%s %lldx%lldx%lld x %lld does not fit the buffers: skipped\n", s.sweep, (long long)s.m,
                (long long)s.n, (long long)s.k, (long long)s.count);
        return;
    }
    static unsigned seed = 7;
    fill(dt, S.a, na, seed++);
    fill(dt, S.b, nb, seed++);
    CK(cudaMemset(S.c_own, 0xff, nc * es));
    CK(cudaMemset(S.c_ref, 0xff, nc * es));
    CK(cudaDeviceSynchronize());
    cr_stack st = stack_of(s);
    double ref = gpu_time_median_ms(&S.timer, [&] { cublas_run(s, dt, S.c_ref); }, 50, 0, 200.0);
    double own = gpu_time_median_ms(&S.timer, [&] { own_run(s, dt, &st, S.c_own); }, 50, 0, 200.0);
    double err = compare(nc, dt), tol = dt == CR_DT_F64 ? 1e-12 : 1e-5;
    double fl = floor_ms(s, dt);
    row(s, "cublas", dt, ref, fl, ref);
    row(s, "batched", dt, own, fl, ref);
    printf("%-6s %-8s %4lldx%-4lldx%-4lld x %7lld  cuBLAS %9.4f ms  batched %9.4f ms  floor %8.4f ms  "
           "cuBLAS/batched %5.2fx  %s %.1e\n",
           s.sweep, cr_dtype_name(dt), (long long)s.m, (long long)s.n, (long long)s.k, (long long)s.count, ref, own,
           fl, ref / own, err <= tol ? "ok" : "MISMATCH", err);
    fflush(stdout);
    if (!(err <= tol))
        S.mismatches++;
    if (own_out)
        *own_out = own, *ref_out = ref;
    for (int v = 1; tune && v < VARIANTS; v++) {
        char name[32];
        snprintf(name, sizeof name, "batched-v%d", v);
        CK(cudaMemset(S.c_own, 0xff, nc * es));
        double ms = gpu_time_median_ms(&S.timer, [&] { own_run(s, dt, &st, S.c_own, v); }, 50, 0, 200.0);
        double e = compare(nc, dt);
        row(s, name, dt, ms, fl, ref);
        printf("        %-10s %9.4f ms  cuBLAS/this %5.2fx  %s %.1e\n", name, ms, ref / ms, e <= tol ? "ok" : "MISMATCH", e);
        if (!(e <= tol))
            S.mismatches++;
    }
}

/* Device-to-device copy of 1 GiB, read plus write: the memory's rate as kernels get it. */
static double measure_copy_gbs(void)
{
    size_t bytes = (size_t)1 << 30;
    void *x, *y;
    CK(cudaMalloc(&x, bytes));
    CK(cudaMalloc(&y, bytes));
    CK(cudaMemset(x, 1, bytes));
    double ms = gpu_time_median_ms(&S.timer, [&] { CK(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, 0)); },
                                   20, 0, 200.0);
    CK(cudaFree(x));
    CK(cudaFree(y));
    return 2.0 * bytes / (ms * 1e6);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s OUT.csv [quick]\n", argv[0]);
        return 2;
    }
    bool quick = argc > 2 && !strcmp(argv[2], "quick"), tune = argc > 2 && !strcmp(argv[2], "tune");
    S.dev = gpu_run_begin(stdout, argv[1]);
    S.csv = fopen(argv[1], "w");
    if (!S.csv) {
        perror(argv[1]);
        return 2;
    }
    fprintf(S.csv, "sweep,kernel,dtype,m,n,k,count,ms,gflops,gbs,floor_ms,ratio_vs_cublas\n");
    S.bytes = (size_t)800 << 20;
    CK(cudaMalloc(&S.a, S.bytes));
    CK(cudaMalloc(&S.b, S.bytes));
    CK(cudaMalloc(&S.c_own, S.bytes));
    CK(cudaMalloc(&S.c_ref, S.bytes));
    CK(cublasCreate(&S.h));
    CK(cublasSetMathMode(S.h, CR_CUBLAS_MATH)); /* the daemon's workers' mode */
    gpu_timer_create(&S.timer);
    S.copy_gbs = measure_copy_gbs();
    printf("device-to-device copy: %.0f GB/s (read + write), the floors' memory rate\n", S.copy_gbs);
    const cr_dtype dts[] = {CR_DT_F32, CR_DT_F64};
    for (cr_dtype dt : dts) {
        if (quick && dt != CR_DT_F32)
            continue;
        for (const shape &s : shapes)
            if (!tune || (s.m <= 128 && s.n <= 128))
                bench_shape(s, dt, NULL, NULL, tune);
    }
    shape floor_term = {"floor", 64, 64, 64, 8192, false};
    double own = 0, ref = 0;
    bench_shape(floor_term, CR_DT_F32, &own, &ref);
    printf("\nissue 35's floor term, 8,192 64x64 float32 products, strided-batched, kernel only: cuBLAS %.4f ms, "
           "batched %.4f ms; floor %.4f ms (%.0f MB at %.0f GB/s; %.2f GFLOP at %.1f TFLOP/s)\n",
           ref, own, floor_ms(floor_term, CR_DT_F32), 3.0 * 8192 * 64 * 64 * 4 / 1e6, S.copy_gbs,
           2.0 * 64 * 64 * 64 * 8192 / 1e9, S.dev.fp32 / 1e3);
    gpu_run_end(&S.dev, stdout);
    gpu_timer_destroy(&S.timer);
    CK(cublasDestroy(S.h));
    cudaFree(S.a), cudaFree(S.b), cudaFree(S.c_own), cudaFree(S.c_ref);
    fclose(S.csv);
    if (S.mismatches)
        printf("%d shapes where batched and cuBLAS disagree\n", S.mismatches);
    return S.mismatches ? 1 : 0;
}
