/* Unit tests for the content codings (server/codec/coding.c, body_inflate.c, answer_deflate.c):
 * Content-Encoding and Accept-Encoding, answers compressed and read back by the request
 * decoder in every chunking, bombs stopped at the sink, malformed and truncated streams. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "server/codec/answer_deflate.h"
#include "server/codec/body_inflate.h"
#include "server/codec/media_type.h"
#include "tests/unit/check.h"

static void test_content_encoding(void)
{
    cr_coding c = CR_CODING_DEFLATE;
    cr_error e;
    CHECK(cr_coding_from_content_encoding(NULL, &c, &e) == 0 && c == CR_CODING_IDENTITY);
    CHECK(cr_coding_from_content_encoding(" identity ", &c, &e) == 0 && c == CR_CODING_IDENTITY);
    CHECK(cr_coding_from_content_encoding("gzip", &c, &e) == 0 && c == CR_CODING_GZIP);
    CHECK(cr_coding_from_content_encoding("X-GZip", &c, &e) == 0 && c == CR_CODING_GZIP);
    CHECK(cr_coding_from_content_encoding("Deflate ", &c, &e) == 0 && c == CR_CODING_DEFLATE);
    const char *refused[] = {"br", "zstd", "compress", "gzip, gzip", "gzip;q=1", "gzipx", "x", NULL};
    for (int i = 0; refused[i]; i++) {
        memset(&e, 0, sizeof e);
        CHECK_MSG(cr_coding_from_content_encoding(refused[i], &c, &e) < 0 && e.http == 415 &&
                      strcmp(e.field, "Content-Encoding") == 0 && strstr(e.message, refused[i]),
                  "'%s' -> %d %s %s", refused[i], e.http, e.field, e.message);
    }
}

static void test_negotiate(void)
{
    struct { const char *h; cr_coding want; } cases[] = {
        {NULL, CR_CODING_IDENTITY},
        {"", CR_CODING_IDENTITY},
        {"gzip", CR_CODING_GZIP},
        {"gzip, deflate, br", CR_CODING_GZIP},
        {"deflate", CR_CODING_DEFLATE},
        {"br, zstd", CR_CODING_IDENTITY},
        {"gzip;q=0", CR_CODING_IDENTITY},
        {"gzip; q=0.000, deflate", CR_CODING_DEFLATE},
        {"gzip;q=0.5, deflate;q=0.8", CR_CODING_DEFLATE},
        {"deflate;q=0.5, gzip;q=0.5", CR_CODING_GZIP},
        {"*", CR_CODING_GZIP},
        {"*;q=0", CR_CODING_IDENTITY},
        {"gzip;q=0, *", CR_CODING_DEFLATE},
        {"identity", CR_CODING_IDENTITY},
        {"GZIP;Q=1.0", CR_CODING_GZIP},
        {"gzip;q=nonsense", CR_CODING_IDENTITY},
        {"gzip;q=2", CR_CODING_IDENTITY},
        {"x-gzip", CR_CODING_GZIP},
        {" , ,gzip", CR_CODING_GZIP},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_MSG(cr_coding_negotiate(cases[i].h) == cases[i].want, "'%s' -> %s", cases[i].h ? cases[i].h : "(null)",
                  cr_coding_name(cr_coding_negotiate(cases[i].h)));
}

static void test_worth_it(void)
{
    CHECK(cr_deflate_worth_it("application/json", 1024));
    CHECK(!cr_deflate_worth_it("application/json", 1023));
    CHECK(cr_deflate_worth_it("text/plain; version=0.0.4; charset=utf-8", 5000));
    CHECK(!cr_deflate_worth_it("application/x-npy", 5000)); /* float arrays: not worth it */
    CHECK(!cr_deflate_worth_it("application/octet-stream", 5000));
    CHECK(!cr_deflate_worth_it("image/png", 5000));
    CHECK(!cr_deflate_worth_it("application/jsonx", 5000));
    CHECK(!cr_deflate_worth_it(NULL, 5000));
}

/* ---- streams ------------------------------------------------------------------------------ */

typedef struct {
    char *buf;
    size_t len, cap, stop_after; /* stop_after: the sink refuses past this many bytes (0: never) */
    int calls;
} sink_buf;

static int sink(void *cls, const char *data, size_t n)
{
    sink_buf *s = cls;
    s->calls++;
    if (n > CR_INFLATE_PIECE)
        return 2;
    if (s->stop_after && s->len + n > s->stop_after)
        return 1;
    if (s->len + n > s->cap) {
        s->cap = (s->len + n) * 2;
        s->buf = realloc(s->buf, s->cap);
    }
    memcpy(s->buf + s->len, data, n);
    s->len += n;
    return 0;
}

/* Everything a deflater gives, read in blocks of `block` bytes. */
static char *compress_all(cr_coding coding, const cr_span *spans, int n, size_t block, size_t *len)
{
    cr_deflater *d = cr_deflater_new(coding, 1, spans, n);
    size_t cap = 1 << 16, k = 0;
    char *out = malloc(cap);
    ssize_t got;
    while (d && (got = cr_deflater_read(d, out + k, cap - k < block ? cap - k : block)) > 0) {
        k += (size_t)got;
        if (cap - k < block)
            out = realloc(out, cap *= 2);
    }
    cr_deflater_free(d);
    *len = k;
    return out;
}

/* Decodes in chunks of `chunk` bytes; the inflater's verdict (0 ok, 1 stopped, -1 malformed). */
static int inflate_all(cr_coding coding, const char *in, size_t n, size_t chunk, sink_buf *s, cr_error *e)
{
    cr_inflater *z = cr_inflater_new(coding);
    int rc = 0;
    for (size_t at = 0; at < n && rc == 0; at += chunk)
        rc = cr_inflater_feed(z, in + at, n - at < chunk ? n - at : chunk, sink, s, e);
    if (rc == 0)
        rc = cr_inflater_finish(z, e);
    cr_inflater_free(z);
    return rc;
}

static char *text_of(size_t n)
{
    char *t = malloc(n);
    for (size_t i = 0; i < n; i++) /* JSON-like: compressible, not trivially */
        t[i] = "0123456789,. [\"e-]"[(i * 7 + i / 13) % 18];
    return t;
}

static void test_round_trip(void)
{
    size_t sizes[] = {0, 1, 1023, 70000, 300000};
    size_t chunks[] = {1, 7, 4096, 1 << 20};
    cr_coding codings[] = {CR_CODING_GZIP, CR_CODING_DEFLATE};
    for (int c = 0; c < 2; c++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            char *t = text_of(sizes[i]);
            size_t half = sizes[i] / 3;
            cr_span spans[2] = {{t, half}, {t + half, sizes[i] - half}}; /* a .npy header and its data */
            size_t clen = 0;
            char *z = compress_all(codings[c], spans, 2, 1000, &clen);
            if (sizes[i] >= 70000)
                CHECK_MSG(clen < sizes[i] / 2, "%zu bytes compressed to %zu", sizes[i], clen);
            for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
                if (chunks[k] == 1 && sizes[i] > 70000)
                    continue;
                sink_buf s = {0};
                cr_error e = {0};
                int rc = inflate_all(codings[c], z, clen, chunks[k], &s, &e);
                CHECK_MSG(rc == 0 && s.len == sizes[i] && (!s.len || memcmp(s.buf, t, s.len) == 0),
                          "%s %zu bytes in chunks of %zu: rc %d, %zu bytes back (%s)", cr_coding_name(codings[c]),
                          sizes[i], chunks[k], rc, s.len, e.message);
                free(s.buf);
            }
            /* zlib's own one-shot decoder agrees (what clients use) */
            if (codings[c] == CR_CODING_DEFLATE && sizes[i]) {
                uLongf out_len = sizes[i];
                char *out = malloc(sizes[i]);
                CHECK(uncompress((Bytef *)out, &out_len, (Bytef *)z, clen) == Z_OK && out_len == sizes[i] &&
                      memcmp(out, t, sizes[i]) == 0);
                free(out);
            }
            free(z);
            free(t);
        }
}

static void test_multi_member_gzip(void)
{
    char *t = text_of(5000);
    cr_span a = {t, 2000}, b = {t + 2000, 3000};
    size_t la, lb;
    char *za = compress_all(CR_CODING_GZIP, &a, 1, 512, &la), *zb = compress_all(CR_CODING_GZIP, &b, 1, 512, &lb);
    char *both = malloc(la + lb);
    memcpy(both, za, la);
    memcpy(both + la, zb, lb);
    sink_buf s = {0};
    cr_error e = {0};
    CHECK(inflate_all(CR_CODING_GZIP, both, la + lb, 100, &s, &e) == 0 && s.len == 5000 && memcmp(s.buf, t, 5000) == 0);
    free(s.buf);
    /* deflate has one stream: anything after it is an error */
    size_t ld;
    char *zd = compress_all(CR_CODING_DEFLATE, &a, 1, 512, &ld);
    char *tail = malloc(ld + 3);
    memcpy(tail, zd, ld);
    memcpy(tail + ld, "xyz", 3);
    memset(&s, 0, sizeof s);
    CHECK(inflate_all(CR_CODING_DEFLATE, tail, ld + 3, 64, &s, &e) == -1 && e.http == 400 &&
          strcmp(e.code, "invalid_encoding") == 0 && strstr(e.message, "after the end"));
    free(s.buf);
    free(za), free(zb), free(both), free(zd), free(tail), free(t);
}

static void test_malformed(void)
{
    cr_error e = {0};
    sink_buf s = {0};
    CHECK(inflate_all(CR_CODING_GZIP, "not gzip at all", 15, 4, &s, &e) == -1);
    CHECK(e.http == 400 && strcmp(e.code, "invalid_encoding") == 0 && strcmp(e.field, "Content-Encoding") == 0 &&
          strstr(e.message, "gzip") && strstr(e.message, "byte"));
    free(s.buf);
    char *t = text_of(20000);
    cr_span sp = {t, 20000};
    size_t n;
    char *z = compress_all(CR_CODING_GZIP, &sp, 1, 4096, &n);
    memset(&s, 0, sizeof s);
    CHECK(inflate_all(CR_CODING_GZIP, z, n - 5, 999, &s, &e) == -1 && strstr(e.message, "truncated"));
    free(s.buf);
    z[n / 2] ^= 0x55; /* a flipped byte: a bad block or a bad CRC, never silent */
    memset(&s, 0, sizeof s);
    CHECK(inflate_all(CR_CODING_GZIP, z, n, 999, &s, &e) == -1 && e.http == 400);
    free(s.buf);
    memset(&s, 0, sizeof s);
    CHECK(inflate_all(CR_CODING_DEFLATE, "", 0, 1, &s, &e) == -1 && strstr(e.message, "empty"));
    /* raw deflate (no zlib header) is not HTTP's deflate */
    memset(&s, 0, sizeof s);
    CHECK(inflate_all(CR_CODING_DEFLATE, z + 10, n - 18, 999, &s, &e) == -1);
    free(s.buf);
    free(z);
    free(t);
}

/* 64 MiB of zeros compress to ~64 KiB: the sink's limit stops the decoding after a few pieces. */
static void test_bomb_stops_at_the_sink(void)
{
    size_t big = 64u << 20;
    char *zeros = calloc(1, big);
    cr_span sp = {zeros, big};
    size_t n;
    char *z = compress_all(CR_CODING_GZIP, &sp, 1, 1 << 16, &n);
    free(zeros);
    CHECK_MSG(n < big / 100, "64 MiB of zeros -> %zu bytes", n); /* level 1: ~230x */
    sink_buf s = {.stop_after = 1 << 20};
    cr_error e = {0};
    cr_inflater *d = cr_inflater_new(CR_CODING_GZIP);
    CHECK(cr_inflater_feed(d, z, n, sink, &s, &e) == 1);
    CHECK_MSG(s.len <= (1 << 20) && cr_inflater_out(d) <= (1 << 20) + CR_INFLATE_PIECE,
              "held %zu, decoded %llu", s.len, (unsigned long long)cr_inflater_out(d));
    CHECK(cr_inflater_in(d) < n); /* it did not even read all of the input */
    cr_inflater_free(d);
    free(s.buf);
    free(z);
}

/* The one media-type test that uploads, JSON bodies and compressed answers share. */
static void test_media_type(void)
{
    CHECK(cr_media_type_is("application/json", "application/json"));
    CHECK(cr_media_type_is("Application/JSON; charset=utf-8", "application/json"));
    CHECK(cr_media_type_is("multipart/form-data;boundary=x", "multipart/form-data"));
    CHECK(cr_media_type_is("application/x-npy \t; a=b", "application/x-npy"));
    CHECK(cr_media_type_is("application/x-npy\t;a=b", "application/x-npy"));
    CHECK(!cr_media_type_is("application/jsonx", "application/json"));
    CHECK(!cr_media_type_is("application/jso", "application/json"));
    CHECK(!cr_media_type_is("text/application/json", "application/json"));
    CHECK(!cr_media_type_is(NULL, "application/json"));
    CHECK(!cr_media_type_is("", "application/json"));
}

int main(void)
{
    test_media_type();
    test_content_encoding();
    test_negotiate();
    test_worth_it();
    test_round_trip();
    test_multi_member_gzip();
    test_malformed();
    test_bomb_stops_at_the_sink();
    return check_summary("coding");
}
