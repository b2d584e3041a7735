/* JSON response encoders (the text itself: json_buf.c). */
#include "server/codec/json_encode.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/registry.h"
#include "server/codec/json_buf.h"
#include "server/engine/tensors.h"

/* ---- pieces ---------------------------------------------------------------------------- */

static void jb_dims(cr_jbuf *b, const cr_shape *s)
{
    cr_jbuf_put(b, "[", 1);
    for (int d = 0; d < s->rank; d++) {
        if (d)
            cr_jbuf_put(b, ",", 1);
        cr_jbuf_u64(b, (uint64_t)s->dims[d]);
    }
    cr_jbuf_put(b, "]", 1);
}

/* A matrix as {"rows", "cols", "shape", "data"}; any other rank (a stack, a vector, a scalar) as
 * {"shape", "data"}: the request's own forms, the data flat in C order. */
static void jb_array(cr_jbuf *b, const cr_shape *s, const void *data, cr_dtype dt)
{
    cr_jbuf_put(b, "{", 1);
    if (s->rank == 2) {
        cr_jbuf_lit(b, "\"rows\":");
        cr_jbuf_u64(b, (uint64_t)s->dims[0]);
        cr_jbuf_lit(b, ",\"cols\":");
        cr_jbuf_u64(b, (uint64_t)s->dims[1]);
        cr_jbuf_put(b, ",", 1);
    }
    cr_jbuf_lit(b, "\"shape\":");
    jb_dims(b, s);
    cr_jbuf_lit(b, ",\"data\":");
    cr_jbuf_numbers(b, data, cr_shape_count(s), dt);
    cr_jbuf_put(b, "}", 1);
}

/* numpy.linspace(lo, hi, bins + 1): lo + i * step, the last edge exactly hi; in the data's
 * precision, as numpy's edges are. */
static void jb_edges(cr_jbuf *b, const cr_hist_task *h, cr_dtype dt)
{
    double step = (h->hi - h->lo) / h->bins;
    cr_jbuf_put(b, "[", 1);
    for (int32_t i = 0; i <= h->bins; i++) {
        double e = i == h->bins ? h->hi : h->lo + i * step;
        if (i)
            cr_jbuf_put(b, ",", 1);
        if (dt == CR_DT_F32)
            cr_jbuf_f32(b, (float)e);
        else
            cr_jbuf_f64(b, e);
    }
    cr_jbuf_put(b, "]", 1);
}

/* A result written to shared memory, in the form an operand takes (json_shm.h): where, what
 * shape, what type; fed back as an operand it reads the same bytes. */
static void jb_shm_result(cr_jbuf *b, const cr_request *r, const cr_shape *shape, cr_dtype dt)
{
    cr_jbuf_lit(b, "{\"shm\":{\"region\":");
    cr_jbuf_string(b, r->result_shm.region);
    cr_jbuf_lit(b, ",\"offset\":");
    cr_jbuf_u64(b, r->result_shm.offset);
    cr_jbuf_lit(b, ",\"byte_size\":");
    cr_jbuf_u64(b, r->result_shm.bytes);
    cr_jbuf_lit(b, "},\"shape\":");
    jb_dims(b, shape);
    cr_jbuf_lit(b, ",\"dtype\":");
    cr_jbuf_string(b, cr_dtype_name(dt));
    cr_jbuf_put(b, "}", 1);
}

static void jb_counts(cr_jbuf *b, const cr_request *r)
{
    const cr_hist_task *h = &r->task.u.hist;
    if (r->result_shm.on) {
        cr_shape bins = {.rank = 1, .dims = {h->bins}};
        jb_shm_result(b, r, &bins, CR_DT_U64);
        return;
    }
    cr_jbuf_put(b, "[", 1);
    for (int32_t i = 0; h->counts && i < h->bins; i++) {
        if (i)
            cr_jbuf_put(b, ",", 1);
        cr_jbuf_u64(b, h->counts[i]);
    }
    cr_jbuf_put(b, "]", 1);
}

static void jb_histogram(cr_jbuf *b, const cr_request *r)
{
    const cr_hist_task *h = &r->task.u.hist;
    cr_jbuf_lit(b, "{\"bins\":");
    cr_jbuf_u64(b, (uint64_t)(h->bins > 0 ? h->bins : 0));
    cr_jbuf_lit(b, ",\"counts\":");
    jb_counts(b, r);
    if (r->is_float_hist) {
        cr_jbuf_lit(b, ",\"edges\":");
        jb_edges(b, h, r->task.dtype);
    }
    cr_jbuf_put(b, "}", 1);
}

/* A resident tensor's metadata, as POST /v1/tensors answers it (also for results kept as one). */
void cr_jbuf_tensor(cr_jbuf *b, const char *id, const char *name, const cr_shape *shape, cr_dtype dt, uint64_t bytes,
                    int device, double expires_at)
{
    cr_jbuf_lit(b, "{\"id\":");
    cr_jbuf_string(b, id);
    if (name && name[0]) {
        cr_jbuf_lit(b, ",\"name\":");
        cr_jbuf_string(b, name);
    }
    cr_jbuf_lit(b, ",\"shape\":");
    jb_dims(b, shape);
    cr_jbuf_lit(b, ",\"dtype\":");
    cr_jbuf_string(b, cr_dtype_name(dt));
    cr_jbuf_lit(b, ",\"bytes\":");
    cr_jbuf_u64(b, bytes);
    cr_jbuf_lit(b, ",\"device\":");
    if (device >= 0) {
        cr_jbuf_u64(b, (uint64_t)device);
    } else {
        cr_jbuf_lit(b, "\"host\"");
    }
    cr_jbuf_lit(b, ",\"expires_at\":");
    if (expires_at > 0)
        cr_jbuf_f64(b, nearbyint(expires_at * 1e3) / 1e3);
    else
        cr_jbuf_lit(b, "null");
    cr_jbuf_lit(b, ",\"instance\":");
    cr_jbuf_string(b, cr_tensors_instance());
    cr_jbuf_put(b, "}", 1);
}

static void jb_result(cr_jbuf *b, const cr_request *r)
{
    const cr_task *t = &r->task;
    cr_shape shape = cr_request_result_shape(r);
    if (r->result_tensor.id[0]) { /* kept on the device: where, not what */
        cr_dtype dt = t->op == CR_OP_HISTOGRAM ? CR_DT_U64 : t->dtype;
        cr_jbuf_lit(b, "{\"tensor\":");
        cr_jbuf_tensor(b, r->result_tensor.id, r->result_tensor.name, &shape, dt,
                       cr_shape_count(&shape) * cr_dtype_size(dt), r->result_tensor.device, r->result_tensor.expires_at);
        cr_jbuf_put(b, "}", 1);
        return;
    }
    if (t->op == CR_OP_HISTOGRAM)
        jb_histogram(b, r);
    else if (r->result_shm.on)
        jb_shm_result(b, r, &shape, t->dtype);
    else
        jb_array(b, &shape, cr_task_output(t), t->dtype);
}

/* Milliseconds to the nanosecond: full double precision would only add noise digits. */
static double round_ms(double ms) { return isfinite(ms) ? nearbyint(ms * 1e6) / 1e6 : ms; }

static void jb_timings(cr_jbuf *b, const cr_phase_ms *ms)
{
    const char *names[] = {"receive", "queue", "h2d", "kernel", "d2h", "total"};
    double v[] = {ms->receive, ms->queue, ms->h2d, ms->kernel, ms->d2h, ms->total};
    cr_jbuf_put(b, "{", 1);
    for (int i = 0; i < 6; i++) {
        cr_jbuf_key(b, names[i], i == 0);
        cr_jbuf_f64(b, round_ms(v[i]));
    }
    cr_jbuf_put(b, "}", 1);
}

/* GFLOP/s (gemm, ata) or GB/s (histogram) over the kernel time; 0 when it was not measured. */
static double job_rate(const cr_task *t, double kernel_ms)
{
    if (!(kernel_ms > 0))
        return 0.0;
    double work = t->op == CR_OP_HISTOGRAM ? cr_task_bytes(t) : cr_task_flops(t);
    return work / (kernel_ms * 1e-3) / 1e9;
}

static const char *rate_name(cr_op op) { return op == CR_OP_HISTOGRAM ? "gbps" : "gflops"; }

static void jb_compare(cr_jbuf *b, const cr_job *j)
{
    const char *rate = rate_name(j->req.task.op);
    cr_jbuf_put(b, "[", 1);
    for (int i = 0; i < j->n_compare; i++) {
        const cr_compare_row *c = &j->compare[i];
        if (i)
            cr_jbuf_put(b, ",", 1);
        cr_jbuf_put(b, "{", 1);
        cr_jbuf_key(b, "kernel", true);
        cr_jbuf_string(b, c->kernel->name);
        cr_jbuf_key(b, "ms", false);
        cr_jbuf_f64(b, round_ms(c->ms));
        cr_jbuf_key(b, rate, false);
        cr_jbuf_f64(b, c->rate);
        cr_jbuf_key(b, "max_rel_error", false);
        cr_jbuf_f64(b, c->max_rel_error);
        cr_jbuf_key(b, "status", false);
        cr_jbuf_string(b, cr_status_name(c->status));
        cr_jbuf_put(b, "}", 1);
    }
    cr_jbuf_put(b, "]", 1);
}

static void jb_error_object(cr_jbuf *b, const cr_error *e)
{
    cr_jbuf_put(b, "{", 1);
    cr_jbuf_key(b, "code", true);
    cr_jbuf_string(b, e->code);
    cr_jbuf_key(b, "message", false);
    cr_jbuf_string(b, e->message);
    if (e->field[0]) {
        cr_jbuf_key(b, "field", false);
        cr_jbuf_string(b, e->field);
    }
    cr_jbuf_put(b, "}", 1);
}

/* ---- bodies ---------------------------------------------------------------------------- */

char *cr_json_error(const cr_error *e, size_t *len)
{
    cr_jbuf b = {0};
    cr_jbuf_lit(&b, "{\"error\":");
    jb_error_object(&b, e);
    cr_jbuf_put(&b, "}", 1);
    return cr_jbuf_finish(&b, len);
}

/* Bytes the answer will likely need: numbers at their longest common spelling (float32 ~16,
 * float64 ~25 with the comma). Reserving it up front avoids the doubling reallocations that
 * copy a big answer several times over; pages never written are never resident. */
static size_t answer_estimate(const cr_job *j)
{
    const cr_task *t = &j->req.task;
    size_t per = t->dtype == CR_DT_F32 ? 16 : cr_dtype_size(t->dtype) == 2 ? 9 : 25, elems;
    switch (t->op) {
    case CR_OP_GEMM:
        elems = (size_t)(t->u.gemm.m > 0 ? t->u.gemm.m : 0) *
                (size_t)(t->u.gemm.n > 0 ? t->u.gemm.n : 0);
        break;
    case CR_OP_ATA:
        elems = (size_t)(t->u.ata.n > 0 ? t->u.ata.n : 0) * (size_t)(t->u.ata.n > 0 ? t->u.ata.n : 0);
        break;
    default:
        elems = (size_t)(t->u.hist.bins > 0 ? t->u.hist.bins : 0) * 2 + 1;
        per = 25;
        break;
    }
    return elems * per + 1024 + (size_t)j->n_compare * 160;
}

char *cr_json_job_result(const cr_job *j, const char *backend, size_t *len)
{
    const cr_task *t = &j->req.task;
    cr_jbuf b = {0};
    cr_jbuf_reserve(&b, answer_estimate(j));
    cr_jbuf_put(&b, "{", 1);
    cr_jbuf_key(&b, "id", true);
    cr_jbuf_string(&b, j->id);
    cr_jbuf_key(&b, "op", false);
    cr_jbuf_string(&b, cr_op_name(t->op));
    cr_jbuf_key(&b, "kernel", false);
    cr_jbuf_string(&b, cr_job_kernel_name(j) ? cr_job_kernel_name(j) : j->req.kernel.name);
    cr_jbuf_key(&b, "backend", false);
    cr_jbuf_string(&b, backend);
    cr_jbuf_key(&b, "device", false);
    cr_jbuf_string(&b, j->device);
    cr_jbuf_key(&b, "dtype", false);
    cr_jbuf_string(&b, cr_dtype_name(t->dtype));
    cr_jbuf_key(&b, "result", false);
    jb_result(&b, &j->req);
    cr_jbuf_key(&b, "timings_ms", false);
    jb_timings(&b, &j->ms);
    cr_jbuf_key(&b, "batch", false);
    cr_jbuf_u64(&b, (uint64_t)(j->batch > 0 ? j->batch : 1));
    if (t->stack.rank > 0) { /* a stack is its own batch: its shape and how many products it made */
        cr_shape dims = {.rank = t->stack.rank};
        memcpy(dims.dims, t->stack.dims, sizeof dims.dims[0] * (size_t)dims.rank);
        cr_jbuf_key(&b, "stack", false);
        jb_dims(&b, &dims);
        cr_jbuf_key(&b, "matrices", false);
        cr_jbuf_u64(&b, (uint64_t)t->stack.count);
    }
    cr_jbuf_key(&b, rate_name(t->op), false);
    cr_jbuf_f64(&b, job_rate(t, j->ms.kernel));
    if (j->compare && j->n_compare > 0) {
        cr_jbuf_key(&b, "kernels", false);
        jb_compare(&b, j);
    }
    cr_jbuf_put(&b, "}", 1);
    return cr_jbuf_finish(&b, len);
}

char *cr_json_job_status(const cr_job *j, size_t *len)
{
    cr_job_state s = (cr_job_state)atomic_load(&((cr_job *)j)->state);
    cr_jbuf b = {0};
    cr_jbuf_put(&b, "{", 1);
    cr_jbuf_key(&b, "id", true);
    cr_jbuf_string(&b, j->id);
    cr_jbuf_key(&b, "op", false);
    cr_jbuf_string(&b, cr_op_name(j->req.task.op));
    cr_jbuf_key(&b, "status", false);
    cr_jbuf_string(&b, cr_job_state_name(s));
    if (j->request_id[0]) {
        cr_jbuf_key(&b, "request_id", false);
        cr_jbuf_string(&b, j->request_id);
    }
    if (s == CR_JOB_DONE || s == CR_JOB_FAILED) {
        cr_jbuf_key(&b, "timings_ms", false);
        jb_timings(&b, &j->ms);
    }

    if (s == CR_JOB_FAILED || s == CR_JOB_CANCELLED) {
        cr_jbuf_key(&b, "error", false);
        jb_error_object(&b, &j->error);
    }
    cr_jbuf_put(&b, "}", 1);
    return cr_jbuf_finish(&b, len);
}

char *cr_json_accepted(const cr_job *j, size_t *len)
{
    cr_jbuf b = {0};
    cr_jbuf_put(&b, "{", 1);
    cr_jbuf_key(&b, "id", true);
    cr_jbuf_string(&b, j->id);
    cr_jbuf_key(&b, "status", false);
    cr_jbuf_string(&b, cr_job_state_name(CR_JOB_QUEUED));
    cr_jbuf_put(&b, "}", 1);
    return cr_jbuf_finish(&b, len);
}

char *cr_json_error_v2(const cr_error *e, size_t *len)
{
    cr_jbuf b = {0};
    cr_jbuf_lit(&b, "{\"error\":");
    cr_jbuf_string(&b, e->message);
    cr_jbuf_lit(&b, "}");
    return cr_jbuf_finish(&b, len);
}

static uint64_t count_nonfinite(const void *p, cr_dtype dt, uint64_t n)
{
    uint64_t bad = 0;
    if (dt == CR_DT_F32) {
        const float *v = p;
        for (uint64_t i = 0; i < n; i++)
            bad += !isfinite(v[i]);
    } else if (dt == CR_DT_F64) {
        const double *v = p;
        for (uint64_t i = 0; i < n; i++)
            bad += !isfinite(v[i]);
    } else if (dt == CR_DT_F16 || dt == CR_DT_BF16) { /* all exponent bits set: Inf or NaN */
        const uint16_t *v = p, e = dt == CR_DT_F16 ? 0x7c00u : 0x7f80u;
        for (uint64_t i = 0; i < n; i++)
            bad += (v[i] & e) == e;
    }
    return bad;
}

int cr_json_nonfinite_result(const cr_job *j, cr_error *err)
{
    const cr_task *t = &j->req.task;
    if (t->op == CR_OP_HISTOGRAM || !cr_task_output(t))
        return 0; /* counts are integers */
    uint64_t n = cr_task_output_bytes(t) / cr_dtype_size(t->dtype);
    uint64_t bad = count_nonfinite(cr_task_output(t), t->dtype, n);
    if (!bad)
        return 0;
    return cr_fail(err, 422, "non_finite_result", "result",
                   "%llu of the %llu result values are not finite (overflow): JSON numbers cannot "
                   "carry them; ask for Accept: application/x-npy to get them as they are",
                   (unsigned long long)bad, (unsigned long long)n);
}
