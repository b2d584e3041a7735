/* JSON decode/encode throughput for big numeric arrays (design.md target: >= 150 MB/s per core,
 * a request's peak memory <= 3x its body). Not built by make (bench/ builds .cu); run:
 *   gcc -std=c11 -D_GNU_SOURCE -O2 -I. bench/json_bench.c server/error.c server/json_request.c \
 *       server/json_matrix.c server/json_response.c server/numfmt.c server/job_state.c \
 *       kernels/backend.c -lcjson -lm -o /tmp/json_bench && /tmp/json_bench [n]
 * Prints MB/s of body decoded and of response encoded, and the decoder's peak heap bytes
 * (malloc_info-free: counted through cJSON's hooks plus the request's buffers). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/job.h"
#include "server/json_response.h"
#include "server/numfmt.h"
#include "server/request.h"

static size_t live, peak;

/* cJSON's allocations, counted, so the bench can report the parse tree's share of memory. */
static void *count_malloc(size_t n)
{
    size_t *p = malloc(n + sizeof(size_t));
    if (!p)
        return NULL;
    *p = n;
    live += n;
    peak = live > peak ? live : peak;
    return p + 1;
}

static void count_free(void *q)
{
    if (!q)
        return;
    size_t *p = (size_t *)q - 1;
    live -= *p;
    free(p);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    long side = argc > 1 ? atol(argv[1]) : 1024;
    long n = side * side;
    size_t cap = (size_t)n * 2 * 16 + 256, len = 0;
    char *body = malloc(cap);
    if (!body)
        return 1;
    len += (size_t)snprintf(body, cap, "{\"a\":{\"rows\":%ld,\"cols\":%ld,\"data\":[", side, side);
    uint64_t s = 12345;
    for (int m = 0; m < 2; m++) {
        for (long i = 0; i < n; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            float f = (float)(s >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
            if (i)
                body[len++] = ',';
            len += cr_fmt_f32(body + len, f);
        }
        len += (size_t)snprintf(body + len, cap - len, m == 0 ? "]},\"b\":{\"rows\":%ld,\"cols\":%ld,\"data\":[" : "]}}", side, side);
    }
    cJSON_Hooks hooks = {count_malloc, count_free};
    cJSON_InitHooks(&hooks);
    cr_limits lim = {.max_elements = 1ull << 30, .max_total_bytes = 1ull << 34, .max_bins = 1 << 20};
    cr_request r;
    cr_error e;
    double t0 = now();
    int rc = cr_request_from_json(CR_OP_GEMM, body, len, &lim, &r, &e);
    double t1 = now();
    if (rc != 0) {
        fprintf(stderr, "decode failed: %s\n", e.message);
        return 1;
    }
    size_t bufs = r.buf_bytes[0] + r.buf_bytes[1];
    printf("decode: %.1f MB body, %.1f MB/s, peak parse tree %.1f MB + buffers %.1f MB = %.2fx body "
           "(plus the body itself)\n",
           (double)len / 1e6, (double)len / (t1 - t0) / 1e6, (double)peak / 1e6,
           (double)bufs / 1e6, (double)(peak + bufs) / (double)len);

    cr_job *j = calloc(1, sizeof *j);
    if (!j)
        return 1;
    j->req = r;
    if (cr_request_alloc_output(&j->req, &e) != 0)
        return 1;
    memcpy(j->req.task.u.gemm.c_out, j->req.task.u.gemm.a, (size_t)n * sizeof(float));
    size_t out_len;
    t0 = now();
    char *out = cr_json_job_result(j, "cpu", &out_len);
    t1 = now();
    if (!out)
        return 1;
    printf("encode float32: %.1f MB, %.1f MB/s\n", (double)out_len / 1e6,
           (double)out_len / (t1 - t0) / 1e6);
    free(out);
    cr_request_free(&j->req);
    free(j);
    free(body);
    return 0;
}
