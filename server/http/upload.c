/* Binary bodies over HTTP; see upload.h. */
#include "server/http/upload.h"

#include "server/http/respond.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/codec/binary_decode.h"
#include "server/codec/media_type.h"
#include "server/http/body.h"
#include "server/http/body_stream.h"
#include "server/engine/owned.h"
#include "server/engine/tensors.h"

typedef enum { UP_MULTIPART, UP_NPY, UP_RAW } upload_kind;

/* MHD's post processor parses multipart boundaries through a buffer of this size: the parts'
 * bytes pass through it on their way to our arrays (bounded, cache-sized). */
#define PP_BUFFER (64 * 1024)

struct cr_upload {
    upload_kind kind;
    cr_bin_request *bin;
    char owner[CR_OWNER_MAX];/* who asks: the resident tensors it names or keeps are theirs */
    bool keep;               /* ?output=tensor: the result kept as a tensor (named keep_name) */
    char keep_name[129];
    char into[129];          /* ?output_into=: the result written into this existing tensor */
    struct MHD_PostProcessor *pp;
    cr_bin_part *part;       /* the part being received */
    char part_name[16];
    uint64_t part_fed;       /* bytes of it so far: the next chunk's offset */
    bool failed;             /* the iterator refused something: err says what */
    bool buffered;           /* raw bytes of unknown length (a coded body): held in c->body
                                until complete, then one array of exactly that size */
    char delim[4 + 72];      /* a direct multipart body's "\r\n--boundary" (RFC 2046: 1-70 chars) */
    size_t delim_len;
    bool closed;             /* its closing delimiter arrived */
    cr_error err;
};

static enum MHD_Result refuse(cr_conn *c, const cr_error *e)
{
    cr_upload_free(c);
    return cr_send_error(c, e);
}

static cr_op route_op(const cr_conn *c)
{
    switch (c->label) {
    case CR_ROUTE_GEMM: return CR_OP_GEMM;
    case CR_ROUTE_ATA: return CR_OP_ATA;
    case CR_ROUTE_HISTOGRAM: return CR_OP_HISTOGRAM;
    default: return CR_OP_COUNT; /* /v1/jobs: ?op= */
    }
}

typedef struct {
    cr_params *p;
    const cr_limits *lim;
    cr_error *err;
    int rc;
} query_walk;

static enum MHD_Result query_pair(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
    (void)kind;
    query_walk *w = cls;
    w->rc = cr_params_set(w->p, key, value, w->lim, w->err);
    return w->rc == 0 ? MHD_YES : MHD_NO;
}

static int read_params(cr_conn *c, const cr_limits *lim, cr_params *p, cr_error *err)
{
    query_walk w = {p, lim, err, 0};
    if (c->label == CR_ROUTE_TENSORS)
        cr_params_init_tensor(p);
    else
        cr_params_init(p, route_op(c));
    cr_query_each(c, query_pair, &w);
    return w.rc ? -1 : cr_params_finish(p, err);
}

/* Which body types a route takes: x-npy is one array (ata, histogram), raw bytes a uint8
 * histogram; /v1/jobs learns its op from ?op= first. */
static int check_type(upload_kind kind, cr_op op, const char *ct, cr_error *err)
{
    if (op == CR_OP_COUNT && kind == UP_MULTIPART) /* POST /v1/tensors: one array */
        return cr_fail(err, 415, "unsupported_media_type", "Content-Type",
                       "a tensor is one array: send application/x-npy, application/octet-stream (with ?shape= and "
                       "?dtype=) or JSON");
    if (op == CR_OP_COUNT)
        return 0;
    if (kind == UP_NPY && op == CR_OP_GEMM)
        return cr_fail(err, 415, "unsupported_media_type", "Content-Type",
                       "gemm takes two arrays: send multipart/form-data with .npy parts a and b");
    if (kind == UP_RAW && op != CR_OP_HISTOGRAM)
        return cr_fail(err, 415, "unsupported_media_type", "Content-Type",
                       "application/octet-stream (raw uint8 bytes) is for histograms; send %s "
                       "arrays as .npy", cr_op_name(op));
    (void)ct;
    return 0;
}

static int classify(const char *ct, upload_kind *kind, cr_error *err)
{
    if (cr_media_type_is(ct, "multipart/form-data"))
        *kind = UP_MULTIPART;
    else if (cr_media_type_is(ct, "application/x-npy"))
        *kind = UP_NPY;
    else if (cr_media_type_is(ct, "application/octet-stream"))
        *kind = UP_RAW;
    else
        return cr_fail(err, 415, "unsupported_media_type", "Content-Type",
                       "Content-Type %.60s is not accepted: send application/json, "
                       "multipart/form-data (.npy parts), application/x-npy or "
                       "application/octet-stream", ct ? ct : "(none)");
    return 0;
}

bool cr_upload_takes(const char *ct)
{
    upload_kind kind;
    cr_error err;
    return classify(ct, &kind, &err) == 0;
}

static cr_limits limits_of(const cr_config *cfg)
{
    return (cr_limits){.max_elements = (uint64_t)cfg->max_elements,
                       .max_total_bytes = (uint64_t)cfg->max_body_mb << 20,
                       .max_bins = cfg->max_bins, .max_stack = cfg->max_stack};
}

cr_host_allocator cr_upload_allocator(const cr_conn *c)
{
    cr_engine *e = c->h->deps.engine;
    const cr_backend *b = e ? cr_engine_backend(e) : NULL;
    return (cr_host_allocator){b ? b->host_alloc : NULL, b ? b->host_free : NULL, b ? b->host_ready : NULL,
                               b && b->sink_open ? b : NULL, e ? cr_engine_device_count(e) : 0};
}

/* ---- multipart: the post processor's iterator ------------------------------------------------ */

static enum MHD_Result part_data(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *filename, const char *content_type,
                                 const char *transfer_encoding, const char *data, uint64_t off,
                                 size_t size)
{
    (void)kind, (void)filename, (void)content_type, (void)transfer_encoding;
    cr_upload *u = cls;
    if (u->failed)
        return MHD_NO;
    key = key ? key : "";
    bool new_part = !u->part || strcmp(u->part_name, key) != 0 || (off == 0 && u->part_fed > 0);
    if (new_part) {
        if (strlen(key) >= sizeof u->part_name) {
            cr_fail(&u->err, 400, "invalid_field", "", "unexpected part \"%.40s\"", key);
            u->failed = true;
            return MHD_NO;
        }
        snprintf(u->part_name, sizeof u->part_name, "%s", key);
        u->part_fed = 0;
        if (!(u->part = cr_bin_start(u->bin, key, &u->err))) {
            u->failed = true;
            return MHD_NO;
        }
    }
    if (off != u->part_fed) { /* the post processor hands parts over in order: a bug if not */
        cr_fail(&u->err, 500, "internal", u->part_name, "part %s arrived out of order", key);
        u->failed = true;
        return MHD_NO;
    }
    u->part_fed += size;
    if (size && cr_bin_feed(u->bin, u->part, data, size, &u->err) != 0) {
        u->failed = true;
        return MHD_NO;
    }
    return MHD_YES;
}

static void fail_later(cr_upload *u, const cr_error *e);

/* ---- multipart read by us (the Unix socket's direct path) -------------------------------------- */

/* A parameter of a header value ("form-data; name=\"a\"", "multipart/form-data; boundary=x"),
 * quoted or not, into out; false when absent or longer than n - 1. */
static bool header_param(const char *value, const char *key, char *out, size_t n)
{
    size_t klen = strlen(key);
    for (const char *p = strchr(value, ';'); p; p = strchr(p + 1, ';')) {
        const char *at = p + 1;
        while (*at == ' ' || *at == '\t')
            at++;
        if (strncasecmp(at, key, klen) != 0 || at[klen] != '=')
            continue;
        at += klen + 1;
        bool quoted = *at == '"';
        const char *end = quoted ? strchr(++at, '"') : at + strcspn(at, "; \t");
        if (!end || (size_t)(end - at) >= n || end == at)
            return false;
        memcpy(out, at, (size_t)(end - at));
        out[end - at] = '\0';
        return true;
    }
    return false;
}

static int direct_boundary(cr_upload *u, const char *ct, cr_error *err)
{
    char b[72];
    if (!ct || !header_param(ct, "boundary", b, sizeof b) || strlen(b) > 70)
        return cr_fail(err, 400, "invalid_field", "Content-Type",
                       "multipart/form-data needs a boundary parameter (1 to 70 characters)");
    u->delim_len = (size_t)snprintf(u->delim, sizeof u->delim, "\r\n--%s", b);
    return 0;
}

static void direct_fail(cr_upload *u, int status, const char *msg)
{
    cr_error e;
    cr_fail(&e, status, "invalid_field", "body", "%s", msg);
    fail_later(u, &e);
}

/* What a parser reads past the bytes it needs: enough for a part's head and its .npy header in
 * one read, while a fill of the whole buffer would take up to 64 KiB of array data with them,
 * to be copied out of the buffer again (at 64 connections of 256x256 .npy GEMMs, that copy and
 * the delimiter search over it were 8% of the daemon's CPU). */
#define LOOKAHEAD 512

/* At least min buffered bytes of what a parser looks at, read no further than LOOKAHEAD past. */
static ssize_t look(cr_body_stream *s, size_t min) { return cr_body_stream_fill_upto(s, min, min + LOOKAHEAD); }

/* Body bytes that are not received in place: into the part (header bytes, a scattered part,
 * anything past its declared data, which cr_bin_feed refuses), or dropped once it failed. */
static void feed_part(cr_conn *c, cr_upload *u, const char *data, size_t n)
{
    cr_error err;
    c->len += n;
    if (!u->failed && n && cr_bin_feed(u->bin, u->part, data, n, &err) != 0)
        fail_later(u, &err);
}

/* A part's bytes up to its delimiter (multipart) or the body's end (x-npy, raw bytes): its data
 * straight from the socket into its array once the header is parsed. 1: at the delimiter (not yet
 * taken); 0: the body ended; -1: the connection failed. */
static int receive_part(cr_conn *c, cr_upload *u, cr_body_stream *s, bool delimited)
{
    size_t dlen = delimited ? u->delim_len : 0;
    for (;;) {
        size_t want = 0;
        void *dst = u->failed ? NULL : cr_bin_span(u->bin, u->part, &want);
        if (dst) {
            ssize_t got = cr_body_stream_read(s, dst, want);
            if (got <= 0)
                return (int)got;
            cr_error err;
            if (cr_bin_spanned(u->bin, u->part, (size_t)got, &err) != 0)
                fail_later(u, &err); /* the rest of the body is read and dropped */
            c->len += (size_t)got;
            continue;
        }
        /* a part still parsing its header (or done, before its delimiter) is looked at; bytes that
         * go through the buffer anyway (a scattered part, or dropped) are read a buffer at once */
        size_t min = dlen ? dlen : 1, need = u->failed || !u->part ? SIZE_MAX : cr_bin_buffered_need(u->part);
        ssize_t avail = need == SIZE_MAX ? cr_body_stream_fill(s, min)
                                         : cr_body_stream_fill_upto(s, min, min + need + LOOKAHEAD);
        if (avail <= 0)
            return (int)avail;
        const char *data = cr_body_stream_data(s);
        const char *hit = dlen ? memmem(data, (size_t)avail, u->delim, dlen) : NULL;
        /* without a hit, keep a tail that may be the start of the delimiter */
        size_t k = hit ? (size_t)(hit - data) : dlen && s->left ? (size_t)avail - (dlen - 1) : (size_t)avail;
        feed_part(c, u, data, k);
        cr_body_stream_take(s, k);
        if (hit)
            return 1;
    }
}

/* The part's header lines, up to the blank line; its name from Content-Disposition. */
static int receive_part_head(cr_upload *u, cr_body_stream *s, char *name, size_t n)
{
    enum { PART_HEAD_MAX = 8192 };
    const char *end = NULL;
    for (size_t need = 2; !end; ) {
        ssize_t avail = look(s, need);
        if (avail < 0)
            return -1;
        if ((size_t)avail < need) /* the body ended */
            return direct_fail(u, 400, "the multipart/form-data body ends early (no closing boundary)"), 0;
        const char *d = cr_body_stream_data(s);
        size_t look = (size_t)avail < PART_HEAD_MAX ? (size_t)avail : PART_HEAD_MAX;
        end = d[0] == '\r' && d[1] == '\n' ? d : memmem(d, look, "\r\n\r\n", 4);
        if (!end && look == PART_HEAD_MAX)
            return direct_fail(u, 400, "a multipart part's headers pass 8 KiB"), 0;
        need = (size_t)avail + 1;
    }
    const char *d = cr_body_stream_data(s);
    size_t len = (size_t)(end - d) + (end == d ? 2 : 4);
    char head[PART_HEAD_MAX + 1];
    memcpy(head, d, len);
    head[len] = '\0';
    cr_body_stream_take(s, len);
    name[0] = '\0';
    for (char *line = head; line && *line; ) {
        char *next = strstr(line, "\r\n");
        if (next)
            *next = '\0', next += 2;
        if (strncasecmp(line, "Content-Disposition:", 20) == 0 && !header_param(line, "name", name, n)) {
            direct_fail(u, 400, "a multipart part has no name of at most 15 characters");
            return 0;
        }
        line = next;
    }
    return 1;
}

/* After a delimiter: "--" closes the body (the epilogue is dropped); else transport padding and
 * CRLF open the next part. 1: a part follows; 0: the end; -1: the connection failed. */
static int after_delimiter(cr_upload *u, cr_body_stream *s)
{
    ssize_t avail = look(s, 2);
    if (avail < 0)
        return -1;
    const char *d = cr_body_stream_data(s);
    if (avail >= 2 && d[0] == '-' && d[1] == '-') {
        u->closed = true;
        return cr_body_stream_discard(s) < 0 ? -1 : 0;
    }
    size_t i = 0;
    for (;; i++) {
        if (i + 2 > (size_t)avail && (avail = look(s, i + 2)) < 0)
            return -1;
        d = cr_body_stream_data(s);
        if (i + 2 > (size_t)avail || (d[i] != ' ' && d[i] != '\t') || i == 256) /* padding: a few bytes */
            break;
    }
    if (i + 2 > (size_t)avail || d[i] != '\r' || d[i + 1] != '\n')
        return direct_fail(u, 400, "the multipart/form-data body is malformed"), 0;
    cr_body_stream_take(s, i + 2);
    return 1;
}

/* The preamble, if any, up to the first delimiter (which may open the body without its CRLF).
 * 1: just past it; 0: the body ended; -1: the connection failed. */
static int skip_preamble(cr_conn *c, cr_upload *u, cr_body_stream *s)
{
    size_t open_len = u->delim_len - 2;
    ssize_t avail = look(s, open_len);
    if (avail < 0)
        return -1;
    if ((size_t)avail >= open_len && memcmp(cr_body_stream_data(s), u->delim + 2, open_len) == 0) {
        cr_body_stream_take(s, open_len);
        return 1;
    }
    bool failed = u->failed;
    u->failed = true; /* the preamble is nobody's data: dropped */
    int rc = receive_part(c, u, s, true);
    u->failed = failed;
    if (rc == 1)
        cr_body_stream_take(s, u->delim_len);
    return rc;
}

static int receive_multipart(cr_conn *c, cr_upload *u, cr_body_stream *s)
{
    int rc = skip_preamble(c, u, s);
    while (rc == 1 && (rc = after_delimiter(u, s)) == 1) {
        char name[16];
        if ((rc = receive_part_head(u, s, name, sizeof name)) != 1)
            break;
        cr_error err;
        if (!u->failed && !(u->part = cr_bin_start(u->bin, name, &err)))
            fail_later(u, &err);
        if ((rc = receive_part(c, u, s, true)) == 1)
            cr_body_stream_take(s, u->delim_len);
    }
    if (rc < 0)
        return -1;
    if (!u->closed && !u->failed)
        direct_fail(u, 400, "the multipart/form-data body ends early (no closing boundary)");
    return cr_body_stream_discard(s);
}

int cr_upload_receive(cr_conn *c, cr_body_stream *s)
{
    cr_upload *u = c->upload;
    if (u->kind == UP_MULTIPART)
        return receive_multipart(c, u, s);
    return receive_part(c, u, s, false) < 0 ? -1 : 0;
}

/* ---- entry points -------------------------------------------------------------------------------- */

static int begin_body(cr_conn *c, cr_upload *u, const cr_params *p, const cr_limits *lim,
                      cr_error *err)
{
    const char *cl = cr_header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
    unsigned long long declared = cl ? strtoull(cl, NULL, 10) : 0;
    if (cl && declared > c->limit)
        return cr_fail(err, 413, "too_large", "body",
                       "the body is %llu bytes, larger than --max-body-mb (%zu bytes)", declared,
                       c->limit);
    if (u->kind == UP_RAW && !cl && !c->inflater)
        return cr_fail(err, 411, "length_required", "Content-Length",
                       "raw application/octet-stream bodies need a Content-Length");
    if (!(u->bin = cr_bin_new(p, lim, cr_upload_allocator(c))))
        return cr_fail(err, 503, "host_memory", "", "out of memory");
    cr_peer_client(&c->peer, c->authenticated, u->owner, sizeof u->owner);
    u->keep = p->output_tensor;
    snprintf(u->keep_name, sizeof u->keep_name, "%s", p->output_name);
    snprintf(u->into, sizeof u->into, "%s", p->output_into);
    if (cr_bin_tensors(u->bin, u->owner, err) < 0)
        return -1;
    /* The array is sized before the first byte lands; a coded body's size is known at its end. */
    if (u->kind == UP_RAW && c->inflater)
        return u->buffered = true, 0;
    if (u->kind == UP_RAW)
        return (u->part = cr_bin_start_raw(u->bin, declared, err)) ? 0 : -1;
    /* ?tensor_a= with an empty body: the query names every operand there is. */
    if (u->kind == UP_NPY && cl && !declared && cr_bin_names_tensor(u->bin, cr_bin_body_part_name(p->op)))
        return 0;
    if (u->kind == UP_NPY)
        return (u->part = cr_bin_start(u->bin, cr_bin_body_part_name(p->op), err)) ? 0 : -1;
    if (c->direct)
        return direct_boundary(u, cr_header(c, MHD_HTTP_HEADER_CONTENT_TYPE), err);
    u->pp = MHD_create_post_processor(c->conn, PP_BUFFER, part_data, u);
    if (!u->pp)
        return cr_fail(err, 400, "invalid_field", "Content-Type",
                       "multipart/form-data needs a boundary parameter");
    return 0;
}

enum MHD_Result cr_upload_begin(cr_conn *c)
{
    cr_error err;
    cr_params p;
    const char *ct = cr_header(c, MHD_HTTP_HEADER_CONTENT_TYPE);
    cr_limits lim = limits_of(c->h->deps.cfg);
    upload_kind kind = UP_MULTIPART;
    if (classify(ct, &kind, &err) || read_params(c, &lim, &p, &err) ||
        check_type(kind, p.op, ct, &err))
        return refuse(c, &err);
    c->limit = (size_t)c->h->deps.cfg->max_body_mb << 20;
    cr_upload *u = calloc(1, sizeof *u);
    if (!u)
        return MHD_NO;
    u->kind = kind;
    c->upload = u;
    if (begin_body(c, u, &p, &lim, &err))
        return refuse(c, &err);
    return MHD_YES;
}

/* libmicrohttpd (0.9.75) takes no response while a body is arriving: a refusal is kept, the
 * arrays freed at once, the rest of the body read and dropped, and the error answered when the
 * body is complete. */
static void fail_later(cr_upload *u, const cr_error *e)
{
    if (!u->failed)
        u->err = *e;
    u->failed = true;
    if (u->pp)
        MHD_destroy_post_processor(u->pp);
    u->pp = NULL;
    cr_bin_free(u->bin);
    u->bin = NULL;
    u->part = NULL;
}

/* Raw bytes of a coded body: kept whole (charged to the budget) until their length is known. */
static enum MHD_Result buffer_raw(cr_conn *c, const char *data, size_t n)
{
    cr_error err;
    int rc = cr_body_append(c, data, n, &err);
    if (rc == -1)
        cr_fail(&err, 413, "too_large", "body", "the body is larger than --max-body-mb (%zu bytes) decoded",
                c->limit);
    if (rc < 0)
        cr_body_refuse_later(c, &err); /* frees u */
    return MHD_YES;
}

enum MHD_Result cr_upload_feed(cr_conn *c, const char *data, size_t *size)
{
    cr_upload *u = c->upload;
    cr_error err;
    size_t n = *size;
    *size = 0;
    if (u->buffered && !u->failed)
        return buffer_raw(c, data, n);
    if (c->len + n > c->limit && c->inflater) { /* decoded past the limit: a 413 once it ends */
        cr_fail(&err, 413, "too_large", "body", "the body is larger than --max-body-mb (%zu bytes) decoded",
                c->limit);
        fail_later(u, &err);
        return MHD_YES;
    }
    if (c->len + n > c->limit) { /* only a chunked body gets here: Content-Length was checked */
        c->status = 413;
        snprintf(c->error_code, sizeof c->error_code, "too_large");
        return MHD_NO; /* reading on would be unbounded: drop the connection */
    }
    c->len += n;
    if (u->failed)
        return MHD_YES;
    if (u->pp) {
        if (MHD_post_process(u->pp, data, n) != MHD_YES && !u->failed)
            cr_fail(&u->err, 400, "invalid_field", "body", "the multipart/form-data body is malformed");
        if (u->failed || u->err.code[0]) {
            err = u->err;
            fail_later(u, &err);
        }
        return MHD_YES;
    }
    if (cr_bin_feed(u->bin, u->part, data, n, &err) != 0)
        fail_later(u, &err);
    return MHD_YES;
}

/* The buffered raw bytes, now of known length, into their array; the buffer goes at once. */
static int unbuffer_raw(cr_conn *c, cr_upload *u, cr_error *err)
{
    u->part = cr_bin_start_raw(u->bin, c->len, err);
    int rc = u->part && (!c->len || cr_bin_feed(u->bin, u->part, c->body, c->len, err) == 0) ? 0 : -1;
    cr_body_free(c);
    return rc;
}

bool cr_upload_failed(const cr_conn *c)
{
    return c->upload && c->upload->failed;
}

int cr_upload_request(cr_conn *c, cr_request *out, cr_error *err)
{
    cr_upload *u = c->upload;
    memset(out, 0, sizeof *out);
    if (u->failed)
        return *err = u->err, -1;
    if (u->buffered && unbuffer_raw(c, u, err) < 0)
        return -1;
    if (u->pp) {
        enum MHD_Result done = MHD_destroy_post_processor(u->pp);
        u->pp = NULL;
        if (u->failed)
            return *err = u->err, -1;
        if (done != MHD_YES)
            return cr_fail(err, 400, "invalid_field", "body",
                           "the multipart/form-data body ends early (no closing boundary)");
    }
    cr_metrics_device_stream(false, cr_bin_device_bytes(u->bin));
    int rc = cr_bin_finish(u->bin, out, err);
    if (rc == 0 && ((u->keep && cr_request_keep_result(out, u->owner, u->keep_name, err) < 0) ||
                    (u->into[0] && cr_request_result_into(out, u->owner, u->into, err) < 0))) {
        cr_request_free(out);
        rc = -1;
    }
    cr_upload_free(c); /* the arrays now belong to out */
    return rc;
}

int cr_upload_array(cr_conn *c, cr_request *out, cr_shape *shape, cr_dtype *dt, cr_error *err)
{
    cr_upload *u = c->upload;
    memset(out, 0, sizeof *out);
    if (u->failed)
        return *err = u->err, -1;
    if (u->buffered && unbuffer_raw(c, u, err) < 0)
        return -1;
    cr_metrics_device_stream(false, cr_bin_device_bytes(u->bin));
    int rc = cr_bin_finish_array(u->bin, out, shape, dt, err);
    cr_upload_free(c);
    return rc;
}

void cr_upload_free(cr_conn *c)
{
    cr_upload *u = c->upload;
    if (!u)
        return;
    if (u->pp)
        MHD_destroy_post_processor(u->pp);
    cr_bin_free(u->bin);
    free(u);
    c->upload = NULL;
}
