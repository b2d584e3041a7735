/* GPU tests of the cuda backend through its public table (cr_backend_cuda): every kernel of its
 * list on every dtype it claims, GEMM with all trans flags, alpha/beta and a C input, AᵀA on
 * stored A and Aᵀ, histograms on bytes and floats; then the failure paths: a task larger than
 * the device (CR_E_NOMEM_DEVICE, and the worker still works), cancel, unknown kernel, dtype a
 * kernel lacks; inputs copied to the device while they arrive (host_ready), used by several
 * runs, and an upload abandoned half-way. Ends with "backend: N passed, M failed". */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "kernels/cuda/ata_hist_kernels.h"
#include "kernels/cuda/hist_bin.cuh"
#include "kernels/registry.h"

static int passed, failed;

/* A cuda kernel by op and name, as the engine resolves it. */
static const cr_kernel *K(cr_op op, const char *name) { return cr_kernel_find(&cr_backend_cuda, op, name); }

static void expect(bool ok, const char *what, const char *detail = "")
{
    if (ok) {
        passed++;
    } else {
        failed++;
        printf("FAIL %s %s\n", what, detail);
    }
}

static uint64_t rng_state = 0x243f6a8885a308d3ull;
static double uniform(double lo, double hi)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return lo + (hi - lo) * (double)(rng_state >> 11) / 9007199254740992.0;
}

static const cr_backend *B = &cr_backend_cuda;
static cr_worker *W;

/* A matrix of random values exact in float, stored as dt. */
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
        if (dt == CR_DT_F32)
            ((float *)m.raw.data())[i] = (float)m.v[i];
        else
            ((double *)m.raw.data())[i] = m.v[i];
    }
    return m;
}

static double value_at(const std::vector<char> &raw, int64_t i, cr_dtype dt)
{
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

static void test_hist(const cr_kernel *k, cr_dtype dt)
{
    const int64_t count = 1000003;
    std::vector<char> data(count * cr_dtype_size(dt));
    int bins = dt == CR_DT_U8 ? 256 : 100;
    double lo = dt == CR_DT_U8 ? 0 : -1.0, hi = dt == CR_DT_U8 ? 256 : 1.0;
    cr_hist_dev hd = {count, NULL, bins, lo, hi, NULL};
    cr_hist_params p = {};
    cr_hist_make_params(&hd, dt, &p);
    std::vector<uint64_t> want(bins, 0), got(bins, 7);
    for (int64_t i = 0; i < count; i++) {
        double x;
        if (dt == CR_DT_U8) {
            x = (double)(unsigned char)(uniform(0, 256));
            ((unsigned char *)data.data())[i] = (unsigned char)x;
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
    expect(n == 16, "kernel list has 16 kernels");
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
static void test_out_of_memory(void)
{
    static float a[200000];
    cr_task t = {};
    t.op = CR_OP_ATA;
    t.dtype = CR_DT_F32;
    t.kernel = K(t.op, "symtile");
    t.u.ata = {1, 200000, false, a, (void *)a};
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

int main(void)
{
    char err[256] = "";
    if (B->init(2, err, sizeof err) != CR_OK) {
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
    B->worker_destroy(W);
    B->shutdown();
    printf("backend: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
