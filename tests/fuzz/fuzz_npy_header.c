/* libFuzzer harness for .npy headers and the streaming binary decoder: every input is parsed as
 * a header the way the upload path does (growing the prefix to what the parser asks for), a
 * header that parses is written back and must read back the same, and the input is streamed in
 * input-chosen chunk sizes, fed or received in place, as a histogram body, an ata body and all
 * three gemm parts (a Fortran `c` takes the scatter copy). Each is decoded twice: into host
 * memory, and through a sink (tests/unit/fake_sink.h) that may break at an input-chosen commit;
 * the sink's request must hold the same bytes, or fail 503 where it broke. Limits are small, so
 * nothing can allocate much; a failure must name its part and leave nothing behind
 * (LeakSanitizer checks). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/codec/binary_decode.h"
#include "server/codec/npy.h"
#include "tests/unit/fake_sink.h"

static const cr_limits fuzz_limits = {
    .max_elements = 1 << 16, .max_total_bytes = 1 << 20, .max_bins = 1 << 12, .max_stack = 1 << 10,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_header(const uint8_t *data, size_t size)
{
    cr_npy_header h;
    cr_error e = {0};
    size_t have = 0, need = 0;
    cr_npy_status st;
    do { /* as the upload path: give it exactly what it asked for */
        have = need > size ? size : need;
        st = cr_npy_parse_header(data, have, "a", &h, &need, &e);
    } while (st == CR_NPY_MORE && have < size && need > have);
    if (st == CR_NPY_BAD && (e.http < 400 || strcmp(e.field, "a") != 0))
        abort();
    if (st != CR_NPY_OK)
        return;
    if (h.header_bytes > have || h.ndim < 0 || h.ndim > CR_NPY_MAX_DIMS)
        abort();
    char out[CR_NPY_WRITE_MAX];
    size_t n = cr_npy_write_header(out, sizeof out, h.dtype, h.ndim, h.shape);
    if (!n)
        return; /* too many dimensions for the writer's buffer */
    cr_npy_header back;
    if (cr_npy_parse_header((const uint8_t *)out, n, "r", &back, &need, &e) != CR_NPY_OK ||
        back.dtype != h.dtype || back.ndim != h.ndim || back.count != h.count || n % 64)
        abort();
}

/* Gives data to part p in chunks whose sizes come from a small generator seeded by the input,
 * each fed or, where the part offers room, received in place (as the direct path reads). */
static int stream(cr_bin_request *r, cr_bin_part *p, const uint8_t *data, size_t size, cr_error *e)
{
    uint32_t seed = size ? data[0] * 2654435761u : 1;
    for (size_t at = 0; at < size;) {
        seed = seed * 1103515245u + 12345u;
        size_t k = 1 + (seed >> 16) % 97, room = 0;
        k = k > size - at ? size - at : k;
        char *dst = seed & 1 ? cr_bin_span(r, p, &room) : NULL;
        if (dst) {
            k = k < room ? k : room;
            memcpy(dst, data + at, k);
            if (cr_bin_spanned(r, p, k, e) != 0)
                return -1;
        } else if (cr_bin_feed(r, p, (const char *)data + at, k, e) != 0) {
            return -1;
        }
        at += k;
    }
    return 0;
}

/* One decode of the input as the op's parts; 0 with *q, or -1 with *e (a 4xx/5xx naming it). */
static int decode(cr_op op, const char *const *names, int n_names, const uint8_t *data, size_t size,
                  const cr_backend *sink, cr_request *q, cr_error *e)
{
    cr_params p;
    cr_params_init(&p, op);
    if (cr_params_finish(&p, e) != 0)
        abort();
    cr_bin_request *r = cr_bin_new(&p, &fuzz_limits, (cr_host_allocator){NULL, NULL, NULL, sink, 2});
    if (!r)
        return cr_fail(e, 503, "host_memory", "", "out of memory");
    int rc = 0;
    for (int i = 0; i < n_names && rc == 0; i++) {
        cr_bin_part *part = cr_bin_start(r, names[i], e);
        rc = part ? stream(r, part, data, size, e) : -1;
    }
    rc = rc == 0 ? cr_bin_finish(r, q, e) : -1;
    if (rc != 0 && (e->http < 400 || !e->code[0]))
        abort();
    cr_bin_free(r);
    return rc;
}

static bool same_inputs(const cr_request *a, const cr_request *b)
{
    for (int i = 0; i < CR_BUF_OUTPUT; i++)
        if (a->buf_bytes[i] != b->buf_bytes[i] || (a->buf_bytes[i] && memcmp(a->bufs[i], b->bufs[i], a->buf_bytes[i])))
            return false;
    return true;
}

static void run(cr_op op, const char *const *names, int n_names, const uint8_t *data, size_t size)
{
    cr_request host, sunk;
    cr_error e = {0}, es = {0};
    int rc = decode(op, names, n_names, data, size, NULL, &host, &e);
    if (rc == 0 && host.task.op != op)
        abort();
    fake_commits = 0;
    fake_fail_commit_at = size && data[size - 1] & 1 ? data[size - 1] >> 1 : -1;
    int rs = decode(op, names, n_names, data, size, &fake_sink_backend, &sunk, &es);
    bool broke = rs != 0 && es.http == 503 && strcmp(es.code, "device_fault") == 0;
    if (fake_sink_misused || (rc == 0 && rs != 0 && !broke) || (rc != 0 && rs == 0) ||
        (broke && fake_fail_commit_at < 0) || (rc != 0 && !broke && strcmp(e.code, es.code) != 0))
        abort();
    if (rc == 0 && rs == 0 && !same_inputs(&host, &sunk))
        abort();
    if (rs == 0)
        cr_request_free(&sunk);
    if (rc == 0)
        cr_request_free(&host);
    if (fake_sinks_open != 0) /* every sink went with its request */
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const hist[] = {"data"}, *const ata[] = {"a"}, *const gemm[] = {"a", "b", "c"};
    check_header(data, size);
    run(CR_OP_HISTOGRAM, hist, 1, data, size);
    run(CR_OP_ATA, ata, 1, data, size);
    run(CR_OP_GEMM, gemm, 3, data, size);
    return 0;
}
