/* Streaming decoding of coded request bodies; see body_inflate.h. */
#include "server/codec/body_inflate.h"

#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <zlib.h>

struct cr_inflater {
    z_stream zs;
    cr_coding coding;
    bool ended;        /* the current stream (gzip: member) is complete */
    uint64_t in, out;  /* across members: zlib's totals restart with each */
    unsigned char piece[CR_INFLATE_PIECE];
};

cr_inflater *cr_inflater_new(cr_coding coding)
{
    cr_inflater *z = calloc(1, sizeof *z);
    if (!z)
        return NULL;
    z->coding = coding;
    /* 16 + MAX_WBITS: the gzip wrapper only; MAX_WBITS: the zlib wrapper only. HTTP's deflate is
     * zlib's format, and a raw deflate stream fails its header check: a clear 400, no guess. */
    if (inflateInit2(&z->zs, coding == CR_CODING_GZIP ? 16 + MAX_WBITS : MAX_WBITS) != Z_OK) {
        free(z);
        return NULL;
    }
    return z;
}

static int malformed(const cr_inflater *z, cr_error *err, const char *why)
{
    return cr_fail(err, 400, "invalid_encoding", "Content-Encoding",
                   "the body is not valid %s data: %s (at byte %llu of the body as sent)",
                   cr_coding_name(z->coding), why, (unsigned long long)z->in);
}

/* The next member of a gzip body starts where the last ended. */
static int next_member(cr_inflater *z, cr_error *err)
{
    if (z->coding != CR_CODING_GZIP)
        return malformed(z, err, "data after the end of the deflate stream");
    if (inflateReset(&z->zs) != Z_OK)
        return malformed(z, err, "cannot restart the decoder");
    z->ended = false;
    return 0;
}

int cr_inflater_feed(cr_inflater *z, const void *in, size_t n, cr_inflate_sink sink, void *cls,
                     cr_error *err)
{
    const unsigned char *p = in;
    bool pending = false; /* the last piece was full: zlib may hold more output */
    for (;;) {
        if (!z->zs.avail_in && n) { /* zlib counts in uInt: long chunks go in slices */
            size_t k = n < UINT_MAX ? n : UINT_MAX;
            z->zs.next_in = (unsigned char *)p;
            z->zs.avail_in = (uInt)k;
            p += k;
            n -= k;
        }
        if (!z->zs.avail_in && !pending)
            return 0;
        if (z->ended && !z->zs.avail_in)
            return 0; /* nothing is pending after a stream's end */
        if (z->ended && next_member(z, err) < 0)
            return -1;
        uInt before = z->zs.avail_in;
        z->zs.next_out = z->piece;
        z->zs.avail_out = sizeof z->piece;
        int rc = inflate(&z->zs, Z_NO_FLUSH);
        size_t got = sizeof z->piece - z->zs.avail_out;
        z->in += before - z->zs.avail_in;
        z->out += got;
        if (rc == Z_STREAM_END)
            z->ended = true;
        else if (rc != Z_OK && rc != Z_BUF_ERROR)
            return malformed(z, err, z->zs.msg ? z->zs.msg : "corrupt stream");
        if (got && sink(cls, (const char *)z->piece, got))
            return 1;
        pending = got == sizeof z->piece;
        if (!got && before == z->zs.avail_in && rc != Z_STREAM_END && z->zs.avail_in)
            return malformed(z, err, "the decoder made no progress");
    }
}

int cr_inflater_finish(const cr_inflater *z, cr_error *err)
{
    if (z->ended)
        return 0;
    return malformed(z, err, z->in ? "it ends before its stream does (truncated)" : "the body is empty");
}

uint64_t cr_inflater_in(const cr_inflater *z) { return z->in; }

uint64_t cr_inflater_out(const cr_inflater *z) { return z->out; }

void cr_inflater_free(cr_inflater *z)
{
    if (!z)
        return;
    inflateEnd(&z->zs);
    free(z);
}
