/* Unit tests of the CPU backend: OpenBLAS against the plain C references and an independent
 * naive computation, histogram bin edges against numpy's answers (numpy 2.x, checked by hand
 * where noted), the kernel list, and the errors run() returns. No framework: CHECK counts. */
#include "kernels/backend.h"
#include "kernels/half.h"
#include "kernels/hist_range.h"
#include "kernels/registry.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed;

static void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...)
{
    if (ok) {
        passed++;
        return;
    }
    failed++;
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL: ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
}

static const cr_backend *B = &cr_backend_cpu;

/* A kernel of the CPU backend by op and name, as the engine resolves it. */
static const cr_kernel *K(cr_op op, const char *name) { return cr_kernel_find(&cr_backend_cpu, op, name); }
static cr_worker *W;

static cr_status run_task(const cr_task *t, char *err, size_t errlen)
{
    cr_timings tm;
    cr_status s = B->run(W, t, &tm, err, errlen);
    if (s == CR_OK)
        check(tm.h2d_ms == 0.0 && tm.d2h_ms == 0.0 && tm.kernel_ms >= 0.0 &&
                  strncmp(tm.device, "cpu: ", 5) == 0 && tm.device_index == 0,
              "timings: h2d %g d2h %g kernel %g device \"%s\"", tm.h2d_ms, tm.d2h_ms, tm.kernel_ms,
              tm.device);
    return s;
}

/* Deterministic inputs in [-1, 1) so failures reproduce. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static void *rand_matrix(int64_t count, int f64)
{
    void *p = malloc((size_t)count * (f64 ? 8 : 4));
    if (p == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    for (int64_t i = 0; i < count; i++) {
        if (f64)
            ((double *)p)[i] = rnd();
        else
            ((float *)p)[i] = (float)rnd();
    }
    return p;
}

static double at(const void *p, int64_t i, int f64)
{
    return f64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
}

/* ---------- GEMM ---------- */

typedef struct {
    int64_t m, n, k;
    int ta, tb;
    double alpha, beta;
    int with_c;
} gemm_case;

/* C = alpha·op(A)·op(B) + beta·C in double, the textbook way; also returns Σ|terms| per
 * element in mag for an error bound. */
static void naive_gemm(const gemm_case *c, const void *a, const void *b, const void *cin, int f64,
                       double *out, double *mag)
{
    for (int64_t i = 0; i < c->m; i++)
        for (int64_t j = 0; j < c->n; j++) {
            double s = 0, sm = 0;
            for (int64_t p = 0; p < c->k; p++) {
                double x = at(a, c->ta ? p * c->m + i : i * c->k + p, f64);
                double y = at(b, c->tb ? j * c->k + p : p * c->n + j, f64);
                s += x * y;
                sm += fabs(x * y);
            }
            double r = c->alpha * s, rm = fabs(c->alpha) * sm;
            if (cin != NULL && c->beta != 0.0) {
                r += c->beta * at(cin, i * c->n + j, f64);
                rm += fabs(c->beta * at(cin, i * c->n + j, f64));
            }
            out[i * c->n + j] = r;
            mag[i * c->n + j] = rm;
        }
}

static double max_scaled_error(const void *got, const double *want, const double *mag,
                               int64_t count, int f64)
{
    double worst = 0;
    for (int64_t i = 0; i < count; i++) {
        double e = fabs(at(got, i, f64) - want[i]) / (mag[i] + 1e-30);
        if (!(e <= worst)) /* NaN counts as worst */
            worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}

static void check_gemm_case(const gemm_case *c, const char *kernel, int f64)
{
    int64_t mn = c->m * c->n;
    void *a = rand_matrix(c->m * c->k, f64), *b = rand_matrix(c->k * c->n, f64);
    void *cin = c->with_c ? rand_matrix(mn, f64) : NULL;
    void *cout = rand_matrix(mn, f64); /* garbage that must not leak into the result */
    double *want = malloc((size_t)mn * sizeof *want), *mag = malloc((size_t)mn * sizeof *mag);
    if (want == NULL || mag == NULL)
        exit(2);
    naive_gemm(c, a, b, cin, f64, want, mag);

    cr_task t = {.op = CR_OP_GEMM, .dtype = f64 ? CR_DT_F64 : CR_DT_F32, .kernel = K(CR_OP_GEMM, kernel)};
    t.u.gemm = (cr_gemm_task){c->m, c->n, c->k, c->ta, c->tb, c->alpha, c->beta, a, b, cin, cout};
    char err[256] = "";
    cr_status s = run_task(&t, err, sizeof err);
    double tol = f64 ? 1e-13 : 2e-6 * (1.0 + log2((double)c->k));
    double e = s == CR_OK ? max_scaled_error(cout, want, mag, mn, f64) : INFINITY;
    check(s == CR_OK && e <= tol,
          "gemm %s %s m=%lld n=%lld k=%lld ta=%d tb=%d alpha=%g beta=%g c=%d: %s %s err %g > %g",
          kernel, f64 ? "f64" : "f32", (long long)c->m, (long long)c->n, (long long)c->k, c->ta,
          c->tb, c->alpha, c->beta, c->with_c, cr_status_name(s), err, e, tol);
    free(a), free(b), free(cin), free(cout), free(want), free(mag);
}

static void test_gemm(void)
{
    static const int64_t shapes[][3] = {
        {1, 1, 1}, {1, 37, 5}, {41, 1, 7}, {17, 31, 13}, {257, 257, 257}, {33, 29, 1},
        {1, 1, 300}, {64, 64, 64},
    };
    static const char *const kernels[] = {"openblas", "reference"};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int tr = 0; tr < 4; tr++)
            for (int f64 = 0; f64 < 2; f64++)
                for (int kk = 0; kk < 2; kk++) {
                    gemm_case c = {shapes[s][0], shapes[s][1], shapes[s][2], tr & 1, tr >> 1,
                                   1.0, 0.0, 0};
                    check_gemm_case(&c, kernels[kk], f64);
                }
    /* alpha/beta, beta with c_in NULL (C is zeros), alpha = 0 (A and B unread). */
    static const struct { double alpha, beta; int with_c; } ab[] = {
        {2.5, 0.0, 1}, {-0.5, 1.0, 1}, {1.0, -2.0, 1}, {0.75, 3.0, 0}, {0.0, 1.5, 1}, {0.0, 0.0, 0},
    };
    for (size_t i = 0; i < sizeof ab / sizeof ab[0]; i++)
        for (int tr = 0; tr < 4; tr++)
            for (int f64 = 0; f64 < 2; f64++)
                for (int kk = 0; kk < 2; kk++) {
                    gemm_case c = {19, 23, 11, tr & 1, tr >> 1, ab[i].alpha, ab[i].beta,
                                   ab[i].with_c};
                    check_gemm_case(&c, kernels[kk], f64);
                }
}

/* float16/bfloat16: the reference (double sums, one rounding) equals the exact product rounded
 * once; OpenBLAS (float32 sums) is within one unit of the dtype's last place of it. */
static void check_half_case(cr_dtype dt, const char *kernel, int64_t m, int64_t n, int64_t k, bool ta, bool tb,
                            double alpha, double beta, bool with_c)
{
    uint16_t *a = malloc((size_t)(m * k) * 2), *b = malloc((size_t)(k * n) * 2), *c = malloc((size_t)(m * n) * 2);
    uint16_t *out = malloc((size_t)(m * n) * 2);
    for (int64_t i = 0; i < m * k; i++)
        a[i] = cr_half_from_double(dt, rnd() * 4);
    for (int64_t i = 0; i < k * n; i++)
        b[i] = cr_half_from_double(dt, rnd());
    for (int64_t i = 0; i < m * n; i++)
        c[i] = cr_half_from_double(dt, rnd());
    cr_task t = {.op = CR_OP_GEMM, .dtype = dt, .kernel = K(CR_OP_GEMM, kernel)};
    t.u.gemm = (cr_gemm_task){m, n, k, ta, tb, alpha, beta, a, b, with_c ? c : NULL, out};
    cr_status st = run_task(&t, NULL, 0);
    double ulp = dt == CR_DT_F16 ? 0x1p-10 : 0x1p-7;
    int bad = 0;
    for (int64_t i = 0; st == CR_OK && i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double acc = 0;
            for (int64_t p = 0; p < k; p++)
                acc += (double)cr_half_to_float(dt, a[ta ? p * m + i : i * k + p]) *
                       cr_half_to_float(dt, b[tb ? j * k + p : p * n + j]);
            double want = alpha * acc + (with_c ? beta * cr_half_to_float(dt, c[i * n + j]) : 0.0);
            uint16_t w = cr_half_from_double(dt, want), got = out[i * n + j];
            double gv = cr_half_to_float(dt, got), wv = cr_half_to_float(dt, w);
            bad += strcmp(kernel, "reference") == 0 ? got != w : !(fabs(gv - wv) <= ulp * fabs(wv) + 0x1p-24);
        }
    check(st == CR_OK && bad == 0, "gemm %s %s %lldx%lldx%lld ta=%d tb=%d alpha=%g beta=%g c=%d: status %d, %d wrong",
          cr_dtype_name(dt), kernel, (long long)m, (long long)n, (long long)k, ta, tb, alpha, beta, with_c, st, bad);
    free(a), free(b), free(c), free(out);
}

static void test_gemm_half(void)
{
    static const char *const kernels[] = {"openblas", "reference"};
    static const cr_dtype dts[] = {CR_DT_F16, CR_DT_BF16};
    for (int d = 0; d < 2; d++)
        for (int kk = 0; kk < 2; kk++)
            for (int tr = 0; tr < 4; tr++) {
                check_half_case(dts[d], kernels[kk], 17, 13, 29, tr & 1, tr >> 1, 1.0, 0.0, false);
                check_half_case(dts[d], kernels[kk], 1, 7, 300, tr & 1, tr >> 1, -0.5, 2.0, true);
                check_half_case(dts[d], kernels[kk], 9, 1, 1, tr & 1, tr >> 1, 0.0, 1.5, true);
            }
}

/* beta = 0 must not read C: a NaN there stays out (BLAS semantics), in both kernels. */
static void test_gemm_beta_zero_ignores_nan(void)
{
    static const char *const kernels[] = {"openblas", "reference"};
    for (int kk = 0; kk < 2; kk++) {
        double a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1}, cin[4] = {NAN, NAN, NAN, NAN}, out[4];
        cr_task t = {.op = CR_OP_GEMM, .dtype = CR_DT_F64, .kernel = K(CR_OP_GEMM, kernels[kk])};
        t.u.gemm = (cr_gemm_task){2, 2, 2, false, false, 1.0, 0.0, a, b, cin, out};
        cr_status s = run_task(&t, NULL, 0);
        check(s == CR_OK && out[0] == 1 && out[1] == 2 && out[2] == 3 && out[3] == 4,
              "gemm %s beta=0 with NaN c_in: %g %g %g %g", kernels[kk], out[0], out[1], out[2],
              out[3]);
    }
}

/* c_in == c_out: C += A·B in place. */
static void test_gemm_in_place(void)
{
    static const char *const kernels[] = {"openblas", "reference"};
    for (int kk = 0; kk < 2; kk++) {
        float a[2] = {1, 2}, b[2] = {3, 4}, c[4] = {10, 20, 30, 40}; /* a: 2×1, b: 1×2 */
        cr_task t = {.op = CR_OP_GEMM, .dtype = CR_DT_F32, .kernel = K(CR_OP_GEMM, kernels[kk])};
        t.u.gemm = (cr_gemm_task){2, 2, 1, false, false, 1.0, 1.0, a, b, c, c};
        cr_status s = run_task(&t, NULL, 0);
        check(s == CR_OK && c[0] == 13 && c[1] == 24 && c[2] == 36 && c[3] == 48,
              "gemm %s in place: %g %g %g %g", kernels[kk], c[0], c[1], c[2], c[3]);
    }
}

/* ---------- AᵀA ---------- */

static void check_ata_case(int64_t m, int64_t n, int ta, const char *kernel, int f64)
{
    void *a = rand_matrix(m * n, f64), *c = rand_matrix(n * n, f64);
    cr_task t = {.op = CR_OP_ATA, .dtype = f64 ? CR_DT_F64 : CR_DT_F32, .kernel = K(CR_OP_ATA, kernel)};
    t.u.ata = (cr_ata_task){m, n, ta, a, c};
    char err[256] = "";
    cr_status s = run_task(&t, err, sizeof err);
    double worst = 0;
    int symmetric = 1;
    for (int64_t i = 0; i < n && s == CR_OK; i++)
        for (int64_t j = 0; j < n; j++) {
            double want = 0, mag = 0;
            for (int64_t r = 0; r < m; r++) {
                /* A(r, x) with A m×n; stored transposed it is S(x, r) of n×m */
                double x = at(a, ta ? i * m + r : r * n + i, f64);
                double y = at(a, ta ? j * m + r : r * n + j, f64);
                want += x * y;
                mag += fabs(x * y);
            }
            double e = fabs(at(c, i * n + j, f64) - want) / (mag + 1e-30);
            worst = e > worst || isnan(e) ? (isnan(e) ? INFINITY : e) : worst;
            if (at(c, i * n + j, f64) != at(c, j * n + i, f64))
                symmetric = 0;
        }
    double tol = f64 ? 1e-13 : 2e-6 * (1.0 + log2((double)m));
    check(s == CR_OK && worst <= tol && symmetric,
          "ata %s %s m=%lld n=%lld trans_a=%d: %s %s err %g > %g symmetric %d", kernel,
          f64 ? "f64" : "f32", (long long)m, (long long)n, ta, cr_status_name(s), err, worst, tol,
          symmetric);
    free(a), free(c);
}

static void test_ata(void)
{
    static const int64_t shapes[][2] = {{1, 1}, {1, 9}, {9, 1}, {17, 13}, {13, 17}, {100, 257},
                                        {300, 64}};
    static const char *const kernels[] = {"openblas", "reference"};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int f64 = 0; f64 < 2; f64++)
                for (int kk = 0; kk < 2; kk++)
                    check_ata_case(shapes[s][0], shapes[s][1], ta, kernels[kk], f64);
}

/* A = [[1,2],[3,4],[5,6]]: AᵀA = [[35,44],[44,56]], by hand. Stored transposed: [[1,3,5],[2,4,6]]. */
static void test_ata_by_hand(void)
{
    static const char *const kernels[] = {"openblas", "reference"};
    for (int kk = 0; kk < 2; kk++)
        for (int ta = 0; ta < 2; ta++) {
            double plain[6] = {1, 2, 3, 4, 5, 6}, trans[6] = {1, 3, 5, 2, 4, 6}, c[4];
            cr_task t = {.op = CR_OP_ATA, .dtype = CR_DT_F64, .kernel = K(CR_OP_ATA, kernels[kk])};
            t.u.ata = (cr_ata_task){3, 2, ta, ta ? trans : plain, c};
            cr_status s = run_task(&t, NULL, 0);
            check(s == CR_OK && c[0] == 35 && c[1] == 44 && c[2] == 44 && c[3] == 56,
                  "ata %s trans_a=%d by hand: %g %g %g %g", kernels[kk], ta, c[0], c[1], c[2], c[3]);
        }
}

/* ---------- histogram ---------- */

static cr_status hist(cr_dtype dt, const void *data, int64_t count, int32_t bins, double lo,
                      double hi, uint64_t *counts)
{
    cr_task t = {.op = CR_OP_HISTOGRAM, .dtype = dt, .kernel = K(CR_OP_HISTOGRAM, "reference")};
    t.u.hist = (cr_hist_task){count, data, bins, lo, hi, counts};
    char err[256] = "";
    cr_status s = run_task(&t, err, sizeof err);
    if (s != CR_OK)
        printf("  histogram %s: %s %s\n", cr_dtype_name(dt), cr_status_name(s), err);
    return s;
}

static void expect_counts(const char *what, cr_dtype dt, const void *data, int64_t count,
                          int32_t bins, double lo, double hi, const uint64_t *want)
{
    uint64_t got[64];
    memset(got, 0xAB, sizeof got); /* the kernel must zero them */
    cr_status s = hist(dt, data, count, bins, lo, hi, got);
    int same = s == CR_OK && memcmp(got, want, (size_t)bins * sizeof *got) == 0;
    char buf[512];
    int off = 0;
    for (int i = 0; i < bins && off < (int)sizeof buf - 24; i++)
        off += snprintf(buf + off, sizeof buf - (size_t)off, " %llu/%llu",
                        (unsigned long long)got[i], (unsigned long long)want[i]);
    check(same, "histogram %s (%s): got/want%s", what, cr_dtype_name(dt), buf);
}

static void test_hist_edges(void)
{
    /* bins=4 over [0,1]: -0 and 0 in bin 0, interior edges go up, 1.0 closes the last bin,
     * 1.0000001 and NaN are out. numpy: [2 1 1 2]. */
    double d[] = {0.0, 0.25, 0.5, 1.0, 1.0000001, -0.0, NAN, 0.75};
    float f[] = {0.0f, 0.25f, 0.5f, 1.0f, 1.0000001f, -0.0f, NAN, 0.75f};
    expect_counts("bins=4 [0,1]", CR_DT_F64, d, 8, 4, 0, 1, (uint64_t[]){2, 1, 1, 2});
    expect_counts("bins=4 [0,1]", CR_DT_F32, f, 8, 4, 0, 1, (uint64_t[]){2, 1, 1, 2});

    /* linspace(0,1,11)[3] is 0.30000000000000004 and [7] is 0.7000000000000001, so 0.3 and
     * 0.7 fall below their edges while those exact edge values go up. numpy:
     * [0 1 2 1 0 1 2 1 0 0]. */
    double e[] = {0.3, 0.30000000000000004, 0.7, 0.7000000000000001, 0.1, 0.2, 0.6,
                  0.6000000000000001};
    expect_counts("numpy edges bins=10", CR_DT_F64, e, 8, 10, 0, 1,
                  (uint64_t[]){0, 1, 2, 1, 0, 1, 2, 1, 0, 0});
    /* float32 data gets float32 edges: (float)0.7000000000000001 == 0.7f, so 0.7f goes to bin
     * 7 where a double comparison would say 6. numpy: [0 1 1 1 0 0 1 1 0 2]. */
    float e32[] = {0.3f, 0.7f, 0.1f, 0.2f, 0.6f, 0.9f, 1.0f};
    expect_counts("numpy edges bins=10", CR_DT_F32, e32, 7, 10, 0, 1,
                  (uint64_t[]){0, 1, 1, 1, 0, 0, 1, 1, 0, 2});
    /* 0.1*i for i in 0..10 against bins=10 over [0,1]: numpy [1 1 1 1 1 1 1 1 1 2];
     * against bins=3 over [0.1,0.7]: numpy [2 2 2] for float64 and [2 2 3] for float32. */
    double tenth[11];
    float tenth32[11];
    for (int i = 0; i < 11; i++)
        tenth[i] = 0.1 * i, tenth32[i] = (float)(0.1 * i);
    expect_counts("0.1*i bins=10", CR_DT_F64, tenth, 11, 10, 0, 1,
                  (uint64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1, 2});
    expect_counts("0.1*i bins=3 [0.1,0.7]", CR_DT_F64, tenth, 11, 3, 0.1, 0.7,
                  (uint64_t[]){2, 2, 2});
    expect_counts("0.1*i bins=3 [0.1,0.7]", CR_DT_F32, tenth32, 11, 3, 0.1, 0.7,
                  (uint64_t[]){2, 2, 3});
    /* float32 compares with the range rounded to float32: 0.1f > 0.1, yet it is in. */
    float tenth_f = 0.1f;
    expect_counts("range rounded to float32", CR_DT_F32, &tenth_f, 1, 1, 0.0, 0.1, (uint64_t[]){1});
    /* negative range, numpy: [2 1 2]. */
    double neg[] = {-1, -0.5, 0.5, 2, 1.9999999999999998};
    expect_counts("bins=3 [-1,2]", CR_DT_F64, neg, 5, 3, -1, 2, (uint64_t[]){2, 1, 2});
    /* no data: all zeros. */
    expect_counts("empty", CR_DT_F64, d, 0, 3, 0, 1, (uint64_t[]){0, 0, 0});
}

static void test_hist_ints(void)
{
    int8_t i8[] = {-128, -1, 0, 1, 127, 64, -64}; /* numpy [1 2 2 2] */
    expect_counts("bins=4 [-128,128]", CR_DT_I8, i8, 7, 4, -128, 128, (uint64_t[]){1, 2, 2, 2});
    uint16_t u16[] = {0, 65535, 32768, 100}; /* numpy [2 2] */
    expect_counts("bins=2 [0,65535]", CR_DT_U16, u16, 4, 2, 0, 65535, (uint64_t[]){2, 2});
    int16_t i16[] = {-5, 5, 0}; /* numpy [1 2] */
    expect_counts("bins=2 [-5,5]", CR_DT_I16, i16, 3, 2, -5, 5, (uint64_t[]){1, 2});
    uint32_t u32[] = {0, 7, 3, 10}; /* numpy [1 1 1]: 10 is out */
    expect_counts("bins=3 [0,9]", CR_DT_U32, u32, 4, 3, 0, 9, (uint64_t[]){1, 1, 1});
    int32_t i32[] = {-3, -2, -1, 0, 1, 2, 3}; /* numpy [2 2 3] */
    expect_counts("bins=3 [-3,3]", CR_DT_I32, i32, 7, 3, -3, 3, (uint64_t[]){2, 2, 3});
    int64_t i64[] = {INT64_MIN, -1, 0, (int64_t)1 << 62}; /* numpy [1 1 1 1] */
    expect_counts("bins=4 [-2^63,2^63]", CR_DT_I64, i64, 4, 4, -9223372036854775808.0,
                  9223372036854775808.0, (uint64_t[]){1, 1, 1, 1});
    /* uint64 converts to double as numpy does: 2^64-1 becomes 2^64, the closed end. [1 3] */
    uint64_t u64[] = {0, (uint64_t)1 << 63, UINT64_MAX, ((uint64_t)1 << 63) - 1};
    expect_counts("bins=2 [0,2^64]", CR_DT_U64, u64, 4, 2, 0, 18446744073709551616.0,
                  (uint64_t[]){1, 3});
    /* 2^53+1 rounds to 2^53 in double, the closed upper end: numpy [1]. */
    int64_t big[] = {((int64_t)1 << 53) + 1};
    expect_counts("2^53+1 rounds in", CR_DT_I64, big, 1, 1, 0, 9007199254740992.0, (uint64_t[]){1});
    uint8_t u8[] = {0, 63, 64, 255, 128}; /* bins=4 over [0,256]: [2 1 1 1] via the general path */
    expect_counts("u8 bins=4 [0,256]", CR_DT_U8, u8, 5, 4, 0, 256, (uint64_t[]){2, 1, 1, 1});
}

static void test_hist_bytes(void)
{
    enum { N = 256 * 1000 + 77 };
    uint8_t *data = malloc(N);
    uint64_t counts[256], want[256] = {0};
    if (data == NULL)
        exit(2);
    for (int i = 0; i < N; i++) {
        data[i] = (uint8_t)((i * 7 + i / 256) & 0xFF);
        want[data[i]]++;
    }
    cr_status s = hist(CR_DT_U8, data, N, 256, 0, 256, counts);
    check(s == CR_OK && memcmp(counts, want, sizeof want) == 0, "uint8 256-bin counts");
    free(data);
}

/* np.linspace(lo, hi, bins + 1) as numpy computes it. */
static double np_edge(double lo, double hi, int32_t bins, int32_t i)
{
    return i == bins ? hi : (double)i * ((hi - lo) / bins) + lo;
}

/* Random values, many on or next to edges: every counted value must lie in its bin's
 * [edge_i, edge_i+1) (last closed), with edges of the data's float type. Checked one value at a
 * time so the bin is known. */
static void test_hist_edge_property(void)
{
    static const struct { int32_t bins; double lo, hi; } ranges[] = {
        {10, 0, 1}, {7, -3.3, 1.7}, {100, 0.1, 0.7}, {3, 1e-3, 1e-3 + 1e-9}, {1000, -1e6, 1e6},
    };
    int bad = 0;
    for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++)
        for (int f64 = 0; f64 < 2; f64++)
            for (int trial = 0; trial < 2000; trial++) {
                int32_t bins = ranges[r].bins;
                double lo = ranges[r].lo, hi = ranges[r].hi;
                int32_t ei = (int32_t)((rnd() + 1) / 2 * bins);
                double v = np_edge(lo, hi, bins, ei);
                if (trial % 3 == 1)
                    v = nextafter(v, -INFINITY);
                else if (trial % 3 == 2)
                    v = lo + (rnd() + 1) / 2 * (hi - lo);
                uint64_t counts[1000];
                float vf = (float)v;
                cr_status s = f64 ? hist(CR_DT_F64, &v, 1, bins, lo, hi, counts)
                                  : hist(CR_DT_F32, &vf, 1, bins, lo, hi, counts);
                double x = f64 ? v : (double)vf;
                int in = f64 ? (v >= lo && v <= hi) : (vf >= (float)lo && vf <= (float)hi);
                int64_t want = -1;
                for (int32_t b = 0; b < bins && in; b++) {
                    double e0 = np_edge(lo, hi, bins, b), e1 = np_edge(lo, hi, bins, b + 1);
                    if (!f64)
                        e0 = (float)e0, e1 = (float)e1;
                    if (x >= e0 && (x < e1 || (b == bins - 1 && x <= e1))) {
                        want = b;
                        break;
                    }
                }
                int ok = s == CR_OK;
                for (int32_t b = 0; b < bins && ok; b++)
                    ok = counts[b] == (uint64_t)(b == want);
                if (!ok && bad++ < 5)
                    printf("  %s v=%.17g bins=%d [%g,%g]: want bin %lld\n", f64 ? "f64" : "f32",
                           x, bins, lo, hi, (long long)want);
            }
    check(bad == 0, "histogram edge property: %d values in the wrong bin", bad);
}

/* ---------- backend surface and errors ---------- */

static void test_kernel_list(void)
{
    size_t n = 0;
    const cr_kernel *k = cr_kernels(B, &n);
    uint32_t mat = CR_DT_BIT(CR_DT_F32) | CR_DT_BIT(CR_DT_F64), half = CR_DT_BIT(CR_DT_F16) | CR_DT_BIT(CR_DT_BF16);
    uint32_t all = ((1u << CR_DT_COUNT) - 1) & ~half;
    const struct { const char *name; cr_op op; int ref; uint32_t dtypes; } want[] = {
        {"openblas", CR_OP_GEMM, 0, mat | half}, {"reference", CR_OP_GEMM, 1, mat | half},
        {"openblas", CR_OP_ATA, 0, mat},         {"reference", CR_OP_ATA, 1, mat},
        {"reference", CR_OP_HISTOGRAM, 1, all},
    };
    check(n == 5, "kernel list has %zu entries, want 5", n);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const cr_kernel *f = cr_kernel_find(B, want[i].op, want[i].name);
        check(f != NULL && f->reference == want[i].ref && f->precision == CR_PREC_DEFAULT &&
                  f->dtypes == want[i].dtypes && f->summary != NULL,
              "kernel %s/%s listed with the right flags", cr_op_name(want[i].op), want[i].name);
    }
    for (cr_op op = 0; op < CR_OP_COUNT; op++) {
        int refs = 0;
        for (size_t i = 0; i < n; i++)
            refs += k[i].op == op && k[i].reference;
        check(refs == 1, "op %s has %d reference kernels, want 1", cr_op_name(op), refs);
    }
    check(strcmp(B->name, "cpu") == 0, "backend name \"%s\"", B->name);
    check(B->device_count() == 1, "device_count %d", B->device_count());
    cr_device_info di;
    check(B->device_info(0, &di) == CR_OK && di.name[0] != '\0' && di.memory_total > 0 &&
              di.multiprocessors >= 1,
          "device_info(0): \"%s\" %llu bytes", di.name, (unsigned long long)di.memory_total);
    check(B->device_info(1, &di) != CR_OK, "device_info(1) fails");
    cr_task t = {.op = CR_OP_GEMM};
    check(B->task_device_bytes(&t) == 0, "task_device_bytes is 0");
}

/* Which rows auto, the batcher and compare mode may run (cr_kernel_candidate), on made-up rows:
 * named_only rows (tc-3xtf32 on cuda) only in compare mode, TF32 rows only when the request
 * allows TF32 (compare: for float32), hidden rows never, and the op, dtype and size must fit. */
static void test_candidate_rules(void)
{
    const cr_kernel plain = {.name = "p", .op = CR_OP_GEMM, .dtypes = CR_DT_BIT(CR_DT_F32), .max_dim = 100};
    cr_kernel named = plain, tf32 = plain, hidden = plain;
    named.named_only = true;
    tf32.precision = CR_PREC_TF32;
    hidden.hidden = true;
    cr_task t = {.op = CR_OP_GEMM, .dtype = CR_DT_F32, .precision = CR_PREC_DEFAULT};
    t.u.gemm = (cr_gemm_task){.m = 100, .n = 3, .k = 7};
    check(cr_kernel_candidate(&plain, &t, false) && cr_kernel_candidate(&plain, &t, true), "plain row: auto and compare");
    check(!cr_kernel_candidate(&named, &t, false), "named_only row: not for auto");
    check(cr_kernel_candidate(&named, &t, true), "named_only row: in compare mode");
    check(!cr_kernel_candidate(&tf32, &t, false) && cr_kernel_candidate(&tf32, &t, true),
          "TF32 row: not for an fp32 request's auto, in its compare mode");
    check(!cr_kernel_candidate(&hidden, &t, false) && !cr_kernel_candidate(&hidden, &t, true), "hidden row: never");
    t.precision = CR_PREC_TF32;
    check(cr_kernel_candidate(&tf32, &t, false) && !cr_kernel_candidate(&named, &t, false),
          "tf32 request: TF32 rows for auto, named_only still not");
    t.dtype = CR_DT_F64;
    check(!cr_kernel_candidate(&plain, &t, false) && !cr_kernel_candidate(&tf32, &t, true), "dtype the row lacks");
    t.dtype = CR_DT_F32;
    t.u.gemm.m = 101;
    check(!cr_kernel_candidate(&plain, &t, true), "a dimension past max_dim");
    t.op = CR_OP_ATA;
    check(!cr_kernel_candidate(&plain, &t, true), "another op's row");
    size_t n = 0;
    const cr_kernel *k = cr_kernels(B, &n);
    for (size_t i = 0; i < n; i++)
        check(!k[i].named_only, "cpu row %s is not named_only: auto may pick any", k[i].name);
}

static void expect_status(const char *what, const cr_task *t, cr_status want)
{
    char err[256] = "";
    cr_status s = run_task(t, err, sizeof err);
    check(s == want && (want == CR_OK || err[0] != '\0'), "%s: got %s (\"%s\"), want %s", what,
          cr_status_name(s), err, cr_status_name(want));
}

static void test_errors(void)
{
    float a[4] = {1, 2, 3, 4}, c[4];
    uint64_t counts[4];
    static const cr_kernel gpu_row = {.name = "cublas", .backend = CR_BACKEND_CUDA, .op = CR_OP_GEMM};
    cr_task g = {.op = CR_OP_GEMM, .dtype = CR_DT_F32, .kernel = K(CR_OP_ATA, "openblas")};
    g.u.gemm = (cr_gemm_task){2, 2, 2, false, false, 1, 0, a, a, NULL, c};
    expect_status("another op's kernel", &g, CR_E_INVALID);
    g.kernel = &gpu_row;
    expect_status("gpu kernel on cpu", &g, CR_E_INVALID);
    g.kernel = NULL;
    expect_status("no kernel", &g, CR_E_INVALID);
    g.kernel = K(CR_OP_GEMM, "openblas");
    g.dtype = CR_DT_U8;
    expect_status("gemm uint8", &g, CR_E_UNSUPPORTED);
    g.dtype = CR_DT_I64;
    g.kernel = K(CR_OP_GEMM, "reference");
    expect_status("gemm int64 reference", &g, CR_E_UNSUPPORTED);
    g.dtype = CR_DT_F32;
    g.u.gemm.k = 0;
    expect_status("gemm k=0", &g, CR_E_INVALID);
    g.u.gemm.k = 2;
    g.u.gemm.b = NULL;
    expect_status("gemm b NULL", &g, CR_E_INVALID);
    g.u.gemm.b = a;
    g.u.gemm.m = INT64_MAX / 2;
    expect_status("gemm size overflow", &g, CR_E_INVALID);
    g.u.gemm.m = 2;
    g.precision = CR_PREC_TF32; /* permits rounding; exact fp32 honours it */
    expect_status("gemm tf32 on cpu", &g, CR_OK);

    cr_task h = {.op = CR_OP_ATA, .dtype = CR_DT_F64, .kernel = K(CR_OP_HISTOGRAM, "reference")};
    h.u.ata = (cr_ata_task){2, 2, false, a, c};
    expect_status("a histogram kernel for ata", &h, CR_E_INVALID);
    h.kernel = K(CR_OP_ATA, "reference");
    h.dtype = CR_DT_I32;
    expect_status("ata int32", &h, CR_E_UNSUPPORTED);
    h.dtype = CR_DT_F32;
    h.u.ata.n = -1;
    expect_status("ata n=-1", &h, CR_E_INVALID);

    cr_task x = {.op = CR_OP_HISTOGRAM, .dtype = CR_DT_F32, .kernel = K(CR_OP_GEMM, "openblas")};
    x.u.hist = (cr_hist_task){4, a, 4, 0, 1, counts};
    expect_status("histogram openblas", &x, CR_E_INVALID);
    x.kernel = K(CR_OP_HISTOGRAM, "reference");
    x.u.hist.bins = 0;
    expect_status("histogram bins=0", &x, CR_E_INVALID);
    x.u.hist.bins = 4;
    x.u.hist.lo = 1;
    expect_status("histogram lo == hi (widened, as numpy and cuda do)", &x, CR_OK);
    x.u.hist.lo = 2;
    expect_status("histogram lo > hi", &x, CR_E_INVALID);
    x.u.hist.lo = NAN;
    expect_status("histogram lo NaN", &x, CR_E_INVALID);
    x.u.hist.lo = 0;
    x.u.hist.hi = INFINITY;
    expect_status("histogram hi inf", &x, CR_E_INVALID);
    x.u.hist.hi = 1e300;
    expect_status("histogram float32 range beyond float32", &x, CR_E_INVALID);
    x.u.hist.hi = 1;
    x.u.hist.count = -1;
    expect_status("histogram count=-1", &x, CR_E_INVALID);
    x.u.hist.count = 4;
    x.dtype = (cr_dtype)CR_DT_COUNT;
    expect_status("histogram bad dtype", &x, CR_E_UNSUPPORTED);
    x.dtype = CR_DT_F32;
    x.op = CR_OP_COUNT;
    expect_status("bad op", &x, CR_E_INVALID);

    cr_worker *w = NULL;
    char err[128] = "";
    check(B->worker_create(1, &w, err, sizeof err) == CR_E_INVALID && w == NULL && err[0],
          "worker_create(1) is invalid");
}

static void test_cancel(void)
{
    volatile int flag = 1;
    float a[4] = {1, 2, 3, 4}, c[4];
    uint64_t counts[4];
    static const char *const kernels[] = {"openblas", "reference"};
    for (int kk = 0; kk < 2; kk++) {
        cr_task g = {.op = CR_OP_GEMM, .dtype = CR_DT_F32, .kernel = K(CR_OP_GEMM, kernels[kk]), .cancel = &flag};
        g.u.gemm = (cr_gemm_task){2, 2, 2, false, false, 1, 0, a, a, NULL, c};
        expect_status("cancelled gemm", &g, CR_E_CANCELLED);
        cr_task t = {.op = CR_OP_ATA, .dtype = CR_DT_F32, .kernel = K(CR_OP_ATA, kernels[kk]), .cancel = &flag};
        t.u.ata = (cr_ata_task){2, 2, false, a, c};
        expect_status("cancelled ata", &t, CR_E_CANCELLED);
    }
    cr_task h = {.op = CR_OP_HISTOGRAM, .dtype = CR_DT_F32, .kernel = K(CR_OP_HISTOGRAM, "reference"), .cancel = &flag};
    h.u.hist = (cr_hist_task){4, a, 4, 0, 5, counts};
    expect_status("cancelled histogram", &h, CR_E_CANCELLED);
    flag = 0;
    expect_status("histogram with a clear cancel flag", &h, CR_OK);
}

/* Workers run on their own threads at the same time; OpenBLAS must give each the same answer
 * it gives alone. */
enum { CONC_THREADS = 4, CONC_N = 96, CONC_ROUNDS = 10 };
static float conc_a[CONC_N * CONC_N], conc_b[CONC_N * CONC_N], conc_want[CONC_N * CONC_N];

static void *conc_worker(void *arg)
{
    int *bad = arg;
    cr_worker *w = NULL;
    if (B->worker_create(0, &w, NULL, 0) != CR_OK) {
        *bad = 1;
        return NULL;
    }
    float *c = malloc(sizeof conc_want);
    for (int r = 0; r < CONC_ROUNDS && c != NULL; r++) {
        cr_task t = {.op = CR_OP_GEMM, .dtype = CR_DT_F32, .kernel = K(CR_OP_GEMM, "openblas")};
        t.u.gemm = (cr_gemm_task){CONC_N, CONC_N, CONC_N, false, true, 1, 0, conc_a, conc_b,
                                  NULL, c};
        cr_timings tm;
        if (B->run(w, &t, &tm, NULL, 0) != CR_OK || memcmp(c, conc_want, sizeof conc_want) != 0)
            *bad = 1;
    }
    if (c == NULL)
        *bad = 1;
    free(c);
    B->worker_destroy(w);
    return NULL;
}

static void test_concurrent_workers(void)
{
    for (int i = 0; i < CONC_N * CONC_N; i++)
        conc_a[i] = (float)rnd(), conc_b[i] = (float)rnd();
    cr_task t = {.op = CR_OP_GEMM, .dtype = CR_DT_F32, .kernel = K(CR_OP_GEMM, "openblas")};
    t.u.gemm = (cr_gemm_task){CONC_N, CONC_N, CONC_N, false, true, 1, 0, conc_a, conc_b, NULL,
                              conc_want};
    check(run_task(&t, NULL, 0) == CR_OK, "concurrent: single-threaded baseline");
    pthread_t th[CONC_THREADS];
    int bad[CONC_THREADS] = {0}, started = 0;
    for (int i = 0; i < CONC_THREADS; i++)
        if (pthread_create(&th[i], NULL, conc_worker, &bad[i]) == 0)
            started++;
        else
            bad[i] = 1;
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    int any = 0;
    for (int i = 0; i < CONC_THREADS; i++)
        any |= bad[i];
    check(!any && started == CONC_THREADS, "concurrent workers agree with the baseline");
}

static void test_thread_setting(void)
{
    char err[256] = "";
    setenv("CRUNCHD_CPU_THREADS", "lots", 1);
    check(B->init(&(cr_backend_opts){.workers_per_device = 1}, err, sizeof err) == CR_E_INVALID && err[0], "CRUNCHD_CPU_THREADS=lots rejected");
    setenv("CRUNCHD_CPU_THREADS", "2", 1);
    check(B->init(&(cr_backend_opts){.workers_per_device = 1}, err, sizeof err) == CR_OK, "CRUNCHD_CPU_THREADS=2 accepted: %s", err);
    unsetenv("CRUNCHD_CPU_THREADS");
}

/* The NaN scan works in blocks: a NaN at each position around a block's edges must be the one
 * found, the first of two must win, and integer data (whose bytes may spell a NaN) holds none. */
static void test_first_nan(void)
{
    enum { N = 3000 };
    static float f[N];
    static double d[N];
    const int64_t spots[] = {0, 1, 1023, 1024, 1025, 2047, 2048, 2999};
    for (size_t s = 0; s < sizeof spots / sizeof spots[0]; s++) {
        for (int i = 0; i < N; i++) {
            f[i] = (float)i;
            d[i] = i;
        }
        int64_t at = spots[s];
        f[at] = NAN;
        d[at] = NAN;
        f[N - 1 - (at == N - 1)] = NAN;
        d[N - 1 - (at == N - 1)] = NAN;
        int64_t want = at < N - 1 ? at : N - 2;
        check(cr_hist_first_nan(f, N, CR_DT_F32) == want, "float32 NaN at %lld found", (long long)want);
        check(cr_hist_first_nan(d, N, CR_DT_F64) == want, "float64 NaN at %lld found", (long long)want);
        check(cr_hist_first_nan(f, at, CR_DT_F32) == (at == N - 1 ? want : -1),
              "float32: none before %lld", (long long)at);
    }
    for (int i = 0; i < N; i++)
        f[i] = (float)i;
    check(cr_hist_first_nan(f, N, CR_DT_F32) == -1, "float32 without NaN");
    check(cr_hist_first_nan(NULL, 0, CR_DT_F64) == -1, "no data, no NaN");
    memset(f, 0xff, sizeof f); /* all-ones bytes: NaN as a float, -1 as an integer */
    check(cr_hist_first_nan(f, N, CR_DT_I32) == -1, "int32 holds no NaN");
    check(cr_hist_first_nan(f, N, CR_DT_F32) == 0, "all-ones float32 is NaN");
}

int main(void)
{
    char err[256] = "";
    if (B->init(&(cr_backend_opts){.workers_per_device = 2}, err, sizeof err) != CR_OK || B->worker_create(0, &W, err, sizeof err) != CR_OK) {
        printf("cpu backend did not start: %s\ntest_cpu_backend: 0 passed, 1 failed\n", err);
        return 1;
    }
    test_kernel_list();
    test_candidate_rules();
    test_gemm();
    test_gemm_half();
    test_gemm_beta_zero_ignores_nan();
    test_gemm_in_place();
    test_ata();
    test_ata_by_hand();
    test_hist_edges();
    test_hist_ints();
    test_hist_bytes();
    test_hist_edge_property();
    test_first_nan();
    test_errors();
    test_cancel();
    test_concurrent_workers();
    test_thread_setting();
    B->worker_destroy(W);
    B->shutdown();
    printf("test_cpu_backend: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
