/* GPU tests of the cuda backend through its public table (cr_backend_cuda): every kernel of its
 * list on every dtype it claims, GEMM with all trans flags, alpha/beta and a C input, AᵀA on
 * stored A and Aᵀ, histograms on bytes and floats; then the failure paths: a task larger than
 * the device (CR_E_NOMEM_DEVICE, and the worker still works), cancel, unknown kernel, dtype a
 * kernel lacks; inputs copied to the device while they arrive (host_ready), used by several
 * runs, and an upload abandoned half-way; a shared-memory mapping page-locked in place
 * (host_register), computed from and into, then unlocked. Ends with "backend: N passed, M failed". */
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

#include "kernels/cuda/ata_hist_kernels.h"
#include "kernels/cuda/hist_bin.cuh"
#include "kernels/cuda/pinned_pool.h"
#include "kernels/half.h"
#include "kernels/registry.h"

#define GPU_TEST_SEED 0x243f6a8885a308d3ull
#include "tools/gpu/check.cuh"

/* A cuda kernel by op and name, as the engine resolves it. */
static const cr_kernel *K(cr_op op, const char *name) { return cr_kernel_find(&cr_backend_cuda, op, name); }


static const cr_backend *B = &cr_backend_cuda;
static cr_worker *W;

static bool is_half(cr_dtype dt) { return dt == CR_DT_F16 || dt == CR_DT_BF16; }

/* A matrix of random values exact in float (in the dtype itself for float16/bfloat16), stored as dt. */
struct mat {
    std::vector<double> v; /* row-major values */
    std::vector<char> raw; /* as stored for the task */
};

static mat make_mat(int64_t rows, int64_t cols, cr_dtype dt)
{
    mat m;
    m.v.resize(rows * cols);
    m.raw.resize(rows * cols * cr_dtype_size(dt));
    for (int64_t i = 0; i < rows * cols; i++) {
        m.v[i] = (double)(float)uniform(-1, 1);
        if (is_half(dt)) {
            uint16_t h = cr_half_from_double(dt, m.v[i]);
            m.v[i] = cr_half_to_float(dt, h);
            ((uint16_t *)m.raw.data())[i] = h;
        } else if (dt == CR_DT_F32)
            ((float *)m.raw.data())[i] = (float)m.v[i];
        else
            ((double *)m.raw.data())[i] = m.v[i];
    }
    return m;
}

static double value_at(const std::vector<char> &raw, int64_t i, cr_dtype dt)
{
    if (is_half(dt))
        return cr_half_to_float(dt, ((const uint16_t *)raw.data())[i]);
    return dt == CR_DT_F32 ? ((const float *)raw.data())[i] : ((const double *)raw.data())[i];
}

/* ‖out − ref‖ / ‖ref‖, NaN (an unwritten element) never passes. */
static double rel_error(const std::vector<char> &out, const std::vector<double> &ref, cr_dtype dt)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        double d = value_at(out, i, dt) - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    double r = sqrt(num) / (den > 0 ? sqrt(den) : 1.0);
    return r == r ? r : INFINITY;
}

static double tolerance(const cr_kernel *k, cr_dtype dt)
{
    if (k->precision == CR_PREC_TF32)
        return 5e-3;
    if (is_half(dt)) /* the answer's own rounding: 2^-11 (float16) or 2^-8 (bfloat16) of each element */
        return dt == CR_DT_F16 ? 1e-3 : 8e-3;
    return dt == CR_DT_F32 ? 1e-5 : 1e-12;
}

static cr_status run(const cr_task *t, cr_timings *tm, char *err)
{
    return B->run(W, t, tm, err, 256);
}

static void check_run(const char *what, const cr_task *t, std::vector<char> &out,
                      const std::vector<double> &ref, double tol)
{
    char err[256] = "", detail[300];
    cr_timings tm = {};
    memset(out.data(), 0xff, out.size()); /* NaN poison */
    cr_status st = run(t, &tm, err);
    if (st != CR_OK) {
        snprintf(detail, sizeof detail, "status %s: %s", cr_status_name(st), err);
        expect(false, what, detail);
        return;
    }
    double e = rel_error(out, ref, t->dtype);
    snprintf(detail, sizeof detail, "rel error %.3g > %.1g", e, tol);
    expect(e <= tol && tm.device[0] != 0 && tm.kernel_ms >= 0, what, detail);
}

static void test_gemm(const cr_kernel *k, cr_dtype dt)
{
    const int64_t m = 67, n = 45, kk = 131;
    for (int variant = 0; variant < 6; variant++) {
        bool ta = variant & 1, tb = variant & 2, with_c = variant >= 4;
        double alpha = variant ? 1.5 : 1.0, beta = with_c ? -0.5 : 0.0;
        mat a = make_mat(ta ? kk : m, ta ? m : kk, dt), b = make_mat(tb ? n : kk, tb ? kk : n, dt);
        mat c = make_mat(m, n, dt);
        std::vector<double> ref(m * n);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0;
                for (int64_t p = 0; p < kk; p++)
                    s += a.v[ta ? p * m + i : i * kk + p] * b.v[tb ? j * kk + p : p * n + j];
                ref[i * n + j] = alpha * s + (with_c ? beta * c.v[i * n + j] : 0.0);
            }
        std::vector<char> out(m * n * cr_dtype_size(dt));
        cr_task t = {};
        t.op = CR_OP_GEMM;
        t.dtype = dt;
        t.precision = k->precision;
        t.kernel = k;
        t.u.gemm = {m, n, kk, ta, tb, alpha, beta, a.raw.data(), b.raw.data(), with_c ? c.raw.data() : NULL,
                    out.data()};
        char what[128];
        snprintf(what, sizeof what, "gemm %s %s ta=%d tb=%d alpha=%g beta=%g c=%d", k->name, cr_dtype_name(dt),
                 ta, tb, alpha, beta, with_c);
        check_run(what, &t, out, ref, tolerance(k, dt));
    }
}

static void test_ata(const cr_kernel *k, cr_dtype dt)
{
    static const int64_t shapes[][2] = {{131, 67}, {64, 129}, {1, 1}, {257, 200}};
    for (auto &s : shapes)
        for (int trans = 0; trans < 2; trans++) {
            int64_t m = s[0], n = s[1];
            mat a = make_mat(m, n, dt);
            std::vector<char> stored = a.raw;
            if (trans)
                for (int64_t r = 0; r < m; r++)
                    for (int64_t c = 0; c < n; c++)
                        memcpy(&stored[(c * m + r) * cr_dtype_size(dt)], &a.raw[(r * n + c) * cr_dtype_size(dt)],
                               cr_dtype_size(dt));
            std::vector<double> ref(n * n, 0.0);
            for (int64_t p = 0; p < m; p++)
                for (int64_t i = 0; i < n; i++)
                    for (int64_t j = 0; j < n; j++)
                        ref[i * n + j] += a.v[p * n + i] * a.v[p * n + j];
            std::vector<char> out(n * n * cr_dtype_size(dt));
            cr_task t = {};
            t.op = CR_OP_ATA;
            t.dtype = dt;
            t.kernel = k;
            t.u.ata = {m, n, (bool)trans, stored.data(), out.data()};
            char what[128];
            snprintf(what, sizeof what, "ata %s %s m=%lld n=%lld trans=%d", k->name, cr_dtype_name(dt),
                     (long long)m, (long long)n, trans);
            check_run(what, &t, out, ref, tolerance(k, dt));
        }
}

/* Stores x as element i of an integer array of dt; returns what was stored, as a double. */
static double store_int(cr_dtype dt, void *data, int64_t i, double x)
{
    switch (dt) {
    case CR_DT_I8: return ((int8_t *)data)[i] = (int8_t)x;
    case CR_DT_U16: return ((uint16_t *)data)[i] = (uint16_t)x;
    case CR_DT_I16: return ((int16_t *)data)[i] = (int16_t)x;
    case CR_DT_U32: return ((uint32_t *)data)[i] = (uint32_t)x;
    case CR_DT_I32: return ((int32_t *)data)[i] = (int32_t)x;
    case CR_DT_U64: return (double)(((uint64_t *)data)[i] = (uint64_t)x);
    default: return (double)(((int64_t *)data)[i] = (int64_t)x);
    }
}

static void test_hist(const cr_kernel *k, cr_dtype dt)
{
    const int64_t count = 1000003;
    bool is_float = dt == CR_DT_F32 || dt == CR_DT_F64, is_signed = dt == CR_DT_I8 || dt == CR_DT_I16 ||
                                                                   dt == CR_DT_I32 || dt == CR_DT_I64;
    std::vector<char> data(count * cr_dtype_size(dt));
    int bins = dt == CR_DT_U8 ? 256 : 100;
    /* integers: 100 bins over [lo, hi] of a range the values overrun on both sides (unsigned ones
     * only above), so every bin and both out-of-range sides are hit */
    double lo = dt == CR_DT_U8 ? 0 : is_float ? -1.0 : is_signed ? -60 : 10;
    double hi = dt == CR_DT_U8 ? 256 : is_float ? 1.0 : is_signed ? 60 : 110;
    cr_hist_dev hd = {count, NULL, bins, lo, hi, NULL};
    cr_hist_params p = {};
    cr_hist_make_params(&hd, dt, &p);
    std::vector<uint64_t> want(bins, 0), got(bins, 7);
    for (int64_t i = 0; i < count; i++) {
        double x;
        if (dt == CR_DT_U8) {
            x = (double)(unsigned char)(uniform(0, 256));
            ((unsigned char *)data.data())[i] = (unsigned char)x;
        } else if (!is_float) {
            x = store_int(dt, data.data(), i, floor(uniform(is_signed ? -70 : 0, is_signed ? 71 : 121)));
        } else {
            x = i % 97 == 0 ? cr_hist_edge(p, (int)(i % (bins + 1))) : uniform(-1.2, 1.2);
            if (i % 1009 == 0)
                x = NAN;
            if (dt == CR_DT_F32) {
                ((float *)data.data())[i] = (float)x;
                x = (float)x;
            } else {
                ((double *)data.data())[i] = x;
            }
        }
        int b = cr_hist_bin(x, p);
        if (b >= 0)
            want[b]++;
    }
    cr_task t = {};
    t.op = CR_OP_HISTOGRAM;
    t.dtype = dt;
    t.kernel = k;
    t.u.hist = {count, data.data(), bins, lo, hi, got.data()};
    char what[96], err[256] = "";
    snprintf(what, sizeof what, "histogram %s %s", k->name, cr_dtype_name(dt));
    cr_status st = run(&t, NULL, err);
    expect(st == CR_OK && got == want, what, err);
}

static void test_every_kernel(void)
{
    size_t n = 0;
    const cr_kernel *list = cr_kernels(B, &n);
    expect(n == 24, "kernel list has 24 kernels");
    for (size_t i = 0; i < n; i++)
        for (int d = 0; d < CR_DT_COUNT; d++) {
            if (!(list[i].dtypes & CR_DT_BIT(d)))
                continue;
            if (list[i].op == CR_OP_GEMM)
                test_gemm(&list[i], (cr_dtype)d);
            else if (list[i].op == CR_OP_ATA)
                test_ata(&list[i], (cr_dtype)d);
            else
                test_hist(&list[i], (cr_dtype)d);
        }
}

/* A 200000² float AᵀA (160 GB) fits no device: its A is tiny, and nothing is written. */
/* An AᵀA whose 200000² output no device holds (160 GB). */
static cr_task too_big_task(void)
{
    static float a[200000];
    cr_task t = {};
    t.op = CR_OP_ATA;
    t.dtype = CR_DT_F32;
    t.kernel = K(t.op, "symtile");
    t.u.ata = {1, 200000, false, a, (void *)a};
    return t;
}

static void test_out_of_memory(void)
{
    cr_task t = too_big_task();
    char err[256] = "";
    cr_status st = run(&t, NULL, err);
    expect(st == CR_E_NOMEM_DEVICE, "too large a task is CR_E_NOMEM_DEVICE", err);
    printf("  (message: %s)\n", err);
    expect(B->task_device_bytes(&t) > 100000000000ull, "task_device_bytes counts the output");

    /* the worker is fine afterwards */
    mat m = make_mat(50, 40, CR_DT_F32);
    std::vector<char> out(40 * 40 * 4);
    t.u.ata = {50, 40, false, m.raw.data(), out.data()};
    std::vector<double> ref(40 * 40, 0.0);
    for (int p = 0; p < 50; p++)
        for (int i = 0; i < 40; i++)
            for (int j = 0; j < 40; j++)
                ref[i * 40 + j] += m.v[p * 40 + i] * m.v[p * 40 + j];
    check_run("a normal task after out-of-memory", &t, out, ref, 1e-5);
}

/* ---- inputs copied to the device while they "arrive" (host_ready; kernels/cuda/prefetch.cu) ---- */

/* A pinned block from the backend filled in uneven chunks, each announced as a body would be. */
static void *arrive(const void *src, size_t bytes, size_t announce_upto)
{
    char *p = (char *)B->host_alloc(bytes);
    if (!p)
        return NULL;
    const size_t chunk = 1300000; /* not a multiple of the prefetch's chunk */
    for (size_t at = 0; at < announce_upto; at += chunk) {
        size_t n = announce_upto - at < chunk ? announce_upto - at : chunk;
        memcpy(p + at, (const char *)src + at, n);
        B->host_ready(p, at + n, bytes);
    }
    return p;
}

static void test_prefetch_hist(void)
{
    const size_t n = (40u << 20) + 123;
    std::vector<unsigned char> data(n);
    for (size_t i = 0; i < n; i++)
        data[i] = (unsigned char)(uniform(0, 256));
    std::vector<uint64_t> want(256, 0);
    for (size_t i = 0; i < n; i++)
        want[data[i]]++;
    void *in = arrive(data.data(), n, n);
    uint64_t *counts = (uint64_t *)B->host_alloc(256 * sizeof(uint64_t));
    expect(in && counts, "pinned blocks for a 40 MiB histogram");
    if (!in || !counts)
        return;
    const char *kernels[] = {"smem-vec", "cub", "global"}; /* one buffer, several runs: compare mode */
    for (const char *k : kernels) {
        cr_task t = {};
        t.op = CR_OP_HISTOGRAM;
        t.dtype = CR_DT_U8;
        t.kernel = K(CR_OP_HISTOGRAM, k);
        t.u.hist = {(int64_t)n, in, 256, 0.0, 256.0, counts};
        cr_timings tm = {};
        char err[256] = "", what[96];
        memset(counts, 0xff, 256 * sizeof(uint64_t));
        cr_status st = run(&t, &tm, err);
        snprintf(what, sizeof what, "prefetched 40 MiB histogram, %s", k);
        expect(st == CR_OK && memcmp(counts, want.data(), 256 * sizeof(uint64_t)) == 0, what, err);
        printf("  (%s: h2d %.3f ms after the upload, kernel %.3f ms)\n", k, tm.h2d_ms, tm.kernel_ms);
    }
    B->host_free(in);
    B->host_free(counts);
}

/* C = alpha·A·B + beta·C with every input prefetched: A and B are used from the prefetch, C (the
 * output in place) is copied as usual, so a second run gives the same answer. */
static void test_prefetch_gemm(void)
{
    const int64_t m = 4096, k = 600, n = 1000;
    mat a = make_mat(m, k, CR_DT_F32), b = make_mat(k, n, CR_DT_F32), c = make_mat(m, n, CR_DT_F32);
    void *pa = arrive(a.raw.data(), a.raw.size(), a.raw.size());
    void *pb = arrive(b.raw.data(), b.raw.size(), b.raw.size());
    void *pc = arrive(c.raw.data(), c.raw.size(), c.raw.size());
    float *out = (float *)B->host_alloc(m * n * 4);
    expect(pa && pb && pc && out, "pinned blocks for a prefetched GEMM");
    if (!pa || !pb || !pc || !out)
        return;
    cr_task t = {};
    t.op = CR_OP_GEMM;
    t.dtype = CR_DT_F32;
    t.kernel = K(t.op, "cublas");
    t.u.gemm = {m, n, k, false, false, 1.5, -0.5, pa, pb, pc, out};
    for (int rep = 0; rep < 2; rep++) {
        char err[256] = "", what[96];
        memset(out, 0xff, m * n * 4);
        cr_status st = run(&t, NULL, err);
        double worst = st == CR_OK ? 0 : INFINITY;
        for (int s = 0; s < 300 && st == CR_OK; s++) { /* sampled: the full product is 2.5 G MACs */
            int64_t i = (int64_t)uniform(0, m), j = (int64_t)uniform(0, n);
            double ref = 0;
            for (int64_t p = 0; p < k; p++)
                ref += a.v[i * k + p] * b.v[p * n + j];
            ref = 1.5 * ref - 0.5 * c.v[i * n + j];
            double d = fabs(out[i * n + j] - ref) / (fabs(ref) + 1.0);
            if (!(d <= worst)) /* NaN too: an unwritten element */
                worst = d;
        }
        snprintf(what, sizeof what, "prefetched GEMM run %d (max sampled error %.2g)", rep + 1, worst);
        expect(worst < 1e-4, what, err);
    }
    B->host_free(pa);
    B->host_free(pb);
    B->host_free(pc);
    B->host_free(out);
}

/* An upload that stops half-way (a client gone): freeing its block drops the early copy; the
 * block's next user (likely the same block, from the cache) gets its own. */
static void test_prefetch_abandoned(void)
{
    const size_t n = 24u << 20;
    std::vector<unsigned char> first(n, 7), second(n);
    for (size_t i = 0; i < n; i++)
        second[i] = (unsigned char)(i * 2654435761u >> 24);
    B->host_free(arrive(first.data(), n, n / 2));
    void *in = arrive(second.data(), n, n);
    uint64_t *counts = (uint64_t *)B->host_alloc(256 * sizeof(uint64_t));
    if (!in || !counts) {
        expect(false, "pinned blocks for the abandoned-upload test");
        return;
    }
    std::vector<uint64_t> want(256, 0);
    for (size_t i = 0; i < n; i++)
        want[second[i]]++;
    cr_task t = {};
    t.op = CR_OP_HISTOGRAM;
    t.dtype = CR_DT_U8;
    t.kernel = K(t.op, "smem-vec");
    t.u.hist = {(int64_t)n, in, 256, 0.0, 256.0, counts};
    char err[256] = "";
    cr_status st = run(&t, NULL, err);
    expect(st == CR_OK && memcmp(counts, want.data(), 256 * sizeof(uint64_t)) == 0,
           "after an abandoned upload, the reused block's histogram is right", err);
    B->host_free(in);
    B->host_free(counts);
}

static void test_refusals(void)
{
    mat m = make_mat(8, 8, CR_DT_F64);
    std::vector<char> out(8 * 8 * 8);
    cr_task t = {};
    t.op = CR_OP_GEMM;
    t.dtype = CR_DT_F64;
    t.kernel = K(t.op, "dbuf");
    t.u.gemm = {8, 8, 8, false, false, 1.0, 0.0, m.raw.data(), m.raw.data(), NULL, out.data()};
    char err[256] = "";
    expect(run(&t, NULL, err) == CR_E_UNSUPPORTED, "dbuf float64 is CR_E_UNSUPPORTED", err);
    t.kernel = K(CR_OP_ATA, "symtile");
    expect(run(&t, NULL, err) == CR_E_INVALID, "another op's kernel is CR_E_INVALID", err);
    t.kernel = cr_kernel_find(&cr_backend_cpu, CR_OP_GEMM, "openblas");
    expect(run(&t, NULL, err) == CR_E_INVALID, "a cpu kernel is CR_E_INVALID on cuda", err);
    t.kernel = K(t.op, "cublas");
    volatile int cancel = 1;
    t.cancel = &cancel;
    expect(run(&t, NULL, err) == CR_E_CANCELLED, "a cancelled task is CR_E_CANCELLED", err);
    cancel = 0;
    expect(run(&t, NULL, err) == CR_OK, "the same task without cancel runs", err);
}

/* ---- batches: cr_backend.batch_launch / batch_wait (kernels/cuda/cuda_batch.cu) ---- */

/* n GEMM of one shape (the batch key) with their own inputs; checked one by one. */
struct gemm_batch {
    std::vector<mat> a, b, c;
    std::vector<std::vector<char>> out;
    std::vector<std::vector<double>> ref;
    std::vector<cr_task> t;
    std::vector<cr_task *> tp;
};

static void make_gemm_batch(gemm_batch &g, int n, int64_t m, int64_t nn, int64_t kk, bool ta, bool with_c,
                            cr_dtype dt, cr_precision prec)
{
    const cr_kernel *row = K(CR_OP_GEMM, prec == CR_PREC_TF32 ? "cublas-tf32" : "cublas");
    g.t.resize(n);
    for (int i = 0; i < n; i++) {
        g.a.push_back(make_mat(ta ? kk : m, ta ? m : kk, dt));
        g.b.push_back(make_mat(kk, nn, dt));
        g.c.push_back(make_mat(m, nn, dt));
        std::vector<double> ref(m * nn);
        for (int64_t r = 0; r < m; r++)
            for (int64_t j = 0; j < nn; j++) {
                double s = 0;
                for (int64_t p = 0; p < kk; p++)
                    s += g.a[i].v[ta ? p * m + r : r * kk + p] * g.b[i].v[p * nn + j];
                ref[r * nn + j] = 2.0 * s + (with_c ? 0.5 * g.c[i].v[r * nn + j] : 0.0);
            }
        g.ref.push_back(ref);
        g.out.emplace_back(m * nn * cr_dtype_size(dt), (char)0xff);
    }
    for (int i = 0; i < n; i++) {
        cr_task &t = g.t[i];
        t = {};
        t.op = CR_OP_GEMM;
        t.dtype = dt;
        t.precision = prec;
        t.kernel = row;
        t.u.gemm = {m, nn, kk, ta, false, 2.0, 0.5, g.a[i].raw.data(), g.b[i].raw.data(),
                    with_c ? g.c[i].raw.data() : NULL, g.out[i].data()};
        g.tp.push_back(&t);
    }
}

static void check_gemm_batch(const char *what, gemm_batch &g, const cr_status *st, double tol)
{
    for (size_t i = 0; i < g.t.size(); i++) {
        char detail[160];
        double e = rel_error(g.out[i], g.ref[i], g.t[i].dtype);
        snprintf(detail, sizeof detail, "job %zu: status %s, rel error %.3g", i, cr_status_name(st[i]), e);
        expect(st[i] == CR_OK && e <= tol, what, detail);
    }
}

static void test_batches_gemm(void)
{
    struct { int n; int64_t m, nn, kk; bool ta, c; cr_dtype dt; cr_precision prec; } cases[] = {
        {32, 64, 64, 64, false, false, CR_DT_F32, CR_PREC_DEFAULT},
        {7, 17, 5, 33, true, true, CR_DT_F32, CR_PREC_DEFAULT},
        {1, 9, 9, 9, false, true, CR_DT_F64, CR_PREC_DEFAULT},
        {16, 16, 16, 16, false, false, CR_DT_F64, CR_PREC_DEFAULT},
        {5, 31, 29, 47, true, false, CR_DT_F32, CR_PREC_TF32},
    };
    for (auto &c : cases) {
        gemm_batch g;
        make_gemm_batch(g, c.n, c.m, c.nn, c.kk, c.ta, c.c, c.dt, c.prec);
        std::vector<cr_status> st(c.n, CR_E_INTERNAL);
        std::vector<cr_timings> tm(c.n);
        char err[256] = "", what[128];
        snprintf(what, sizeof what, "batch of %d gemm %lldx%lldx%lld ta=%d c=%d %s %s", c.n, (long long)c.m,
                 (long long)c.nn, (long long)c.kk, c.ta, c.c, cr_dtype_name(c.dt),
                 c.prec == CR_PREC_TF32 ? "tf32" : "fp32");
        expect(B->batch_launch(W, 0, g.tp.data(), c.n, st.data(), err, sizeof err) == CR_OK, what, err);
        B->batch_wait(W, 0, st.data(), tm.data(), err, sizeof err);
        double tol = c.prec == CR_PREC_TF32 ? 5e-3 : c.dt == CR_DT_F32 ? 1e-5 : 1e-12;
        check_gemm_batch(what, g, st.data(), tol);
        expect(tm[0].device[0] && tm[0].kernel_ms >= 0 && tm[c.n - 1].kernel_ms == tm[0].kernel_ms,
               "a batch's jobs share its timings");
    }
}

/* Two lanes in flight at once: the second batch launched before the first is waited for. */
static void test_batches_two_lanes(void)
{
    gemm_batch g0, g1;
    make_gemm_batch(g0, 12, 48, 40, 56, false, true, CR_DT_F32, CR_PREC_DEFAULT);
    make_gemm_batch(g1, 20, 48, 40, 56, false, false, CR_DT_F32, CR_PREC_DEFAULT);
    std::vector<cr_status> s0(12), s1(20);
    std::vector<cr_timings> t0(12), t1(20);
    char err[256] = "";
    expect(B->lanes >= 2, "two lanes");
    expect(B->batch_launch(W, 0, g0.tp.data(), 12, s0.data(), err, sizeof err) == CR_OK, "lane 0 launch", err);
    expect(B->batch_launch(W, 1, g1.tp.data(), 20, s1.data(), err, sizeof err) == CR_OK, "lane 1 launch", err);
    B->batch_wait(W, 0, s0.data(), t0.data(), err, sizeof err);
    B->batch_wait(W, 1, s1.data(), t1.data(), err, sizeof err);
    check_gemm_batch("two lanes: lane 0", g0, s0.data(), 1e-5);
    check_gemm_batch("two lanes: lane 1", g1, s1.data(), 1e-5);
    /* the worker's own stream works beside the lanes' */
    test_gemm(K(CR_OP_GEMM, "cublas"), CR_DT_F32);
}

/* Tasks alone on lanes (run_launch / run_wait): one in flight on every lane at once, each with
 * its own kernel, waited for in launch order, then a batch beside them; twice, so lanes are
 * reused. In the second round lane 0's task has its operands and output in pinned memory (no
 * staging), and a task too big for the device is refused at launch with its lane left free. */
static void test_run_lanes(void)
{
    const char *rows[] = {"dbuf", "cublas", "vec", "blocktile"};
    char err[256] = "";
    expect(B->lanes >= 3 && B->run_launch && B->run_wait, "three lanes that take tasks alone");
    for (int round = 0; round < 2; round++) {
        gemm_batch g;
        int n = B->lanes;
        make_gemm_batch(g, n, 97, 83 + round, 71 + 60 * round, round == 1, round == 0, CR_DT_F32, CR_PREC_DEFAULT);
        size_t a_bytes = g.a[0].raw.size(), b_bytes = g.b[0].raw.size(), c_bytes = g.out[0].size();
        void *pa = NULL, *pb = NULL, *pc = NULL;
        if (round == 1) {
            pa = B->host_alloc(a_bytes), pb = B->host_alloc(b_bytes), pc = B->host_alloc(c_bytes);
            expect(pa && pb && pc, "pinned operands");
            memcpy(pa, g.a[0].raw.data(), a_bytes);
            memcpy(pb, g.b[0].raw.data(), b_bytes);
            memset(pc, 0xff, c_bytes);
            g.t[0].u.gemm.a = pa, g.t[0].u.gemm.b = pb, g.t[0].u.gemm.c_out = pc;
            cr_task huge = too_big_task();
            expect(B->run_launch(W, 0, &huge, err, sizeof err) == CR_E_NOMEM_DEVICE,
                   "a task too big for the device is refused at launch", err);
        }
        for (int l = 0; l < n; l++) {
            g.t[l].kernel = K(CR_OP_GEMM, rows[(l + round) % 4]);
            expect(B->run_launch(W, l, &g.t[l], err, sizeof err) == CR_OK, "run_launch", err);
        }
        gemm_batch h;
        make_gemm_batch(h, 5, 30, 20, 10, false, true, CR_DT_F32, CR_PREC_DEFAULT);
        std::vector<cr_status> st(n), hs(5);
        std::vector<cr_timings> ht(5);
        for (int l = 0; l < n; l++) {
            cr_timings tm = {};
            st[l] = B->run_wait(W, l, &tm, err, sizeof err);
            expect(st[l] == CR_OK && tm.device[0] && tm.kernel_ms > 0, "run_wait: done, with timings", err);
            if (l == 0) /* lane 0 is free again: a batch while the others still run */
                expect(B->batch_launch(W, 0, h.tp.data(), 5, hs.data(), err, sizeof err) == CR_OK,
                       "a batch on a lane a task alone left", err);
        }
        B->batch_wait(W, 0, hs.data(), ht.data(), err, sizeof err);
        check_gemm_batch("a batch after tasks alone", h, hs.data(), 1e-5);
        if (pc)
            memcpy(g.out[0].data(), pc, c_bytes);
        check_gemm_batch(round ? "tasks alone on lanes, pinned lane 0" : "tasks alone on lanes", g, st.data(), 1e-5);
        B->host_free(pa), B->host_free(pb), B->host_free(pc);
    }
}

/* Pinned staging is bounded and counted: a pageable 1 MiB histogram leaves the worker's staging
 * kept (and reported), a pageable 80 MiB one, past the 4 MiB a stream keeps, is staged in a
 * pool block that goes back to the pool's cache when the task is done, so staging does not grow
 * past what the worker's streams keep; host_trim then gives the cache back. */
static void test_staging_bounded(void)
{
    const size_t MiB = 1 << 20, sizes[] = {MiB + 7, 80 * MiB + 3};
    expect(B->host_usage != NULL && B->device_pool_usage != NULL && B->device_trim != NULL,
           "host_usage reports staging, device_pool_usage the pool");
    for (size_t n : sizes) {
        std::vector<unsigned char> data(n);
        for (size_t i = 0; i < n; i++)
            data[i] = (unsigned char)(i * 2654435761u >> 24);
        std::vector<uint64_t> want(256, 0), got(256, 7);
        for (size_t i = 0; i < n; i++)
            want[data[i]]++;
        cr_task t = {};
        t.op = CR_OP_HISTOGRAM;
        t.dtype = CR_DT_U8;
        t.kernel = K(CR_OP_HISTOGRAM, "smem-vec");
        t.u.hist = {(int64_t)n, data.data(), 256, 0.0, 256.0, got.data()};
        uint64_t use0, cache0, stage0, use, cache, stage;
        B->host_usage(&use0, &cache0, &stage0);
        char err[256] = "", what[96];
        cr_status st = run(&t, NULL, err);
        B->host_usage(&use, &cache, &stage);
        snprintf(what, sizeof what, "pageable %zu-byte histogram through staging", n);
        expect(st == CR_OK && got == want, what, err);
        snprintf(what, sizeof what, "staging %llu bytes after %zu: kept, counted, at most 4 x 4 MiB a worker",
                 (unsigned long long)stage, n);
        expect(stage >= (n < 4 * MiB ? n : stage0) && stage <= 4 * 4 * MiB, what, "");
        if (n > 4 * MiB) {
            expect(stage == stage0 && use == use0 && cache >= cache0 + n,
                   "a task past 4 MiB staged in a pool block, back in the cache after", "");
            B->host_trim();
            B->host_usage(&use, &cache, &stage);
            expect(cache == 0 && stage == stage0, "host_trim gives the cache back, not the kept staging", "");
            /* its 80 MiB of device input was past a stream's own buffer: from the pool, kept there
             * (under CRUNCHD_DEVICE_CACHE_MB) until device_trim */
            uint64_t dev_use, dev_cache, dev_use2, dev_cache2;
            B->device_pool_usage(0, &dev_use, &dev_cache);
            char got[160];
            snprintf(got, sizeof got, "in use %llu, cached %llu", (unsigned long long)dev_use,
                     (unsigned long long)dev_cache);
            expect(dev_cache >= n, "the device buffer is back in the pool's cache", got);
            B->device_trim();
            B->device_pool_usage(0, &dev_use2, &dev_cache2);
            snprintf(got, sizeof got, "in use %llu -> %llu, cached %llu -> %llu", (unsigned long long)dev_use,
                     (unsigned long long)dev_use2, (unsigned long long)dev_cache, (unsigned long long)dev_cache2);
            /* the pool reserves in chunks: one that a stream's kept buffer shares stays */
            expect(dev_cache2 < n && dev_use2 == dev_use, "device_trim gives the cache back, not what is in use", got);
            printf("device pool: %s\n", got);
        }
    }
}

static void test_batches_ata(void)
{
    for (int trans = 0; trans < 2; trans++) {
        const int n = 9;
        const int64_t m = 21, c = 13;
        std::vector<mat> a;
        std::vector<std::vector<char>> stored, out;
        std::vector<std::vector<double>> ref;
        std::vector<cr_task> t(n);
        std::vector<cr_task *> tp;
        for (int i = 0; i < n; i++) {
            a.push_back(make_mat(m, c, CR_DT_F64));
            stored.push_back(a[i].raw);
            if (trans)
                for (int64_t r = 0; r < m; r++)
                    for (int64_t k = 0; k < c; k++)
                        memcpy(&stored[i][(k * m + r) * 8], &a[i].raw[(r * c + k) * 8], 8);
            std::vector<double> rf(c * c, 0.0);
            for (int64_t p = 0; p < m; p++)
                for (int64_t x = 0; x < c; x++)
                    for (int64_t y = 0; y < c; y++)
                        rf[x * c + y] += a[i].v[p * c + x] * a[i].v[p * c + y];
            ref.push_back(rf);
            out.emplace_back(c * c * 8, (char)0xff);
        }
        for (int i = 0; i < n; i++) {
            t[i] = {};
            t[i].op = CR_OP_ATA;
            t[i].dtype = CR_DT_F64;
            t[i].kernel = K(CR_OP_ATA, "cublas-batched");
            t[i].u.ata = {m, c, (bool)trans, stored[i].data(), out[i].data()};
            tp.push_back(&t[i]);
        }
        std::vector<cr_status> st(n);
        std::vector<cr_timings> tm(n);
        char err[256] = "";
        B->batch_launch(W, 1, tp.data(), n, st.data(), err, sizeof err);
        B->batch_wait(W, 1, st.data(), tm.data(), err, sizeof err);
        for (int i = 0; i < n; i++) {
            char detail[320];
            double e = rel_error(out[i], ref[i], CR_DT_F64);
            snprintf(detail, sizeof detail, "trans=%d job %d: %s, rel error %.3g %s", trans, i,
                     cr_status_name(st[i]), e, err);
            expect(st[i] == CR_OK && e <= 1e-12, "batch of ata float64", detail);
        }
    }
}

/* Histograms of different lengths (0 and 1 included) and ranges, byte-identity ones among them,
 * in one launch. */
static void test_batches_hist(cr_dtype dt)
{
    const int n = 11, bins = dt == CR_DT_U8 ? 256 : 37;
    std::vector<std::vector<char>> data;
    std::vector<std::vector<uint64_t>> want, got;
    std::vector<cr_task> t(n);
    std::vector<cr_task *> tp;
    for (int i = 0; i < n; i++) {
        int64_t count = i == 0 ? 0 : i == 1 ? 1 : 997 * i + 13;
        bool identity = dt == CR_DT_U8 && i % 2;
        double lo = dt == CR_DT_U8 ? (identity ? 0 : 10) : -1.0 - 0.1 * i;
        double hi = dt == CR_DT_U8 ? (identity ? 256 : 200) : 1.0 + 0.05 * i;
        cr_hist_dev hd = {count, NULL, bins, lo, hi, NULL};
        cr_hist_params p = {};
        cr_hist_make_params(&hd, dt, &p);
        data.emplace_back(count * cr_dtype_size(dt) + 1);
        want.emplace_back(bins, 0);
        got.emplace_back(bins, 7);
        for (int64_t k = 0; k < count; k++) {
            double x = dt == CR_DT_U8 ? (double)(unsigned char)uniform(0, 256) : uniform(-1.5, 1.5);
            if (dt == CR_DT_U8)
                ((unsigned char *)data[i].data())[k] = (unsigned char)x;
            else if (dt == CR_DT_F32)
                ((float *)data[i].data())[k] = (float)x, x = (float)x;
            else
                ((double *)data[i].data())[k] = x;
            int b = identity ? (int)x : cr_hist_bin(x, p);
            if (b >= 0)
                want[i][b]++;
        }
        t[i] = {};
        t[i].op = CR_OP_HISTOGRAM;
        t[i].dtype = dt;
        t[i].kernel = K(CR_OP_HISTOGRAM, "smem-batched");
        t[i].u.hist = {count, data[i].data(), bins, lo, hi, got[i].data()};
    }
    for (auto &x : t)
        tp.push_back(&x);
    std::vector<cr_status> st(n);
    std::vector<cr_timings> tm(n);
    char err[256] = "", what[64];
    snprintf(what, sizeof what, "batch of histograms %s", cr_dtype_name(dt));
    B->batch_launch(W, 0, tp.data(), n, st.data(), err, sizeof err);
    B->batch_wait(W, 0, st.data(), tm.data(), err, sizeof err);
    for (int i = 0; i < n; i++) {
        char detail[320];
        snprintf(detail, sizeof detail, "job %d (%lld values): %s %s", i, (long long)t[i].u.hist.count,
                 cr_status_name(st[i]), err);
        expect(st[i] == CR_OK && got[i] == want[i], what, detail);
    }
}

static bool pinned_host(const void *p)
{
    cudaPointerAttributes a;
    bool host = cudaPointerGetAttributes(&a, p) == cudaSuccess && a.type == cudaMemoryTypeHost;
    cudaGetLastError();
    return host;
}

/* A registered shared-memory region as the server maps it (a MAP_SHARED mapping of a /dev/shm
 * object): host_register locks it in place, any address inside then counts as pinned (what
 * cuda_run.cu's is_pinned asks), a GEMM reads its inputs from it and writes its result into it,
 * and host_unregister unlocks it before it is unmapped. */
/* The pinned block cache: blocks reused by size (never one more than twice the need), found
 * again by pointer after others came and went (its hash's deletions), its usage counters back
 * where they started, and eviction past the cap (2 GiB) leaving the rest findable. */
static void test_pinned_pool(void)
{
    const size_t MiB = 1 << 20;
    uint64_t use0, cache0, use, cache;
    cr_pinned_release_all(); /* what earlier tests cached would be picked first */
    cr_pinned_usage(&use0, &cache0);
    expect(cache0 == 0, "pinned pool: empty after release_all");
    char *one = (char *)cr_pinned_alloc(1);
    expect(one != NULL, "pinned pool: 1 byte gives a block");
    memset(one, 1, MiB); /* rounded up to 1 MiB, all of it writable */
    cr_pinned_free(one);
    expect(cr_pinned_alloc(MiB) == one, "pinned pool: a freed 1 MiB block is reused for 1 MiB");
    char *three = (char *)cr_pinned_alloc(3 * MiB - 5);
    cr_pinned_free(three);
    char *other = (char *)cr_pinned_alloc(MiB);
    expect(other != three && other != one, "pinned pool: 1 MiB does not take a cached 3 MiB block");
    expect(cr_pinned_alloc(2 * MiB) == three, "pinned pool: 2 MiB takes the cached 3 MiB block");
    cr_pinned_free(three);
    cr_pinned_free(other);
    cr_pinned_free(one);
    cr_pinned_free((void *)&use0); /* not the pool's: ignored */

    std::vector<char *> held;
    for (int i = 0; i < 150; i++)
        held.push_back((char *)cr_pinned_alloc((size_t)(1 + i % 5) * MiB));
    bool all = true;
    for (size_t i = 0; i < held.size(); i++)
        all = all && held[i] != NULL;
    expect(all, "pinned pool: 150 blocks of 1-5 MiB");
    cr_pinned_usage(&use, &cache);
    expect(use >= use0 + 450 * MiB, "pinned pool: in use counts the held blocks");
    for (size_t i = 0; i < held.size(); i += 2) /* every other one back, then the rest */
        cr_pinned_free(held[i]);
    for (size_t i = 1; i < held.size(); i += 2)
        cr_pinned_free(held[i]);
    cr_pinned_usage(&use, &cache);
    expect(use == use0, "pinned pool: in use back to where it started");
    for (size_t i = 0; i < held.size(); i++) /* all from the cache now: nothing new pinned */
        held[i] = (char *)cr_pinned_alloc((size_t)(1 + i % 5) * MiB);
    uint64_t cache_after;
    cr_pinned_usage(&use, &cache_after);
    expect(use - use0 == cache - cache_after, "pinned pool: the same sizes come back from the cache");
    for (char *p : held)
        cr_pinned_free(p);

    std::vector<char *> big;
    for (int i = 0; i < 9; i++)
        big.push_back((char *)cr_pinned_alloc(300 * MiB));
    for (char *p : big)
        cr_pinned_free(p);
    cr_pinned_usage(&use, &cache);
    expect(cache <= 2048 * MiB && use == use0, "pinned pool: eviction keeps the cache under its cap");
    char *again = (char *)cr_pinned_alloc(MiB);
    expect(again != NULL, "pinned pool: serves after eviction");
    again[MiB - 1] = 1;
    cr_pinned_free(again);
    cr_pinned_usage(&use, &cache);
    expect(use == use0, "pinned pool: in use back to where it started after eviction");
}

static void test_host_register(void)
{
    const int64_t m = 300, n = 200, kk = 150;
    char key[64];
    snprintf(key, sizeof key, "/crunchd-gpu-test-%d", (int)getpid());
    size_t bytes = (size_t)(m * kk + kk * n + m * n) * sizeof(float) + 4096;
    int fd = shm_open(key, O_CREAT | O_EXCL | O_RDWR, 0600);
    bool ok = fd >= 0 && ftruncate(fd, (off_t)bytes) == 0;
    char *map = ok ? (char *)mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : NULL;
    if (fd >= 0) {
        close(fd);
        shm_unlink(key);
    }
    expect(ok && map && map != MAP_FAILED, "a shared-memory mapping");
    if (!ok || !map || map == MAP_FAILED)
        return;
    expect(!pinned_host(map + 4096), "a fresh mapping is not pinned");
    expect(B->host_register && B->host_register(map, bytes), "host_register locks a shared-memory mapping");
    expect(pinned_host(map) && pinned_host(map + 4096 + 7), "any address inside the mapping counts as pinned");
    mat a = make_mat(m, kk, CR_DT_F32), b = make_mat(kk, n, CR_DT_F32);
    float *ha = (float *)(map + 4096), *hb = ha + m * kk, *hc = hb + kk * n;
    memcpy(ha, a.raw.data(), a.raw.size());
    memcpy(hb, b.raw.data(), b.raw.size());
    memset(hc, 0xff, (size_t)(m * n) * sizeof(float));
    std::vector<double> ref(m * n, 0.0);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++)
            for (int64_t p = 0; p < kk; p++)
                ref[i * n + j] += a.v[i * kk + p] * b.v[p * n + j];
    cr_task t = {};
    t.op = CR_OP_GEMM;
    t.dtype = CR_DT_F32;
    t.kernel = K(CR_OP_GEMM, "cublas");
    t.u.gemm = {m, n, kk, false, false, 1.0, 0.0, ha, hb, NULL, hc};
    char err[256] = "";
    cr_status st = run(&t, NULL, err);
    std::vector<char> out((char *)hc, (char *)(hc + m * n));
    char detail[300];
    snprintf(detail, sizeof detail, "status %s %s, rel error %.3g", cr_status_name(st), err,
             rel_error(out, ref, CR_DT_F32));
    expect(st == CR_OK && rel_error(out, ref, CR_DT_F32) <= 1e-5, "gemm from and into a registered mapping", detail);
    B->host_unregister(map);
    expect(!pinned_host(map + 4096), "host_unregister unlocks it");
    munmap(map, bytes);
}

/* Device memory as a client's CUDA shared memory lands in a task (ipc_open gives device
 * pointers): a GEMM with every placement of a, b, c_in and the output (host or device), each
 * against the host reference; c in device memory stays unchanged (the kernel updates a copy);
 * AᵀA and a uint8 histogram read device data; a tensor on a device the worker does not own is
 * refused; ipc_open refuses a handle that is not one. */
static void *on_device(const void *host, size_t bytes)
{
    void *d = NULL;
    if (cudaMalloc(&d, bytes) != cudaSuccess)
        return NULL;
    if (host)
        cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice);
    else
        cudaMemset(d, 0xff, bytes); /* NaN poison */
    return d;
}

static std::vector<char> from_device(const void *d, size_t bytes)
{
    std::vector<char> h(bytes);
    cudaMemcpy(h.data(), d, bytes, cudaMemcpyDeviceToHost);
    return h;
}

static void test_device_tensors_gemm(void)
{
    const int64_t m = 77, n = 53, kk = 91;
    const double alpha = 1.25, beta = -0.75;
    mat a = make_mat(m, kk, CR_DT_F32), b = make_mat(kk, n, CR_DT_F32), c = make_mat(m, n, CR_DT_F32);
    std::vector<double> ref(m * n);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double acc = 0;
            for (int64_t p = 0; p < kk; p++)
                acc += a.v[i * kk + p] * b.v[p * n + j];
            ref[i * n + j] = alpha * acc + beta * c.v[i * n + j];
        }
    size_t out_bytes = (size_t)(m * n) * sizeof(float);
    for (int where = 0; where < 16; where++) { /* bit 0: a, 1: b, 2: c, 3: the output on the device */
        void *da = where & 1 ? on_device(a.raw.data(), a.raw.size()) : NULL;
        void *db = where & 2 ? on_device(b.raw.data(), b.raw.size()) : NULL;
        void *dc = where & 4 ? on_device(c.raw.data(), c.raw.size()) : NULL;
        void *dout = where & 8 ? on_device(NULL, out_bytes) : NULL;
        std::vector<char> hout(out_bytes, (char)0xff);
        cr_task t = {};
        t.op = CR_OP_GEMM;
        t.dtype = CR_DT_F32;
        t.kernel = K(CR_OP_GEMM, where & 1 ? "dbuf" : "cublas");
        t.u.gemm = {m, n, kk, false, false, alpha, beta, da ? da : a.raw.data(), db ? db : b.raw.data(),
                    dc ? dc : c.raw.data(), dout ? dout : hout.data()};
        char err[256] = "", what[96], detail[320];
        cr_timings tm = {};
        cr_status st = run(&t, &tm, err);
        std::vector<char> out = dout ? from_device(dout, out_bytes) : hout;
        double e = rel_error(out, ref, CR_DT_F32);
        bool c_kept = !dc || from_device(dc, c.raw.size()) == c.raw;
        snprintf(what, sizeof what, "gemm %s with a%s b%s c%s out%s on the device", t.kernel->name,
                 where & 1 ? "+" : "-", where & 2 ? "+" : "-", where & 4 ? "+" : "-", where & 8 ? "+" : "-");
        snprintf(detail, sizeof detail, "status %s %s, rel error %.3g, c kept %d, d2h %.3f ms", cr_status_name(st),
                 err, e, c_kept, tm.d2h_ms);
        expect(st == CR_OK && e <= 1e-5 && c_kept && (!dout || tm.d2h_ms < 0.05), what, detail);
        cudaFree(da);
        cudaFree(db);
        cudaFree(dc);
        cudaFree(dout);
    }
}

static void test_device_tensors_ata_hist(void)
{
    const int64_t m = 129, n = 65;
    mat a = make_mat(m, n, CR_DT_F32);
    std::vector<double> ref(n * n, 0.0);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++)
            for (int64_t p = 0; p < m; p++)
                ref[i * n + j] += a.v[p * n + i] * a.v[p * n + j];
    void *da = on_device(a.raw.data(), a.raw.size());
    std::vector<char> out((size_t)(n * n) * sizeof(float));
    cr_task t = {};
    t.op = CR_OP_ATA;
    t.dtype = CR_DT_F32;
    t.kernel = K(CR_OP_ATA, "symtile");
    t.u.ata = {m, n, false, da, out.data()};
    check_run("ata symtile from device memory", &t, out, ref, 1e-5);
    cudaFree(da);

    const int64_t count = 100003;
    std::vector<unsigned char> data(count);
    std::vector<uint64_t> want(256, 0);
    for (int64_t i = 0; i < count; i++)
        want[data[i] = (unsigned char)(uniform(0, 256))]++;
    void *dd = on_device(data.data(), count), *dcounts = on_device(NULL, 256 * 8);
    t = {};
    t.op = CR_OP_HISTOGRAM;
    t.dtype = CR_DT_U8;
    t.kernel = K(CR_OP_HISTOGRAM, "smem-vec");
    t.u.hist = {count, dd, 256, 0.0, 256.0, (uint64_t *)dcounts};
    char err[256] = "";
    cr_status st = run(&t, NULL, err);
    std::vector<char> got = from_device(dcounts, 256 * 8);
    expect(st == CR_OK && memcmp(got.data(), want.data(), 256 * 8) == 0,
           "uint8 histogram from and into device memory", err);
    cudaFree(dd);
    cudaFree(dcounts);
}

static void test_device_tensors_refused(void)
{
    char err[256] = "";
    void *p = NULL;
    unsigned char junk[64] = {1, 2, 3};
    expect(B->ipc_open && B->ipc_open(junk, sizeof junk, 0, 64, &p, err, sizeof err) == CR_E_INVALID && !p,
           "ipc_open refuses a handle that is not one", err);
    expect(B->ipc_open(junk, 10, 0, 64, &p, err, sizeof err) == CR_E_INVALID, "ipc_open refuses a short handle", err);
    int devices = 0;
    cudaGetDeviceCount(&devices);
    if (devices < 2)
        return;
    cudaSetDevice(1); /* a tensor on device 1 for a worker of device 0 */
    mat a = make_mat(8, 8, CR_DT_F32);
    void *da = on_device(a.raw.data(), a.raw.size());
    cudaSetDevice(0);
    std::vector<char> out(8 * 8 * sizeof(float));
    cr_task t = {};
    t.op = CR_OP_ATA;
    t.dtype = CR_DT_F32;
    t.kernel = K(CR_OP_ATA, "cublas");
    t.u.ata = {8, 8, false, da, out.data()};
    expect(run(&t, NULL, err) == CR_E_INVALID, "a tensor in another device's memory is refused", err);
    cudaFree(da);
}

int main(void)
{
    char err[256] = "";
    cr_backend_opts opts = {};
    opts.workers_per_device = 2;
    opts.wait = CR_WAIT_YIELD;
    if (B->init(&opts, err, sizeof err) != CR_OK) {
        printf("init: %s\nbackend: 0 passed, 1 failed\n", err);
        return 1;
    }
    cr_device_info info;
    expect(B->device_count() >= 1 && B->device_info(0, &info) == CR_OK && info.memory_total > 0,
           "a device with memory");
    printf("device 0: %s, %d SMs, %.1f GiB\n", info.name, info.multiprocessors, info.memory_total / 1073741824.0);
    if (B->worker_create(0, &W, err, sizeof err) != CR_OK) {
        printf("worker: %s\nbackend: %d passed, %d failed\n", err, passed, failed + 1);
        return 1;
    }
    test_every_kernel();
    test_out_of_memory();
    test_refusals();
    test_prefetch_hist();
    test_prefetch_gemm();
    test_prefetch_abandoned();
    test_batches_gemm();
    test_batches_two_lanes();
    test_run_lanes();
    test_staging_bounded();
    test_batches_ata();
    test_batches_hist(CR_DT_U8);
    test_batches_hist(CR_DT_F32);
    test_batches_hist(CR_DT_F64);
    test_host_register();
    test_pinned_pool();
    test_device_tensors_gemm();
    test_device_tensors_ata_hist();
    test_device_tensors_refused();
    B->worker_destroy(W);
    B->shutdown();
    printf("backend: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
