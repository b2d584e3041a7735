/* A finished job's answer; see answer.h. */
#include "server/http/answer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kernels/registry.h"
#include "server/codec/json_encode.h"
#include "server/codec/npy.h"
#include "server/codec/numfmt.h"
#include "server/http/answer_coding.h"
#include "server/http/direct_io.h"
#include "server/http/respond.h"
#include "server/memory.h"

#define EDGES_HEADER_MAX 4096

/* The body: the header text, then the job's output buffer. libmicrohttpd sends both straight
 * from here (sendmsg over an iovec): no copy through its connection buffer, whose few KiB per
 * send made a 64 MiB answer thousands of small writes. */
typedef struct {
    cr_job *job;             /* a reference, released by free_body */
    char header[CR_NPY_WRITE_MAX];
    size_t header_len;
    const char *data;
    uint64_t data_len;
    /* data on a device (cr_answer_plan), read out by the backend: the piece being sent */
    int (*read)(cr_sink *s, const void **p, size_t *len);
    const char *piece;
    size_t piece_left;
} npy_body;

/* libmicrohttpd's buffer for a result read from a device: its reader copies each piece there. */
#define STREAM_BLOCK (256 * 1024)

static bool wants_npy(cr_conn *c)
{
    const char *accept = cr_header(c, MHD_HTTP_HEADER_ACCEPT);
    return accept && strcasestr(accept, "application/x-npy") != NULL;
}

static void free_body(void *cls)
{
    npy_body *b = cls;
    cr_job_release(b->job);
    free(b);
}


static void add_number(struct MHD_Response *r, const char *name, double v)
{
    char text[CR_NUMFMT_MAX];
    cr_fmt_f64(text, v);
    MHD_add_response_header(r, name, text);
}

/* numpy.linspace(lo, hi, bins + 1) in the data's precision, as the JSON answer's edges. */
static void add_edges(struct MHD_Response *r, const cr_request *q)
{
    const cr_hist_task *h = &q->task.u.hist;
    char *text = malloc(EDGES_HEADER_MAX + CR_NUMFMT_MAX + 2);
    size_t n = 0;
    double step = (h->hi - h->lo) / h->bins;
    if (!text)
        return;
    for (int32_t i = 0; i <= h->bins && n <= EDGES_HEADER_MAX; i++) {
        double e = i == h->bins ? h->hi : h->lo + i * step;
        if (i)
            text[n++] = ',';
        n += q->task.dtype == CR_DT_F32 ? cr_fmt_f32(text + n, (float)e) : cr_fmt_f64(text + n, e);
    }
    if (n <= EDGES_HEADER_MAX) /* else too long for a header: the JSON answer has them */
        MHD_add_response_header(r, "X-Crunchd-Edges", text);
    free(text);
}

static void add_headers(cr_conn *c, struct MHD_Response *r, const cr_job *j)
{
    const cr_task *t = &j->req.task;
    const cr_phase_ms *ms = &j->ms;
    char timing[256];
    MHD_add_response_header(r, "X-Crunchd-Job-Id", j->id);
    MHD_add_response_header(r, "X-Crunchd-Op", cr_op_name(t->op));
    MHD_add_response_header(r, "X-Crunchd-Kernel", cr_job_kernel_name(j) ? cr_job_kernel_name(j) : j->req.kernel.name);
    if (c->h->deps.engine)
        MHD_add_response_header(r, "X-Crunchd-Backend",
                                cr_job_backend_name(j, cr_engine_backend(c->h->deps.engine)->name));
    MHD_add_response_header(r, "X-Crunchd-Device", j->device);
    char batch[16];
    snprintf(batch, sizeof batch, "%d", j->batch > 0 ? j->batch : 1);
    MHD_add_response_header(r, "X-Crunchd-Batch", batch);
    if (t->stack.rank > 0) { /* the .npy's shape says the rest */
        snprintf(batch, sizeof batch, "%lld", (long long)t->stack.count);
        MHD_add_response_header(r, "X-Crunchd-Matrices", batch);
    }
    MHD_add_response_header(r, "X-Crunchd-Dtype", cr_dtype_name(t->dtype));
    double work = t->op == CR_OP_HISTOGRAM ? cr_task_bytes(t) : cr_task_flops(t);
    double rate = ms->kernel > 0 ? work / (ms->kernel * 1e-3) / 1e9 : 0.0;
    add_number(r, t->op == CR_OP_HISTOGRAM ? "X-Crunchd-Gbps" : "X-Crunchd-Gflops", rate);
    cr_server_timing(ms, timing, sizeof timing);
    MHD_add_response_header(r, "Server-Timing", timing);
    if (t->op == CR_OP_HISTOGRAM && j->req.is_float_hist) {
        char range[2 * CR_NUMFMT_MAX + 2];
        size_t n = cr_fmt_f64(range, t->u.hist.lo);
        range[n++] = ',';
        cr_fmt_f64(range + n, t->u.hist.hi);
        MHD_add_response_header(r, "X-Crunchd-Range", range);
        add_edges(r, &j->req);
    }
}

typedef struct {
    const cr_backend *b;
    cr_sink *s;
    size_t staging;
} out_stream;

static void out_stream_free(void *p)
{
    out_stream *o = p;
    o->b->sink_free(o->s);
    cr_mem_release(CR_MEM_DECODE, o->staging);
    free(o);
}

int cr_answer_plan(cr_conn *c, cr_request *r, cr_error *err)
{
    const cr_backend *b = c->h->deps.engine ? cr_engine_backend(c->h->deps.engine) : NULL;
    size_t bytes = cr_task_output_bytes(&r->task);
    if (!b || !b->sink_read || !r->on_device || r->task.op == CR_OP_HISTOGRAM || r->result_shm.on ||
        r->buf_bytes[CR_BUF_OUTPUT] || !wants_npy(c))
        return 0;
    out_stream *o = calloc(1, sizeof *o);
    if (!o)
        return 0;
    o->b = b;
    if (!(o->s = b->sink_open(bytes, r->device, &o->staging))) { /* small, or no room: as always */
        free(o);
        return 0;
    }
    if (cr_mem_charge(CR_MEM_DECODE, o->staging, "the answer's staging", err) < 0) {
        b->sink_free(o->s);
        free(o);
        return -1;
    }
    int device;
    void *dev = b->sink_target(o->s, &device);
    cr_request_adopt_buf(r, CR_BUF_OUTPUT, dev, bytes, out_stream_free, o);
    r->out_stream = o->s;
    return cr_request_mark_device(r, CR_BUF_OUTPUT, device, err);
}

/* libmicrohttpd's reader of a result left on the device: the .npy header, then the pieces the
 * backend hands out, copied into libmicrohttpd's buffer (the direct path sends them from the ring
 * itself, direct_io.c). */
static ssize_t read_streamed(void *cls, uint64_t pos, char *buf, size_t max)
{
    npy_body *b = cls;
    if (pos < b->header_len) {
        size_t n = b->header_len - (size_t)pos < max ? b->header_len - (size_t)pos : max;
        memcpy(buf, b->header + pos, n);
        return (ssize_t)n;
    }
    if (!b->piece_left) {
        const void *p = NULL;
        int rc = b->read(b->job->req.out_stream, &p, &b->piece_left);
        if (rc <= 0)
            return rc == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
        b->piece = p;
    }
    size_t n = b->piece_left < max ? b->piece_left : max;
    memcpy(buf, b->piece, n);
    b->piece += n;
    b->piece_left -= n;
    return (ssize_t)n;
}

/* A result left on the device (cr_answer_plan; .npy, which is never compressed anyway): the
 * direct path writes it from the backend's ring, libmicrohttpd reads it through read_streamed. */
static struct MHD_Response *streamed_response(cr_conn *c, npy_body *b, const cr_span *spans)
{
    cr_metrics_device_stream(true, (uint64_t)b->data_len);
    b->read = cr_engine_backend(c->h->deps.engine)->sink_read;
    if (c->direct) {
        cr_direct_stream_last(c->direct, b->read, b->job->req.out_stream);
        return cr_answer_response(c, "application/x-npy", spans, 2, free_body, b);
    }
    struct MHD_Response *r = MHD_create_response_from_callback(b->header_len + b->data_len, STREAM_BLOCK,
                                                               read_streamed, b, free_body);
    if (!r) {
        free_body(b);
        return NULL;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-npy");
    return r;
}

static enum MHD_Result send_npy(cr_conn *c, cr_job *j)
{
    cr_shape shape = cr_request_result_shape(&j->req); /* a stack's whole shape */
    cr_dtype dt = j->req.task.op == CR_OP_HISTOGRAM ? CR_DT_U64 : j->req.task.dtype;
    npy_body *b = calloc(1, sizeof *b);
    if (!b)
        return MHD_NO;
    b->header_len = cr_npy_write_header(b->header, sizeof b->header, dt, shape.rank, shape.dims);
    b->data = cr_task_output(&j->req.task);
    b->data_len = cr_task_output_bytes(&j->req.task);
    if (!b->header_len || (!b->data && b->data_len)) {
        free(b);
        return cr_refuse(c, 500, "internal", "", "cannot encode this result as .npy");
    }
    cr_job_ref(j);
    b->job = j;
    const cr_span spans[2] = {{b->header, b->header_len}, {b->data, (size_t)b->data_len}};
    struct MHD_Response *r = j->req.out_stream ? streamed_response(c, b, spans)
                                               : cr_answer_response(c, "application/x-npy", spans, 2, free_body, b);
    if (!r)
        return MHD_NO;
    add_headers(c, r, j);
    return cr_queue(c, 200, r);
}

enum MHD_Result cr_send_job(cr_conn *c, cr_job *j)
{
    size_t len = 0;
    if (atomic_load(&j->state) != CR_JOB_DONE)
        return cr_send_error(c, &j->error);
    /* errors, and results left in shared memory or kept as tensors, stay JSON */
    if (wants_npy(c) && !j->req.result_shm.on && !j->req.result_tensor.id[0])
        return send_npy(c, j);
    cr_error err;
    if (cr_json_nonfinite_result(j, &err) < 0)
        return cr_send_error(c, &err);
    char *body = cr_json_job_result(
        j, c->h->deps.engine ? cr_job_backend_name(j, cr_engine_backend(c->h->deps.engine)->name) : "", &len);
    return cr_send(c, 200, "application/json", body, len);
}
