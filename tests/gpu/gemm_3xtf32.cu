/* GPU tests of tc-3xtf32 (kernels/cuda/gemm_3xtf32.cu) beyond gemm.cu's grid, which checks it
 * as every FP32 kernel: that its error is of FP32's class, not TF32's, measured against an FP64
 * product beside tc-tf32's and cuBLAS SGEMM's (pedantic FP32) errors on the same data (random
 * signs and magnitudes over 2^±8, and values near FLT_MAX); that Inf and NaN inputs give the
 * same non-finite pattern as SGEMM; with and without the scratch given. Prints the errors;
 * ends with "gemm_3xtf32: N passed, M failed".
 *
 * Why not SGEMM's error exactly: the split holds each input to 2^-22 (a float: 2^-24) and the
 * tensor cores' FP32 accumulation truncates, so with inputs spread over 2^±8 the error is up to
 * 2-30x pedantic SGEMM's, growing with K (6e-6 of Σ|a·b| at K = 4096 on an H200: far inside
 * FP32 GEMM's K·2^-24 bound), and 25-2500x below TF32's. */
#include <cublas_v2.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "tools/gpu/check.cuh"


#define CK(x)                                                                                     \
    do {                                                                                          \
        cudaError_t e_ = (x);                                                                     \
        if (e_ != cudaSuccess) {                                                                  \
            printf("FAIL %s: %s\n", #x, cudaGetErrorString(e_));                                  \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

struct problem {
    int64_t m, n, k;
    bool ta, tb;
    std::vector<float> a, b; /* as stored: op(A) m×k, op(B) k×n after the transposes */
};

static float a_at(const problem &p, int64_t i, int64_t kk) { return p.ta ? p.a[kk * p.m + i] : p.a[i * p.k + kk]; }
static float b_at(const problem &p, int64_t kk, int64_t j) { return p.tb ? p.b[j * p.k + kk] : p.b[kk * p.n + j]; }

/* values with random signs and binary exponents in [-spread, spread] */
static problem make(int64_t m, int64_t n, int64_t k, bool ta, bool tb, double spread, double a_scale,
                    double b_scale)
{
    problem p{m, n, k, ta, tb, std::vector<float>(m * k), std::vector<float>(k * n)};
    for (float &x : p.a)
        x = (float)(a_scale * uniform(-1, 1) * exp2(round(uniform(-spread, spread))));
    for (float &x : p.b)
        x = (float)(b_scale * uniform(-1, 1) * exp2(round(uniform(-spread, spread))));
    return p;
}

enum which { OURS, OURS_OWN_SCRATCH, TF32, SGEMM };

/* C = op(A)·op(B) with tc-3xtf32 (given its scratch, or finding its own), tc-tf32 or SGEMM */
static std::vector<float> run(const problem &p, which k, cublasHandle_t h)
{
    float *a, *b, *c;
    void *work = NULL;
    CK(cudaMalloc(&a, p.a.size() * 4 + 16));
    CK(cudaMalloc(&b, p.b.size() * 4 + 16));
    CK(cudaMalloc(&c, p.m * p.n * 4 + 16));
    CK(cudaMemcpy(a, p.a.data(), p.a.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(b, p.b.data(), p.b.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(c, 0xff, p.m * p.n * 4)); /* NaN: beta is 0, C must not be read */
    cr_gemm_dev g = {p.m, p.n, p.k, p.ta, p.tb, 1.0, 0.0, a, b, c};
    size_t wb = cr_cuda_gemm_3xtf32_work_bytes(&g, CR_DT_F32);
    if (k == OURS)
        CK(cudaMalloc(&work, wb));
    if (k == OURS || k == OURS_OWN_SCRATCH) {
        CK(cr_cuda_gemm_3xtf32_ws(&g, CR_DT_F32, work, wb, 0));
    } else if (k == TF32) {
        CK(cr_cuda_gemm_tc_tf32(&g, CR_DT_F32, 0));
    } else { /* row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ */
        const float one = 1, zero = 0;
        cublasStatus_t st = cublasSgemm(h, p.tb ? CUBLAS_OP_T : CUBLAS_OP_N, p.ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                        (int)p.n, (int)p.m, (int)p.k, &one, b, p.tb ? (int)p.k : (int)p.n, a,
                                        p.ta ? (int)p.m : (int)p.k, &zero, c, (int)p.n);
        if (st != CUBLAS_STATUS_SUCCESS)
            printf("FAIL cublasSgemm %d\n", (int)st), exit(1);
    }
    std::vector<float> out(p.m * p.n);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(out.data(), c, out.size() * 4, cudaMemcpyDeviceToHost));
    cudaFree(a), cudaFree(b), cudaFree(c), cudaFree(work);
    return out;
}

/* the largest error over C, relative to Σ|a·b| of each element (the scale SGEMM's error bound has) */
static double max_error(const problem &p, const std::vector<float> &c)
{
    double worst = 0;
    for (int64_t i = 0; i < p.m; i++)
        for (int64_t j = 0; j < p.n; j++) {
            double s = 0, mag = 0;
            for (int64_t kk = 0; kk < p.k; kk++) {
                double t = (double)a_at(p, i, kk) * b_at(p, kk, j);
                s += t, mag += fabs(t);
            }
            double e = mag > 0 ? fabs(c[i * p.n + j] - s) / mag : fabs(c[i * p.n + j]);
            worst = e > worst ? e : worst;
        }
    return worst;
}

/* Error of FP32's class: below 1e-5 of Σ|a·b| (gemm.cu's FP32 tolerance is 1e-5·√K) and at
 * least 20x below tc-tf32's on the same data. */
static void accuracy(cublasHandle_t h)
{
    static const struct { int64_t m, n, k; double spread, a_scale, b_scale; } shapes[] = {
        {7, 5, 3, 8, 1, 1},          {64, 64, 64, 0, 1, 1},      {127, 129, 131, 8, 1, 1},
        {300, 200, 1000, 8, 1, 1},   {257, 130, 67, 4, 1, 1},    {1, 513, 77, 8, 1, 1},
        {129, 1, 1000, 8, 1, 1},     {256, 256, 4096, 8, 1, 1},  {96, 96, 96, 0, 3.4e38, 1e-4},
        {1024, 1024, 1024, 0, 1, 1}, {1024, 1024, 1024, 8, 1, 1},
    };
    for (const auto &s : shapes)
        for (int t = 0; t < (s.m * s.n * s.k > (1 << 26) ? 1 : 4); t++) { /* the FP64 reference is slow */
            problem p = make(s.m, s.n, s.k, t & 1, t & 2, s.spread, s.a_scale, s.b_scale);
            p.a[0] = s.a_scale > 1e38 ? 3.4028235e38f : p.a[0]; /* FLT_MAX: its TF32 rounding is Inf */
            double ours = max_error(p, run(p, t == 1 ? OURS_OWN_SCRATCH : OURS, h));
            double tf32 = max_error(p, run(p, TF32, h)), ref = max_error(p, run(p, SGEMM, h));
            char what[200];
            snprintf(what, sizeof what, "accuracy %lldx%lldx%lld spread 2^±%g ta=%d tb=%d: error %.3g, SGEMM %.3g, TF32 %.3g",
                     (long long)s.m, (long long)s.n, (long long)s.k, s.spread, t & 1, (t & 2) >> 1, ours, ref, tf32);
            expect(ours < 1e-5 && ours * 20 < tf32, what);
            if (t == 0)
                printf("%s\n", what);
        }
}

/* Inf and NaN inputs: the same outputs are NaN, +Inf, -Inf or finite as with SGEMM */
static void specials(cublasHandle_t h)
{
    for (int t = 0; t < 4; t++) {
        problem p = make(67, 45, 33, t & 1, t & 2, 4, 1, 1);
        auto set_a = [&](int64_t i, int64_t kk, float v) { (p.ta ? p.a[kk * p.m + i] : p.a[i * p.k + kk]) = v; };
        auto set_b = [&](int64_t kk, int64_t j, float v) { (p.tb ? p.b[j * p.k + kk] : p.b[kk * p.n + j]) = v; };
        set_a(3, 5, INFINITY);
        set_a(10, 0, -INFINITY);
        set_a(20, 32, NAN);
        set_b(7, 4, INFINITY);
        set_b(0, 44, NAN);
        set_a(30, 1, INFINITY), set_a(30, 2, -INFINITY); /* Inf - Inf in one row: NaN */
        set_a(40, 6, INFINITY), set_b(6, 9, 0.0f);        /* Inf·0 at one output */
        set_a(50, 0, 3.4028235e38f), set_b(0, 0, 2.0f);   /* finite input, product overflows */
        std::vector<float> ours = run(p, OURS, h), ref = run(p, SGEMM, h);
        int bad = 0;
        for (size_t x = 0; x < ours.size(); x++) {
            float o = ours[x], r = ref[x];
            bool same = isnan(o) ? isnan(r) : isinf(o) ? o == r : isfinite(r) && fabsf(o - r) <= 1e-4f * (1 + fabsf(r));
            bad += !same;
        }
        char what[120];
        snprintf(what, sizeof what, "Inf/NaN inputs ta=%d tb=%d: %d outputs differ from SGEMM's class", t & 1,
                 (t & 2) >> 1, bad);
        expect(bad == 0, what);
    }
}

int main(void)
{
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS)
        return printf("FAIL cublasCreate\n"), 1;
    cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH); /* true FP32 SGEMM: the accuracy to match */
    accuracy(h);
    specials(h);
    cublasDestroy(h);
    printf("gemm_3xtf32: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
