/* Streaming compression of answers; see answer_deflate.h. */
#include "server/codec/answer_deflate.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "server/codec/media_type.h"

#define MAX_SPANS 2

struct cr_deflater {
    z_stream zs;
    cr_span spans[MAX_SPANS];
    int n_spans, span;  /* the span being read */
    size_t offset;      /* how far into it */
    bool done;
};

bool cr_deflate_worth_it(const char *ct, size_t bytes)
{
    if (!ct || bytes < CR_DEFLATE_MIN_BYTES)
        return false;
    /* Text only. Binary answers (.npy, KServe's raw tensors) are float arrays whose mantissas do
     * not compress: 64 MiB of float32 shrank 1.08x at 45 MB/s (level 1, this machine), so gzip
     * would cost a second per 64 MiB to save 7%; and python requests asks for gzip by default. */
    return strncasecmp(ct, "text/", 5) == 0 || cr_media_type_is(ct, "application/json") || cr_media_type_is(ct, "application/yaml");
}

cr_deflater *cr_deflater_new(cr_coding coding, int level, const cr_span *spans, int n)
{
    if (n < 0 || n > MAX_SPANS || coding == CR_CODING_IDENTITY)
        return NULL;
    cr_deflater *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    memcpy(d->spans, spans, (size_t)n * sizeof *spans);
    d->n_spans = n;
    int bits = coding == CR_CODING_GZIP ? 16 + MAX_WBITS : MAX_WBITS;
    if (deflateInit2(&d->zs, level, Z_DEFLATED, bits, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        free(d);
        return NULL;
    }
    return d;
}

/* Hands zlib the next slice of input when it has none left. */
static void refill(cr_deflater *d)
{
    while (!d->zs.avail_in && d->span < d->n_spans) {
        const cr_span *s = &d->spans[d->span];
        size_t left = s->n - d->offset;
        size_t k = left < UINT_MAX ? left : UINT_MAX;
        d->zs.next_in = (unsigned char *)s->p + d->offset;
        d->zs.avail_in = (uInt)k;
        d->offset += k;
        if (d->offset == s->n)
            d->span++, d->offset = 0;
    }
}

ssize_t cr_deflater_read(cr_deflater *d, char *out, size_t max)
{
    if (d->done)
        return 0;
    if (max > UINT_MAX)
        max = UINT_MAX;
    d->zs.next_out = (unsigned char *)out;
    d->zs.avail_out = (uInt)max;
    while (d->zs.avail_out) {
        refill(d);
        bool last = !d->zs.avail_in && d->span >= d->n_spans;
        int rc = deflate(&d->zs, last ? Z_FINISH : Z_NO_FLUSH);
        if (rc == Z_STREAM_END) {
            d->done = true;
            break;
        }
        if (rc != Z_OK && rc != Z_BUF_ERROR)
            return -1;
    }
    return (ssize_t)(max - d->zs.avail_out);
}

void cr_deflater_free(cr_deflater *d)
{
    if (!d)
        return;
    deflateEnd(&d->zs);
    free(d);
}
