/* Unit tests of binary uploads received through a backend's sink (server/codec/binary_decode.c
 * with backend.h's sink_*), on tests/unit/fake_sink.h: every way a body can be cut (fed bytes,
 * bytes received in place, slot edges, part edges) crosses many slots; a sink that breaks at any
 * byte fails the request with a 503 and leaves nothing charged or held; what a sink must not take
 * (histograms, compare mode, a scattered c, small parts) lands in host memory as before. */
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "server/codec/binary_decode.h"
#include "server/memory.h"
#include "tests/unit/fake_sink.h"

/* ---- bodies ------------------------------------------------------------------------------------ */

static size_t npy(uint8_t *out, const char *descr, int rows, int cols, bool fortran, const void *data, size_t bytes)
{
    char dict[160];
    snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': (%d, %d), }", descr,
             fortran ? "True" : "False", rows, cols);
    size_t dl = strlen(dict), total = (10 + dl + 1 + 63) / 64 * 64, hlen = total - 10;
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    out[8] = (uint8_t)hlen;
    out[9] = (uint8_t)(hlen >> 8);
    memcpy(out + 10, dict, dl);
    memset(out + 10 + dl, ' ', hlen - dl - 1);
    out[total - 1] = '\n';
    memcpy(out + total, data, bytes);
    return total + bytes;
}

static void fill(float *x, int n, int seed)
{
    for (int i = 0; i < n; i++)
        x[i] = (float)(seed * 1000 + i);
}

static cr_bin_request *new_request(cr_op op, const char *query_kernel, const cr_backend *b)
{
    cr_params p;
    cr_error err;
    cr_limits lim = cr_request_limits(NULL);
    cr_params_init(&p, op);
    if (query_kernel)
        CHECK(cr_params_set(&p, "kernel", query_kernel, &lim, &err) == 0);
    CHECK(cr_params_finish(&p, &err) == 0);
    return cr_bin_new(&p, &lim, (cr_host_allocator){NULL, NULL, NULL, b, 2});
}

/* The part's bytes: fed in pieces of `step` (0: received in place wherever a span is offered,
 * as the direct path does, fed otherwise). */
static int send_part(cr_bin_request *r, const char *name, const uint8_t *bytes, size_t n, size_t step, cr_error *err)
{
    cr_bin_part *p = cr_bin_start(r, name, err);
    if (!p)
        return -1;
    for (size_t at = 0; at < n;) {
        size_t want = 0;
        uint8_t *dst = step ? NULL : cr_bin_span(r, p, &want);
        if (dst) {
            size_t k = want < 7 ? want : 7; /* short reads, as a socket gives */
            k = k < n - at ? k : n - at;
            memcpy(dst, bytes + at, k);
            if (cr_bin_spanned(r, p, k, err) != 0)
                return -1;
            at += k;
            continue;
        }
        size_t k = step ? step : 5;
        k = k < n - at ? k : n - at;
        if (cr_bin_feed(r, p, (const char *)bytes + at, k, err) != 0)
            return -1;
        at += k;
    }
    return 0;
}

/* ---- tests ------------------------------------------------------------------------------------ */

static void test_gemm_through_sinks(size_t step)
{
    enum { M = 9, K = 13, N = 11 };
    float a[M * K], b[K * N];
    uint8_t buf[4096];
    cr_error err;
    cr_request req;
    fill(a, M * K, 1);
    fill(b, K * N, 2);
    cr_bin_request *r = new_request(CR_OP_GEMM, NULL, &fake_sink_backend);
    size_t n = npy(buf, "<f4", M, K, false, a, sizeof a);
    CHECK(send_part(r, "a", buf, n, step, &err) == 0);
    n = npy(buf, "<f4", K, N, true, b, sizeof b); /* Fortran order: b's transpose, a flag */
    CHECK(send_part(r, "b", buf, n, step, &err) == 0);
    CHECK(cr_bin_device_bytes(r) == sizeof a + sizeof b);
    CHECK(cr_mem_charged(CR_MEM_DECODE) == 0); /* the rings are given back as each part ends */
    CHECK(cr_bin_finish(r, &req, &err) == 0);
    cr_bin_free(r);
    const cr_gemm_task *g = &req.task.u.gemm;
    CHECK(g->m == M && g->k == K && g->n == N && !g->trans_a && g->trans_b);
    CHECK(req.on_device && req.buf_on_device[CR_BUF_A] && req.buf_on_device[CR_BUF_B] && !req.buf_on_device[CR_BUF_C]);
    CHECK(req.device == 0 || req.device == 1);
    CHECK(g->a && memcmp(g->a, a, sizeof a) == 0);
    CHECK(g->b && memcmp(g->b, b, sizeof b) == 0);
    CHECK(fake_sinks_open == 2);
    cr_request_free(&req);
    CHECK(fake_sinks_open == 0);
}

static void test_every_byte_can_break_the_sink(void)
{
    float a[6 * 5], b[5 * 4];
    uint8_t ba[1024], bb[1024];
    fill(a, 30, 3);
    fill(b, 20, 4);
    size_t na = npy(ba, "<f4", 6, 5, false, a, sizeof a), nb = npy(bb, "<f4", 5, 4, false, b, sizeof b);
    int broke = 0;
    for (int at = 0; at < 80; at++) {
        cr_error err = {0};
        cr_request req;
        fake_commits = 0;
        fake_fail_commit_at = at;
        cr_bin_request *r = new_request(CR_OP_GEMM, NULL, &fake_sink_backend);
        int rc = send_part(r, "a", ba, na, 0, &err);
        if (rc == 0)
            rc = send_part(r, "b", bb, nb, 3, &err);
        if (rc == 0)
            rc = cr_bin_finish(r, &req, &err);
        if (rc != 0) {
            broke++;
            CHECK_MSG(err.http == 503 && strcmp(err.code, "device_fault") == 0, "break at %d: %d %s", at,
                      err.http, err.code);
        } else {
            cr_request_free(&req);
        }
        cr_bin_free(r);
        CHECK_MSG(fake_sinks_open == 0, "break at %d: %d sinks left open", at, fake_sinks_open);
        CHECK(cr_mem_charged(CR_MEM_DECODE) == 0);
    }
    fake_fail_commit_at = -1;
    CHECK(broke > 0 && broke < 80); /* a break past the last commit never happens */
}

/* Parts no sink takes land in host memory as before; the request still runs where its sunk
 * parts are. */
static void test_what_stays_on_the_host(void)
{
    float a[8 * 8], c[8 * 8];
    uint8_t buf[2048], data[300];
    cr_error err;
    cr_request req;
    fill(a, 64, 5);
    fill(c, 64, 6);
    memset(data, 7, sizeof data);

    cr_bin_request *r = new_request(CR_OP_HISTOGRAM, NULL, &fake_sink_backend); /* its checks read the data */
    CHECK(send_part(r, "data", buf, npy(buf, "|u1", 10, 30, false, data, sizeof data), 0, &err) == 0);
    CHECK(cr_bin_device_bytes(r) == 0 && fake_sinks_open == 0);
    cr_bin_free(r);

    r = new_request(CR_OP_GEMM, "all", &fake_sink_backend); /* compare mode */
    CHECK(send_part(r, "a", buf, npy(buf, "<f4", 8, 8, false, a, sizeof a), 0, &err) == 0);
    CHECK(cr_bin_device_bytes(r) == 0 && fake_sinks_open == 0);
    cr_bin_free(r);

    r = new_request(CR_OP_GEMM, NULL, &fake_sink_backend); /* a Fortran-ordered c is scattered as it arrives */
    CHECK(send_part(r, "a", buf, npy(buf, "<f4", 8, 8, false, a, sizeof a), 0, &err) == 0);
    CHECK(send_part(r, "b", buf, npy(buf, "<f4", 8, 8, false, a, sizeof a), 0, &err) == 0);
    CHECK(send_part(r, "c", buf, npy(buf, "<f4", 8, 8, true, c, sizeof c), 0, &err) == 0);
    CHECK(cr_bin_finish(r, &req, &err) == 0);
    cr_bin_free(r);
    CHECK(req.on_device && req.buf_on_device[CR_BUF_A] && !req.buf_on_device[CR_BUF_C]);
    CHECK(((const float *)req.task.u.gemm.c_in)[1] == c[8]); /* scattered into C order */
    cr_request_free(&req);

    fake_sink_min = sizeof a + 1; /* too small for a sink: host memory, no device */
    r = new_request(CR_OP_ATA, NULL, &fake_sink_backend);
    CHECK(send_part(r, "a", buf, npy(buf, "<f4", 8, 8, false, a, sizeof a), 0, &err) == 0);
    CHECK(cr_bin_finish(r, &req, &err) == 0);
    cr_bin_free(r);
    CHECK(!req.on_device && memcmp(req.task.u.ata.a, a, sizeof a) == 0);
    cr_request_free(&req);
    fake_sink_min = 1;
    CHECK(fake_sinks_open == 0 && cr_mem_charged(CR_MEM_DECODE) == 0);
}

/* An AᵀA request whose 10x10 a (its .npy in buf, n bytes) has arrived half-way: its sink is open. */
static cr_bin_request *half_sent(uint8_t *buf, size_t *n)
{
    float a[10 * 10];
    cr_error err;
    fill(a, 100, 8);
    *n = npy(buf, "<f4", 10, 10, false, a, sizeof a);
    cr_bin_request *r = new_request(CR_OP_ATA, NULL, &fake_sink_backend);
    cr_bin_part *p = cr_bin_start(r, "a", &err);
    CHECK(p && cr_bin_feed(r, p, (const char *)buf, *n / 2, &err) == 0);
    return r;
}

/* A body abandoned half-way: the open sink goes with the request. */
static void test_abandoned(void)
{
    uint8_t buf[1024];
    size_t n;
    cr_bin_request *r = half_sent(buf, &n);
    CHECK(fake_sinks_open == 1 && cr_mem_charged(CR_MEM_DECODE) == sizeof ((cr_sink *)0)->ring);
    cr_bin_free(r);
    CHECK(fake_sinks_open == 0 && cr_mem_charged(CR_MEM_DECODE) == 0);
}

/* A request goes to the device whose sinks hold the fewest bytes: while one upload is arriving
 * on a device, every new one goes to the other. */
static void test_least_loaded_device(void)
{
    uint8_t buf[1024];
    size_t n;
    cr_error err;
    cr_bin_request *r1 = half_sent(buf, &n);
    int busy = fake_held[0] ? 0 : fake_held[1] ? 1 : -1;
    CHECK(busy >= 0 && fake_held[1 - busy] == 0);
    for (int i = 0; i < 4; i++) {
        cr_request req;
        cr_bin_request *r = new_request(CR_OP_ATA, NULL, &fake_sink_backend);
        CHECK(send_part(r, "a", buf, n, 0, &err) == 0 && cr_bin_finish(r, &req, &err) == 0);
        CHECK_MSG(req.device == 1 - busy, "request %d went to device %d, beside the busy %d", i, req.device, busy);
        cr_bin_free(r);
        cr_request_free(&req);
    }
    cr_bin_free(r1);
    CHECK(fake_held[0] == 0 && fake_held[1] == 0);
}

/* How many bytes a reader must pass through its buffer before a part's data can be received in
 * place (the direct path reads no further than that past a .npy header): the header's missing
 * bytes while it is incomplete, 0 once it is parsed, SIZE_MAX for a scattered (Fortran-ordered)
 * c, whose data is fed, never received in place. */
static void test_buffered_need(void)
{
    uint8_t a[4096], c[4096];
    float x[6];
    cr_error err;
    fill(x, 6, 3);
    size_t na = npy(a, "<f4", 2, 3, false, x, sizeof x), nc = npy(c, "<f4", 2, 3, true, x, sizeof x);
    size_t head = na - sizeof x, want = 0;
    cr_bin_request *r = new_request(CR_OP_GEMM, NULL, NULL);
    cr_bin_part *p = cr_bin_start(r, "a", &err);
    CHECK(p && cr_bin_buffered_need(p) > 0 && cr_bin_buffered_need(p) <= 10);
    CHECK(cr_bin_feed(r, p, (const char *)a, 10, &err) == 0);
    CHECK_MSG(cr_bin_buffered_need(p) == head - 10, "need %zu after 10 bytes, want %zu", cr_bin_buffered_need(p),
              head - 10);
    CHECK(cr_bin_feed(r, p, (const char *)a + 10, head - 10, &err) == 0);
    CHECK(cr_bin_buffered_need(p) == 0 && cr_bin_span(r, p, &want) != NULL && want == sizeof x);
    cr_bin_part *q = cr_bin_start(r, "c", &err);
    CHECK(q && cr_bin_feed(r, q, (const char *)c, nc - sizeof x, &err) == 0);
    CHECK(cr_bin_buffered_need(q) == SIZE_MAX && cr_bin_span(r, q, &want) == NULL);
    CHECK(cr_bin_feed(r, q, (const char *)c + nc - sizeof x, sizeof x, &err) == 0);
    CHECK(cr_bin_buffered_need(q) == 0);
    cr_bin_free(r);
}

int main(void)
{
    for (size_t step = 0; step < 70; step += 3)
        test_gemm_through_sinks(step);
    test_every_byte_can_break_the_sink();
    test_what_stays_on_the_host();
    test_abandoned();
    test_least_loaded_device();
    test_buffered_need();
    CHECK(!fake_sink_misused);
    return check_summary("bin_sink");
}
