/* libFuzzer harness for the content codings and the header values clients send
 * (server/codec/coding.c, body_inflate.c, answer_deflate.c, server/http/request_id.c, cors.c).
 * The input, as a coded body, is decoded as gzip and as deflate in input-chosen chunk sizes
 * into a sink with a small limit: a failure must be a 400 naming Content-Encoding, decoding must
 * stop at the sink's limit, and a stream that decodes must give the same bytes in one chunk. The
 * decoded bytes are compressed back and must decode to themselves. The input as text is also
 * read as Content-Encoding, Accept-Encoding, X-Request-Id and a --cors-origin list. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/codec/answer_deflate.h"
#include "server/codec/body_inflate.h"
#include "server/http/cors.h"
#include "server/http/request_id.h"

#define SINK_LIMIT (256 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
    char buf[SINK_LIMIT];
    size_t len;
    int stopped;
} sink_buf;

static int sink(void *cls, const char *d, size_t n)
{
    sink_buf *s = cls;
    if (n == 0 || n > CR_INFLATE_PIECE)
        abort();
    if (s->len + n > sizeof s->buf)
        return s->stopped = 1;
    memcpy(s->buf + s->len, d, n);
    s->len += n;
    return 0;
}

/* rc: 0 decoded whole, 1 stopped by the sink, -1 refused. */
static int decode(cr_coding coding, const uint8_t *data, size_t size, size_t first_chunk, sink_buf *s)
{
    cr_inflater *z = cr_inflater_new(coding);
    cr_error e = {0};
    if (!z)
        return -2;
    int rc = 0;
    uint32_t seed = (uint32_t)first_chunk * 2654435761u;
    for (size_t at = 0; at < size && rc == 0;) {
        seed = seed * 1103515245u + 12345u;
        size_t k = first_chunk ? 1 + (seed >> 16) % (first_chunk + 1) : size;
        k = k > size - at ? size - at : k;
        rc = cr_inflater_feed(z, data + at, k, sink, s, &e);
        at += k;
    }
    if (rc == 0)
        rc = cr_inflater_finish(z, &e);
    if (rc < 0 && (e.http != 400 || strcmp(e.code, "invalid_encoding") || strcmp(e.field, "Content-Encoding")))
        abort();
    if (cr_inflater_out(z) > SINK_LIMIT + CR_INFLATE_PIECE)
        abort(); /* decoding went on past the sink's refusal */
    cr_inflater_free(z);
    return rc;
}

static void round_trip(const char *plain, size_t n, cr_coding coding, int level)
{
    cr_span sp = {plain, n};
    cr_deflater *d = cr_deflater_new(coding, level, &sp, 1);
    if (!d)
        return;
    static char packed[SINK_LIMIT * 2];
    size_t len = 0;
    ssize_t got;
    while ((got = cr_deflater_read(d, packed + len, len + 777 < sizeof packed ? 777 : sizeof packed - len)) > 0)
        len += (size_t)got;
    cr_deflater_free(d);
    if (got < 0)
        abort();
    static sink_buf back;
    back.len = 0;
    if (decode(coding, (const uint8_t *)packed, len, 0, &back) != 0 || back.len != n || memcmp(back.buf, plain, n))
        abort();
}

static void headers(const uint8_t *data, size_t size)
{
    char text[1100];
    size_t n = size < sizeof text - 1 ? size : sizeof text - 1;
    memcpy(text, data, n);
    text[n] = '\0';
    cr_coding c;
    cr_error e = {0};
    if (cr_coding_from_content_encoding(text, &c, &e) < 0 && (e.http != 415 || strcmp(e.field, "Content-Encoding")))
        abort();
    if ((int)cr_coding_negotiate(text) > CR_CODING_DEFLATE)
        abort();
    char id[CR_REQUEST_ID_MAX + 1];
    int rc = cr_request_id_take(text, id);
    if (!cr_request_id_valid(id) || (rc == 0 && strcmp(id, text)) || (rc == 0) != cr_request_id_valid(text))
        abort();
    cr_cors cors;
    char err[256];
    if (cr_cors_load(&cors, text, err, sizeof err) == 0)
        for (int i = 0; i < cors.n; i++)
            if (!cr_cors_allows(&cors, cors.origins[i]))
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sink_buf whole, chunked;
    headers(data, size);
    for (cr_coding c = CR_CODING_GZIP; c <= CR_CODING_DEFLATE; c++) {
        whole.len = chunked.len = 0;
        int a = decode(c, data, size, 0, &whole);
        int b = decode(c, data, size, size ? data[0] % 64 : 1, &chunked);
        if (a == 0 && (b != 0 || whole.len != chunked.len || memcmp(whole.buf, chunked.buf, whole.len)))
            abort(); /* how the body was cut into chunks must not change what it decodes to */
    }
    round_trip((const char *)data, size < SINK_LIMIT ? size : SINK_LIMIT, size % 2 ? CR_CODING_GZIP : CR_CODING_DEFLATE,
               1 + (int)(size % 9));
    return 0;
}
