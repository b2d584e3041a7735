/* Streamed bodies; see stream_body.h. */
#include "server/http/stream_body.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "kernels/hist_range.h"
#include "server/clock.h"
#include "server/codec/binary_decode.h"
#include "server/codec/media_type.h"
#include "server/codec/npy.h"
#include "server/engine/engine.h"
#include "server/engine/owned.h"
#include "server/engine/streams.h"
#include "server/http/answer.h"
#include "server/http/respond.h"
#include "server/http/submit.h"
#include "server/http/upload.h"

/* Parts running at once per stream: one being absorbed while the next arrives, and slack. */
#define IN_FLIGHT 3

typedef struct {
    cr_stream_spec spec;
    bool npy;
    uint64_t npy_bytes;   /* .npy: the data the header announces */
    cr_job *job;          /* the stream's (not in the job table: the answer is this request's) */
    cr_stream *s;         /* held */
    cr_host_allocator alloc;
    cr_engine *engine;
    pthread_mutex_t mu;   /* guards running, failed, err */
    pthread_cond_t cv;
    int running;
    bool failed;
    cr_error err;
    uint64_t seq;
} stream_body;

bool cr_stream_body_takes(const cr_head *hd)
{
    const char *te = cr_head_get(hd, "Transfer-Encoding"), *ct = cr_head_get(hd, "Content-Type");
    bool put = !strcmp(hd->method, "PUT"), chunked = te && !strcasecmp(te, "chunked");
    bool route = !strcmp(hd->path, "/v1/ata") || !strcmp(hd->path, "/v1/histogram");
    bool type = !ct || cr_media_type_is(ct, "application/octet-stream") || cr_media_type_is(ct, "application/x-npy");
    bool length = cr_head_count(hd, "Content-Length") == 1;
    return route && type && (put || !strcmp(hd->method, "POST")) && cr_head_count(hd, "Transfer-Encoding") <= 1 &&
           (chunked ? !length : put && length && !te) && !cr_head_get(hd, "Content-Encoding");
}

/* ---- opening ---------------------------------------------------------------------------------- */

static int query_dtype(cr_conn *c, bool ata, cr_dtype *dt, cr_error *err)
{
    const char *v = cr_query_value(c, "dtype");
    *dt = ata ? CR_DT_F32 : CR_DT_U8;
    if (!v)
        return 0;
    if (!strcmp(v, "float32") || !strcmp(v, "float64") || (!ata && !strcmp(v, "uint8"))) {
        *dt = !strcmp(v, "float32") ? CR_DT_F32 : !strcmp(v, "float64") ? CR_DT_F64 : CR_DT_U8;
        return 0;
    }
    return cr_fail(err, 400, "invalid_parameter", "dtype", "a streamed %s body's dtype is %s", ata ? "ata" : "histogram",
                   ata ? "float32 or float64" : "uint8, float32 or float64");
}

static int query_int(cr_conn *c, const char *name, int64_t lo, int64_t hi, int64_t *out, cr_error *err)
{
    const char *v = cr_query_value(c, name);
    if (!v)
        return 1;
    char *end = NULL;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || x < lo || x > hi)
        return cr_fail(err, 400, "invalid_parameter", name, "%s must be an integer from %lld to %lld", name,
                       (long long)lo, (long long)hi);
    *out = x;
    return 0;
}

static int query_range(cr_conn *c, cr_stream_spec *sp, cr_error *err)
{
    const char *v = cr_query_value(c, "range");
    char *end = NULL;
    if (!v && sp->dtype != CR_DT_U8)
        return cr_fail(err, 400, "missing_field", "range", "a streamed float histogram needs ?range=lo,hi up front "
                       "(numpy's default, the data's min and max, is only known at the end)");
    if (!v) {
        sp->lo = 0.0, sp->hi = 256.0;
        return 0;
    }
    sp->lo = strtod(v, &end);
    if (end == v || *end != ',' || (sp->hi = strtod(end + 1, &end), *end))
        return cr_fail(err, 400, "invalid_parameter", "range", "range is lo,hi");
    cr_range_status st = cr_hist_range_fix(&sp->lo, &sp->hi, sp->dtype);
    if (st == CR_RANGE_OK)
        return 0;
    char why[160];
    cr_hist_range_explain(st, sp->lo, sp->hi, why, sizeof why);
    return cr_fail(err, 400, "invalid_parameter", "range", "%s", why);
}

/* What the query says of the stream; .npy bodies give dtype and cols in their header instead. */
static int read_spec(cr_conn *c, bool ata, cr_stream_spec *sp, cr_error *err)
{
    cr_limits lim = cr_request_limits(c->h->deps.cfg);
    const char *k = cr_query_value(c, "kernel"), *acc = cr_query_value(c, "accumulate");
    int64_t v = 0;
    memset(sp, 0, sizeof *sp);
    sp->op = ata ? CR_OP_ATA : CR_OP_HISTOGRAM;
    sp->kernel = cr_kernel_choice_auto();
    if (k && (cr_kernel_choice_parse(k, &sp->kernel) < 0 || sp->kernel.mode == CR_KERNEL_ALL))
        return cr_fail(err, 400, "invalid_parameter", "kernel", "kernel is auto or a kernel's name");
    if (query_dtype(c, ata, &sp->dtype, err) < 0)
        return -1;
    if (!ata) {
        int rc = query_int(c, "bins", 1, lim.max_bins, &v, err);
        sp->bins = rc == 1 ? (sp->dtype == CR_DT_U8 ? 256 : 10) : (int32_t)v;
        return rc < 0 ? -1 : query_range(c, sp, err);
    }
    if (acc && strcmp(acc, "float64") && strcmp(acc, "float32"))
        return cr_fail(err, 400, "invalid_parameter", "accumulate", "accumulate is float64 (the default) or float32");
    sp->acc_f32 = acc && !strcmp(acc, "float32");
    int rc = query_int(c, "cols", 1, 1 << 16, &v, err);
    sp->cols = rc == 0 ? v : 0;
    return rc < 0 ? -1 : 0;
}

static void body_free(void *p)
{
    stream_body *b = p;
    pthread_mutex_lock(&b->mu);
    while (b->running) /* the parts point at b */
        pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
    if (b->s) {
        cr_stream_abandon(b->s); /* a no-op once published */
        cr_stream_release(b->s);
    }
    if (b->job)
        cr_job_release(b->job);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
    free(b);
}

/* The stream opens once cols is known: from the query for raw rows, from a .npy's header. */
static int open_stream(cr_conn *c, stream_body *b, cr_error *err)
{
    char owner[CR_OWNER_MAX];
    cr_request req = {0};
    if (b->spec.op == CR_OP_ATA && !b->spec.cols)
        return cr_fail(err, 400, "missing_field", "cols", "raw rows need ?cols=N (or send a .npy, whose header has it)");
    if (!(b->job = cr_job_new(&req, false)))
        return cr_fail(err, 503, "host_memory", "", "out of memory");
    cr_peer_client(&c->peer, c->authenticated, owner, sizeof owner);
    if (cr_apply_job_headers(c, b->job, err) < 0 || cr_stream_open(b->job, owner, &b->spec, err) < 0)
        return -1;
    b->s = cr_stream_acquire(owner, b->job->id, false, err);
    return b->s ? 0 : -1;
}

enum MHD_Result cr_stream_body_begin(cr_conn *c)
{
    cr_error err;
    stream_body *b = calloc(1, sizeof *b);
    if (!b)
        return MHD_NO;
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    c->ctx = b;
    c->ctx_free = body_free;
    c->handler = cr_stream_body_answer;
    b->engine = c->h->deps.engine;
    b->alloc = cr_upload_allocator(c);
    const char *ct = cr_header(c, MHD_HTTP_HEADER_CONTENT_TYPE);
    b->npy = ct && cr_media_type_is(ct, "application/x-npy");
    if (cr_engine_draining(b->engine))
        return cr_refuse(c, 503, "draining", "", "the daemon is shutting down: stream to another instance");
    if (read_spec(c, !strcmp(c->path, "/v1/ata"), &b->spec, &err) < 0 || (!b->npy && open_stream(c, b, &err) < 0))
        return cr_send_error(c, &err);
    return MHD_YES;
}

/* ---- parts ------------------------------------------------------------------------------------ */

static void fail_once(stream_body *b, const cr_error *err)
{
    pthread_mutex_lock(&b->mu);
    if (!b->failed)
        b->failed = true, b->err = *err;
    pthread_mutex_unlock(&b->mu);
}

static bool has_failed(stream_body *b)
{
    pthread_mutex_lock(&b->mu);
    bool f = b->failed;
    pthread_mutex_unlock(&b->mu);
    return f;
}

static void part_finished(cr_job *j)
{
    stream_body *b = j->conn;
    pthread_mutex_lock(&b->mu);
    if (atomic_load(&j->state) != CR_JOB_DONE && !b->failed)
        b->failed = true, b->err = j->error;
    b->running--;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    cr_job_release(j);
}

/* Waits until fewer than `most` parts run. */
static void wait_running(stream_body *b, int most)
{
    pthread_mutex_lock(&b->mu);
    while (b->running >= most && b->running > 0)
        pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
}

/* The part in r (its array in slot A, count elements) as a job of the stream, queued. A full queue
 * is waited out (the upload slows down, as backpressure should), not refused. */
static int submit_part(stream_body *b, cr_request *r, uint64_t count, cr_error *err)
{
    cr_task *t = &r->task;
    const cr_stream_spec *sp = &b->spec;
    cr_part_admit admit;
    t->op = sp->op;
    t->dtype = sp->dtype;
    r->kernel = sp->kernel;
    if (sp->op == CR_OP_ATA) {
        t->u.ata.m = (int64_t)(count / (uint64_t)sp->cols), t->u.ata.n = sp->cols, t->u.ata.a = r->bufs[CR_BUF_A];
    } else {
        t->u.hist = (cr_hist_task){.count = (int64_t)count, .data = r->bufs[CR_BUF_A], .bins = sp->bins, .lo = sp->lo,
                                   .hi = sp->hi};
        int64_t nan_at = sp->dtype == CR_DT_U8 ? -1 : cr_hist_first_nan(t->u.hist.data, t->u.hist.count, sp->dtype);
        if (nan_at >= 0)
            return cr_fail(err, 400, "non_finite", "body", "the data holds NaN (element %lld of part %llu): a histogram "
                           "has no bin for it", (long long)nan_at, (unsigned long long)b->seq);
    }
    r->stream_bytes = count * cr_dtype_size(sp->dtype);
    if (cr_stream_part_begin(b->s, b->seq, &admit, err) < 0)
        return -1;
    cr_stream_hold(b->s); /* the part's own hold, ended with it */
    r->stream = b->s, r->stream_seq = b->seq++, r->stream_drop = cr_stream_part_drop;
    cr_job *j = cr_job_new(r, true);
    if (!j)
        return cr_request_free(r), cr_fail(err, 503, "host_memory", "", "out of memory");
    j->conn = b;
    j->on_done = part_finished;
    pthread_mutex_lock(&b->mu);
    b->running++;
    pthread_mutex_unlock(&b->mu);
    for (;;) {
        if (cr_engine_submit(b->engine, j, err) == 0)
            return 0;
        if (strcmp(err->code, "queue_full") != 0 || has_failed(b))
            break;
        nanosleep(&(struct timespec){0, 2000000}, NULL);
    }
    pthread_mutex_lock(&b->mu);
    b->running--;
    pthread_mutex_unlock(&b->mu);
    cr_job_release(j); /* frees the part: its seq is dropped */
    return -1;
}

/* Fills one part of whole rows (or values) from the body; 0 with *count elements (0: the body
 * has ended), -1 with err (the connection broke: *broke). */
static int read_part(stream_body *b, cr_body_stream *s, cr_request *r, uint64_t *count, bool *broke, cr_error *err)
{
    size_t es = cr_dtype_size(b->spec.dtype), row = es * (b->spec.op == CR_OP_ATA ? (size_t)b->spec.cols : 1);
    size_t cap = CR_STREAM_PART_BYTES / row * row, have = 0;
    if (!cap)
        cap = row;
    char *p = cr_request_alloc_from(r, CR_BUF_A, cap, false, b->alloc.alloc, b->alloc.free, err);
    if (!p)
        return -1;
    while (have < cap) {
        ssize_t n = cr_body_stream_read(s, p + have, cap - have);
        if (n < 0 && s->error == CR_STREAM_BAD) /* answered: the client may still be listening */
            return cr_fail(err, 400, "invalid_field", "Transfer-Encoding", "the chunked framing is malformed (RFC 9112 "
                           "7.1: a hex size line, the data, CRLF; a 0 chunk at the end)");
        if (n < 0) {
            *broke = true;
            return cr_fail(err, 400, "invalid_field", "body", "the body broke off");
        }
        if (n == 0)
            break;
        have += (size_t)n;
    }
    if (have % row)
        return cr_fail(err, 400, "invalid_field", "body", "the body ends inside a row: %zu bytes are not whole rows of "
                       "%zu bytes", have, row);
    *count = have / es;
    return 0;
}

/* A .npy's header: the dtype and, for AᵀA, the columns of its rows; then the stream opens. */
static int read_npy_header(cr_conn *c, stream_body *b, cr_body_stream *s, cr_error *err)
{
    cr_npy_header h;
    size_t need = 10;
    for (;;) {
        ssize_t n = cr_body_stream_fill_upto(s, need, need);
        if (n < 0)
            return cr_fail(err, 400, "invalid_field", "body", "the body broke off in its .npy header");
        cr_npy_status st = cr_npy_parse_header((const uint8_t *)cr_body_stream_data(s), (size_t)n, "body", &h, &need, err);
        if (st == CR_NPY_BAD)
            return -1;
        if (st == CR_NPY_OK)
            break;
        if ((size_t)n >= need)
            return cr_fail(err, 400, "invalid_field", "body", "the .npy header is cut short");
    }
    cr_body_stream_take(s, h.header_bytes);
    bool ata = b->spec.op == CR_OP_ATA;
    if (ata && (h.ndim != 2 || h.fortran_order))
        return cr_fail(err, 400, "invalid_field", "body", "a streamed AᵀA is rows of a C-ordered 2-D .npy (got %d "
                       "dimensions%s)", h.ndim, h.fortran_order ? ", Fortran order" : "");
    if ((ata && h.dtype != CR_DT_F32 && h.dtype != CR_DT_F64) ||
        (!ata && h.dtype != CR_DT_U8 && h.dtype != CR_DT_F32 && h.dtype != CR_DT_F64))
        return cr_fail(err, 400, "invalid_field", "body", "a streamed %s .npy is %s, not %s", ata ? "AᵀA" : "histogram",
                       ata ? "float32 or float64" : "uint8, float32 or float64", cr_dtype_name(h.dtype));
    if (cr_query_value(c, "dtype") && h.dtype != b->spec.dtype)
        return cr_fail(err, 400, "invalid_parameter", "dtype", "?dtype= says %s, the .npy header %s",
                       cr_dtype_name(b->spec.dtype), cr_dtype_name(h.dtype));
    if (ata && b->spec.cols && b->spec.cols != h.shape[1])
        return cr_fail(err, 422, "shape_mismatch", "cols", "?cols=%lld, the .npy header's rows have %lld",
                       (long long)b->spec.cols, (long long)h.shape[1]);
    b->spec.dtype = h.dtype;
    if (ata)
        b->spec.cols = h.shape[1];
    if (!ata && !cr_query_value(c, "bins") && h.dtype != CR_DT_U8)
        b->spec.bins = 10;
    if (!ata && h.dtype != CR_DT_U8 && !cr_query_value(c, "range"))
        return cr_fail(err, 400, "missing_field", "range", "a streamed float histogram needs ?range=lo,hi up front");
    b->npy_bytes = h.data_bytes;
    return open_stream(c, b, err);
}

int cr_stream_body_receive(cr_conn *c, cr_body_stream *s)
{
    stream_body *b = c->ctx;
    cr_error err;
    bool broke = false;
    uint64_t total = 0;
    if (b->npy && read_npy_header(c, b, s, &err) < 0) {
        fail_once(b, &err);
        return 0;
    }
    for (;;) {
        cr_request r = {0};
        uint64_t count = 0;
        wait_running(b, IN_FLIGHT);
        if (has_failed(b))
            return 0; /* the answer says why; the rest of the body is not read (the connection closes) */
        if (read_part(b, s, &r, &count, &broke, &err) < 0 || (count && submit_part(b, &r, count, &err) < 0)) {
            cr_request_free(&r);
            fail_once(b, &err);
            return broke ? -1 : 0;
        }
        total += count * cr_dtype_size(b->spec.dtype);
        if (!count) {
            cr_request_free(&r);
            break;
        }
    }
    if (b->npy && total != b->npy_bytes) {
        cr_fail(&err, 400, "invalid_field", "body", "the .npy header announces %llu bytes of data, the body has %llu",
                (unsigned long long)b->npy_bytes, (unsigned long long)total);
        fail_once(b, &err);
    }
    return 0;
}

enum MHD_Result cr_stream_body_answer(cr_conn *c)
{
    stream_body *b = c->ctx;
    cr_error err;
    wait_running(b, 1);
    if (has_failed(b))
        return cr_send_error(c, &b->err);
    if (cr_stream_finish(b->s, &err) < 0)
        return cr_send_error(c, &err);
    c->job = b->job; /* for the log line */
    cr_job_ref(b->job);
    return cr_send_job(c, b->job);
}

enum MHD_Result cr_route_streamed(cr_conn *c)
{
    return cr_refuse(c, 400, "unsupported", "Transfer-Encoding", "streamed bodies (PUT, or POST with "
                     "Transfer-Encoding: chunked) are read on plain TCP or the Unix socket, with --direct-min-kb above 0; "
                     "over TLS send parts to a stream job (POST /v1/jobs {\"stream\": true})");
}
