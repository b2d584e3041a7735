/* Unit tests for the gRPC listener's pure parts: protobuf's wire format (server/grpc/pb_wire.c),
 * the length-prefixed message reader in every chunking, its limits and compression
 * (grpc_frame.c), the metadata's rules (grpc_metadata.c), status codes and grpc-message's
 * percent-encoding (grpc_status.c), typed contents as raw bytes (infer_contents.c), and where a
 * ModelInferRequest's first tensor starts (infer_request.c's alignment hint). */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "server/grpc/grpc_frame.h"
#include "server/grpc/grpc_metadata.h"
#include "server/grpc/grpc_status.h"
#include "server/grpc/infer_contents.h"
#include "server/grpc/infer_request.h"
#include "server/grpc/pb_wire.h"
#include "server/memory.h"
#include "tests/unit/check.h"

static void test_varints(void)
{
    const uint64_t values[] = {0, 1, 127, 128, 300, 16383, 16384, (1ull << 31) - 1, 1ull << 35, UINT64_MAX};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        uint8_t buf[CR_PB_VARINT_MAX];
        size_t n = cr_pb_put_varint(buf, values[i]), at = 0;
        uint64_t back = 0;
        CHECK(n == cr_pb_varint_size(values[i]));
        CHECK_MSG(cr_pb_varint(buf, n, &at, &back) && back == values[i] && at == n, "%llu",
                  (unsigned long long)values[i]);
        at = 0;
        CHECK(n == 1 || !cr_pb_varint(buf, n - 1, &at, &back)); /* cut short */
    }
    const uint8_t eleven[11] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    const uint8_t overflow[10] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02};
    size_t at = 0;
    uint64_t v;
    CHECK(!cr_pb_varint(eleven, sizeof eleven, &at, &v));
    at = 0;
    CHECK(!cr_pb_varint(overflow, sizeof overflow, &at, &v));
}

static void test_fields(void)
{
    /* field 1 varint 150, field 7 bytes "abc", field 3 fixed64, field 5 fixed32 */
    const uint8_t msg[] = {0x08, 0x96, 0x01, 0x3a, 0x03, 'a', 'b', 'c', 0x19, 1, 2, 3, 4, 5, 6, 7, 8,
                           0x2d, 9, 9, 9, 9};
    cr_pb_field f;
    size_t at = 0;
    CHECK(cr_pb_next(msg, sizeof msg, at, &f) && f.number == 1 && f.type == CR_PB_VARINT && f.end == 3);
    at = f.end;
    CHECK(cr_pb_next(msg, sizeof msg, at, &f) && f.number == 7 && f.type == CR_PB_LEN && f.len == 3 &&
          memcmp(msg + f.value, "abc", 3) == 0);
    at = f.end;
    CHECK(cr_pb_next(msg, sizeof msg, at, &f) && f.number == 3 && f.type == CR_PB_I64 && f.len == 8);
    at = f.end;
    CHECK(cr_pb_next(msg, sizeof msg, at, &f) && f.number == 5 && f.type == CR_PB_I32 && f.end == sizeof msg);
    const uint8_t past_end[] = {0x3a, 0x05, 'a', 'b'}, number_zero[] = {0x02, 0x00}, group[] = {0x0b};
    CHECK(!cr_pb_next(past_end, sizeof past_end, 0, &f));
    CHECK(!cr_pb_next(number_zero, sizeof number_zero, 0, &f));
    CHECK(!cr_pb_next(group, sizeof group, 0, &f));
    uint8_t hdr[16];
    size_t n = cr_pb_put_len_header(hdr, 6, 1000);
    CHECK(n == 3 && hdr[0] == 0x32 && cr_pb_len_field_size(6, 1000) == 1003);
}

/* ---- the message reader ------------------------------------------------------------------------ */

typedef struct {
    int count;
    size_t lens[8];
    uint8_t first[8];
} got_messages;

static bool take(void *cls, cr_grpc_msg *m)
{
    got_messages *g = cls;
    if (g->count < 8) {
        g->lens[g->count] = m->len;
        g->first[g->count] = m->len ? m->p[0] : 0;
    }
    g->count++;
    return true;
}

static size_t frame(uint8_t *out, uint8_t flag, const void *p, uint32_t n)
{
    out[0] = flag;
    out[1] = (uint8_t)(n >> 24), out[2] = (uint8_t)(n >> 16), out[3] = (uint8_t)(n >> 8), out[4] = (uint8_t)n;
    memcpy(out + 5, p, n);
    return 5 + n;
}

static void test_reader_chunkings(void)
{
    uint8_t stream[64];
    size_t len = frame(stream, 0, "hello", 5);
    len += frame(stream + len, 0, "", 0);
    len += frame(stream + len, 0, "xyz", 3);
    for (size_t chunk = 1; chunk <= len; chunk++) {
        cr_grpc_reader r;
        got_messages g = {0};
        cr_error e;
        cr_grpc_reader_init(&r, 1 << 20, CR_CODING_IDENTITY, NULL);
        for (size_t at = 0; at < len; at += chunk)
            CHECK(cr_grpc_reader_feed(&r, stream + at, at + chunk <= len ? chunk : len - at, take, &g, &e) == 0);
        CHECK_MSG(g.count == 3 && g.lens[0] == 5 && g.first[0] == 'h' && g.lens[1] == 0 && g.lens[2] == 3,
                  "chunk %zu: %d messages", chunk, g.count);
        CHECK(cr_grpc_reader_end(&r, &e) == 0);
        cr_grpc_reader_free(&r);
    }
    CHECK(cr_mem_charged(CR_MEM_BODY) == 0); /* every message's charge went with it */
}

static void test_reader_refusals(void)
{
    cr_grpc_reader r;
    got_messages g = {0};
    cr_error e;
    uint8_t big[5] = {0, 0, 0x10, 0, 0}; /* 1 MiB announced */
    cr_grpc_reader_init(&r, 1000, CR_CODING_IDENTITY, NULL);
    CHECK(cr_grpc_reader_feed(&r, big, 5, take, &g, &e) < 0 && e.http == 413 && strstr(e.message, "--max-body-mb"));
    CHECK(cr_grpc_code_of(&e) == CR_GRPC_RESOURCE_EXHAUSTED);
    cr_grpc_reader_free(&r);
    uint8_t flag2[5] = {2, 0, 0, 0, 0}, compressed[5] = {1, 0, 0, 0, 1};
    cr_grpc_reader_init(&r, 1000, CR_CODING_IDENTITY, NULL);
    CHECK(cr_grpc_reader_feed(&r, flag2, 5, take, &g, &e) < 0 && e.http == 400 && cr_grpc_code_of(&e) == 3);
    cr_grpc_reader_free(&r);
    cr_grpc_reader_init(&r, 1000, CR_CODING_IDENTITY, NULL);
    CHECK(cr_grpc_reader_feed(&r, compressed, 5, take, &g, &e) < 0 && strcmp(e.field, "grpc-encoding") == 0);
    cr_grpc_reader_free(&r);
    uint8_t cut[8];
    size_t n = frame(cut, 0, "abc", 3);
    cr_grpc_reader_init(&r, 1000, CR_CODING_IDENTITY, NULL);
    CHECK(cr_grpc_reader_feed(&r, cut, n - 1, take, &g, &e) == 0 && cr_grpc_reader_end(&r, &e) < 0);
    size_t room = 0;
    uint8_t *dest = cr_grpc_reader_dest(&r, &room);
    CHECK(dest && room == 1); /* where the last byte would be received in place */
    cr_grpc_reader_free(&r);
    CHECK(cr_mem_charged(CR_MEM_BODY) == 0);
}

/* A gzip message is inflated within the limit; one that inflates past it is stopped. */
static void test_reader_gzip(void)
{
    uint8_t plain[4096], packed[5000], stream[5100];
    memset(plain, 'z', sizeof plain);
    z_stream zs = {0};
    CHECK(deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    zs.next_in = plain, zs.avail_in = sizeof plain, zs.next_out = packed, zs.avail_out = sizeof packed;
    CHECK(deflate(&zs, Z_FINISH) == Z_STREAM_END);
    size_t packed_len = sizeof packed - zs.avail_out;
    deflateEnd(&zs);
    size_t n = frame(stream, 1, packed, (uint32_t)packed_len);
    cr_grpc_reader r;
    got_messages g = {0};
    cr_error e;
    cr_grpc_reader_init(&r, 1 << 20, CR_CODING_GZIP, NULL);
    CHECK(cr_grpc_reader_feed(&r, stream, n, take, &g, &e) == 0 && g.count == 1 && g.lens[0] == sizeof plain &&
          g.first[0] == 'z');
    cr_grpc_reader_free(&r);
    cr_grpc_reader_init(&r, 1000, CR_CODING_GZIP, NULL); /* 4 KiB inflated, 1000 allowed: a bomb */
    g.count = 0;
    CHECK(cr_grpc_reader_feed(&r, stream, n, take, &g, &e) < 0 && e.http == 413 && g.count == 0);
    cr_grpc_reader_free(&r);
    stream[n - 3] ^= 0xff; /* the stream's length trailer: corrupt */
    cr_grpc_reader_init(&r, 1 << 20, CR_CODING_GZIP, NULL);
    CHECK(cr_grpc_reader_feed(&r, stream, n, take, &g, &e) < 0 && e.http == 400 &&
          strcmp(e.field, "grpc-encoding") == 0);
    cr_grpc_reader_free(&r);
    CHECK(cr_mem_charged(CR_MEM_BODY) == 0);
}

/* A big message of a method with an allocator is placed so that its hinted byte is aligned. */
static size_t hint_at_7(const uint8_t *first, size_t avail)
{
    (void)first, (void)avail;
    return 7;
}

static void test_reader_alignment(void)
{
    cr_grpc_alloc a = {NULL, NULL, hint_at_7};
    size_t len = CR_GRPC_TENSOR_GRADE_MIN + 100;
    uint8_t *stream = calloc(1, len + 5);
    frame(stream, 0, "", 0);
    stream[1] = (uint8_t)(len >> 24), stream[2] = (uint8_t)(len >> 16), stream[3] = (uint8_t)(len >> 8),
    stream[4] = (uint8_t)len;
    cr_grpc_reader r;
    cr_error e;
    cr_grpc_reader_init(&r, len, CR_CODING_IDENTITY, &a);
    CHECK(cr_grpc_reader_feed(&r, stream, 5 + 10, take, &(got_messages){0}, &e) == 0);
    CHECK(r.cur.buf && r.cur.buf->tensor_grade && ((uintptr_t)r.cur.p + 7) % CR_GRPC_ALIGN == 0);
    cr_grpc_reader_free(&r);
    free(stream);
}

/* ---- metadata and status ------------------------------------------------------------------------ */

static void test_metadata(void)
{
    int64_t us;
    CHECK(cr_grpc_timeout_parse("1S", &us) && us == 1000000);
    CHECK(cr_grpc_timeout_parse("250m", &us) && us == 250000);
    CHECK(cr_grpc_timeout_parse("99999999u", &us) && us == 99999999);
    CHECK(cr_grpc_timeout_parse("1n", &us) && us == 1);
    CHECK(cr_grpc_timeout_parse("2H", &us) && us == 2LL * 3600 * 1000000);
    const char *bad[] = {"", "S", "123456789S", "1s", "1 S", "-1S", "1SS", NULL};
    for (int i = 0; bad[i]; i++)
        CHECK_MSG(!cr_grpc_timeout_parse(bad[i], &us), "'%s'", bad[i]);
    CHECK(cr_grpc_content_type_ok("application/grpc") && cr_grpc_content_type_ok("application/grpc+proto"));
    CHECK(cr_grpc_content_type_ok("Application/GRPC;charset=x"));
    CHECK(!cr_grpc_content_type_ok("application/grpc-web") && !cr_grpc_content_type_ok("application/json") &&
          !cr_grpc_content_type_ok(NULL));
    cr_coding c;
    CHECK(cr_grpc_encoding_parse("gzip", &c) && c == CR_CODING_GZIP);
    CHECK(cr_grpc_encoding_parse("deflate", &c) && c == CR_CODING_DEFLATE);
    CHECK(!cr_grpc_encoding_parse("snappy", &c) && !cr_grpc_encoding_parse("GZIP", &c));
}

static void test_status(void)
{
    struct { int http; const char *code; cr_grpc_code want; } cases[] = {
        {404, "not_found", CR_GRPC_NOT_FOUND},          {400, "invalid_field", CR_GRPC_INVALID_ARGUMENT},
        {413, "too_large", CR_GRPC_RESOURCE_EXHAUSTED}, {503, "memory_budget", CR_GRPC_RESOURCE_EXHAUSTED},
        {503, "queue_full", CR_GRPC_UNAVAILABLE},       {503, "draining", CR_GRPC_UNAVAILABLE},
        {504, "deadline_exceeded", CR_GRPC_DEADLINE_EXCEEDED}, {507, "device_memory", CR_GRPC_RESOURCE_EXHAUSTED},
        {401, "unauthorized", CR_GRPC_UNAUTHENTICATED}, {409, "already_exists", CR_GRPC_ALREADY_EXISTS},
        {409, "in_use", CR_GRPC_FAILED_PRECONDITION},   {409, "cancelled", CR_GRPC_CANCELLED},
        {422, "shape_mismatch", CR_GRPC_INVALID_ARGUMENT}, {500, "internal", CR_GRPC_INTERNAL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_error e = {.http = cases[i].http};
        snprintf(e.code, sizeof e.code, "%s", cases[i].code);
        CHECK_MSG(cr_grpc_code_of(&e) == cases[i].want, "%d %s -> %s", cases[i].http, cases[i].code,
                  cr_grpc_code_name(cr_grpc_code_of(&e)));
    }
    CHECK(strcmp(cr_grpc_code_name(CR_GRPC_NOT_FOUND), "NOT_FOUND") == 0);
    char out[64];
    cr_grpc_percent_encode("caf\xc3\xa9 100%\n", out, sizeof out);
    CHECK_MSG(strcmp(out, "caf%C3%A9 100%25%0A") == 0, "%s", out);
    cr_grpc_percent_encode("%%%%", out, 8); /* cut at a whole escape */
    CHECK_MSG(strcmp(out, "%25%25") == 0, "%s", out);
}

/* ---- typed contents and the first tensor's place ----------------------------------------------- */

static void test_contents(void)
{
    int32_t ints[] = {-128, 0, 127};
    float floats[] = {1.5f, -2.0f};
    Inference__InferTensorContents t = INFERENCE__INFER_TENSOR_CONTENTS__INIT;
    const void *bytes;
    size_t len;
    void *owned;
    cr_error e;
    t.n_fp32_contents = 2, t.fp32_contents = floats;
    CHECK(cr_grpc_contents_bytes(&t, "FP32", "a", &bytes, &len, &owned, &e) == 0 && bytes == floats && len == 8 &&
          !owned);
    CHECK(cr_grpc_contents_bytes(&t, "INT8", "a", &bytes, &len, &owned, &e) < 0 && strstr(e.message, "int_contents"));
    CHECK(cr_grpc_contents_bytes(&t, "FP16", "a", &bytes, &len, &owned, &e) < 0 && strstr(e.message, "raw_input"));
    t = (Inference__InferTensorContents)INFERENCE__INFER_TENSOR_CONTENTS__INIT;
    t.n_int_contents = 3, t.int_contents = ints;
    CHECK(cr_grpc_contents_bytes(&t, "INT8", "a", &bytes, &len, &owned, &e) == 0 && len == 3 && owned &&
          ((const int8_t *)bytes)[0] == -128 && ((const int8_t *)bytes)[2] == 127);
    free(owned);
    ints[2] = 128;
    CHECK(cr_grpc_contents_bytes(&t, "INT8", "a", &bytes, &len, &owned, &e) < 0 && strstr(e.message, "range"));
    CHECK(cr_grpc_contents_bytes(&t, "INT32", "a", &bytes, &len, &owned, &e) == 0 && bytes == ints && len == 12);
}

static void test_align_hint(void)
{
    /* model_name "gemm", inputs {name "a"}, then raw_input_contents of 4 bytes */
    const uint8_t msg[] = {0x0a, 4, 'g', 'e', 'm', 'm', 0x2a, 3, 0x0a, 1, 'a', 0x3a, 4, 1, 2, 3, 4};
    CHECK(cr_grpc_infer_align(msg, sizeof msg) == 13);
    CHECK(cr_grpc_infer_align(msg, 9) == 0); /* the inputs field is not all there: not yet known */
    const uint8_t none[] = {0x0a, 2, 'a', 't'};
    CHECK(cr_grpc_infer_align(none, sizeof none) == 0);
}

int main(void)
{
    test_varints();
    test_fields();
    test_reader_chunkings();
    test_reader_refusals();
    test_reader_gzip();
    test_reader_alignment();
    test_metadata();
    test_status();
    test_contents();
    test_align_hint();
    return check_summary("grpc_wire");
}
