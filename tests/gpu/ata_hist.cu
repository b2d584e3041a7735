/* GPU tests of the AᵀA and histogram kernels (run on the device machine).
 * AᵀA: every kernel × F32/F64 × stored A or Aᵀ × odd, prime, tiny and tile-straddling shapes,
 * against a float64 CPU reference, element-wise within γ_m·Σ|aₖᵢaₖⱼ| (the rounding bound of an
 * m-term dot product), output poisoned with NaN first so an unwritten element fails.
 * Histograms: every kernel exact against a CPU count: lengths around the 16-byte vector,
 * unaligned starts, all-equal bytes, floats on the edges, at lo and hi, outside, NaN, and a few
 * answers taken from numpy itself; float32/float64 with many bins (4096 up to the API's limits,
 * 2^20 by default and 2^24 with --max-bins) through every path of smem-vec (hist_smem_vec.h) and
 * the smem-batched kernel run alone. Ends with "ata_hist: N passed, M failed". */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits>
#include <vector>

#include "kernels/cuda/ata_hist_kernels.h"
#include "kernels/cuda/hist_bin.cuh"
#include "kernels/cuda/hist_smem_vec.h"
#include "tools/gpu/check.cuh"

static bool cuda_ok(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return true;
    printf("FAIL %s: %s\n", what, cudaGetErrorString(e));
    failed++;
    cudaGetLastError();
    return false;
}


/* ---------------- AᵀA ---------------- */

struct ata_ref { std::vector<double> c, s; }; /* AᵀA and Σ|aₖᵢaₖⱼ| */

static ata_ref reference_ata(const std::vector<double> &a, int64_t m, int64_t n)
{
    ata_ref r;
    r.c.assign(n * n, 0.0);
    r.s.assign(n * n, 0.0);
    for (int64_t k = 0; k < m; k++) {
        const double *row = &a[k * n];
        for (int64_t i = 0; i < n; i++) {
            double ai = row[i];
            double *ci = &r.c[i * n], *si = &r.s[i * n];
            for (int64_t j = 0; j < n; j++) {
                ci[j] += ai * row[j];
                si[j] += fabs(ai * row[j]);
            }
        }
    }
    return r;
}

static size_t ata_work_bytes(const cr_ata_dev *d, cr_dtype dt, cr_ata_launcher fn); /* symtile's variants too */

template <typename T>
static void check_ata(const char *kname, cr_ata_launcher fn, int64_t m, int64_t n, bool trans,
                      const std::vector<double> &a, const ata_ref &ref)
{
    char what[160];
    snprintf(what, sizeof what, "ata %s %s m=%lld n=%lld trans=%d", kname, sizeof(T) == 4 ? "f32" : "f64",
             (long long)m, (long long)n, trans);
    cr_dtype dt = sizeof(T) == 4 ? CR_DT_F32 : CR_DT_F64;
    std::vector<T> host_a(m * n), host_c(n * n);
    for (int64_t k = 0; k < m; k++)
        for (int64_t i = 0; i < n; i++)
            host_a[trans ? i * m + k : k * n + i] = (T)a[k * n + i]; /* a is exact in T */
    T *da = NULL, *dc = NULL;
    void *work = NULL;
    cr_ata_dev d = {m, n, trans, NULL, NULL, NULL};
    size_t wb = ata_work_bytes(&d, dt, fn);
    bool ok = cuda_ok(cudaMalloc(&da, host_a.size() * sizeof(T) + 16), what) &&
              cuda_ok(cudaMalloc(&dc, host_c.size() * sizeof(T) + 16), what) &&
              (wb == 0 || (cuda_ok(cudaMalloc(&work, wb), what) && cuda_ok(cudaMemset(work, 0xff, wb), what))) &&
              cuda_ok(cudaMemcpy(da, host_a.data(), host_a.size() * sizeof(T), cudaMemcpyHostToDevice), what) &&
              cuda_ok(cudaMemset(dc, 0xff, host_c.size() * sizeof(T)), what); /* NaN poison, the scratch too */
    if (ok) {
        d.a = da;
        d.c = dc;
        d.work = work;
        ok = cuda_ok(fn(&d, dt, 0), what) && cuda_ok(cudaDeviceSynchronize(), what) &&
             cuda_ok(cudaMemcpy(host_c.data(), dc, host_c.size() * sizeof(T), cudaMemcpyDeviceToHost), what);
    }
    if (ok) {
        double eps = sizeof(T) == 4 ? 5.96e-8 : 1.11e-16, worst = 0;
        int64_t bad = 0;
        for (int64_t x = 0; x < n * n; x++) {
            double err = fabs((double)host_c[x] - ref.c[x]);
            double bound = 2.0 * (double)(m + 2) * eps * ref.s[x] + 1e-300;
            if (!(err <= bound))
                bad++;
            if (err / bound > worst || err != err)
                worst = err / bound;
        }
        if (bad)
            printf("  %s: %lld elements out of bound (worst err/bound %.3g)\n", what, (long long)bad, worst);
        expect(bad == 0, what);
    }
    cudaFree(da);
    cudaFree(dc);
    cudaFree(work);
}

static void test_ata(void)
{
    static const int64_t shapes[][2] = {
        {1, 1}, {7, 7}, {31, 31}, {64, 64}, {127, 127}, {128, 128}, {129, 129}, {1000, 1000},
        {1023, 1023}, {1, 129}, {129, 1}, {300, 67}, {67, 300}, {997, 131}, {131, 997}, {2, 1021},
        {0, 5}, {257, 256}, {16, 130},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t m = shapes[s][0], n = shapes[s][1];
        std::vector<double> a(m * n);
        for (auto &x : a) /* values exact in float: the reference sees the very inputs */
            x = (double)(float)uniform(-1.0, 1.0);
        ata_ref ref = reference_ata(a, m, n);
        for (int trans = 0; trans < 2; trans++) {
            check_ata<float>("basic", cr_cuda_ata_basic, m, n, trans, a, ref);
            check_ata<float>("symtile", cr_cuda_ata_symtile, m, n, trans, a, ref);
            check_ata<double>("basic", cr_cuda_ata_basic, m, n, trans, a, ref);
            check_ata<double>("symtile", cr_cuda_ata_symtile, m, n, trans, a, ref);
            check_ata<double>("dmma", cr_cuda_ata_dmma, m, n, trans, a, ref);
        }
    }
}

/* dmma (FP64 tensor cores) beyond test_ata: A and C at 8-byte (not 16-byte) aligned addresses,
 * the same result bit for bit on a second run, and NaN/Inf in A reaching exactly the rows and
 * columns of C they touch; each configuration forced through the tuning hook (ata_dmma.cu:
 * 1 = 128² tiles, 2 = 64² tiles, 3 = pairs of 64² tiles), `variant` 0 the shipped choice. */
extern "C" cudaError_t cr_cuda_ata_dmma_variant(const cr_ata_dev *t, cr_dtype dt, cudaStream_t s, int variant);

static bool dmma_run(const std::vector<double> &stored, int64_t m, int64_t n, bool trans, int a_off, int c_off,
                     std::vector<double> &out, const char *what, int variant = 0)
{
    double *da = NULL, *dc = NULL;
    cr_ata_dev d = {m, n, trans, NULL, NULL, NULL};
    std::vector<double> again(n * n);
    out.assign(n * n, 0.0);
    bool ok = cuda_ok(cudaMalloc(&da, (stored.size() + 2) * sizeof(double)), what) &&
              cuda_ok(cudaMalloc(&dc, (out.size() + 2) * sizeof(double)), what) &&
              cuda_ok(cudaMemcpy(da + a_off, stored.data(), stored.size() * sizeof(double), cudaMemcpyHostToDevice),
                      what);
    for (int run = 0; ok && run < 2; run++) {
        d.a = da + a_off;
        d.c = dc + c_off;
        std::vector<double> &dst = run ? again : out;
        ok = cuda_ok(cudaMemset(dc, 0xff, (out.size() + 2) * sizeof(double)), what) &&
             cuda_ok(cr_cuda_ata_dmma_variant(&d, CR_DT_F64, 0, variant), what) &&
             cuda_ok(cudaDeviceSynchronize(), what) &&
             cuda_ok(cudaMemcpy(dst.data(), dc + c_off, dst.size() * sizeof(double), cudaMemcpyDeviceToHost), what);
    }
    if (ok) {
        char rep[200];
        snprintf(rep, sizeof rep, "%s: bit-identical on a second run", what);
        expect(memcmp(out.data(), again.data(), out.size() * sizeof(double)) == 0, rep);
    }
    cudaFree(da);
    cudaFree(dc);
    return ok;
}

static std::vector<double> dmma_stored(const std::vector<double> &a, int64_t m, int64_t n, bool trans)
{
    std::vector<double> s(m * n);
    for (int64_t k = 0; k < m; k++)
        for (int64_t i = 0; i < n; i++)
            s[trans ? i * m + k : k * n + i] = a[k * n + i];
    return s;
}

/* AᵀA of an A (m×n) whose column i0 holds a NaN and column i1 an Inf at row k1, all else finite
 * and nonzero: the elements of C that are not where IEEE arithmetic puts them (NaN in row and
 * column i0; ±Inf in row and column i1, + on the diagonal, elsewhere the sign of the finite
 * factor; finite everywhere else). */
template <typename T>
static int64_t nonfinite_misplaced(const std::vector<T> &c, const std::vector<T> &a, int64_t n, int64_t i0,
                                   int64_t i1, int64_t k1)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            T v = c[i * n + j];
            if (i == i0 || j == i0)
                bad += !std::isnan(v);
            else if (i == i1 || j == i1)
                bad += !(std::isinf(v) && (v > 0) == (i == j || a[k1 * n + (i == i1 ? j : i)] > 0));
            else
                bad += !std::isfinite(v);
        }
    return bad;
}

static void test_ata_dmma(void)
{
    static const int64_t shapes[][2] = {{63, 63}, {65, 65}, {7, 1}, {1, 7}, {2000, 3}, {3, 2000}, {65, 2500},
                                        {129, 127}, {17, 1023}, {4, 129}, {0, 65}};
    for (auto &sh : shapes)
        for (int trans = 0; trans < 2; trans++)
            for (int off = 0; off < 2; off++) {
                int64_t m = sh[0], n = sh[1];
                std::vector<double> a(m * n);
                for (auto &x : a)
                    x = uniform(-1.0, 1.0);
                ata_ref ref = reference_ata(a, m, n);
                char what[160];
                snprintf(what, sizeof what, "ata dmma m=%lld n=%lld trans=%d %s", (long long)m, (long long)n, trans,
                         off ? "A, C 8-byte aligned" : "aligned");
                std::vector<double> c;
                if (!dmma_run(dmma_stored(a, m, n, trans), m, n, trans, off, off, c, what))
                    continue;
                int64_t bad = 0;
                for (int64_t x = 0; x < n * n; x++)
                    if (!(fabs(c[x] - ref.c[x]) <= 2.0 * (double)(m + 2) * 1.11e-16 * ref.s[x] + 1e-300))
                        bad++;
                if (bad)
                    printf("  %s: %lld elements out of bound\n", what, (long long)bad);
                expect(bad == 0, what);
            }
    /* NaN at A[k0][i0], +Inf at A[k1][i1]: row and column i0 NaN, i1's (but for i0) ±Inf */
    int64_t m = 70, n = 150, k0 = 5, i0 = 33, k1 = 66, i1 = 140;
    for (int trans = 0; trans < 2; trans++)
        for (int variant = 0; variant <= 3; variant++) {
            std::vector<double> a(m * n);
            for (auto &x : a)
                x = uniform(0.5, 1.0) * (rnd() & 1 ? 1 : -1);
            a[k0 * n + i0] = NAN;
            a[k1 * n + i1] = INFINITY;
            char what[96];
            snprintf(what, sizeof what, "ata dmma NaN/Inf propagation trans=%d variant %d", trans, variant);
            std::vector<double> c;
            if (!dmma_run(dmma_stored(a, m, n, trans), m, n, trans, 0, 0, c, what, variant))
                continue;
            expect(nonfinite_misplaced(c, a, n, i0, i1, k1) == 0, what);
        }
}

/* Each dmma configuration forced, on shapes where the pair schedule (64² tiles two by two:
 * ata_dmma.cu) has blocks missing their second tile (64-tiles per edge odd: 129, 130, 517), a
 * lone last diagonal tile (65, 129, 130, 321) or neither (1000, 2000), plus tiny and empty
 * ones (1, 7, m = 0); both layouts, 16- and 8-byte aligned A and C: within the bound,
 * bit-identical on a second run, and the pair and 64² configurations equal to the 128² one bit
 * for bit (the same k order in every one). */
static void test_ata_dmma_configs(void)
{
    static const int64_t shapes[][2] = {{1, 1},   {7, 7},    {65, 65},   {33, 129}, {130, 130},
                                        {17, 321}, {301, 517}, {40, 2000}, {0, 65},  {5, 1000}};
    for (auto &sh : shapes)
        for (int trans = 0; trans < 2; trans++)
            for (int off = 0; off < 2; off++) {
                int64_t m = sh[0], n = sh[1];
                std::vector<double> a(m * n);
                for (auto &x : a)
                    x = uniform(-1.0, 1.0);
                ata_ref ref = reference_ata(a, m, n);
                std::vector<double> stored = dmma_stored(a, m, n, trans), base;
                for (int variant = 1; variant <= 3; variant++) {
                    char what[160];
                    snprintf(what, sizeof what, "ata dmma variant %d m=%lld n=%lld trans=%d %s", variant,
                             (long long)m, (long long)n, trans, off ? "A, C 8-byte aligned" : "aligned");
                    std::vector<double> c;
                    if (!dmma_run(stored, m, n, trans, off, off, c, what, variant))
                        continue;
                    int64_t bad = 0;
                    for (int64_t x = 0; x < n * n; x++)
                        if (!(fabs(c[x] - ref.c[x]) <= 2.0 * (double)(m + 2) * 1.11e-16 * ref.s[x] + 1e-300))
                            bad++;
                    if (bad)
                        printf("  %s: %lld elements out of bound\n", what, (long long)bad);
                    expect(bad == 0, what);
                    if (variant == 1) {
                        base = c;
                    } else if (base.size() == c.size()) {
                        char same[240];
                        snprintf(same, sizeof same, "%s: the same bits as the 128² configuration", what);
                        expect(memcmp(base.data(), c.data(), c.size() * sizeof(double)) == 0, same);
                    }
                }
            }
}

/* symtile's FP32 schedules, forced through its tuning variants (kernels/cuda/ata_symtile.cu):
 * plain tiling, the last wave's tiles shared among a wave of blocks (split along m, summed by a
 * fixup) and each k-tile configuration; shapes around 2816 = 22 tiles (where 253 tiles give way to 276 on 132 SMs),
 * m far larger than n (a tile split over ~90 blocks), m = 1, odd n (the scalar path), trans_a. */
extern "C" cudaError_t cr_cuda_ata_symtile_variant(const cr_ata_dev *t, cr_dtype dt, cudaStream_t s, int variant);
extern "C" size_t cr_cuda_ata_symtile_variant_work_bytes(const cr_ata_dev *t, cr_dtype dt, int variant);

#define SYM_VARIANT(v)                                                                        \
    static cudaError_t sym_v##v(const cr_ata_dev *t, cr_dtype dt, cudaStream_t s)             \
    {                                                                                         \
        return cr_cuda_ata_symtile_variant(t, dt, s, v);                                      \
    }
SYM_VARIANT(1) SYM_VARIANT(10) SYM_VARIANT(20) SYM_VARIANT(22) SYM_VARIANT(23) SYM_VARIANT(24)
SYM_VARIANT(25) SYM_VARIANT(26) SYM_VARIANT(27) SYM_VARIANT(14) SYM_VARIANT(1620) SYM_VARIANT(110)
SYM_VARIANT(17) SYM_VARIANT(18) SYM_VARIANT(28) SYM_VARIANT(19) SYM_VARIANT(29) SYM_VARIANT(429)
SYM_VARIANT(10029) SYM_VARIANT(20019) SYM_VARIANT(20029) SYM_VARIANT(30029) SYM_VARIANT(20829) SYM_VARIANT(328)
SYM_VARIANT(10019) SYM_VARIANT(10829) SYM_VARIANT(40029) SYM_VARIANT(50029)
/* c8/c9: the wide 256×128 kernel (its vector path when n % 4 == 0, else the 128² kernel): c8
 * dbuf big's register-staged loop, c9 cp.async; variant / 100 = 100·sub + g: g bands per group
 * of the tile order (0: band by band), sub the c9 configuration (0: 3 stages of BK 16, 1: 4
 * stages (shipped from n = 1536 on), 2: 3 stages of BK 32, 3: 2 stages of BK 32, 4: 5 stages,
 * 5: 6 stages) */
static const struct { const char *name; cr_ata_launcher fn; int variant; } sym_variants[] = {
    {"symtile:8x8", sym_v1, 1},          {"symtile:tiles", sym_v10, 10},      {"symtile:shared", sym_v20, 20},
    {"symtile:shared-c2", sym_v22, 22},  {"symtile:shared-c3", sym_v23, 23},  {"symtile:shared-c4", sym_v24, 24},
    {"symtile:shared-c5", sym_v25, 25},  {"symtile:shared-c6", sym_v26, 26},  {"symtile:shared-c7", sym_v27, 27},
    {"symtile:tiles-c4", sym_v14, 14},   {"symtile:shared-g16", sym_v1620, 1620}, {"symtile:tiles-g1", sym_v110, 110},
    {"symtile:tiles-c7", sym_v17, 17},   {"symtile:tiles-c8", sym_v18, 18},   {"symtile:shared-c8", sym_v28, 28},
    {"symtile:tiles-c9", sym_v19, 19},   {"symtile:shared-c9", sym_v29, 29},  {"symtile:shared-c9g4", sym_v429, 429},
    {"symtile:shared-c9s1", sym_v10029, 10029}, {"symtile:tiles-c9s2", sym_v20019, 20019},
    {"symtile:shared-c9s2", sym_v20029, 20029}, {"symtile:shared-c9s3", sym_v30029, 30029},
    {"symtile:shared-c9s2g8", sym_v20829, 20829}, {"symtile:shared-c8g3", sym_v328, 328},
    {"symtile:tiles-c9s1", sym_v10019, 10019},  {"symtile:shared-c9s1g8", sym_v10829, 10829},
    {"symtile:shared-c9s4", sym_v40029, 40029}, {"symtile:shared-c9s5", sym_v50029, 50029},
};
static bool sym_both_trans(int v) { return v == 10 || v == 20 || v == 18 || v == 28 || v == 10029 || v == 10019; }

static size_t ata_work_bytes(const cr_ata_dev *d, cr_dtype dt, cr_ata_launcher fn)
{
    for (auto &v : sym_variants)
        if (v.fn == fn)
            return cr_cuda_ata_symtile_variant_work_bytes(d, dt, v.variant);
    return cr_cuda_ata_work_bytes(d, dt, fn);
}

/* Two runs of symtile on the same input give the same bits (stream-K's fixed summation order). */
static void check_symtile_repeat(cr_ata_launcher fn, const char *name, int64_t m, int64_t n, bool trans)
{
    char what[160];
    snprintf(what, sizeof what, "ata %s f32 m=%lld n=%lld trans=%d: bit-identical on a second run", name,
             (long long)m, (long long)n, trans);
    std::vector<float> host_a(m * n), c1(n * n), c2(n * n);
    for (auto &x : host_a)
        x = (float)uniform(-1.0, 1.0);
    cr_ata_dev d = {m, n, trans, NULL, NULL, NULL};
    size_t wb = ata_work_bytes(&d, CR_DT_F32, fn);
    float *da = NULL, *dc = NULL;
    void *work = NULL;
    bool ok = cuda_ok(cudaMalloc(&da, host_a.size() * 4), what) && cuda_ok(cudaMalloc(&dc, c1.size() * 4), what) &&
              (wb == 0 || (cuda_ok(cudaMalloc(&work, wb), what) && cuda_ok(cudaMemset(work, 0xff, wb), what))) &&
              cuda_ok(cudaMemcpy(da, host_a.data(), host_a.size() * 4, cudaMemcpyHostToDevice), what);
    d.a = da;
    d.c = dc;
    d.work = work;
    for (int run = 0; ok && run < 2; run++)
        ok = cuda_ok(cudaMemset(dc, 0xff, c1.size() * 4), what) && cuda_ok(fn(&d, CR_DT_F32, 0), what) &&
             cuda_ok(cudaMemcpy((run ? c2 : c1).data(), dc, c1.size() * 4, cudaMemcpyDeviceToHost), what);
    if (ok)
        expect(memcmp(c1.data(), c2.data(), c1.size() * 4) == 0, what);
    if (ok) { /* and exactly symmetric */
        int64_t asym = 0;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = i + 1; j < n; j++)
                asym += memcmp(&c1[i * n + j], &c1[j * n + i], 4) != 0;
        snprintf(what, sizeof what, "ata %s f32 m=%lld n=%lld trans=%d: C bit-symmetric", name, (long long)m,
                 (long long)n, trans);
        expect(asym == 0, what);
    }
    cudaFree(da);
    cudaFree(dc);
    cudaFree(work);
}

static void test_ata_symtile_f32(void)
{
    /* n % 4 == 0 runs the wide kernel's variants for real: 2816 (22 blocks of 128: 11 bands), 260 (3
     * blocks: a band of one, a pair tile with one block), 1000, 4096, 300, 2820 (an odd 23rd block),
     * 1412 (12 blocks, the last 4 columns wide), 388 (4 blocks: 2 pairs' worth, one pair tile) */
    static const int64_t shapes[][2] = {{33, 2815}, {37, 2816}, {31, 2817}, {4100, 260}, {2049, 513}, {1, 1500},
                                        {1100, 1000}, {777, 1031}, {3, 4096}, {40, 4097}, {0, 300}, {5, 3},
                                        {19, 2820}, {301, 1412}, {2000, 388}};
    for (auto &sh : shapes) {
        int64_t m = sh[0], n = sh[1];
        std::vector<double> a(m * n);
        for (auto &x : a)
            x = (double)(float)uniform(-1.0, 1.0);
        ata_ref ref = reference_ata(a, m, n);
        for (int trans = 0; trans < 2; trans++) {
            check_ata<float>("symtile", cr_cuda_ata_symtile, m, n, trans, a, ref);
            for (auto &v : sym_variants)
                if (trans == 0 || sym_both_trans(v.variant))
                    check_ata<float>(v.name, v.fn, m, n, trans, a, ref);
        }
    }
    for (int trans = 0; trans < 2; trans++) {
        check_symtile_repeat(cr_cuda_ata_symtile, "symtile", 2049, 1000, trans);
        check_symtile_repeat(sym_v20, "symtile:shared", 3001, 2050, trans);
        check_symtile_repeat(sym_v10, "symtile:tiles", 300, 2050, trans);
        check_symtile_repeat(sym_v28, "symtile:shared-c8", 3001, 2048, trans);
        check_symtile_repeat(sym_v28, "symtile:shared-c8", 2049, 1412, trans);
        check_symtile_repeat(sym_v18, "symtile:tiles-c8", 300, 2820, trans);
        check_symtile_repeat(sym_v29, "symtile:shared-c9", 1999, 1000, trans);
        check_symtile_repeat(sym_v20029, "symtile:shared-c9s2", 2049, 2048, trans);
        check_symtile_repeat(cr_cuda_ata_symtile, "symtile", 1999, 2048, trans); /* the wide kernel, shared */
        check_symtile_repeat(cr_cuda_ata_symtile, "symtile", 33, 4100, trans);
        check_symtile_repeat(sym_v10019, "symtile:tiles-c9s1", 300, 1540, trans);
    }
}

/* The wide kernel takes A and C 16-byte aligned only: with A or C 4 bytes off (n = 1540 >= S32W_MIN_N,
 * n % 4 == 0) the shipped symtile and forced c9 fall back to the 128² kernel's scalar path. */
static void test_ata_symtile_unaligned(void)
{
    const int64_t m = 37, n = 1540;
    std::vector<double> a(m * n);
    for (auto &x : a)
        x = (double)(float)uniform(-1.0, 1.0);
    ata_ref ref = reference_ata(a, m, n);
    std::vector<float> host_a(m * n), host_c(n * n);
    for (int64_t x = 0; x < m * n; x++)
        host_a[x] = (float)a[x];
    static const struct { const char *name; cr_ata_launcher fn; } runs[] = {
        {"symtile", cr_cuda_ata_symtile}, {"symtile:shared-c9s1", sym_v10029}, {"symtile:tiles-c9s1", sym_v10019}};
    for (int off = 0; off < 3; off++) /* 0: A 4 bytes off, 1: C, 2: both */
        for (auto &r : runs) {
            char what[128];
            snprintf(what, sizeof what, "ata %s f32 m=%lld n=%lld %s 4 bytes off 16-byte alignment", r.name,
                     (long long)m, (long long)n, off == 0 ? "A" : off == 1 ? "C" : "A and C");
            float *da = NULL, *dc = NULL;
            void *work = NULL;
            cr_ata_dev d = {m, n, false, NULL, NULL, NULL};
            size_t wb = ata_work_bytes(&d, CR_DT_F32, r.fn);
            bool ok = cuda_ok(cudaMalloc(&da, (host_a.size() + 4) * 4), what) &&
                      cuda_ok(cudaMalloc(&dc, (host_c.size() + 4) * 4), what) &&
                      (wb == 0 || (cuda_ok(cudaMalloc(&work, wb), what) && cuda_ok(cudaMemset(work, 0xff, wb), what)));
            float *pa = da + (off != 1), *pc = dc + (off != 0);
            ok = ok && cuda_ok(cudaMemcpy(pa, host_a.data(), host_a.size() * 4, cudaMemcpyHostToDevice), what) &&
                 cuda_ok(cudaMemset(pc, 0xff, host_c.size() * 4), what);
            d.a = pa;
            d.c = pc;
            d.work = work;
            ok = ok && cuda_ok(r.fn(&d, CR_DT_F32, 0), what) &&
                 cuda_ok(cudaMemcpy(host_c.data(), pc, host_c.size() * 4, cudaMemcpyDeviceToHost), what);
            if (ok) {
                int64_t bad = 0;
                for (int64_t x = 0; x < n * n; x++) {
                    double err = fabs((double)host_c[x] - ref.c[x]);
                    if (!(err <= 2.0 * (double)(m + 2) * 5.96e-8 * ref.s[x] + 1e-300))
                        bad++;
                }
                expect(bad == 0, what);
            }
            cudaFree(da);
            cudaFree(dc);
            cudaFree(work);
        }
}

/* NaN at A[k0][i0] and +Inf at A[k1][i1] through symtile FP32 as shipped, forced to share every
 * tile (n = 700: 21 tiles split among a wave of blocks, the NaN and the Inf each in one block's
 * part of a tile, added up by the fixup) and forced to plain tiles: row and column i0 NaN, i1's
 * (but for i0) ±Inf, the rest finite. The scratch is poisoned first, as in check_ata. */
static void test_ata_symtile_nonfinite(void)
{
    const int64_t m = 300, n = 700, k0 = 7, i0 = 130, k1 = 290, i1 = 600;
    static const struct { const char *name; cr_ata_launcher fn; } runs[] = {
        {"symtile", cr_cuda_ata_symtile}, {"symtile:shared", sym_v20}, {"symtile:tiles", sym_v10},
        {"symtile:shared-c8", sym_v28}, {"symtile:tiles-c8", sym_v18}, {"symtile:shared-c9", sym_v29},
        {"symtile:shared-c9s2", sym_v20029}, {"symtile:shared-c9s1", sym_v10029}};
    for (int trans = 0; trans < 2; trans++)
        for (auto &r : runs) {
            std::vector<float> a(m * n), stored(m * n), c(n * n);
            for (auto &x : a)
                x = (float)(uniform(0.5, 1.0) * (rnd() & 1 ? 1 : -1));
            a[k0 * n + i0] = NAN;
            a[k1 * n + i1] = INFINITY;
            for (int64_t k = 0; k < m; k++)
                for (int64_t i = 0; i < n; i++)
                    stored[trans ? i * m + k : k * n + i] = a[k * n + i];
            char what[96];
            snprintf(what, sizeof what, "ata %s f32 NaN/Inf propagation trans=%d", r.name, trans);
            cr_ata_dev d = {m, n, trans != 0, NULL, NULL, NULL};
            size_t wb = ata_work_bytes(&d, CR_DT_F32, r.fn);
            float *da = NULL, *dc = NULL;
            void *work = NULL;
            bool ok = cuda_ok(cudaMalloc(&da, stored.size() * 4), what) &&
                      cuda_ok(cudaMalloc(&dc, c.size() * 4), what) &&
                      (wb == 0 ||
                       (cuda_ok(cudaMalloc(&work, wb), what) && cuda_ok(cudaMemset(work, 0xff, wb), what))) &&
                      cuda_ok(cudaMemcpy(da, stored.data(), stored.size() * 4, cudaMemcpyHostToDevice), what) &&
                      cuda_ok(cudaMemset(dc, 0xff, c.size() * 4), what);
            d.a = da;
            d.c = dc;
            d.work = work;
            ok = ok && cuda_ok(r.fn(&d, CR_DT_F32, 0), what) &&
                 cuda_ok(cudaMemcpy(c.data(), dc, c.size() * 4, cudaMemcpyDeviceToHost), what);
            if (ok)
                expect(nonfinite_misplaced(c, a, n, i0, i1, k1) == 0, what);
            cudaFree(da);
            cudaFree(dc);
            cudaFree(work);
        }
}

/* ---------------- histograms ---------------- */

struct hist_kernel { const char *name; cr_hist_launcher fn; };

static cudaError_t run_cub(const cr_hist_dev *h, cr_dtype dt, cudaStream_t s)
{
    size_t bytes = 0;
    void *temp = NULL;
    cudaError_t e = cr_cuda_hist_cub(h, dt, NULL, &bytes, s);
    if (e == cudaSuccess)
        e = cudaMalloc(&temp, bytes ? bytes : 1);
    if (e == cudaSuccess)
        e = cr_cuda_hist_cub(h, dt, temp, &bytes, s);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(s);
    cudaFree(temp);
    return e;
}

/* The smem-batched row's way to run one histogram (launchers.cu): its job in device memory. */
static cudaError_t run_batched(const cr_hist_dev *h, cr_dtype dt, cudaStream_t s)
{
    if (!cr_hist_dtype_ok(dt))
        return cudaErrorNotSupported;
    cr_hist_job job, *djob = NULL;
    cudaError_t e = cr_hist_job_make(h, dt, &job);
    if (e == cudaSuccess)
        e = cudaMemsetAsync(h->counts, 0, (size_t)h->bins * sizeof(unsigned long long), s);
    if (e != cudaSuccess || h->count == 0)
        return e;
    e = cudaMalloc(&djob, sizeof job);
    if (e == cudaSuccess)
        e = cudaMemcpy(djob, &job, sizeof job, cudaMemcpyHostToDevice);
    if (e == cudaSuccess)
        e = cr_cuda_hist_batched(djob, 1, h->bins, h->count, dt, s);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(s);
    cudaFree(djob);
    return e;
}

/* smem-vec through each of its paths, whatever the bins would make it pick. */
static cudaError_t vec_smem48(const cr_hist_dev *h, cr_dtype dt, cudaStream_t s)
{
    return cr_cuda_hist_smem_vec_path(h, dt, CR_HIST_VEC_SMEM48, s);
}
static cudaError_t vec_one_copy(const cr_hist_dev *h, cr_dtype dt, cudaStream_t s)
{
    return cr_cuda_hist_smem_vec_path(h, dt, CR_HIST_VEC_ONE_COPY, s);
}
static cudaError_t vec_cluster(const cr_hist_dev *h, cr_dtype dt, cudaStream_t s)
{
    return cr_cuda_hist_smem_vec_path(h, dt, CR_HIST_VEC_CLUSTER, s);
}
static cudaError_t vec_cluster8(const cr_hist_dev *h, cr_dtype dt, cudaStream_t s)
{
    return cr_cuda_hist_smem_vec_path(h, dt, CR_HIST_VEC_CLUSTER8, s);
}

/* max_bins: a forced path that holds only so many (0: any; -1: one block's opt-in shared
 * memory, read from the device). */
struct hist_kernel_row { hist_kernel k; int max_bins; };
static const hist_kernel_row hist_kernels[] = {
    {{"global", cr_cuda_hist_global}, 0}, {{"smem", cr_cuda_hist_smem}, 0},
    {{"smem-vec", cr_cuda_hist_smem_vec}, 0}, {{"cub", run_cub}, 0}, {{"smem-batched", run_batched}, 0},
    {{"smem-vec:smem48", vec_smem48}, CR_HIST_SMEM_MAX_BINS}, {{"smem-vec:one-copy", vec_one_copy}, -1},
    {{"smem-vec:cluster", vec_cluster}, 0}, {{"smem-vec:cluster8", vec_cluster8}, 0},
};

static int optin_bins(void)
{
    int dev = 0, bytes = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    return bytes / 4;
}

/* Runs every kernel on bytes [offset, offset+len) of `host` placed at the same offset from a
 * 256-byte aligned device buffer, and compares with `want`. */
static void check_hist(const char *what, const void *host, size_t elem, int64_t count, size_t offset,
                       cr_dtype dt, int bins, double lo, double hi, const std::vector<uint64_t> &want)
{
    char *dbuf = NULL;
    unsigned long long *dcounts = NULL;
    std::vector<uint64_t> got(bins);
    if (!cuda_ok(cudaMalloc(&dbuf, count * elem + offset + 16), what) ||
        !cuda_ok(cudaMalloc(&dcounts, bins * sizeof(uint64_t)), what))
        goto out;
    if (count && !cuda_ok(cudaMemcpy(dbuf + offset, host, count * elem, cudaMemcpyHostToDevice), what))
        goto out;
    for (const hist_kernel_row &row : hist_kernels) {
        const hist_kernel &k = row.k;
        if (row.max_bins && bins > (row.max_bins < 0 ? optin_bins() : row.max_bins))
            continue;
        char name[200];
        snprintf(name, sizeof name, "hist %s %s", k.name, what);
        cr_hist_dev h = {count, dbuf + offset, bins, lo, hi, dcounts};
        cudaMemset(dcounts, 0xab, bins * sizeof(uint64_t)); /* launchers must zero it themselves */
        if (!cuda_ok(k.fn(&h, dt, 0), name) || !cuda_ok(cudaDeviceSynchronize(), name) ||
            !cuda_ok(cudaMemcpy(got.data(), dcounts, bins * sizeof(uint64_t), cudaMemcpyDeviceToHost), name))
            continue;
        int bad = -1;
        for (int b = 0; b < bins && bad < 0; b++)
            if (got[b] != want[b])
                bad = b;
        if (bad >= 0)
            printf("  %s: bin %d got %llu want %llu\n", name, bad, (unsigned long long)got[bad],
                   (unsigned long long)want[bad]);
        expect(bad < 0, name);
    }
out:
    cudaFree(dbuf);
    cudaFree(dcounts);
}

static void test_hist_bytes(void)
{
    static const int64_t lengths[] = {0, 1, 15, 16, 17, 31, 33, 1000003, (1 << 24) + 5};
    static const size_t offsets[] = {0, 1, 3, 7, 15};
    for (int64_t len : lengths)
        for (size_t off : offsets) {
            std::vector<unsigned char> data(len);
            std::vector<uint64_t> want(256, 0);
            for (auto &x : data) {
                x = (unsigned char)(rnd() >> 56);
                want[x]++;
            }
            char what[96];
            snprintf(what, sizeof what, "u8 len=%lld offset=%zu", (long long)len, off);
            check_hist(what, data.data(), 1, len, off, CR_DT_U8, 256, 0, 256, want);
        }
    /* all bytes equal: every atomic on one bin (the worst contention) */
    for (int value : {0, 171, 255}) {
        int64_t len = 3000017;
        std::vector<unsigned char> data(len, (unsigned char)value);
        std::vector<uint64_t> want(256, 0);
        want[value] = len;
        char what[64];
        snprintf(what, sizeof what, "u8 all-equal %d", value);
        check_hist(what, data.data(), 1, len, 5, CR_DT_U8, 256, 0, 256, want);
    }
    /* bytes into other bins: numpy's rule on the byte values */
    {
        int64_t len = 100003;
        std::vector<unsigned char> data(len);
        cr_hist_params p = {10, 200, 190, 19, 10, 10.0 / 190};
        std::vector<uint64_t> want(10, 0);
        for (auto &x : data) {
            x = (unsigned char)(rnd() >> 56);
            int b = cr_hist_bin((double)x, p);
            if (b >= 0)
                want[b]++;
        }
        check_hist("u8 10 bins over [10, 200]", data.data(), 1, len, 3, CR_DT_U8, 10, 10, 200, want);
    }
}

template <typename T> static void shuffle(std::vector<T> &v)
{
    for (int64_t i = (int64_t)v.size() - 1; i > 0; i--)
        std::swap(v[i], v[rnd() % (i + 1)]);
}

/* The counts the host's numpy rule gives: what every kernel must match. */
template <typename T>
static std::vector<uint64_t> host_counts(const std::vector<T> &data, const cr_hist_params &p)
{
    std::vector<uint64_t> want(p.bins, 0);
    for (T x : data) {
        int b = cr_hist_bin((double)x, p);
        if (b >= 0)
            want[b]++;
    }
    return want;
}

/* Values that sit on every edge numpy's linspace gives, on lo and hi, just outside, NaN, ±inf,
 * plus random ones around the range. */
template <typename T>
static std::vector<T> edge_values(int64_t count, const cr_hist_params &p)
{
    std::vector<T> v;
    for (int i = 0; i <= p.bins && (int64_t)v.size() < count; i++)
        v.push_back((T)cr_hist_edge(p, i));
    const T special[] = {(T)p.lo, (T)p.hi, (T)nextafter(p.hi, INFINITY), (T)nextafter(p.lo, -INFINITY),
                         (T)NAN, (T)INFINITY, (T)-INFINITY, (T)nextafter(p.hi, -INFINITY)};
    for (T x : special)
        if ((int64_t)v.size() < count)
            v.push_back(x);
    while ((int64_t)v.size() < count)
        v.push_back((T)uniform(p.lo - 0.2 * p.span, p.hi + 0.2 * p.span));
    shuffle(v); /* so the edges are not all at the head */
    return v;
}

template <typename T>
static void test_hist_floats_of(cr_dtype dt)
{
    static const int64_t lengths[] = {1, 15, 16, 17, 1000003};
    static const int bin_counts[] = {1, 10, 100, 5000, 20000};
    for (int64_t len : lengths)
        for (int bins : bin_counts)
            for (size_t off_elems : {0, 1}) {
                cr_hist_dev hd = {len, NULL, bins, -1.7, 3.1, NULL};
                cr_hist_params p = {};
                cr_hist_make_params(&hd, CR_DT_F64, &p); /* the range is float64-exact */
                std::vector<T> data = edge_values<T>(len, p);
                std::vector<uint64_t> want = host_counts(data, p);
                char what[96];
                snprintf(what, sizeof what, "%s len=%lld bins=%d offset=%zu", sizeof(T) == 4 ? "f32" : "f64",
                         (long long)len, bins, off_elems);
                check_hist(what, data.data(), sizeof(T), len, off_elems * sizeof(T), dt, bins, -1.7, 3.1, want);
            }
}

template <typename T> static T ulp_beside(T x, double dir)
{
    return sizeof(T) == 4 ? (T)nextafterf((float)x, (float)dir) : (T)nextafter((double)x, dir);
}

/* Many bins: edges drawn across the whole range (there are more edges than values at 2^24 bins),
 * each as T and one ulp of T either side of it, the first and last edges, lo, hi and one ulp
 * outside them, NaN, ±inf, then values across the range and 20% beyond it. */
template <typename T>
static std::vector<T> many_bin_values(int64_t count, const cr_hist_params &p)
{
    std::vector<T> v;
    for (int i : {0, 1, p.bins - 1, p.bins}) {
        T e = (T)cr_hist_edge(p, i);
        v.insert(v.end(), {e, ulp_beside(e, INFINITY), ulp_beside(e, -INFINITY)});
    }
    const T special[] = {(T)p.lo, (T)p.hi, ulp_beside((T)p.hi, INFINITY), ulp_beside((T)p.lo, -INFINITY),
                         (T)NAN, (T)INFINITY, (T)-INFINITY, (T)NAN};
    v.insert(v.end(), special, special + 8);
    while ((int64_t)v.size() + 3 <= count / 2) {
        T e = (T)cr_hist_edge(p, (int)(rnd() % ((uint64_t)p.bins + 1)));
        v.insert(v.end(), {e, ulp_beside(e, INFINITY), ulp_beside(e, -INFINITY)});
    }
    while ((int64_t)v.size() < count)
        v.push_back((T)uniform(p.lo - 0.2 * p.span, p.hi + 0.2 * p.span));
    v.resize(count);
    shuffle(v);
    return v;
}

/* float32/float64 with 4096 bins and more: around each path's limit (12,288 in 48 KiB, 58,112 in
 * one block's opt-in shared memory on Hopper, 8 and 16 of those in a cluster), and the API's
 * bins limits (1 << 20 by default, 1 << 24 the most --max-bins allows). */
template <typename T>
static void test_hist_many_bins_of(cr_dtype dt)
{
    const int cap = optin_bins();
    const int bin_counts[] = {4096, 5000, 12288, 12289, 16384, cap, cap + 1, 65536, 100003,
                              8 * cap + 1, 16 * cap + 1, 1 << 20, 1 << 24};
    const double ranges[][2] = {{-1.7, 3.1}, {0.0, 1.0}};
    for (int bins : bin_counts)
        for (int64_t len : {(int64_t)17, (int64_t)1000003})
            for (size_t off_elems : {0, 1}) {
                const double *r = ranges[(bins + len) % 2];
                cr_hist_dev hd = {len, NULL, bins, r[0], r[1], NULL};
                cr_hist_params p = {};
                cr_hist_make_params(&hd, dt, &p);
                std::vector<T> data = many_bin_values<T>(len, p);
                std::vector<uint64_t> want = host_counts(data, p);
                char what[128];
                snprintf(what, sizeof what, "%s many bins len=%lld bins=%d range=[%g,%g] offset=%zu",
                         sizeof(T) == 4 ? "f32" : "f64", (long long)len, bins, r[0], r[1], off_elems);
                check_hist(what, data.data(), sizeof(T), len, off_elems * sizeof(T), dt, bins, r[0], r[1], want);
            }
}

/* Integers of every width, binned as float64 the way numpy does: values on and next to every
 * integer edge, the type's extremes (where 64-bit values round on the way to double), and
 * random ones across and beyond the range, at odd lengths and misaligned starts. */
template <typename T>
static void test_hist_ints_of(cr_dtype dt, const char *name, double lo, double hi, int pow2_width = 0)
{
    static const int64_t lengths[] = {1, 15, 16, 17, 100003, 1000003};
    static const int bin_counts[] = {1, 7, 13, 300, 5000};
    const T tmin = std::numeric_limits<T>::min(), tmax = std::numeric_limits<T>::max();
    for (int64_t len : lengths)
        for (int bins : bin_counts)
            for (size_t off_elems : {0, 1}) {
                /* pow2_width: hi from the bins, edges that far apart (the kernels' integer path) */
                if (pow2_width)
                    hi = lo + (double)bins * pow2_width;
                cr_hist_dev hd = {len, NULL, bins, lo, hi, NULL};
                cr_hist_params p = {};
                if (!cuda_ok(cr_hist_make_params(&hd, dt, &p), name))
                    return;
                std::vector<T> data;
                for (int i = 0; i <= bins && (int64_t)data.size() + 3 <= len; i++) {
                    double e = cr_hist_edge(p, i);
                    for (double d : {floor(e) - 1, floor(e), ceil(e)})
                        if (d >= (double)tmin && d <= (double)tmax)
                            data.push_back((T)d);
                }
                for (T x : {tmin, tmax, (T)(tmin + 1), (T)(tmax - 1)})
                    if ((int64_t)data.size() < len)
                        data.push_back(x);
                double wlo = fmax(lo - 0.2 * (hi - lo), (double)tmin), whi = fmin(hi + 0.2 * (hi - lo), (double)tmax);
                while ((int64_t)data.size() < len) {
                    double d = floor(uniform(wlo, whi));
                    data.push_back(d <= (double)tmin ? tmin : d >= (double)tmax ? tmax : (T)d);
                }
                shuffle(data);
                std::vector<uint64_t> want = host_counts(data, p);
                char what[96];
                snprintf(what, sizeof what, "%s len=%lld bins=%d offset=%zu", name, (long long)len, bins, off_elems);
                check_hist(what, data.data(), sizeof(T), len, off_elems * sizeof(T), dt, bins, lo, hi, want);
            }
}

/* Answers numpy 2.4 gave for the same float64 data (np.histogram(d, bins, range)). */
static void test_hist_numpy_answers(void)
{
    const double d1[] = {0.3, 0.1, 0.2, 0.7, 1.0, 0.0, -0.0, 0.5, 0.9999999999999999, 1.0000000000000002,
                         NAN, 0.6, 0.8, 0.4, -1e-300, INFINITY, -INFINITY};
    std::vector<uint64_t> w1 = {2, 1, 2, 0, 1, 2, 1, 0, 1, 2};
    check_hist("numpy [0,1] 10 bins", d1, 8, 17, 0, CR_DT_F64, 10, 0.0, 1.0, w1);
    double d2[8];
    cr_hist_params p2 = {0.1, 0.7, 0.7 - 0.1, (0.7 - 0.1) / 7, 7, 7 / (0.7 - 0.1)};
    for (int i = 0; i <= 7; i++) /* np.linspace(0.1, 0.7, 8) */
        d2[i] = cr_hist_edge(p2, i);
    std::vector<uint64_t> w2 = {1, 1, 1, 1, 1, 1, 2};
    check_hist("numpy linspace(0.1,0.7,8) 7 bins", d2, 8, 8, 8, CR_DT_F64, 7, 0.1, 0.7, w2);
    const double d3[] = {5.0, 5.0, 4.5, 5.5, 5.6};
    check_hist("numpy empty range (5,5) 1 bin", d3, 8, 5, 0, CR_DT_F64, 1, 5.0, 5.0, std::vector<uint64_t>{4});
    const double d4[] = {4.5, 5.5, 5.0};
    check_hist("numpy empty range (5,5) 2 bins", d4, 8, 3, 0, CR_DT_F64, 2, 5.0, 5.0, std::vector<uint64_t>{1, 2});
}

static void test_hist_invalid(void)
{
    unsigned long long *dc = NULL;
    cudaMalloc(&dc, 64);
    cr_hist_dev bad_range = {0, NULL, 4, 2.0, 1.0, dc}, bad_bins = {0, NULL, 0, 0.0, 1.0, dc};
    cr_hist_dev inf_range = {0, NULL, 4, 0.0, INFINITY, dc};
    for (const hist_kernel_row &row : hist_kernels) {
        const hist_kernel &k = row.k;
        expect(k.fn(&bad_range, CR_DT_F32, 0) == cudaErrorInvalidValue, "hist lo > hi is invalid");
        expect(k.fn(&bad_bins, CR_DT_F32, 0) == cudaErrorInvalidValue, "hist 0 bins is invalid");
        expect(k.fn(&inf_range, CR_DT_F64, 0) == cudaErrorInvalidValue, "hist infinite range is invalid");
        expect(k.fn(&bad_bins, CR_DT_COUNT, 0) == cudaErrorNotSupported, "hist unknown dtype unsupported");
    }
    cudaFree(dc);
}

int main(void)
{
    test_ata();
    test_ata_dmma();
    test_ata_dmma_configs();
    test_ata_symtile_f32();
    test_ata_symtile_nonfinite();
    test_ata_symtile_unaligned();
    test_hist_bytes();
    test_hist_floats_of<float>(CR_DT_F32);
    test_hist_floats_of<double>(CR_DT_F64);
    test_hist_many_bins_of<float>(CR_DT_F32);
    test_hist_many_bins_of<double>(CR_DT_F64);
    test_hist_ints_of<int8_t>(CR_DT_I8, "i8", -100, 117);
    test_hist_ints_of<uint8_t>(CR_DT_U8, "u8 numpy bins", 3, 250);
    test_hist_ints_of<uint16_t>(CR_DT_U16, "u16", 10, 60001);
    test_hist_ints_of<int16_t>(CR_DT_I16, "i16", -30000, 12345);
    test_hist_ints_of<uint32_t>(CR_DT_U32, "u32", 0, 4e9);
    test_hist_ints_of<int32_t>(CR_DT_I32, "i32", -2e9, 7);
    test_hist_ints_of<uint64_t>(CR_DT_U64, "u64", 1e3, 1.8e19);
    test_hist_ints_of<int64_t>(CR_DT_I64, "i64", -9.2e18, 9.2e18);
    test_hist_ints_of<int8_t>(CR_DT_I8, "i8 integer edges", -64, 0, 1);
    test_hist_ints_of<uint8_t>(CR_DT_U8, "u8 integer edges", 0, 0, 1);
    test_hist_ints_of<uint16_t>(CR_DT_U16, "u16 integer edges", 100, 0, 4);
    test_hist_ints_of<int16_t>(CR_DT_I16, "i16 integer edges", -1000, 0, 2);
    test_hist_ints_of<uint32_t>(CR_DT_U32, "u32 integer edges", 0, 0, 1024);
    test_hist_ints_of<int32_t>(CR_DT_I32, "i32 integer edges", -5000000, 0, 8);
    test_hist_numpy_answers();
    test_hist_invalid();
    printf("ata_hist: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
