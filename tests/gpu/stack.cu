/* GPU tests of stacks (cr_task.stack, kernels/backend.h) through the cuda backend's run(), the
 * path the daemon takes: every stack-capable cuda row (GEMM: cublas, cublas-tf32, batched; AᵀA:
 * cublas-batched, batched) on every dtype it claims, against a float64 reference on the host,
 * element by element, outputs poisoned with NaN first:
 *   - numpy.matmul's broadcasting, built with cr_stack_plan as the decoders do: (b,m,k)@(b,k,n),
 *     (1,m,k)@(b,k,n), (m,k)@(b,k,n), (b,m,k)@(k,n), (p,1,m,k)@(q,k,n) (no common stride: the
 *     pointer-array path), six batch dimensions with broadcasting in several of them;
 *   - c broadcast (one c for all, per row of the batch, its own per product), beta 0 with a c of
 *     NaN (never read), alpha 0 with A and B of NaN (never read);
 *   - every transpose pair, odd and prime sizes (1, 7, 33, 65, 129, 255) and the own kernel's
 *     boundaries (a whole product in a block up to 64x64, tall 255x1 and 1024x1, tiles from 65);
 *   - a stack of 70000 products (past cuBLAS's and CUDA's 65535), an empty stack;
 *   - AᵀA stacks, stored A and Aᵀ;
 *   - lanes (run_launch/run_wait, two at once), inputs in pinned memory, in device memory (c
 *     broadcast from the device), inputs arriving in chunks (host_ready), the output in device
 *     memory; task_device_bytes against the layout's sum;
 *   - every row that runs one matrix at a time refuses a stack (CR_E_UNSUPPORTED, its message),
 *     and the registry resolves such a named row as a shape refusal.
 * Ends with "stack: N passed, M failed". */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include <cuda_runtime.h>

#include "kernels/half.h"
#include "kernels/registry.h"

#define GPU_TEST_SEED 0x13198a2e03707344ull
#include "tools/gpu/check.cuh"

static const cr_backend *B = &cr_backend_cuda;
static cr_worker *W;

static const cr_kernel *K(cr_op op, const char *name) { return cr_kernel_find(B, op, name); }
static bool is_half(cr_dtype dt) { return dt == CR_DT_F16 || dt == CR_DT_BF16; }

/* n random values exact in dt, stored as dt; v holds them as doubles. nan: every value NaN. */
struct buf {
    std::vector<double> v;
    std::vector<char> raw;
};

static void store(std::vector<char> &raw, size_t i, double x, cr_dtype dt)
{
    if (is_half(dt))
        ((uint16_t *)raw.data())[i] = cr_half_from_double(dt, x);
    else if (dt == CR_DT_F32)
        ((float *)raw.data())[i] = (float)x;
    else
        ((double *)raw.data())[i] = x;
}

static double load(const void *raw, size_t i, cr_dtype dt)
{
    if (is_half(dt))
        return cr_half_to_float(dt, ((const uint16_t *)raw)[i]);
    return dt == CR_DT_F32 ? ((const float *)raw)[i] : ((const double *)raw)[i];
}

static buf make_buf(size_t n, cr_dtype dt, bool nan = false)
{
    buf b;
    b.v.resize(n);
    b.raw.resize(n * cr_dtype_size(dt) + 1);
    for (size_t i = 0; i < n; i++) {
        double x = nan ? NAN : (double)(float)uniform(-1, 1);
        store(b.raw, i, x, dt);
        b.v[i] = load(b.raw.data(), i, dt);
    }
    return b;
}

/* A batch pattern: the result's batch shape and each operand's own (nrank -1: the task lacks it). */
struct pattern {
    const char *name;
    int rank;
    int64_t dims[CR_STACK_DIMS];
    int nrank[CR_STACK_OPERANDS];
    int64_t ndims[CR_STACK_OPERANDS][CR_STACK_DIMS];
};

static const pattern P_PLAIN = {"(5,m,k)@(5,k,n)", 1, {5}, {1, 1, 1}, {{5}, {5}, {5}}};
static const pattern P_ONE_A = {"(1,m,k)@(6,k,n)", 1, {6}, {1, 1, 0}, {{1}, {6}, {0}}};
static const pattern P_MAT_A = {"(m,k)@(4,k,n) c(m,n)", 1, {4}, {0, 1, 0}, {{0}, {4}, {0}}};
static const pattern P_MAT_B = {"(3,m,k)@(k,n) c(3,m,n)", 1, {3}, {1, 0, 1}, {{3}, {0}, {3}}};
static const pattern P_OUTER = {"(3,1,m,k)@(4,k,n) c(3,1,m,n)", 2, {3, 4}, {2, 1, 2}, {{3, 1}, {4}, {3, 1}}};
static const pattern P_SIX = {"(2,1,3,1,1,2)@(1,2,1,1) c(3,2,1,1)", 6, {2, 2, 3, 2, 1, 2}, {6, 4, 4},
                              {{2, 1, 3, 1, 1, 2}, {1, 2, 1, 1}, {3, 2, 1, 1}}};
static const pattern P_ONE_C = {"(4,m,k)@(4,k,n) c(1,m,n)", 1, {4}, {1, 1, 1}, {{4}, {4}, {1}}};

struct gemm_case {
    int64_t m, n, k;
    bool ta, tb;
    double alpha, beta;
    bool with_c;
};

static cr_stack plan(const pattern &p, bool with_c)
{
    cr_stack s;
    int nrank[CR_STACK_OPERANDS] = {p.nrank[0], p.nrank[1], with_c ? p.nrank[2] : -1};
    cr_stack_plan(&s, p.rank, p.dims, nrank, p.ndims);
    return s;
}

/* The reference of every product and, per element, the sum of |terms| its rounding scales with. */
struct gemm_ref {
    std::vector<double> v, mag;
};

static gemm_ref reference(const gemm_case &c, const cr_stack &s, const buf &a, const buf &b, const buf *cin)
{
    gemm_ref r;
    int64_t mn = c.m * c.n;
    r.v.resize(s.count * mn);
    r.mag.resize(s.count * mn);
    for (int64_t i = 0; i < s.count; i++) {
        const double *A = a.v.data() + cr_stack_operand_index(&s, CR_STACK_A, i) * c.m * c.k;
        const double *Bm = b.v.data() + cr_stack_operand_index(&s, CR_STACK_B, i) * c.k * c.n;
        const double *C = cin ? cin->v.data() + cr_stack_operand_index(&s, CR_STACK_C, i) * mn : NULL;
        for (int64_t x = 0; x < c.m; x++)
            for (int64_t y = 0; y < c.n; y++) {
                double acc = 0, mag = 0;
                for (int64_t p = 0; c.alpha != 0 && p < c.k; p++) {
                    double t = A[c.ta ? p * c.m + x : x * c.k + p] * Bm[c.tb ? y * c.k + p : p * c.n + y];
                    acc += t, mag += fabs(t);
                }
                double v = c.alpha * acc, mg = fabs(c.alpha) * mag;
                if (C && c.beta != 0)
                    v += c.beta * C[x * c.n + y], mg += fabs(c.beta * C[x * c.n + y]);
                r.v[i * mn + x * c.n + y] = v;
                r.mag[i * mn + x * c.n + y] = mg;
            }
    }
    return r;
}

/* |out - ref| within what the kernel's arithmetic allows, per element; NaN never passes. */
static double bound(const cr_kernel *kr, cr_dtype dt, int64_t k, double ref, double mag)
{
    double acc_eps = dt == CR_DT_F64 ? 2.3e-16 : 1.2e-7; /* FP64, or FP32 accumulation */
    double b = 2.0 * (k + 2) * acc_eps * mag + 1e-300;
    if (kr->precision == CR_PREC_TF32)
        b += 2e-3 * mag; /* inputs rounded to 10-bit mantissas */
    /* the answer's own rounding; cuBLAS's GemmEx with a 16-bit C and beta != 0 rounds alpha·A·B to
     * the 16-bit type before it adds beta·C (seen on the H200: 2.6 units in the last place of a
     * result that cancelled), so the scale is the terms', not the result's */
    if (is_half(dt))
        b += (dt == CR_DT_F16 ? 1.0 / 1024 : 1.0 / 128) * (fabs(ref) + mag);
    return b;
}

static bool check_out(const char *what, const cr_kernel *kr, cr_dtype dt, int64_t k, const void *out,
                      const std::vector<double> &ref, const std::vector<double> &mag)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        double d = fabs(load(out, i, dt) - ref[i]);
        if (!(d <= bound(kr, dt, k, ref[i], mag[i])) && bad++ == 0)
            first = i;
    }
    char detail[200];
    snprintf(detail, sizeof detail, "%zu of %zu elements wrong, first at %zu: %.9g, want %.9g", bad, ref.size(), first,
             bad ? load(out, first, dt) : 0.0, bad ? ref[first] : 0.0);
    expect(bad == 0, what, detail);
    return bad == 0;
}

static cr_status run(const cr_task *t, char *err) { return B->run(W, t, NULL, err, 256); }

/* One GEMM stack case on one row: build, run, check. */
/* BLAS's rules: alpha 0 reads neither A nor B, beta 0 never reads C. cuBLAS keeps the second and
 * not the first (A or B of NaN and alpha 0 gave NaN, H200, cuBLAS 13.0): NaN A and B for own rows only. */
static bool reads_nothing_at_alpha_0(const cr_kernel *kr) { return strncmp(kr->name, "cublas", 6) != 0; }

static void gemm_stack(const cr_kernel *kr, cr_dtype dt, const pattern &p, const gemm_case &c)
{
    cr_stack s = plan(p, c.with_c);
    bool nan_ab = c.alpha == 0 && reads_nothing_at_alpha_0(kr);
    buf a = make_buf(s.mats[0] * c.m * c.k, dt, nan_ab), b = make_buf(s.mats[1] * c.k * c.n, dt, nan_ab);
    buf cin = make_buf(c.with_c ? s.mats[2] * c.m * c.n : 0, dt, c.beta == 0);
    gemm_ref r = reference(c, s, a, b, c.with_c ? &cin : NULL);
    std::vector<char> out(s.count * c.m * c.n * cr_dtype_size(dt) + 1);
    memset(out.data(), 0xff, out.size());
    cr_task t = {};
    t.op = CR_OP_GEMM;
    t.dtype = dt;
    t.precision = kr->precision;
    t.kernel = kr;
    t.u.gemm = {c.m, c.n, c.k, c.ta, c.tb, c.alpha, c.beta, a.raw.data(), b.raw.data(),
                c.with_c ? cin.raw.data() : NULL, out.data()};
    t.stack = s;
    char err[256] = "", what[200];
    snprintf(what, sizeof what, "gemm %s %s %s %lldx%lldx%lld ta=%d tb=%d alpha=%g beta=%g c=%d", kr->name,
             cr_dtype_name(dt), p.name, (long long)c.m, (long long)c.n, (long long)c.k, c.ta, c.tb, c.alpha, c.beta,
             c.with_c);
    cr_status st = run(&t, err);
    if (st != CR_OK) {
        expect(false, what, err);
        return;
    }
    check_out(what, kr, dt, c.k, out.data(), r.v, r.mag);
}

static void test_gemm_patterns(const cr_kernel *kr, cr_dtype dt)
{
    const pattern *pats[] = {&P_PLAIN, &P_ONE_A, &P_MAT_A, &P_MAT_B, &P_OUTER, &P_SIX, &P_ONE_C};
    for (const pattern *p : pats)
        for (int v = 0; v < 4; v++) {
            bool ta = v & 1, tb = v & 2;
            gemm_stack(kr, dt, *p, {13, 9, 17, ta, tb, 1.5, -0.5, true});
            gemm_stack(kr, dt, *p, {33, 65, 7, ta, tb, 1.0, 0.0, false});
        }
    gemm_stack(kr, dt, P_OUTER, {16, 16, 16, false, false, 2.0, 0.0, true}); /* beta 0: c of NaN unread */
    gemm_stack(kr, dt, P_OUTER, {16, 16, 16, false, true, 0.0, 0.75, true}); /* alpha 0: A, B of NaN unread (own) */
    gemm_stack(kr, dt, P_ONE_C, {64, 64, 64, true, false, 1.0, 1.0, true});
}

static void test_gemm_sizes(const cr_kernel *kr, cr_dtype dt)
{
    static const int64_t sides[] = {1, 7, 33, 65, 129, 255};
    for (int64_t m : sides)
        for (int64_t n : sides) {
            int64_t k = sides[(m + n) % 6];
            if (m * n * k > 2000000)
                continue; /* the host reference's time: 255³ runs once below */
            gemm_stack(kr, dt, P_ONE_A, {m, n, k, (m & 2) != 0, (n & 2) != 0, 1.0, 0.5, true});
        }
    static const gemm_case edges[] = {
        {8, 8, 8, false, false, 1, 0, false},     {16, 16, 16, true, true, 1, 1, true},
        {32, 32, 32, false, true, 1, 0, false},   {64, 64, 64, false, false, 1, 0.5, true},
        {64, 65, 64, true, false, 1, 0, false},   {255, 1, 7, false, false, 1, 0, false},
        {1024, 1, 33, true, false, 1, 0, false},  {1, 1024, 33, false, true, 1, 0, false},
        {255, 255, 255, false, false, 1, 0, false}, {128, 128, 129, true, true, -1, 0.25, true},
        {256, 256, 256, false, false, 1, 0, false}, {3, 5, 1000, false, false, 1, 0, false},
    };
    for (const gemm_case &c : edges)
        gemm_stack(kr, dt, c.m * c.n * c.k > 4000000 ? P_MAT_B : P_PLAIN, c);
}

/* 70000 products: grids and batch counts past 65535. */
static void test_gemm_many(const cr_kernel *kr, cr_dtype dt)
{
    pattern p = {"(70000,m,k)@(70000,k,n)", 1, {70000}, {1, 1, 0}, {{70000}, {70000}, {0}}};
    gemm_stack(kr, dt, p, {4, 3, 5, false, false, 1.0, 1.0, true});
    pattern q = {"(70000,m,k)@(k,n)", 1, {70000}, {1, 0, -1}, {{70000}, {0}, {0}}};
    gemm_stack(kr, dt, q, {8, 8, 8, true, false, 1.0, 0.0, false});
}

static void test_empty(const cr_kernel *kr)
{
    pattern p = {"(0,m,k)@(0,k,n)", 1, {0}, {1, 1, -1}, {{0}, {0}, {0}}};
    cr_stack s = plan(p, false);
    float a[4], b[4], out[1] = {7};
    cr_task t = {};
    t.op = CR_OP_GEMM;
    t.dtype = CR_DT_F32;
    t.precision = kr->precision;
    t.kernel = kr;
    t.u.gemm = {2, 2, 2, false, false, 1.0, 0.0, a, b, NULL, out};
    t.stack = s;
    char err[256] = "", what[96];
    snprintf(what, sizeof what, "an empty stack on %s", kr->name);
    expect(run(&t, err) == CR_OK && out[0] == 7, what, err);
}

/* ---- AᵀA ---- */

static void ata_stack(const cr_kernel *kr, cr_dtype dt, int64_t m, int64_t n, bool trans, int rank)
{
    pattern p = rank == 1 ? pattern{"(4,m,n)", 1, {4}, {1, -1, -1}, {{4}}}
                          : pattern{"(2,3,m,n)", 2, {2, 3}, {2, -1, -1}, {{2, 3}}};
    cr_stack s;
    cr_stack_plan(&s, p.rank, p.dims, p.nrank, p.ndims);
    buf a = make_buf(s.count * m * n, dt);
    std::vector<char> stored = a.raw;
    size_t es = cr_dtype_size(dt);
    if (trans)
        for (int64_t i = 0; i < s.count; i++)
            for (int64_t r = 0; r < m; r++)
                for (int64_t c = 0; c < n; c++)
                    memcpy(&stored[(i * m * n + c * m + r) * es], &a.raw[(i * m * n + r * n + c) * es], es);
    std::vector<double> ref(s.count * n * n, 0.0), mag(s.count * n * n, 0.0);
    for (int64_t i = 0; i < s.count; i++)
        for (int64_t r = 0; r < m; r++)
            for (int64_t x = 0; x < n; x++)
                for (int64_t y = 0; y < n; y++) {
                    double t = a.v[i * m * n + r * n + x] * a.v[i * m * n + r * n + y];
                    ref[i * n * n + x * n + y] += t;
                    mag[i * n * n + x * n + y] += fabs(t);
                }
    std::vector<char> out(s.count * n * n * es + 1);
    memset(out.data(), 0xff, out.size());
    cr_task t = {};
    t.op = CR_OP_ATA;
    t.dtype = dt;
    t.kernel = kr;
    t.u.ata = {m, n, trans, stored.data(), out.data()};
    t.stack = s;
    char err[256] = "", what[160];
    snprintf(what, sizeof what, "ata %s %s %s m=%lld n=%lld trans=%d", kr->name, cr_dtype_name(dt), p.name,
             (long long)m, (long long)n, trans);
    if (run(&t, err) != CR_OK) {
        expect(false, what, err);
        return;
    }
    check_out(what, kr, dt, m, out.data(), ref, mag);
}

static void test_ata(const cr_kernel *kr, cr_dtype dt)
{
    static const int64_t shapes[][2] = {{131, 67}, {64, 129}, {1, 1}, {33, 7}, {255, 255}, {4096, 16}};
    for (auto &sh : shapes)
        for (int trans = 0; trans < 2; trans++)
            ata_stack(kr, dt, sh[0], sh[1], trans, 1 + (sh[0] & 1));
}

/* ---- refusals and the registry ---- */

static void test_refusals(void)
{
    size_t n = 0;
    const cr_kernel *ks = cr_kernels(B, &n);
    float a[8 * 8 * 2] = {0}, out[8 * 8 * 2];
    pattern p = {"(2,m,k)@(2,k,n)", 1, {2}, {1, 1, -1}, {{2}, {2}, {0}}};
    int refused = 0;
    for (size_t i = 0; i < n; i++) {
        if (ks[i].stacks || ks[i].hidden || ks[i].op == CR_OP_HISTOGRAM || !(ks[i].dtypes & CR_DT_BIT(CR_DT_F32)))
            continue;
        cr_task t = {};
        t.op = ks[i].op;
        t.dtype = CR_DT_F32;
        t.precision = ks[i].precision;
        t.kernel = &ks[i];
        if (t.op == CR_OP_GEMM)
            t.u.gemm = {8, 8, 8, false, false, 1.0, 0.0, a, a, NULL, out};
        else
            t.u.ata = {8, 8, false, a, out};
        int nrank[3] = {1, t.op == CR_OP_GEMM ? 1 : -1, -1};
        cr_stack_plan(&t.stack, p.rank, p.dims, nrank, p.ndims);
        char err[256] = "", what[96];
        cr_status st = run(&t, err);
        snprintf(what, sizeof what, "%s %s refuses a stack", cr_op_name(t.op), ks[i].name);
        expect(st == CR_E_UNSUPPORTED && strstr(err, "runs one matrix at a time") && strstr(err, "batched"), what, err);
        cr_kernel_choice c;
        cr_kernel_choice_parse(ks[i].name, &c);
        const cr_kernel *got = NULL;
        char msg[256];
        snprintf(what, sizeof what, "resolving %s %s for a stack is a shape refusal", cr_op_name(t.op), ks[i].name);
        expect(cr_kernel_resolve(B, NULL, &c, &t, &got, msg, sizeof msg) == CR_RESOLVE_SHAPE && !got, what, msg);
        expect(!cr_kernel_candidate(&ks[i], &t, true), "not a compare-mode candidate for a stack", ks[i].name);
        refused++;
    }
    expect(refused >= 10, "most cuda GEMM and AᵀA rows run one matrix at a time");
    expect(K(CR_OP_GEMM, "cublas")->stacks && K(CR_OP_GEMM, "cublas-tf32")->stacks && K(CR_OP_GEMM, "batched")->stacks &&
               K(CR_OP_ATA, "cublas-batched")->stacks && K(CR_OP_ATA, "batched")->stacks,
           "the stack rows");
    cr_task t = {};
    t.op = CR_OP_ATA;
    t.dtype = CR_DT_F64;
    int nrank[3] = {1, -1, -1};
    int64_t ndims[3][6] = {{3}};
    int64_t dims[1] = {3};
    cr_stack_plan(&t.stack, 1, dims, nrank, ndims);
    const cr_kernel *ref = cr_kernel_reference(B, &t);
    expect(ref && ref->stacks && !strcmp(ref->name, "cublas-batched"), "an AᵀA stack's reference is cublas-batched",
           ref ? ref->name : "none");
}

/* ---- the paths a single task takes: lanes, pinned and device memory, prefetch ---- */

struct prepared {
    cr_stack s;
    buf a, b, c;
    gemm_ref r;
    gemm_case gc;
    std::vector<char> out;
    cr_task t;
};

static void prepare(prepared &x, const cr_kernel *kr, const pattern &p, const gemm_case &c)
{
    x.gc = c;
    x.s = plan(p, c.with_c);
    x.a = make_buf(x.s.mats[0] * c.m * c.k, CR_DT_F32);
    x.b = make_buf(x.s.mats[1] * c.k * c.n, CR_DT_F32);
    x.c = make_buf(c.with_c ? x.s.mats[2] * c.m * c.n : 0, CR_DT_F32);
    x.r = reference(c, x.s, x.a, x.b, c.with_c ? &x.c : NULL);
    x.out.assign(x.s.count * c.m * c.n * 4 + 1, (char)0xff);
    x.t = {};
    x.t.op = CR_OP_GEMM;
    x.t.dtype = CR_DT_F32;
    x.t.kernel = kr;
    x.t.u.gemm = {c.m, c.n, c.k, c.ta, c.tb, c.alpha, c.beta, x.a.raw.data(), x.b.raw.data(),
                  c.with_c ? x.c.raw.data() : NULL, x.out.data()};
    x.t.stack = x.s;
}

static void test_lanes(void)
{
    prepared x, y;
    prepare(x, K(CR_OP_GEMM, "batched"), P_OUTER, {33, 17, 9, false, true, 1.0, 2.0, true});
    prepare(y, K(CR_OP_GEMM, "cublas"), P_SIX, {7, 65, 12, true, false, -1.0, 0.5, true});
    char err[256] = "";
    cr_timings tm;
    expect(B->run_launch(W, 0, &x.t, err, sizeof err) == CR_OK, "stack on lane 0", err);
    expect(B->run_launch(W, 1, &y.t, err, sizeof err) == CR_OK, "stack on lane 1", err);
    expect(B->run_wait(W, 0, &tm, err, sizeof err) == CR_OK, "lane 0 waited", err);
    expect(B->run_wait(W, 1, &tm, err, sizeof err) == CR_OK, "lane 1 waited", err);
    check_out("stack on lane 0 (batched, c broadcast)", x.t.kernel, CR_DT_F32, x.gc.k, x.out.data(), x.r.v, x.r.mag);
    check_out("stack on lane 1 (cublas pointer arrays)", y.t.kernel, CR_DT_F32, y.gc.k, y.out.data(), y.r.v, y.r.mag);
}

static void *to_device(const std::vector<char> &h, size_t bytes)
{
    void *d = NULL;
    if (cudaMalloc(&d, bytes) != cudaSuccess)
        return NULL;
    cudaMemcpy(d, h.data(), bytes, cudaMemcpyHostToDevice);
    return d;
}

/* a, b, c in pinned memory, then in device memory (c broadcast from there: the expansion reads it
 * in place and leaves it as it was), then the output in device memory too. */
static void test_residency(void)
{
    const char *rows[] = {"batched", "cublas"};
    for (const char *row : rows)
        for (int where = 0; where < 3; where++) {
            prepared x;
            prepare(x, K(CR_OP_GEMM, row), P_ONE_C, {40, 24, 31, false, false, 1.25, -1.0, true});
            size_t ab = x.s.mats[0] * 40 * 31 * 4, bb = x.s.mats[1] * 31 * 24 * 4, cb = x.s.mats[2] * 40 * 24 * 4;
            size_t ob = x.s.count * 40 * 24 * 4;
            void *pa, *pb, *pc, *po = NULL;
            if (where == 0) {
                pa = B->host_alloc(ab), pb = B->host_alloc(bb), pc = B->host_alloc(cb);
                memcpy(pa, x.a.raw.data(), ab), memcpy(pb, x.b.raw.data(), bb), memcpy(pc, x.c.raw.data(), cb);
            } else {
                pa = to_device(x.a.raw, ab), pb = to_device(x.b.raw, bb), pc = to_device(x.c.raw, cb);
                if (where == 2) {
                    cudaMalloc(&po, ob);
                    cudaMemset(po, 0xff, ob);
                }
            }
            x.t.u.gemm.a = pa, x.t.u.gemm.b = pb, x.t.u.gemm.c_in = pc;
            if (po)
                x.t.u.gemm.c_out = po;
            char err[256] = "", what[128];
            static const char *place[] = {"pinned", "device", "device, output too"};
            snprintf(what, sizeof what, "stack %s, inputs in %s memory", row, place[where]);
            if (run(&x.t, err) != CR_OK) {
                expect(false, what, err);
            } else {
                if (po)
                    cudaMemcpy(x.out.data(), po, ob, cudaMemcpyDeviceToHost);
                check_out(what, x.t.kernel, CR_DT_F32, 31, x.out.data(), x.r.v, x.r.mag);
                if (where) {
                    std::vector<char> back(cb);
                    cudaMemcpy(back.data(), pc, cb, cudaMemcpyDeviceToHost);
                    expect(memcmp(back.data(), x.c.raw.data(), cb) == 0, "c in device memory left as it was", what);
                }
            }
            if (where == 0) {
                B->host_free(pa), B->host_free(pb), B->host_free(pc);
            } else {
                cudaFree(pa), cudaFree(pb), cudaFree(pc), cudaFree(po);
            }
        }
}

/* Inputs copied to the device while they arrive (the prefetch takes big pinned inputs). */
static void test_prefetch(void)
{
    prepared x;
    pattern p = {"(192,m,k)@(k,n)", 1, {192}, {1, 0, 1}, {{192}, {0}, {192}}};
    prepare(x, K(CR_OP_GEMM, "batched"), p, {96, 64, 128, false, false, 1.0, 1.0, true});
    size_t ab = x.s.mats[0] * 96 * 128 * 4, cb = x.s.mats[2] * 96 * 64 * 4; /* 9 MiB: over the prefetch's 8 */
    char *pa = (char *)B->host_alloc(ab), *pc = (char *)B->host_alloc(cb);
    const size_t chunk = 1300000;
    for (size_t at = 0; at < ab; at += chunk) {
        size_t n = ab - at < chunk ? ab - at : chunk;
        memcpy(pa + at, x.a.raw.data() + at, n);
        B->host_ready(pa, at + n, ab);
    }
    memcpy(pc, x.c.raw.data(), cb);
    B->host_ready(pc, cb, cb);
    x.t.u.gemm.a = pa, x.t.u.gemm.c_in = pc;
    for (int rep = 0; rep < 2; rep++) { /* the in-place c is never the prefetch's: the second run agrees */
        char err[256] = "";
        memset(x.out.data(), 0xff, x.out.size());
        if (run(&x.t, err) != CR_OK)
            expect(false, "prefetched stack", err);
        else
            check_out(rep ? "prefetched stack, second run" : "prefetched stack", x.t.kernel, CR_DT_F32, 128,
                      x.out.data(), x.r.v, x.r.mag);
    }
    B->host_free(pa);
    B->host_free(pc);
}

/* The layout's bytes: every operand's matrices, the output's, the scratch, each aligned to 256. */
static void test_device_bytes(void)
{
    prepared x;
    prepare(x, K(CR_OP_GEMM, "cublas"), P_OUTER, {10, 20, 30, false, false, 1.0, 1.0, true});
    uint64_t want = (3 * 10 * 30 + 4 * 30 * 20 + 3 * 10 * 20 + 12 * 10 * 20) * 4ull;
    uint64_t got = B->task_device_bytes(&x.t), scratch = x.t.kernel->scratch(&x.t);
    char detail[128];
    snprintf(detail, sizeof detail, "%llu bytes, want %llu + scratch %llu + alignment", (unsigned long long)got,
             (unsigned long long)want, (unsigned long long)scratch);
    expect(scratch >= 3 * 12 * sizeof(void *) && got >= want + scratch && got <= want + scratch + 4 * 256,
           "task_device_bytes of a stack with c broadcast and pointer arrays", detail);
    x.t.kernel = K(CR_OP_GEMM, "batched");
    got = B->task_device_bytes(&x.t);
    expect(got >= want && got <= want + 4 * 256, "task_device_bytes of the batched row: no scratch");
    x.t.u.gemm.beta = 0; /* c is not read: not copied, no room */
    got = B->task_device_bytes(&x.t);
    expect(got >= want - 3 * 10 * 20 * 4 && got <= want - 3 * 10 * 20 * 4 + 4 * 256, "beta 0: no room for c");
}

int main(void)
{
    char err[256] = "";
    cr_backend_opts opts = {};
    opts.workers_per_device = 1;
    if (B->init(&opts, err, sizeof err) != CR_OK || B->worker_create(0, &W, err, sizeof err) != CR_OK) {
        printf("cuda backend: %s\nstack: 0 passed, 1 failed\n", err);
        return 1;
    }
    size_t n = 0;
    const cr_kernel *ks = cr_kernels(B, &n);
    for (size_t i = 0; i < n; i++) {
        if (!ks[i].stacks)
            continue;
        for (int d = 0; d < CR_DT_COUNT; d++) {
            if (!(ks[i].dtypes & CR_DT_BIT(d)))
                continue;
            if (ks[i].op == CR_OP_ATA) {
                test_ata(&ks[i], (cr_dtype)d);
                continue;
            }
            test_gemm_patterns(&ks[i], (cr_dtype)d);
            test_gemm_sizes(&ks[i], (cr_dtype)d);
            test_gemm_many(&ks[i], (cr_dtype)d);
        }
        if (ks[i].op == CR_OP_GEMM)
            test_empty(&ks[i]);
        printf("  %s %s: %d passed, %d failed so far\n", cr_op_name(ks[i].op), ks[i].name, passed, failed);
        fflush(stdout);
    }
    test_refusals();
    test_lanes();
    test_residency();
    test_prefetch();
    test_device_bytes();
    B->worker_destroy(W);
    B->shutdown();
    printf("stack: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
