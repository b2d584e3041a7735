/* KServe binary requests on the direct path; see kserve.h (cr_kserve_direct_*).
 *
 * Through libmicrohttpd a 256x256 FP32 GEMM of perf_analyzer's cost the daemon 2.6x the CPU of the
 * same GEMM sent to /v1 as .npy on the direct path (H200 machine): its body went through the
 * connection buffer, our body buffer (grown by realloc) and a copy into each tensor. Here the
 * JSON header is read into memory and decoded as libmicrohttpd's path decodes it, and each binary
 * tensor is then received from the socket straight into its buffer (the backend's pinned memory:
 * the copy to the device starts while the rest arrives). */
#include "server/kserve/kserve.h"

#include <stdlib.h>
#include <string.h>

#include "server/engine/owned.h"
#include "server/http/body_stream.h"
#include "server/http/respond.h"
#include "server/http/upload.h"
#include "server/kserve/kserve_internal.h"
#include "server/memory.h"

#define HEADER_LEN "Inference-Header-Content-Length"

typedef struct cr_ks_upload {
    const cr_ks_model *model;
    uint64_t header_len, body_len;
    cr_request req;
    cr_ks_spec *spec;
    bool decoded;
    bool broken;      /* the connection failed mid-body */
    cr_error err;     /* when not decoded: why */
} cr_ks_upload;

/* The binary section, read from the socket in order. */
typedef struct {
    cr_ks_source src;
    cr_body_stream *s;
    uint64_t at;      /* binary bytes taken so far */
    bool *broken;
} socket_source;

static int read_socket(cr_ks_source *src, uint64_t off, void *dst, size_t n, cr_error *err)
{
    socket_source *ss = (socket_source *)src;
    if (off != ss->at) /* the decoder asks in order, every byte once */
        return cr_fail(err, 500, "internal", "binary_data_size", "binary tensors read out of order");
    for (size_t got = 0; got < n;) {
        ssize_t k = cr_body_stream_read(ss->s, (char *)dst + got, n - got);
        if (k <= 0) {
            *ss->broken = k < 0;
            return cr_fail(err, 400, "invalid_field", "binary_data_size",
                           "the body ends before its binary tensors do");
        }
        got += (size_t)k;
        if (src->alloc.ready) /* cuda: this much of it may go to the device now */
            src->alloc.ready(dst, got, n);
    }
    ss->at += n;
    return 0;
}

static void upload_free(cr_ks_upload *u)
{
    if (!u)
        return;
    if (u->decoded)
        cr_request_free(&u->req);
    cr_ks_spec_free(u->spec);
    free(u->spec);
    free(u);
}

void cr_kserve_direct_free(cr_conn *c)
{
    upload_free(c->ks_upload);
    c->ks_upload = NULL;
}

enum MHD_Result cr_kserve_direct_begin(cr_conn *c)
{
    if (cr_kserve_begin(c) != MHD_YES || c->status) /* the same refusals as libmicrohttpd's path */
        return MHD_YES;
    const cr_ks_model *m = cr_ks_path_model(c);
    if (!m)
        return MHD_YES;
    cr_ks_upload *u = calloc(1, sizeof *u);
    if (!u || !(u->spec = calloc(1, sizeof *u->spec))) {
        free(u);
        return cr_refuse(c, 503, "host_memory", "", "out of memory");
    }
    u->model = m;
    u->header_len = strtoull(cr_header(c, HEADER_LEN), NULL, 10); /* digits: cr_direct_takes checked */
    u->body_len = strtoull(cr_header(c, MHD_HTTP_HEADER_CONTENT_LENGTH), NULL, 10);
    c->ks_upload = u;
    if (u->header_len > u->body_len)
        return cr_refuse(c, 400, "invalid_parameter", HEADER_LEN, "%s %llu is larger than the body (%llu bytes)",
                         HEADER_LEN, (unsigned long long)u->header_len, (unsigned long long)u->body_len);
    if (u->header_len > (uint64_t)c->h->deps.cfg->max_json_mb << 20)
        return cr_refuse(c, 413, "too_large", HEADER_LEN, "the JSON header is larger than --max-json-mb");
    return MHD_YES;
}

/* The JSON header, whole, in memory charged to the budget. NULL with u->err (or u->broken). */
static char *read_header(cr_ks_upload *u, cr_body_stream *s)
{
    size_t n = (size_t)u->header_len;
    if (cr_mem_charge(CR_MEM_BODY, n, "the request's JSON header", &u->err) < 0)
        return NULL;
    char *h = malloc(n ? n : 1);
    size_t got = 0;
    while (h && got < n) {
        ssize_t k = cr_body_stream_read(s, h + got, n - got);
        if (k <= 0) {
            u->broken = k < 0;
            cr_fail(&u->err, 400, "invalid_field", HEADER_LEN, "the body ends inside its JSON header");
            break;
        }
        got += (size_t)k;
    }
    if (h && got == n)
        return h;
    if (!h)
        cr_fail(&u->err, 503, "host_memory", "", "out of memory reading the body");
    free(h);
    cr_mem_release(CR_MEM_BODY, n);
    return NULL;
}

static void decode(cr_conn *c, cr_ks_upload *u, cr_body_stream *s)
{
    char *header = read_header(u, s);
    if (!header)
        return;
    cr_limits lim = cr_request_limits(c->h->deps.cfg);
    socket_source ss = {{u->body_len - u->header_len, read_socket, cr_upload_allocator(c), NULL}, s, 0, &u->broken};
    ss.src.alloc.sink = NULL; /* tensors land in host memory: KServe's decode reads some of them there */
    int rc = cr_request_decode_charge(u->header_len, &u->err);
    if (rc == 0) {
        char owner[CR_OWNER_MAX];
        cr_peer_client(&c->peer, c->authenticated, owner, sizeof owner);
        rc = cr_ks_decode_from_as(u->model, header, (size_t)u->header_len, &ss.src, &lim, owner, &u->req, u->spec,
                                  &u->err);
        cr_request_decode_release(u->header_len);
    }
    free(header);
    cr_mem_release(CR_MEM_BODY, u->header_len);
    u->decoded = rc == 0;
}

int cr_kserve_direct_receive(cr_conn *c, cr_body_stream *s)
{
    cr_ks_upload *u = c->ks_upload;
    decode(c, u, s);
    c->len = (size_t)s->got;
    if (u->broken)
        return -1;
    /* a refusal leaves the rest of the body unread: read and dropped before it is answered */
    return cr_body_stream_discard(s);
}

int cr_kserve_direct_take(cr_conn *c, cr_request *req, cr_ks_spec **spec, cr_error *err)
{
    cr_ks_upload *u = c->ks_upload;
    if (!u->decoded) {
        *err = u->err;
        return -1;
    }
    *req = u->req;
    *spec = u->spec;
    u->decoded = false;
    u->spec = NULL;
    return 0;
}
