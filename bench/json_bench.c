/* JSON decode/encode throughput and peak memory for big numeric arrays, one core (design.md
 * target: >= 150 MB/s per core each way, a request's peak memory <= 3x its body).
 * `make bench-json` builds and runs it; `build/bench/json_bench [side]` alone (default 1024:
 * every decode body holds 2 x side x side numbers).
 *
 * Decode cases, one per shape a client can send: GEMM bodies in the dict and the nested form,
 * matrices as rows of 1, 2, 15, 16 and 1000 numbers (AᵀA bodies: one matrix), histogram data,
 * the KServe v2 tensors (flat and nested), and the bodies that are refused after reading
 * (ragged rows, nested histogram data: the issue-14 body). Numbers are written as clients write
 * them: float32 shortest repr (~11 bytes), float64 as %.17g (Python's repr of random doubles:
 * the strtod slow path), plus the worst case for the text-to-array ratio, one-digit integers.
 *
 * Memory: each case runs in a fresh child process, which builds its body, resets its peak RSS
 * to the current one (/proc/self/clear_refs, "5"; ru_maxrss growth where that is refused) and
 * decodes. "peak" is (body + growth) / body: the request's peak including its own body, as the
 * daemon holds it. "arrays" is the part of it that is the decoded arrays themselves (what a
 * .npy upload of the same data would need too); "work" is the rest: parse trees, skeleton,
 * span bookkeeping, allocator slack. Malloc is set up as the daemon sets it (main.c). */
#include <cjson/cJSON.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "server/codec/json_decode.h"
#include "server/codec/json_encode.h"
#include "server/codec/numfmt.h"
#include "server/engine/job.h"
#include "server/kserve/kserve_internal.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- peak memory -------------------------------------------------------------------------- */

static long status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == ':')
            v = atol(line + n + 1);
    fclose(f);
    return v;
}

static long maxrss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* The peak from here on starts at the current RSS, so building the body does not count. */
typedef struct {
    long base_kb;
    bool hwm; /* VmHWM was reset; else ru_maxrss growth */
} peak_mark;

static peak_mark peak_reset(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    peak_mark m = {maxrss_kb(), false};
    if (f) {
        m.hwm = fputs("5", f) >= 0;
        m.hwm = fclose(f) == 0 && m.hwm;
    }
    if (m.hwm)
        m.base_kb = status_kb("VmRSS");
    return m;
}

static long peak_growth_bytes(peak_mark m)
{
    long now_kb = m.hwm ? status_kb("VmHWM") : maxrss_kb();
    return (now_kb - m.base_kb) * 1024L;
}

/* ---- bodies ------------------------------------------------------------------------------- */

typedef struct {
    char *p;
    size_t len, cap;
} text;

static void grow(text *t, size_t more)
{
    if (t->len + more <= t->cap)
        return;
    size_t cap = t->cap ? t->cap : 1 << 20;
    while (cap < t->len + more)
        cap *= 2;
    char *p = realloc(t->p, cap);
    if (!p) {
        fprintf(stderr, "json_bench: out of memory building a body\n");
        exit(1);
    }
    t->p = p;
    t->cap = cap;
}

static void put(text *t, const char *fmt, ...)
{
    va_list ap;
    grow(t, 256);
    va_start(ap, fmt);
    t->len += (size_t)vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
}

typedef enum { NUM_F32, NUM_F64, NUM_DIGIT } numbers;

static double next_value(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* One number as a client writes it: float32 shortest repr, float64 %.17g, or a digit 0..9. */
static void put_number(text *t, numbers kind, uint64_t *seed)
{
    double v = next_value(seed);
    grow(t, 32);
    if (kind == NUM_F64)
        t->len += (size_t)sprintf(t->p + t->len, "%.17g", v);
    else if (kind == NUM_F32)
        t->len += cr_fmt_f32(t->p + t->len, (float)v);
    else
        t->p[t->len++] = (char)('0' + (int)((v + 1.0) * 4.99));
}

static void put_list(text *t, long n, numbers kind, uint64_t *seed)
{
    put(t, "[");
    for (long i = 0; i < n; i++) {
        if (i)
            put(t, ",");
        put_number(t, kind, seed);
    }
    put(t, "]");
}

/* rows x cols as a list of rows; the last row one number short when ragged. */
static void put_rows(text *t, long rows, long cols, numbers kind, bool ragged, uint64_t *seed)
{
    put(t, "[");
    for (long i = 0; i < rows; i++) {
        put(t, i ? ",[" : "[");
        long n = ragged && i == rows - 1 ? cols - 1 : cols;
        for (long j = 0; j < n; j++) {
            if (j)
                put(t, ",");
            put_number(t, kind, seed);
        }
        put(t, "]");
    }
    put(t, "]");
}

/* ---- cases -------------------------------------------------------------------------------- */

typedef enum {
    GEMM_DICT,   /* {"a": {"rows","cols","data"}, "b": ...} */
    GEMM_NESTED, /* {"a": [[...]], "b": [[...]]} */
    ATA_ROWS,    /* {"a": [[...], ...]} rows of `cols` numbers */
    ATA_RAGGED,  /* the same, last row short: refused */
    HIST_FLAT,   /* {"data": [...]} */
    HIST_NESTED, /* {"data": [[1], [1], ...]}: refused */
    KS_GEMM,     /* KServe gemm, a and b flat or nested */
    KS_ATA_ROWS, /* KServe ata, a as rows of `cols` */
    KS_HIST,     /* KServe histogram, data flat */
} shape;

typedef struct {
    const char *name;
    shape shape;
    numbers kind;
    long cols;   /* rows shapes: numbers per row */
    bool nested; /* KS_GEMM */
    bool refused;
} bench_case;

static const bench_case cases[] = {
    {"gemm dict f32", GEMM_DICT, NUM_F32, 0, false, false},
    {"gemm nested f32", GEMM_NESTED, NUM_F32, 0, false, false},
    {"gemm dict f64", GEMM_DICT, NUM_F64, 0, false, false},
    {"ata rows of 1 f32", ATA_ROWS, NUM_F32, 1, false, false},
    {"ata rows of 1 f64", ATA_ROWS, NUM_F64, 1, false, false},
    {"ata rows of 1 digit", ATA_ROWS, NUM_DIGIT, 1, false, false},
    {"ata rows of 2 f32", ATA_ROWS, NUM_F32, 2, false, false},
    {"ata rows of 15 f32", ATA_ROWS, NUM_F32, 15, false, false},
    {"ata rows of 16 f32", ATA_ROWS, NUM_F32, 16, false, false},
    {"ata rows of 1000 f32", ATA_ROWS, NUM_F32, 1000, false, false},
    {"hist f32", HIST_FLAT, NUM_F32, 0, false, false},
    {"hist u8 digits", HIST_FLAT, NUM_DIGIT, 0, false, false},
    {"kserve gemm flat f32", KS_GEMM, NUM_F32, 0, false, false},
    {"kserve gemm nested f32", KS_GEMM, NUM_F32, 0, true, false},
    {"kserve ata rows of 1 f32", KS_ATA_ROWS, NUM_F32, 1, false, false},
    {"kserve ata rows of 2 f32", KS_ATA_ROWS, NUM_F32, 2, false, false},
    {"kserve hist f32", KS_HIST, NUM_F32, 0, false, false},
    {"ragged rows of 2 (400)", ATA_RAGGED, NUM_F32, 2, false, true},
    {"hist rows of 1 (400)", HIST_NESTED, NUM_DIGIT, 1, false, true},
};
#define N_CASES (sizeof cases / sizeof cases[0])

static const char *dtype_of(numbers kind, bool kserve)
{
    if (kserve)
        return kind == NUM_F64 ? "FP64" : "FP32";
    return kind == NUM_F64 ? "float64" : "float32";
}

static void ks_input(text *t, const char *name, long rows, long cols, const bench_case *c,
                     bool nested, uint64_t *seed)
{
    put(t, "{\"name\":\"%s\",\"datatype\":\"%s\",", name, dtype_of(c->kind, true));
    if (cols)
        put(t, "\"shape\":[%ld,%ld],\"data\":", rows, cols);
    else
        put(t, "\"shape\":[%ld],\"data\":", rows);
    if (nested)
        put_rows(t, rows, cols, c->kind, false, seed);
    else
        put_list(t, cols ? rows * cols : rows, c->kind, seed);
    put(t, "}");
}

/* A body of n numbers in the case's shape. */
static text make_body(const bench_case *c, long n)
{
    text t = {0};
    uint64_t seed = 12345;
    long side = 1;
    while ((side + 1) * (side + 1) * 2 <= n)
        side++;
    switch (c->shape) {
    case GEMM_DICT:
        put(&t, "{\"dtype\":\"%s\",\"a\":{\"rows\":%ld,\"cols\":%ld,\"data\":",
            dtype_of(c->kind, false), side, side);
        put_list(&t, side * side, c->kind, &seed);
        put(&t, "},\"b\":{\"rows\":%ld,\"cols\":%ld,\"data\":", side, side);
        put_list(&t, side * side, c->kind, &seed);
        put(&t, "}}");
        break;
    case GEMM_NESTED:
        put(&t, "{\"dtype\":\"%s\",\"a\":", dtype_of(c->kind, false));
        put_rows(&t, side, side, c->kind, false, &seed);
        put(&t, ",\"b\":");
        put_rows(&t, side, side, c->kind, false, &seed);
        put(&t, "}");
        break;
    case ATA_ROWS:
    case ATA_RAGGED:
        put(&t, "{\"dtype\":\"%s\",\"a\":", dtype_of(c->kind == NUM_F64 ? NUM_F64 : NUM_F32, false));
        put_rows(&t, n / c->cols, c->cols, c->kind, c->shape == ATA_RAGGED, &seed);
        put(&t, "}");
        break;
    case HIST_FLAT:
        put(&t, c->kind == NUM_DIGIT ? "{\"data\":" : "{\"dtype\":\"float32\",\"range\":[-1,1],\"data\":");
        put_list(&t, n, c->kind, &seed);
        put(&t, "}");
        break;
    case HIST_NESTED:
        put(&t, "{\"data\":");
        put_rows(&t, n, 1, c->kind, false, &seed);
        put(&t, "}");
        break;
    case KS_GEMM:
        put(&t, "{\"inputs\":[");
        ks_input(&t, "a", side, side, c, c->nested, &seed);
        put(&t, ",");
        ks_input(&t, "b", side, side, c, c->nested, &seed);
        put(&t, "]}");
        break;
    case KS_ATA_ROWS:
        put(&t, "{\"inputs\":[");
        ks_input(&t, "a", n / c->cols, c->cols, c, true, &seed);
        put(&t, "]}");
        break;
    case KS_HIST:
        put(&t, "{\"parameters\":{\"range_lo\":-1,\"range_hi\":1},\"inputs\":[");
        ks_input(&t, "data", n, 0, c, false, &seed);
        put(&t, "]}");
        break;
    }
    char *fit = realloc(t.p, t.len); /* only the body's own bytes stay resident */
    t.p = fit ? fit : t.p;
    t.cap = t.len;
    return t;
}

static const cr_ks_model *ks_model(shape s)
{
    const char *name = s == KS_GEMM ? "gemm" : s == KS_ATA_ROWS ? "ata" : "histogram";
    return cr_ks_model_find(name, strlen(name));
}

static cr_op v1_op(shape s)
{
    return s == GEMM_DICT || s == GEMM_NESTED ? CR_OP_GEMM
           : s == ATA_ROWS || s == ATA_RAGGED ? CR_OP_ATA
                                              : CR_OP_HISTOGRAM;
}

/* What a child reports back to the parent, through a pipe. */
typedef struct {
    double body_mb, mbps, peak, arrays, work;
    int status; /* 0 decoded, else the error's HTTP status */
    char code[32];
} result;

static int decode_case(const bench_case *c, long n, result *out)
{
    text body = make_body(c, n);
    cr_limits lim = {.max_elements = 1ull << 31, .max_total_bytes = 1ull << 36, .max_bins = 1 << 20};
    cr_request r;
    cr_ks_spec spec;
    cr_error e = {0};
    bool ks = c->shape >= KS_GEMM;
    peak_mark mark = peak_reset();
    double t0 = now();
    int rc = ks ? cr_ks_decode(ks_model(c->shape), body.p, body.len, -1, &lim, &r, &spec, &e)
                : cr_request_from_json(v1_op(c->shape), body.p, body.len, &lim, &r, &e);
    double t1 = now();
    long grew = peak_growth_bytes(mark);
    size_t arrays = 0;
    if (rc == 0)
        for (int i = 0; i < CR_BUF_OUTPUT; i++)
            arrays += r.buf_bytes[i];
    double len = (double)body.len;
    grew = grew > 0 ? grew : 0;
    *out = (result){len / 1e6, len / (t1 - t0) / 1e6, (len + (double)grew) / len,
                    (double)arrays / len, ((double)grew - (double)arrays) / len,
                    rc == 0 ? 0 : e.http, ""};
    snprintf(out->code, sizeof out->code, "%s", rc == 0 ? "ok" : e.code);
    if (rc == 0) {
        cr_request_free(&r);
        if (ks)
            cr_ks_spec_free(&spec);
    }
    free(body.p);
    return 0;
}

static int encode_case(long side, cr_dtype dt)
{
    cr_job *j = calloc(1, sizeof *j);
    if (!j)
        return 1;
    cr_error e;
    uint64_t seed = 99;
    j->req.task.op = CR_OP_GEMM;
    j->req.task.dtype = dt;
    j->req.task.u.gemm.m = j->req.task.u.gemm.n = side;
    if (cr_request_alloc_output(&j->req, &e) != 0)
        return 1;
    for (long i = 0; i < side * side; i++) {
        double v = next_value(&seed);
        if (dt == CR_DT_F32)
            ((float *)j->req.task.u.gemm.c_out)[i] = (float)v;
        else
            ((double *)j->req.task.u.gemm.c_out)[i] = v;
    }
    size_t out_len;
    double t0 = now();
    char *out = cr_json_job_result(j, "cpu", &out_len);
    double t1 = now();
    if (!out)
        return 1;
    printf("encode %-7s %7.1f MB answer: %6.1f MB/s per core\n", cr_dtype_name(dt),
           (double)out_len / 1e6, (double)out_len / (t1 - t0) / 1e6);
    free(out);
    cr_request_free(&j->req);
    free(j);
    return 0;
}

/* Each decode case in its own process (peak RSS only rises); its result comes back by pipe. */
static int run_decode(const bench_case *c, long n, result *out)
{
    int fd[2];
    if (pipe(fd) != 0)
        return 1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        close(fd[0]);
        result r;
        int rc = decode_case(c, n, &r);
        rc |= write(fd[1], &r, sizeof r) != (ssize_t)sizeof r;
        _exit(rc);
    }
    close(fd[1]);
    ssize_t got = read(fd[0], out, sizeof *out);
    close(fd[0]);
    int status = 0;
    if (waitpid(pid, &status, 0) < 0 || got != (ssize_t)sizeof *out)
        return 1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

static int run_encode(long side, cr_dtype dt)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        int rc = encode_case(side, dt);
        fflush(stdout); /* _exit does not flush stdio */
        _exit(rc);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) < 0)
        return 1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int main(int argc, char **argv)
{
    long side = argc > 1 ? atol(argv[1]) : 1024;
    const char *only = argc > 2 ? argv[2] : NULL; /* decode cases whose name holds it; no encode */
    long n = 2 * side * side;
    int rc = 0;
    mallopt(M_MMAP_THRESHOLD, 4 << 20); /* as the daemon (server/main.c) */
    printf("JSON bench: %ld numbers per decode body, one core\n", n);
    printf("%-26s %8s %8s %7s %7s %7s  %s\n", "decode", "body MB", "MB/s", "peak", "arrays",
           "work", "result");
    const bench_case *worst = NULL, *worst_refused = NULL;
    double worst_peak = 0, worst_refused_peak = 0;
    for (size_t i = 0; i < N_CASES; i++) {
        result r;
        if (only && !strstr(cases[i].name, only))
            continue;
        if (run_decode(&cases[i], n, &r) != 0) {
            printf("%-26s failed to run\n", cases[i].name);
            rc = 1;
            continue;
        }
        printf("%-26s %8.1f %8.1f %6.2fx %6.2fx %6.2fx  %s", cases[i].name, r.body_mb, r.mbps,
               r.peak, r.arrays, r.work, r.code);
        printf(r.status ? " %d\n" : "\n", r.status);
        if ((r.status != 0) != cases[i].refused) {
            printf("  ^ expected %s\n", cases[i].refused ? "a refusal" : "a decoded request");
            rc = 1;
        }
        if (!cases[i].refused && r.peak > worst_peak)
            worst = &cases[i], worst_peak = r.peak;
        if (cases[i].refused && r.peak > worst_refused_peak)
            worst_refused = &cases[i], worst_refused_peak = r.peak;
    }
    if (worst)
        printf("worst accepted shape: %s, peak %.2fx body\n", worst->name, worst_peak);
    if (worst_refused)
        printf("worst refused shape:  %s, peak %.2fx body\n", worst_refused->name,
               worst_refused_peak);
    if (only)
        return rc;
    rc |= run_encode((long)((double)side * 1.41421356), CR_DT_F32);
    rc |= run_encode((long)((double)side * 1.41421356), CR_DT_F64);
    printf("targets: >= 150 MB/s per core each way; peak <= 3x body. peak = (body + peak RSS\n"
           "growth while decoding) / body; arrays = the decoded arrays / body (the request's own\n"
           "data; over 2x when one-digit numbers become float64); work = peak - 1 - arrays.\n");
    return rc;
}
