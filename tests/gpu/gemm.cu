/* GPU correctness test of our own GEMM kernels (kernels/cuda/gemm_*.cu).
 *
 * For every kernel × dtype it supports × size × (trans, alpha, beta, alignment) case: fresh
 * random inputs, C poisoned with NaN before the run (or holding the input C when beta != 0),
 * reference = cuBLAS DGEMM on the inputs upcast to float64, compared by
 * ‖out − ref‖_F / ‖ref‖_F and max|out − ref| / max|ref| against a tolerance that grows with
 * sqrt(K). A NaN anywhere (an unwritten element) fails. Unaligned cases offset every device
 * pointer by one element, so the float4 paths must fall back. Prints one line per case and
 * "gpu_gemm: N passed, M failed"; exit status 1 on any failure. */
#include "tools/gpu/harness.cuh"
#include <cublas_v2.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_kernels.h"

/* tuning hook in kernels/cuda/gemm_dbuf.cu: force one of dbuf's tile configurations, which
 * the size-based choice would otherwise only reach at some sizes */
extern "C" cudaError_t cr_cuda_gemm_dbuf_variant(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s, int variant);
static cudaError_t dbuf_big(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s) { return cr_cuda_gemm_dbuf_variant(g, dt, s, 1); }
static cudaError_t dbuf_mid(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s) { return cr_cuda_gemm_dbuf_variant(g, dt, s, 2); }
static cudaError_t dbuf_small(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s) { return cr_cuda_gemm_dbuf_variant(g, dt, s, 3); }

typedef struct {
    const char *name;
    cr_gemm_launcher fn;
    bool f64;  /* supports CR_DT_F64 */
    bool slow; /* skip the largest sizes in F64 */
} kernel_entry;

static const kernel_entry kernels[] = {
    {"naive", cr_cuda_gemm_naive, true, true},         {"regtile", cr_cuda_gemm_regtile, true, true},
    {"smem", cr_cuda_gemm_smem, true, false},          {"blocktile", cr_cuda_gemm_blocktile, true, false},
    {"vec", cr_cuda_gemm_vec, false, false},           {"dbuf", cr_cuda_gemm_dbuf, false, false},
    {"dbuf-big", dbuf_big, false, false},              {"dbuf-mid", dbuf_mid, false, false},
    {"dbuf-small", dbuf_small, false, false},
};

#define MAXN ((size_t)4096 * 4096 + 16) /* elements per buffer, with room for an offset */

static struct {
    void *a, *b, *c;          /* inputs and output in the tested dtype */
    double *da, *db, *dr;     /* upcast inputs and the reference */
    double *part;             /* per-block partial sums of the comparison */
    cublasHandle_t h;
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

/* x gets random values of dtype T, and up gets the same values in float64 */
template <typename T>
__global__ void fill_kernel(T *x, double *up, size_t n, unsigned seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        T v = (T)rnd(seed, i);
        x[i] = v;
        up[i] = (double)v;
    }
}

template <typename T>
__global__ void nan_kernel(T *x, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = (T)NAN;
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
        double o = (double)out[i], r = ref[i], d = fabs(o - r);
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
    else
        fill_kernel<double><<<blocks_for(n), 256>>>((double *)x, up, n, seed);
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
    else
        cmp_kernel<double><<<CMP_BLOCKS, CMP_THREADS>>>((const double *)out, G.dr, n, G.part);
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
    printf("%s %-10s %s m=%lld n=%lld k=%lld %c%c alpha=%g beta=%g%s: %s\n", ok ? "PASS" : "FAIL", kname,
           cr_dtype_name(dt), (long long)c->m, (long long)c->n, (long long)c->k, c->ta ? 'T' : 'N',
           c->tb ? 'T' : 'N', c->alpha, c->beta, c->unaligned ? " unaligned" : "", what);
    if (ok)
        G.passed++;
    else
        G.failed++;
}

static void run_case(const kernel_entry *ke, cr_dtype dt, const gcase *c)
{
    size_t es = dt == CR_DT_F32 ? 4 : 8, off = c->unaligned ? 1 : 0;
    size_t na = (size_t)(c->m * c->k), nb = (size_t)(c->k * c->n), nc = (size_t)(c->m * c->n);
    char *a = (char *)G.a + off * es, *b = (char *)G.b + off * es, *cc = (char *)G.c + off * es;
    fill(dt, a, G.da, na);
    fill(dt, b, G.db, nb);
    if (c->beta != 0.0)
        fill(dt, cc, G.dr, nc); /* input C, and the reference starts from it */
    else if (dt == CR_DT_F32)
        nan_kernel<float><<<blocks_for(nc), 256>>>((float *)cc, nc); /* must not be read */
    else
        nan_kernel<double><<<blocks_for(nc), 256>>>((double *)cc, nc);
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
    double rel = r[1] > 0 ? sqrt(r[0] / r[1]) : sqrt(r[0]);
    double relmax = r[3] > 0 ? r[2] / r[3] : r[2];
    double tol = dt == CR_DT_F32 ? 1e-5 * sqrt((double)c->k) + 1e-6 : 1e-13 * sqrt((double)c->k) + 1e-14;
    bool ok = r[4] == 0 && rel <= tol && relmax <= 4 * tol;
    char msg[160];
    snprintf(msg, sizeof msg, "rel %.2e max %.2e tol %.1e nonfinite %.0f", rel, relmax, tol, r[4]);
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

/* Same input twice must give bit-identical output: a moving result is a race. */
static void check_repeatable(const kernel_entry *ke, int64_t s)
{
    gcase c = {s, s, s, false, false, 1.0, 0.0, false};
    size_t n = (size_t)(s * s);
    fill(CR_DT_F32, G.a, G.da, n);
    fill(CR_DT_F32, G.b, G.db, n);
    cr_gemm_dev g = {s, s, s, false, false, 1.0, 0.0, G.a, G.b, G.c};
    float *h1 = (float *)malloc(n * 4), *h2 = (float *)malloc(n * 4);
    if (!h1 || !h2)
        exit(2);
    CK(ke->fn(&g, CR_DT_F32, 0));
    CK(cudaMemcpy(h1, G.c, n * 4, cudaMemcpyDeviceToHost));
    nan_kernel<float><<<blocks_for(n), 256>>>((float *)G.c, n);
    CK(ke->fn(&g, CR_DT_F32, 0));
    CK(cudaMemcpy(h2, G.c, n * 4, cudaMemcpyDeviceToHost));
    report(memcmp(h1, h2, n * 4) == 0, ke->name, CR_DT_F32, &c, "two runs bit-identical");
    free(h1);
    free(h2);
}

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

static void run_kernel(const kernel_entry *ke, cr_dtype dt)
{
    for (size_t i = 0; i < sizeof cubes / sizeof cubes[0]; i++)
        run_shape(ke, dt, cubes[i], cubes[i], cubes[i]);
    for (size_t i = 0; i < sizeof odd_shapes / sizeof odd_shapes[0]; i++)
        run_shape(ke, dt, odd_shapes[i][0], odd_shapes[i][1], odd_shapes[i][2]);
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

int main(void)
{
    CK(cudaMalloc(&G.a, MAXN * 8));
    CK(cudaMalloc(&G.b, MAXN * 8));
    CK(cudaMalloc(&G.c, MAXN * 8));
    CK(cudaMalloc((void **)&G.da, MAXN * 8));
    CK(cudaMalloc((void **)&G.db, MAXN * 8));
    CK(cudaMalloc((void **)&G.dr, MAXN * 8));
    CK(cudaMalloc((void **)&G.part, CMP_BLOCKS * 5 * sizeof(double)));
    CK(cublasCreate(&G.h));
    /* the reference must be true FP64, never a tensor-core shortcut */
    CK(cublasSetMathMode(G.h, CUBLAS_PEDANTIC_MATH));
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
        const kernel_entry *ke = &kernels[i];
        run_kernel(ke, CR_DT_F32);
        if (ke->f64)
            run_kernel(ke, CR_DT_F64);
        else
            check_refusal(ke, CR_DT_F64);
        check_refusal(ke, CR_DT_I32);
    }
    for (size_t i = 4; i < sizeof kernels / sizeof kernels[0]; i++)
        check_repeatable(&kernels[i], 1023);
    cublasDestroy(G.h);
    printf("gpu_gemm: %d passed, %d failed\n", G.passed, G.failed);
    return G.failed ? 1 : 0;
}
