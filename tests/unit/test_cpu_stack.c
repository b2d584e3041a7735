/* Unit tests of stacks on the CPU backend (kernels/cpu/cpu_stack.c): every cpu GEMM and AᵀA row on
 * stacks built with cr_stack_plan as the decoders build them, against a plain loop that finds each
 * product's operand matrices from the operands' own shapes (numpy's broadcasting, not the strides
 * under test): (1,m,k)@(b,k,n), (m,k)@(b,k,n), (p,1,m,k)@(q,k,n), (b,m,k)@(k,n), six batch
 * dimensions, c broadcast (stride 0) and per row of the batch, every transpose pair, odd sizes,
 * float16/bfloat16, beta 0 with c of NaN, alpha 0 with A and B of NaN; on one thread and shared out
 * over four; then the refusals (strides past an operand, a bad count, a histogram stack, c_in ==
 * c_out where c broadcasts), an empty stack, cancel, and the half widening's memory bound. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/half.h"
#include "kernels/registry.h"
#include "tests/unit/check.h"

static const cr_backend *B = &cr_backend_cpu;
static cr_worker *W;

static uint64_t rng = 0x2545f4914f6cdd1dull;
static double rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static bool is_half(cr_dtype dt) { return dt == CR_DT_F16 || dt == CR_DT_BF16; }

static double get(const void *p, int64_t i, cr_dtype dt)
{
    if (is_half(dt))
        return cr_half_to_float(dt, ((const uint16_t *)p)[i]);
    return dt == CR_DT_F64 ? ((const double *)p)[i] : ((const float *)p)[i];
}

static void put(void *p, int64_t i, double v, cr_dtype dt)
{
    if (is_half(dt))
        ((uint16_t *)p)[i] = cr_half_from_double(dt, v);
    else if (dt == CR_DT_F64)
        ((double *)p)[i] = v;
    else
        ((float *)p)[i] = (float)v;
}

static void *random_array(int64_t n, cr_dtype dt, bool nan)
{
    void *p = malloc((size_t)(n ? n : 1) * cr_dtype_size(dt));
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    for (int64_t i = 0; i < n; i++)
        put(p, i, nan ? NAN : rnd(), dt);
    return p;
}

/* A batch pattern: the result's batch shape, and each operand's own (nrank -1: absent). */
typedef struct {
    const char *name;
    int rank;
    int64_t dims[CR_STACK_DIMS];
    int nrank[CR_STACK_OPERANDS];
    int64_t ndims[CR_STACK_OPERANDS][CR_STACK_DIMS];
} pattern;

static const pattern patterns[] = {
    {"(3,m,k)@(3,k,n) c(3)", 1, {3}, {1, 1, 1}, {{3}, {3}, {3}}},
    {"(1,m,k)@(5,k,n) c()", 1, {5}, {1, 1, 0}, {{1}, {5}, {0}}},
    {"(m,k)@(4,k,n) c(1)", 1, {4}, {0, 1, 1}, {{0}, {4}, {1}}},
    {"(2,m,k)@(k,n) c(2)", 1, {2}, {1, 0, 1}, {{2}, {0}, {2}}},
    {"(3,1,m,k)@(4,k,n) c(3,1)", 2, {3, 4}, {2, 1, 2}, {{3, 1}, {4}, {3, 1}}},
    {"(2,1,3,1,1,2)@(1,2,1,1) c(3,2,1,1)", 6, {2, 2, 3, 2, 1, 2}, {6, 4, 4},
     {{2, 1, 3, 1, 1, 2}, {1, 2, 1, 1}, {3, 2, 1, 1}}},
};

/* Operand k's matrix for result product i, from its own shape: each dimension of 1 broadcasts. */
static int64_t own_index(const pattern *p, int k, int64_t i)
{
    int64_t idx[CR_STACK_DIMS], at = 0, step = 1;
    for (int d = p->rank - 1; d >= 0; d--) {
        idx[d] = i % p->dims[d];
        i /= p->dims[d];
    }
    for (int j = p->nrank[k] - 1; j >= 0; j--) {
        int d = p->rank - p->nrank[k] + j;
        at += (p->ndims[k][j] == 1 ? 0 : idx[d]) * step;
        step *= p->ndims[k][j];
    }
    return at;
}

static int64_t own_mats(const pattern *p, int k)
{
    int64_t n = 1;
    for (int j = 0; j < p->nrank[k]; j++)
        n *= p->ndims[k][j];
    return n;
}

typedef struct {
    int64_t m, n, k;
    bool ta, tb;
    double alpha, beta;
    bool with_c;
} gcase;

/* |got - want| within what the dtype's arithmetic allows: mag is the sum of |terms|. */
static bool close_enough(double got, double want, double mag, cr_dtype dt, int64_t k)
{
    double eps = dt == CR_DT_F64 ? 1e-15 : 1.2e-7;
    double tol = 4.0 * (double)(k + 2) * eps * mag + 1e-300;
    if (is_half(dt))
        tol += (dt == CR_DT_F16 ? 1.0 / 1024 : 1.0 / 128) * (fabs(want) + mag);
    return fabs(got - want) <= tol;
}

static void gemm_stack(const char *kernel, cr_dtype dt, const pattern *p, gcase c)
{
    int64_t count = 1;
    for (int d = 0; d < p->rank; d++)
        count *= p->dims[d];
    int nrank[3] = {p->nrank[0], p->nrank[1], c.with_c ? p->nrank[2] : -1};
    int64_t ma = own_mats(p, 0), mb = own_mats(p, 1), mc = c.with_c ? own_mats(p, 2) : 0;
    /* BLAS's rule, alpha 0 reads neither A nor B, is the reference's; OpenBLAS 0.3.21's SGEMM and
     * DGEMM multiply NaN by 0 all the same, a single matrix too (checked on the build machine): NaN A
     * and B only for the reference */
    bool nan_ab = c.alpha == 0 && strcmp(kernel, "reference") == 0;
    void *a = random_array(ma * c.m * c.k, dt, nan_ab), *b = random_array(mb * c.k * c.n, dt, nan_ab);
    void *cin = random_array(mc * c.m * c.n, dt, c.beta == 0);
    void *out = random_array(count * c.m * c.n, dt, true);
    cr_task t = {.op = CR_OP_GEMM, .dtype = dt, .kernel = cr_kernel_find(B, CR_OP_GEMM, kernel)};
    t.u.gemm = (cr_gemm_task){c.m, c.n, c.k, c.ta, c.tb, c.alpha, c.beta, a, b, c.with_c ? cin : NULL, out};
    cr_stack_plan(&t.stack, p->rank, p->dims, nrank, p->ndims);
    char err[256] = "";
    cr_status st = B->run(W, &t, NULL, err, sizeof err);
    int64_t bad = 0;
    for (int64_t i = 0; st == CR_OK && i < count; i++) {
        const int64_t ia = own_index(p, 0, i) * c.m * c.k, ib = own_index(p, 1, i) * c.k * c.n;
        const int64_t ic = c.with_c ? own_index(p, 2, i) * c.m * c.n : 0;
        for (int64_t x = 0; x < c.m; x++)
            for (int64_t y = 0; y < c.n; y++) {
                double acc = 0, mag = 0;
                for (int64_t q = 0; c.alpha != 0 && q < c.k; q++) {
                    double v = get(a, ia + (c.ta ? q * c.m + x : x * c.k + q), dt) *
                               get(b, ib + (c.tb ? y * c.k + q : q * c.n + y), dt);
                    acc += v, mag += fabs(v);
                }
                double want = c.alpha * acc, m2 = fabs(c.alpha) * mag;
                if (c.with_c && c.beta != 0) {
                    double cv = get(cin, ic + x * c.n + y, dt);
                    want += c.beta * cv, m2 += fabs(c.beta * cv);
                }
                bad += !close_enough(get(out, i * c.m * c.n + x * c.n + y, dt), want, m2, dt, c.k);
            }
    }
    CHECK_MSG(st == CR_OK && bad == 0, "gemm %s %s %s %lldx%lldx%lld ta=%d tb=%d alpha=%g beta=%g c=%d: %s, %lld wrong %s",
              kernel, cr_dtype_name(dt), p->name, (long long)c.m, (long long)c.n, (long long)c.k, c.ta, c.tb, c.alpha,
              c.beta, c.with_c, cr_status_name(st), (long long)bad, err);
    free(a), free(b), free(cin), free(out);
}

static void test_gemm_patterns(void)
{
    const char *kernels[] = {"openblas", "reference"};
    const cr_dtype dts[] = {CR_DT_F32, CR_DT_F64, CR_DT_F16, CR_DT_BF16};
    for (size_t ki = 0; ki < 2; ki++)
        for (size_t di = 0; di < 4; di++)
            for (size_t pi = 0; pi < sizeof patterns / sizeof patterns[0]; pi++)
                for (int v = 0; v < 4; v++) {
                    gemm_stack(kernels[ki], dts[di], &patterns[pi], (gcase){7, 5, 3, v & 1, v & 2, 1.5, -0.5, true});
                    gemm_stack(kernels[ki], dts[di], &patterns[pi], (gcase){1, 9, 13, v & 1, v & 2, 1.0, 0.0, false});
                }
}

static void test_gemm_edges(void)
{
    const char *kernels[] = {"openblas", "reference"};
    for (size_t ki = 0; ki < 2; ki++) {
        const pattern *outer = &patterns[4], *six = &patterns[5];
        gemm_stack(kernels[ki], CR_DT_F32, outer, (gcase){33, 1, 17, false, true, 2.0, 0.0, true}); /* c NaN, unread */
        gemm_stack(kernels[ki], CR_DT_F64, outer, (gcase){5, 6, 7, true, false, 0.0, 0.75, true}); /* A, B NaN (ref) */
        gemm_stack(kernels[ki], CR_DT_F32, six, (gcase){1, 1, 1, false, false, 1.0, 1.0, true});
        gemm_stack(kernels[ki], CR_DT_F64, &patterns[1], (gcase){65, 29, 2, true, true, -1.0, 2.0, true});
    }
}

/* Shared over four threads (and on one): a stack past the threshold of starting them. */
static void test_threads(void)
{
    pattern many = {"(1100,m,k)@(1100,k,n) c()", 1, {1100}, {1, 1, 0}, {{1100}, {1100}, {0}}};
    pattern bc = {"(1,m,k)@(1100,k,n)", 1, {1100}, {1, 1, -1}, {{1}, {1100}, {0}}};
    int before = openblas_get_num_threads();
    for (int threads = 1; threads <= 4; threads *= 4) {
        openblas_set_num_threads(threads);
        gemm_stack("openblas", CR_DT_F32, &many, (gcase){16, 16, 16, false, false, 1.0, 0.5, true});
        gemm_stack("reference", CR_DT_F64, &bc, (gcase){16, 16, 17, true, false, 1.0, 0.0, false});
        gemm_stack("openblas", CR_DT_BF16, &bc, (gcase){16, 16, 16, false, true, 1.0, 0.0, false});
    }
    openblas_set_num_threads(before);
}

static void ata_stack(const char *kernel, cr_dtype dt, int64_t m, int64_t n, bool trans)
{
    int64_t dims[2] = {2, 3}, ndims[3][CR_STACK_DIMS] = {{2, 3}};
    int nrank[3] = {2, -1, -1};
    void *a = random_array(6 * m * n, dt, false), *out = random_array(6 * n * n, dt, true);
    cr_task t = {.op = CR_OP_ATA, .dtype = dt, .kernel = cr_kernel_find(B, CR_OP_ATA, kernel)};
    t.u.ata = (cr_ata_task){m, n, trans, a, out};
    cr_stack_plan(&t.stack, 2, dims, nrank, ndims);
    char err[256] = "";
    cr_status st = B->run(W, &t, NULL, err, sizeof err);
    int64_t bad = 0;
    for (int64_t i = 0; st == CR_OK && i < 6; i++)
        for (int64_t x = 0; x < n; x++)
            for (int64_t y = 0; y < n; y++) {
                double acc = 0, mag = 0;
                for (int64_t r = 0; r < m; r++) {
                    int64_t px = trans ? x * m + r : r * n + x, py = trans ? y * m + r : r * n + y;
                    double v = get(a, i * m * n + px, dt) * get(a, i * m * n + py, dt);
                    acc += v, mag += fabs(v);
                }
                bad += !close_enough(get(out, i * n * n + x * n + y, dt), acc, mag, dt, m);
            }
    CHECK_MSG(st == CR_OK && bad == 0, "ata %s %s (2,3,m,n) m=%lld n=%lld trans=%d: %s, %lld wrong %s", kernel,
              cr_dtype_name(dt), (long long)m, (long long)n, trans, cr_status_name(st), (long long)bad, err);
    free(a), free(out);
}

static void test_ata(void)
{
    const char *kernels[] = {"openblas", "reference"};
    static const int64_t shapes[][2] = {{7, 5}, {1, 1}, {33, 17}, {4, 64}};
    for (size_t ki = 0; ki < 2; ki++)
        for (size_t s = 0; s < 4; s++)
            for (int trans = 0; trans < 2; trans++) {
                ata_stack(kernels[ki], CR_DT_F32, shapes[s][0], shapes[s][1], trans);
                ata_stack(kernels[ki], CR_DT_F64, shapes[s][0], shapes[s][1], trans);
            }
}

/* ---- refusals, edges ---- */

static cr_task small_stack(float *a, float *out)
{
    cr_task t = {.op = CR_OP_GEMM, .dtype = CR_DT_F32, .kernel = cr_kernel_find(B, CR_OP_GEMM, "openblas")};
    t.u.gemm = (cr_gemm_task){2, 2, 2, false, false, 1.0, 1.0, a, a, a, out};
    int64_t dims[1] = {3}, ndims[3][CR_STACK_DIMS] = {{3}, {3}, {3}};
    int nrank[3] = {1, 1, 1};
    cr_stack_plan(&t.stack, 1, dims, nrank, ndims);
    return t;
}

static void expect_invalid(const char *what, const cr_task *t)
{
    char err[256] = "";
    cr_status st = B->run(W, t, NULL, err, sizeof err);
    CHECK_MSG(st == CR_E_INVALID && strstr(err, "stack"), "%s: %s (%s)", what, cr_status_name(st), err);
}

static void test_refusals(void)
{
    float a[64] = {0}, out[64];
    cr_task t = small_stack(a, out);
    t.stack.stride[CR_STACK_B][0] = 2; /* product 2 reads B matrix 4 of 3 */
    expect_invalid("a stride past the operand", &t);
    t = small_stack(a, out);
    t.stack.count = 4;
    expect_invalid("count not the product of dims", &t);
    t = small_stack(a, out);
    t.stack.mats[CR_STACK_A] = 0;
    expect_invalid("an operand of no matrices", &t);
    t = small_stack(a, out);
    t.stack.rank = 7;
    expect_invalid("rank 7", &t);
    t = small_stack(a, out);
    t.u.gemm.c_in = out; /* in place: fine while product i reads C matrix i */
    char err[256] = "";
    CHECK_MSG(B->run(W, &t, NULL, err, sizeof err) == CR_OK, "in place, own c: %s", err);
    t.stack.stride[CR_STACK_C][0] = 0, t.stack.mats[CR_STACK_C] = 1;
    expect_invalid("in place with c broadcast", &t);
    cr_task h = {.op = CR_OP_HISTOGRAM, .dtype = CR_DT_U8, .kernel = cr_kernel_find(B, CR_OP_HISTOGRAM, "reference")};
    uint64_t counts[4];
    h.u.hist = (cr_hist_task){4, a, 4, 0, 4, counts};
    h.stack = small_stack(a, out).stack;
    cr_status st = B->run(W, &h, NULL, err, sizeof err);
    CHECK_MSG(st == CR_E_UNSUPPORTED && strstr(err, "no histogram kernel takes a stack"), "a histogram stack: %s (%s)",
              cr_status_name(st), err);
}

static void test_empty_and_cancel(void)
{
    float a[64] = {0}, out[64] = {7};
    cr_task t = small_stack(a, out);
    int64_t zero[1] = {0}, ndims[3][CR_STACK_DIMS] = {{0}, {0}, {0}};
    int nrank[3] = {1, 1, 1};
    cr_stack_plan(&t.stack, 1, zero, nrank, ndims);
    t.u.gemm.a = t.u.gemm.b = t.u.gemm.c_in = NULL;
    char err[256] = "";
    CHECK_MSG(B->run(W, &t, NULL, err, sizeof err) == CR_OK && out[0] == 7, "an empty stack: %s", err);
    t = small_stack(a, out);
    volatile int cancel = 1;
    t.cancel = &cancel;
    CHECK_MSG(B->run(W, &t, NULL, err, sizeof err) == CR_E_CANCELLED, "a cancelled stack: %s", err);
}

/* float16 is widened a matrix at a time: the charge is one matrix's per thread, not the stack's. */
static void test_half_memory(void)
{
    cr_task t = {.op = CR_OP_GEMM, .dtype = CR_DT_F16};
    t.u.gemm = (cr_gemm_task){.m = 16, .n = 16, .k = 16};
    uint64_t one = B->task_host_bytes(&t);
    CHECK(one == 3 * 256 * sizeof(double));
    int64_t dims[1] = {100000}, ndims[3][CR_STACK_DIMS] = {{100000}, {100000}, {0}};
    int nrank[3] = {1, 1, -1};
    cr_stack_plan(&t.stack, 1, dims, nrank, ndims);
    int before = openblas_get_num_threads();
    openblas_set_num_threads(1);
    CHECK_MSG(B->task_host_bytes(&t) == one, "one thread: one matrix's widening (%llu)",
              (unsigned long long)B->task_host_bytes(&t));
    openblas_set_num_threads(4);
    CHECK_MSG(B->task_host_bytes(&t) == 4 * one, "four threads: four matrices' (%llu)",
              (unsigned long long)B->task_host_bytes(&t));
    openblas_set_num_threads(before);
}

int main(void)
{
    char err[256] = "";
    if (B->init(&(cr_backend_opts){.workers_per_device = 1}, err, sizeof err) != CR_OK ||
        B->worker_create(0, &W, err, sizeof err) != CR_OK) {
        printf("cpu backend did not start: %s\ntest_cpu_stack: 0 passed, 1 failed\n", err);
        return 1;
    }
    test_gemm_patterns();
    test_gemm_edges();
    test_threads();
    test_ata();
    test_refusals();
    test_empty_and_cancel();
    test_half_memory();
    B->worker_destroy(W);
    B->shutdown();
    return check_summary("test_cpu_stack");
}
