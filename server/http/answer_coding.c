/* Compressed answers; see answer_coding.h. */
#include "server/http/answer_coding.h"

#include <stdlib.h>

#include "server/http/direct_io.h"

/* libmicrohttpd asks for this much compressed output per call (its buffer for our reader). */
#define ANSWER_BLOCK (64 * 1024)

typedef struct {
    cr_deflater *z;
    void (*done)(void *cls);
    void *cls;
} coded_answer;

static ssize_t read_coded(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    ssize_t n = cr_deflater_read(((coded_answer *)cls)->z, buf, max);
    return n > 0 ? n : n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void free_coded(void *cls)
{
    coded_answer *a = cls;
    cr_deflater_free(a->z);
    if (a->done)
        a->done(a->cls);
    free(a);
}

static struct MHD_Response *coded_response(cr_coding coding, int level, const cr_span *spans, int n,
                                           void (*done)(void *cls), void *cls)
{
    coded_answer *a = calloc(1, sizeof *a);
    if (a)
        a->z = cr_deflater_new(coding, level, spans, n);
    if (!a || !a->z) {
        free(a);
        return NULL;
    }
    a->done = done;
    a->cls = cls;
    /* Its length is known once compressed: chunked (HTTP/1.1) or to the close (HTTP/1.0). */
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, ANSWER_BLOCK,
                                                               read_coded, a, free_coded);
    if (!r) {
        cr_deflater_free(a->z);
        free(a);
        return NULL;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING, cr_coding_name(coding));
    return r;
}

static struct MHD_Response *plain_response(const cr_span *spans, int n, void (*done)(void *cls), void *cls)
{
    struct MHD_IoVec iov[2];
    unsigned k = 0;
    for (int i = 0; i < n && k < 2; i++)
        if (spans[i].n)
            iov[k++] = (struct MHD_IoVec){spans[i].p, spans[i].n};
    return MHD_create_response_from_iovec(iov, k, done, cls);
}

struct MHD_Response *cr_answer_response(cr_conn *c, const char *content_type, const cr_span *spans,
                                          int n, void (*done)(void *cls), void *cls)
{
    size_t bytes = 0;
    for (int i = 0; i < n; i++)
        bytes += spans[i].n;
    int level = c->h->deps.cfg->gzip_level;
    cr_coding coding = CR_CODING_IDENTITY;
    if (level > 0 && cr_deflate_worth_it(content_type, bytes) && !c->direct) { /* direct.h: never coded */
        c->vary_encoding = true;
        coding = cr_coding_negotiate(MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING));
    }
    struct MHD_Response *r = coding == CR_CODING_IDENTITY ? plain_response(spans, n, done, cls)
                                                          : coded_response(coding, level, spans, n, done, cls);
    if (!r) {
        if (done)
            done(cls);
        return NULL;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (c->direct)
        cr_direct_keep_body(c->direct, spans, n);
    return r;
}
