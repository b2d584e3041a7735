/* Unit tests of the JSON response encoders and number formatting: every body is parsed back
 * with cJSON and checked, numbers must round-trip exactly. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "kernels/registry.h"
#include "server/engine/job.h"
#include "server/codec/json_buf.h"
#include "server/codec/json_encode.h"
#include "server/codec/numfmt.h"


static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Parses body (checking len) and returns the tree; NULL counts as a failure. */
static cJSON *parse(const char *body, size_t len)
{
    CHECK_MSG(body != NULL && strlen(body) == len, "body and length agree");
    if (!body)
        return NULL;
    cJSON *j = cJSON_ParseWithLength(body, len);
    CHECK_MSG(j != NULL, "valid JSON: %.200s", body);
    return j;
}

static const cJSON *get(const cJSON *o, const char *path)
{
    char key[64];
    const char *dot;
    while (o && (dot = strchr(path, '.'))) {
        snprintf(key, sizeof key, "%.*s", (int)(dot - path), path);
        o = cJSON_GetObjectItemCaseSensitive(o, key);
        path = dot + 1;
    }
    return o ? cJSON_GetObjectItemCaseSensitive(o, path) : NULL;
}

static int str_is(const cJSON *o, const char *path, const char *want)
{
    const cJSON *n = get(o, path);
    return cJSON_IsString(n) && strcmp(n->valuestring, want) == 0;
}

/* ---- numbers --------------------------------------------------------------------------- */

/* The shortest float32 text the brute-force way: the first p = 1..9 whose "%.*g" reads back to
 * f both through strtof and through (float)strtod (numpy reads float32 through a double). */
static void f32_reference(float f, char *out, size_t size)
{
    for (int p = 1; p <= 9; p++) {
        snprintf(out, size, "%.*g", p, (double)f);
        if (strtof(out, NULL) == f && (float)strtod(out, NULL) == f)
            return;
    }
    snprintf(out, size, "%.9g", (double)f);
}

/* Significant digits of a decimal text: leading and trailing zeros of its digits not counted. */
static int significant_digits(const char *s)
{
    int n = 0, zeros = 0, started = 0;
    for (; *s && *s != 'e'; s++) {
        if (*s < '0' || *s > '9' || (*s == '0' && !started))
            continue;
        started = 1;
        n++;
        zeros = *s == '0' ? zeros + 1 : 0;
    }
    return n - zeros;
}

/* 1 when cr_fmt_f32(f) differs from the reference in value or in its number of significant
 * digits (spellings may differ: "1e-07" against "1e-7"), or its length is wrong. */
static int f32_differs(float f, long *checked)
{
    char got[CR_NUMFMT_MAX], want[CR_NUMFMT_MAX];
    if (!isfinite(f))
        return 0;
    (*checked)++;
    size_t n = cr_fmt_f32(got, f);
    f32_reference(f, want, sizeof want);
    if (n == strlen(got) && strtod(got, NULL) == strtod(want, NULL) &&
        significant_digits(got) == significant_digits(want))
        return 0;
    fprintf(stderr, "f32 %a: got %s, brute force %s\n", (double)f, got, want);
    return 1;
}

static float f32_of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* cr_fmt_f32 against the brute-force shortest, value for value, over random bit patterns, one
 * float in 8 (at a varying offset) of two whole binades ([1, 2) and the one holding 1e-3), the
 * powers of two and of ten and their neighbours, multiples of 1/997 and integers: about 4
 * million brute-force answers, some 8 s. (Every float was checked outside the unit tests.) */
static void test_f32_shortest(void)
{
    long bad = 0, checked = 0;
    for (long i = 0; i < 1000000 && bad < 20; i++)
        bad += f32_differs(f32_of_bits((uint32_t)rng()), &checked);
    for (uint32_t u = 0x3F800000; u < 0x40000000 && bad < 20; u += 8) /* [1, 2) */
        bad += f32_differs(f32_of_bits(u + (u >> 3 & 7)), &checked);
    for (uint32_t u = 0x3A800000; u < 0x3B000000 && bad < 20; u += 8) /* [2^-10, 2^-9) */
        bad += f32_differs(f32_of_bits(u + (u >> 3 & 7)), &checked);
    for (int e = -149; e <= 127; e++) {
        float p2 = ldexpf(1.0f, e);
        bad += f32_differs(p2, &checked) + f32_differs(nextafterf(p2, 0), &checked) +
               f32_differs(nextafterf(p2, INFINITY), &checked) + f32_differs(-p2, &checked);
    }
    for (int e = -45; e <= 38; e++) {
        char text[16];
        snprintf(text, sizeof text, "1e%d", e);
        float p10 = strtof(text, NULL);
        bad += f32_differs(p10, &checked) + f32_differs(nextafterf(p10, 0), &checked) +
               f32_differs(nextafterf(p10, INFINITY), &checked);
    }
    for (long k = -150000; k <= 150000 && bad < 20; k++)
        bad += f32_differs((float)k / 997.0f, &checked) + f32_differs((float)(k / 997.0), &checked);
    for (long k = 0; k <= (1L << 24) + 4096 && bad < 20; k += k < 100000 ? 1 : 61)
        bad += f32_differs((float)k, &checked);
    CHECK_MSG(bad == 0, "float32 shortest vs brute force: %ld of %ld differ", bad, checked);

    /* One spelling whichever path writes the text (some of these take printf's). */
    static const struct { float v; const char *text; } spelled[] = {
        {0x1.88bfa8p-16f, "0.000023409644"}, {-0x1.def95cp+52f, "-8426201000000000"},
        {0x1p-149f, "1e-45"}, {0x1p-126f, "1.1754944e-38"}, {0x1.4f8b58p-17f, "0.00001"},
        {117760704.0f, "117760700"}, {-0.15625f, "-0.15625"}, {1e16f, "1e16"},
    };
    for (size_t i = 0; i < sizeof spelled / sizeof spelled[0]; i++) {
        char b[CR_NUMFMT_MAX];
        cr_fmt_f32(b, spelled[i].v);
        CHECK_MSG(strcmp(b, spelled[i].text) == 0, "f32 %a -> %s, want %s", (double)spelled[i].v, b,
                  spelled[i].text);
    }

    /* Where the printf loop's answer is not the shortest decimal in the float's interval (the
     * fast path's Schubfach choice), or where that choice needs its out-of-line path. */
    static const struct { float v; const char *text; } special[] = {
        /* numpy's double read takes 7.038531e-26 to the neighbouring float */
        {0x1.5c87fap-84f, "7.0385307e-26"},
        /* powers of two: the shortest decimal inside may be on the wide side and not the
         * nearest of its length (the first three), which printf's rounding passes over */
        {0x1p90f, "1.23794004e27"}, {0x1p87f, "1.54742505e26"}, {0x1p-96f, "1.26217745e-29"},
        {0x1p64f, "1.8446744e19"}, {-0x1p-1f, "-0.5"},
        /* just below a power of ten: the decimal may round up to it, a digit longer */
        {0x1.2a05f2p+33f, "10000000000"}, {0x1.fffffep-1f, "0.99999994"},
        /* the smallest subnormal computed, and the largest left to printf */
        {0x1.9p-143f, "1.4e-43"}, {0x1.8cp-143f, "1.39e-43"},
        /* d.ddd and 0.0000ddd share a layout, down to 10^-5; a lone digit has no point */
        {5.0f, "5"}, {-1.5f, "-1.5"}, {0x1.4f8b58p-17f, "0.00001"}, {0x1.0c6f7ap-20f, "1e-6"},
    };
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) {
        char b[CR_NUMFMT_MAX];
        cr_fmt_f32(b, special[i].v);
        CHECK_MSG(strcmp(b, special[i].text) == 0, "f32 %a -> %s, want %s", (double)special[i].v, b,
                  special[i].text);
    }
}

static void test_numfmt(void)
{
    test_f32_shortest();
    char b[CR_NUMFMT_MAX];
    long bad32 = 0, bad64 = 0;
    for (long i = 0; i < 2000000; i++) {
        uint32_t u = (uint32_t)rng();
        float f;
        memcpy(&f, &u, sizeof f);
        if (i % 2)
            f = (float)(rng() % 2000001) / 997.0f - 1000.0f;
        if (!isfinite(f))
            continue;
        size_t n = cr_fmt_f32(b, f);
        float g = strtof(b, NULL), h = (float)strtod(b, NULL);
        if (n != strlen(b) || memcmp(&g, &f, 4) || memcmp(&h, &f, 4))
            if (bad32++ < 5)
                fprintf(stderr, "f32 %a -> %s\n", (double)f, b);
    }
    CHECK_MSG(bad32 == 0, "float32 round trips (%ld bad)", bad32);
    for (long i = 0; i < 1000000; i++) {
        uint64_t u = rng();
        double d;
        memcpy(&d, &u, sizeof d);
        if (i % 3 == 1)
            d = ldexp((double)(rng() >> 11), -(int)(rng() % 90));
        if (i % 3 == 2)
            d = (double)(rng() % 100000000) / 1000.0;
        if (!isfinite(d))
            continue;
        size_t n = cr_fmt_f64(b, d);
        double g = strtod(b, NULL);
        if (n != strlen(b) || memcmp(&g, &d, 8))
            if (bad64++ < 5)
                fprintf(stderr, "f64 %a -> %s\n", d, b);
    }
    CHECK_MSG(bad64 == 0, "float64 round trips (%ld bad)", bad64);

    static const struct { float v; const char *text; } f32[] = {
        {0.1f, "0.1"}, {1.0f, "1"}, {-2.5f, "-2.5"}, {0.0f, "0"}, {-0.0f, "-0"},
        {1e-45f, "1e-45"}, {3.4028235e38f, "3.4028235e38"}, {16777216.0f, "16777216"},
        {123456.7f, "123456.7"}, {1e-6f, "0.000001"}, {0.3f, "0.3"},
    };
    for (size_t i = 0; i < sizeof f32 / sizeof f32[0]; i++) {
        cr_fmt_f32(b, f32[i].v);
        float back = strtof(b, NULL);
        CHECK_MSG(strcmp(b, f32[i].text) == 0 || (strlen(b) <= strlen(f32[i].text) && back == f32[i].v),
              "f32 %g -> %s, want %s", (double)f32[i].v, b, f32[i].text);
    }
    cr_fmt_f64(b, 0.1);
    CHECK_MSG(strcmp(b, "0.1") == 0, "0.1 -> %s", b);
    cr_fmt_f64(b, 0.30000000000000004);
    CHECK_MSG(strcmp(b, "0.30000000000000004") == 0, "0.30000000000000004 -> %s", b);
    cr_fmt_f64(b, 5e-324);
    CHECK_MSG(strtod(b, NULL) == 5e-324, "denormal min -> %s", b);
    CHECK_MSG(cr_fmt_f64(b, INFINITY) == 4 && strcmp(b, "null") == 0, "inf -> null");
    CHECK_MSG(cr_fmt_f32(b, NAN) == 4 && strcmp(b, "null") == 0, "nan -> null");
    static const uint64_t ints[] = {0, 9, 10, 99, 100, 12345678901234567890ull, UINT64_MAX};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        char want[32];
        snprintf(want, sizeof want, "%llu", (unsigned long long)ints[i]);
        CHECK_MSG(cr_fmt_u64(b, ints[i]) == strlen(want) && strcmp(b, want) == 0, "u64 %s -> %s",
              want, b);
    }
    cr_fmt_i64(b, INT64_MIN);
    CHECK_MSG(strcmp(b, "-9223372036854775808") == 0, "i64 min -> %s", b);
}

/* ---- bodies ---------------------------------------------------------------------------- */

/* Three decimals without printf: printf's text, but at a value within an ulp of a half
 * thousandth, where the last digit may differ by one. Server-Timing lists every phase. */
static void test_fixed3(void)
{
    static const double exact[] = {0, 0.0004, 0.0005001, 1, 2.5, 12.3456, 999.9994, 999.9996,
                                   123456789.123, 1e14, -1.5, 1e16, NAN, INFINITY};
    char got[CR_NUMFMT_MAX], want[64];
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
        size_t n = cr_fmt_fixed3(got, exact[i]);
        snprintf(want, sizeof want, "%.3f", exact[i]);
        CHECK_MSG(strcmp(got, want) == 0 && n == strlen(got), "fixed3(%.17g): %s, printf %s", exact[i], got, want);
    }
    unsigned seed = 7, off = 0;
    for (int i = 0; i < 200000; i++) {
        seed = seed * 1103515245u + 12345u;
        double v = (double)(seed >> 4) / (double)(1u << (seed % 24));
        cr_fmt_fixed3(got, v);
        snprintf(want, sizeof want, "%.3f", v);
        double frac = v * 1000 - floor(v * 1000);
        off += strcmp(got, want) != 0 && fabs(frac - 0.5) > 1e-6;
    }
    CHECK_MSG(off == 0, "%u random values away from a tie differ from printf", off);
    cr_phase_ms ms = {.receive = 1.25, .queue = 0.001, .h2d = 0, .kernel = 10.5, .d2h = 0.0005, .total = 12};
    char timing[256];
    cr_server_timing(&ms, timing, sizeof timing);
    CHECK_MSG(strcmp(timing, "receive;dur=1.250, queue;dur=0.001, h2d;dur=0.000, kernel;dur=10.500, "
                             "d2h;dur=0.001, total;dur=12.000") == 0, "Server-Timing: %s", timing);
}

static void test_error_body(void)
{
    cr_error e;
    size_t len;
    cr_fail(&e, 400, "invalid_field", "we\"ird\n", "field \"%s\" \\ is\tbad\x01 \xc3\xa9 \xff end",
            "we\"ird\n");
    char *s = cr_json_error(&e, &len);
    cJSON *j = parse(s, len);
    CHECK_MSG(str_is(j, "error.code", "invalid_field"), "code");
    CHECK_MSG(str_is(j, "error.field", "we\"ird\n"), "field escaped and read back");
    CHECK_MSG(str_is(j, "error.message",
                 "field \"we\"ird\n\" \\ is\tbad\x01 \xc3\xa9 \xef\xbf\xbd end"),
          "message escaped, invalid UTF-8 replaced: %s", s);
    cJSON_Delete(j);
    free(s);

    cr_fail(&e, 404, "not_found", "", "no such job");
    s = cr_json_error(&e, &len);
    j = parse(s, len);
    CHECK_MSG(str_is(j, "error.code", "not_found") && get(j, "error.field") == NULL,
          "field left out when empty: %s", s);
    cJSON_Delete(j);
    free(s);
}

/* Registry rows as the engine would point a job at them (by name only: nothing runs here). */
static const cr_kernel cublas_row = {.name = "cublas", .backend = CR_BACKEND_CUDA, .op = CR_OP_GEMM};
static const cr_kernel symtile_row = {.name = "symtile", .backend = CR_BACKEND_CUDA, .op = CR_OP_ATA};
static const cr_kernel syrk_row = {.name = "cublas-syrk", .backend = CR_BACKEND_CUDA, .op = CR_OP_ATA};

static cr_job *new_job(cr_op op, cr_dtype dt)
{
    cr_job *j = calloc(1, sizeof *j);
    snprintf(j->id, sizeof j->id, "6f1c0000-0000-4000-8000-000000000001");
    j->req.task.op = op;
    j->req.task.dtype = dt;
    j->req.kernel = cr_kernel_choice_auto();
    snprintf(j->device, sizeof j->device, "NVIDIA H100 80GB HBM3");
    j->req.task.kernel = &cublas_row;
    j->ran = true;
    j->ms = (cr_phase_ms){.queue = 0.01, .h2d = 0.02, .kernel = 0.5, .d2h = 0.01, .total = 0.3};
    atomic_store(&j->state, CR_JOB_DONE);
    return j;
}

static void test_gemm_result(cr_dtype dt)
{
    cr_job *j = new_job(CR_OP_GEMM, dt);
    cr_gemm_task *g = &j->req.task.u.gemm;
    g->m = 37;
    g->n = 29;
    g->k = 11;
    size_t n = (size_t)(g->m * g->n);
    void *c = malloc(n * (dt == CR_DT_F64 ? 8 : 4));
    for (size_t i = 0; i < n; i++) {
        uint64_t u = rng();
        if (dt == CR_DT_F64) {
            double d;
            memcpy(&d, &u, 8);
            ((double *)c)[i] = isfinite(d) ? d : 1.0 / 3;
        } else {
            float f;
            uint32_t w = (uint32_t)u;
            memcpy(&f, &w, 4);
            ((float *)c)[i] = isfinite(f) ? f : (float)(u % 1000) / 7.0f;
        }
    }
    if (dt == CR_DT_F32)
        ((float *)c)[5] = INFINITY; /* overflow in a kernel: encoded as null */
    g->c_out = c;
    size_t len;
    char *s = cr_json_job_result(j, "cuda", &len);
    cJSON *o = parse(s, len);
    CHECK_MSG(str_is(o, "id", j->id) && str_is(o, "op", "gemm") && str_is(o, "kernel", "cublas") &&
              str_is(o, "backend", "cuda") && str_is(o, "device", "NVIDIA H100 80GB HBM3") &&
              str_is(o, "dtype", cr_dtype_name(dt)),
          "gemm header fields");
    CHECK_MSG(get(o, "result.rows")->valuedouble == 37 && get(o, "result.cols")->valuedouble == 29,
          "result shape");
    const cJSON *data = get(o, "result.data");
    CHECK_MSG(cJSON_GetArraySize(data) == (int)n, "result has m*n numbers");
    size_t i = 0, mismatches = 0;
    for (const cJSON *e = data ? data->child : NULL; e; e = e->next, i++) {
        if (dt == CR_DT_F64) {
            double want = ((double *)c)[i];
            if (!cJSON_IsNumber(e) || memcmp(&e->valuedouble, &want, 8))
                mismatches++;
        } else if (i == 5) {
            CHECK_MSG(cJSON_IsNull(e), "inf -> null");
        } else {
            float got = (float)e->valuedouble, want = ((float *)c)[i];
            if (!cJSON_IsNumber(e) || memcmp(&got, &want, 4))
                mismatches++;
        }
    }
    CHECK_MSG(mismatches == 0, "%s values round-trip exactly (%zu mismatches)", cr_dtype_name(dt),
          mismatches);
    CHECK_MSG(get(o, "timings_ms.kernel")->valuedouble == 0.5 &&
              get(o, "timings_ms.queue")->valuedouble == 0.01 &&
              get(o, "timings_ms.total")->valuedouble == 0.3,
          "timings");
    double gflops = 2.0 * 37 * 29 * 11 / 0.5e-3 / 1e9;
    CHECK_MSG(fabs(get(o, "gflops")->valuedouble - gflops) <= 1e-12 * gflops && !get(o, "gbps") &&
              !get(o, "kernels"),
          "gflops %g", get(o, "gflops")->valuedouble);
    cJSON_Delete(o);
    free(s);
    free(c);
    free(j);
}

static void test_ata_compare(void)
{
    cr_job *j = new_job(CR_OP_ATA, CR_DT_F32);
    j->req.task.u.ata.m = 3;
    j->req.task.u.ata.n = 2;
    float c[4] = {1, 2, 2, 5};
    j->req.task.u.ata.c_out = c;
    j->ms.kernel = 0; /* not measured: rate 0, never a division by zero */
    cr_compare_row rows[2] = {
        {.kernel = &symtile_row, .status = CR_OK, .ms = 0.41, .rate = 1234.5, .max_rel_error = 3e-7},
        {.kernel = &syrk_row, .status = CR_E_NOMEM_DEVICE, .ms = 0, .rate = 0,
         .max_rel_error = 0},
    };
    j->compare = rows;
    j->n_compare = 2;
    size_t len;
    char *s = cr_json_job_result(j, "cpu", &len);
    cJSON *o = parse(s, len);
    CHECK_MSG(str_is(o, "op", "ata") && get(o, "result.rows")->valuedouble == 2 &&
              cJSON_GetArraySize(get(o, "result.data")) == 4 && get(o, "gflops")->valuedouble == 0,
          "ata body: %s", s);
    const cJSON *k = get(o, "kernels");
    CHECK_MSG(cJSON_GetArraySize(k) == 2, "kernels rows");
    const cJSON *k0 = cJSON_GetArrayItem(k, 0), *k1 = cJSON_GetArrayItem(k, 1);
    CHECK_MSG(str_is(k0, "kernel", "symtile") && get(k0, "ms")->valuedouble == 0.41 &&
              get(k0, "gflops")->valuedouble == 1234.5 &&
              get(k0, "max_rel_error")->valuedouble == 3e-7 && str_is(k0, "status", "ok"),
          "compare row 0");
    CHECK_MSG(str_is(k1, "kernel", "cublas-syrk") && str_is(k1, "status", "device_memory"),
          "compare row 1 status");
    cJSON_Delete(o);
    free(s);
    free(j);
}

static void test_histogram_result(void)
{
    cr_job *j = new_job(CR_OP_HISTOGRAM, CR_DT_U8);
    cr_hist_task *h = &j->req.task.u.hist;
    uint64_t counts[256] = {0};
    counts[0] = 3;
    counts[255] = UINT64_MAX;
    h->bins = 256;
    h->lo = 0;
    h->hi = 256;
    h->count = 1000;
    h->counts = counts;
    size_t len;
    char *s = cr_json_job_result(j, "cpu", &len);
    cJSON *o = parse(s, len);
    CHECK_MSG(get(o, "result.bins")->valuedouble == 256 &&
              cJSON_GetArraySize(get(o, "result.counts")) == 256 && !get(o, "result.edges"),
          "u8 histogram");
    CHECK_MSG(strstr(s, ",18446744073709551615]") != NULL, "64-bit counts written exactly");
    CHECK_MSG(get(o, "gbps")->valuedouble == 1000 / 0.5e-3 / 1e9 && !get(o, "gflops"), "gbps");
    cJSON_Delete(o);
    free(s);

    j->req.is_float_hist = true;
    j->req.task.dtype = CR_DT_F32;
    h->bins = 10;
    h->lo = -1;
    h->hi = 0.1;
    s = cr_json_job_result(j, "cpu", &len);
    o = parse(s, len);
    const cJSON *edges = get(o, "result.edges");
    CHECK_MSG(cJSON_GetArraySize(edges) == 11, "bins + 1 edges");
    int edges_ok = 1;
    for (int i = 0; i <= 10; i++) {
        float want = (float)(i == 10 ? 0.1 : -1 + i * (1.1 / 10));
        edges_ok &= (float)cJSON_GetArrayItem(edges, i)->valuedouble == want;
    }
    CHECK_MSG(edges_ok, "edges are numpy.linspace(lo, hi, bins + 1) in float32: %s", s);
    cJSON_Delete(o);
    free(s);
    free(j);
}

static void test_status_bodies(void)
{
    cr_job *j = new_job(CR_OP_GEMM, CR_DT_F32);
    size_t len;
    char *s = cr_json_accepted(j, &len);
    cJSON *o = parse(s, len);
    CHECK_MSG(str_is(o, "id", j->id) && str_is(o, "status", "queued") && cJSON_GetArraySize(o) == 2,
          "accepted: %s", s);
    cJSON_Delete(o);
    free(s);

    static const struct { cr_job_state st; const char *name; int timings, error; } cases[] = {
        {CR_JOB_QUEUED, "queued", 0, 0},   {CR_JOB_RUNNING, "running", 0, 0},
        {CR_JOB_DONE, "done", 1, 0},       {CR_JOB_FAILED, "failed", 1, 1},
        {CR_JOB_CANCELLED, "cancelled", 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        atomic_store(&j->state, cases[i].st);
        cr_fail(&j->error, 504, "deadline_exceeded", cases[i].st == CR_JOB_FAILED ? "timeout_ms" : "",
                "job ran past its deadline");
        s = cr_json_job_status(j, &len);
        o = parse(s, len);
        CHECK_MSG(str_is(o, "id", j->id) && str_is(o, "op", "gemm") &&
                  str_is(o, "status", cases[i].name) &&
                  (get(o, "timings_ms") != NULL) == cases[i].timings &&
                  (get(o, "error") != NULL) == cases[i].error,
              "status %s: %s", cases[i].name, s);
        if (cases[i].error)
            CHECK_MSG(str_is(o, "error.code", "deadline_exceeded") &&
                      (get(o, "error.field") != NULL) == (cases[i].st == CR_JOB_FAILED),
                  "status error object: %s", s);
        cJSON_Delete(o);
        free(s);
    }
    CHECK_MSG(strcmp(cr_job_state_name((cr_job_state)42), "unknown") == 0, "bad state name");
    free(j);
}

/* cr_jbuf_numbers writes what formatting each value alone writes, comma-separated, at every
 * count around its 256-value blocks, for each dtype, after text already in the buffer. */
static void test_number_lists(void)
{
    static const uint64_t counts[] = {0, 1, 2, 255, 256, 257, 511, 512, 513, 1000};
    static float f[1000];
    static double d[1000];
    static uint64_t u[1000];
    for (int i = 0; i < 1000; i++) {
        uint64_t r = rng();
        f[i] = (float)((double)(int64_t)r / 9.2e18 * pow(10, (double)(i % 77 - 38)));
        d[i] = (double)(int64_t)r / 3.3e18 * pow(10, (double)(i % 601 - 300));
        u[i] = r >> (i % 64);
    }
    f[7] = -0.0f, d[8] = NAN, f[9] = INFINITY; /* nulls and a negative zero, as the encoders write them */
    const struct {
        cr_dtype dt;
        const void *v;
    } kinds[] = {{CR_DT_F32, f}, {CR_DT_F64, d}, {CR_DT_U64, u}};
    for (size_t k = 0; k < 3; k++)
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            cr_jbuf got = {0}, want = {0};
            cr_jbuf_lit(&got, "x:");
            cr_jbuf_lit(&want, "x:[");
            cr_jbuf_numbers(&got, kinds[k].v, counts[c], kinds[k].dt);
            for (uint64_t i = 0; i < counts[c]; i++) {
                if (i)
                    cr_jbuf_put(&want, ",", 1);
                if (kinds[k].dt == CR_DT_F32)
                    cr_jbuf_f32(&want, f[i]);
                else if (kinds[k].dt == CR_DT_F64)
                    cr_jbuf_f64(&want, d[i]);
                else
                    cr_jbuf_u64(&want, u[i]);
            }
            cr_jbuf_put(&want, "]", 1);
            size_t gl = 0, wl = 0;
            char *g = cr_jbuf_finish(&got, &gl), *w = cr_jbuf_finish(&want, &wl);
            CHECK_MSG(g && w && gl == wl && memcmp(g, w, gl) == 0 && g[gl] == '\0',
                      "%s, %llu numbers: lists differ", cr_dtype_name(kinds[k].dt), (unsigned long long)counts[c]);
            free(g);
            free(w);
        }
}

int main(void)
{
    test_number_lists();
    test_numfmt();
    test_fixed3();
    test_error_body();
    test_gemm_result(CR_DT_F32);
    test_gemm_result(CR_DT_F64);
    test_ata_compare();
    test_histogram_result();
    test_status_bodies();
    return check_summary("test_json_response");
}
