/* JSON decode/encode throughput for big numeric arrays, one core (design.md target: >= 150 MB/s
 * per core each way, a request's peak memory <= 3x its body). `make bench-json` builds and runs
 * it; `build/bench/json_bench [side]` alone (default 1024: two side x side float32 matrices).
 *
 * Cases: GEMM bodies in the dict form and the nested-list form with float32 numbers as numpy
 * prints them (shortest repr, ~11 bytes), and with 17-digit float64 numbers (Python's repr of
 * random doubles: the strtod slow path); the float32 and float64 result encoders.
 *
 * Memory: peak resident memory is read from getrusage's ru_maxrss (the process's high-water
 * mark). The bench first builds every body and touches the output buffers, so the mark already
 * covers them; what decode adds on top is its peak working memory (parse tree, skeleton, request
 * arrays). Reported: (body + that) / body, i.e. the request's peak including its own body. The
 * mark only rises, so each case runs in a fresh child process. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "server/engine/job.h"
#include "server/codec/json_encode.h"
#include "server/codec/numfmt.h"
#include "server/codec/json_decode.h"

typedef enum { FORM_DICT, FORM_NESTED } form;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long maxrss_bytes(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss * 1024L;
}

static double next_value(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* Appends one number as a client would send it: float32 shortest repr, or float64 %.17g. */
static size_t put_number(char *out, double v, bool f64)
{
    if (f64)
        return (size_t)sprintf(out, "%.17g", v);
    return cr_fmt_f32(out, (float)v);
}

static size_t put_matrix(char *body, size_t len, const char *name, long side, form f, bool f64,
                         uint64_t *seed)
{
    if (f == FORM_DICT)
        len += (size_t)sprintf(body + len, "\"%s\":{\"rows\":%ld,\"cols\":%ld,\"data\":[", name,
                               side, side);
    else
        len += (size_t)sprintf(body + len, "\"%s\":[", name);
    for (long i = 0; i < side; i++) {
        if (f == FORM_NESTED)
            len += (size_t)sprintf(body + len, "%s[", i ? "," : "");
        for (long j = 0; j < side; j++) {
            if (j || (i && f == FORM_DICT))
                body[len++] = ',';
            len += put_number(body + len, next_value(seed), f64);
        }
        if (f == FORM_NESTED)
            body[len++] = ']';
    }
    len += (size_t)sprintf(body + len, f == FORM_DICT ? "]}" : "]");
    return len;
}

static char *make_body(long side, form f, bool f64, size_t *len)
{
    size_t cap = (size_t)side * (size_t)side * 2 * 26 + (size_t)side * 8 + 256;
    char *body = malloc(cap);
    uint64_t seed = 12345;
    if (!body)
        return NULL;
    *len = (size_t)sprintf(body, "{\"dtype\":\"%s\",", f64 ? "float64" : "float32");
    *len = put_matrix(body, *len, "a", side, f, f64, &seed);
    body[(*len)++] = ',';
    *len = put_matrix(body, *len, "b", side, f, f64, &seed);
    body[(*len)++] = '}';
    char *fit = realloc(body, *len); /* only the body's own bytes stay resident */
    return fit ? fit : body;
}

static int decode_case(long side, form f, bool f64)
{
    size_t len;
    char *body = make_body(side, f, f64, &len);
    if (!body)
        return 1;
    cr_limits lim = {.max_elements = 1ull << 30, .max_total_bytes = 1ull << 34, .max_bins = 1 << 20};
    cr_request r;
    cr_error e;
    long before = maxrss_bytes();
    double t0 = now();
    int rc = cr_request_from_json(CR_OP_GEMM, body, len, &lim, &r, &e);
    double t1 = now();
    long grew = maxrss_bytes() - before;
    if (rc != 0) {
        fprintf(stderr, "decode failed: %s\n", e.message);
        return 1;
    }
    printf("decode %-6s %-7s %7.1f MB body: %6.1f MB/s per core, peak memory %.2fx body "
           "(body + %.1f MB of decoding)\n",
           f == FORM_DICT ? "dict" : "nested", f64 ? "float64" : "float32", (double)len / 1e6,
           (double)len / (t1 - t0) / 1e6, (double)(len + (size_t)(grew > 0 ? grew : 0)) / (double)len,
           (double)grew / 1e6);
    cr_request_free(&r);
    free(body);
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
    printf("encode        %-7s %7.1f MB answer: %6.1f MB/s per core\n", cr_dtype_name(dt),
           (double)out_len / 1e6, (double)out_len / (t1 - t0) / 1e6);
    free(out);
    cr_request_free(&j->req);
    free(j);
    return 0;
}

/* Each case in its own process: ru_maxrss is a high-water mark that never comes down. */
static int run_isolated(int (*fn)(long, int, int), long side, int a, int b)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        int rc = fn(side, a, b);
        fflush(stdout); /* _exit does not flush stdio */
        _exit(rc);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) < 0)
        return 1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

static int decode_thunk(long side, int f, int f64) { return decode_case(side, (form)f, f64 != 0); }
static int encode_thunk(long side, int dt, int unused) { return (void)unused, encode_case(side, (cr_dtype)dt); }

int main(int argc, char **argv)
{
    long side = argc > 1 ? atol(argv[1]) : 1024;
    int rc = 0;
    printf("JSON bench: two %ld x %ld matrices per body, one core\n", side, side);
    rc |= run_isolated(decode_thunk, side, FORM_DICT, 0);
    rc |= run_isolated(decode_thunk, side, FORM_NESTED, 0);
    rc |= run_isolated(decode_thunk, side, FORM_DICT, 1);
    rc |= run_isolated(encode_thunk, side * 1.41421356, CR_DT_F32, 0);
    rc |= run_isolated(encode_thunk, side * 1.41421356, CR_DT_F64, 0);
    printf("targets: >= 150 MB/s per core each way; peak memory <= 3x body. Peak memory is\n"
           "ru_maxrss (high-water RSS) after decode minus before, plus the body, over the body.\n");
    return rc;
}
