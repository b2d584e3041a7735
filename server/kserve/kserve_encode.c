/* A finished job -> KServe v2 inference response (server/kserve_internal.h).
 *
 * One buffer: the JSON header, then (binary tensor data extension) the raw bytes of each binary
 * output in the header's order, each announced by its "binary_data_size". Numbers in JSON go
 * through numfmt.c (json_buf.c), so floats read back exactly and non-finite values become null. */
#include <stdlib.h>
#include <string.h>

#include "kernels/hist_range.h"
#include "server/kserve/kserve.h"
#include "server/codec/json_buf.h"
#include "server/kserve/kserve_internal.h"

/* ---- one output tensor ---------------------------------------------------------------------- */

static void kb_tensor(cr_jbuf *b, const cr_ks_output *t, bool binary, const cr_ks_shm *shm)
{
    cr_jbuf_lit(b, "{\"name\":");
    cr_jbuf_string(b, t->name);
    cr_jbuf_lit(b, ",\"datatype\":");
    cr_jbuf_string(b, cr_ks_datatype_name(t->dt));
    cr_jbuf_lit(b, ",\"shape\":[");
    for (int d = 0; d < t->shape.rank; d++) {
        if (d)
            cr_jbuf_put(b, ",", 1);
        cr_jbuf_u64(b, (uint64_t)t->shape.dims[d]);
    }
    cr_jbuf_put(b, "]", 1);
    if (shm->on) {
        /* as Triton answers one: name, datatype and shape alone. Its C++ client (perf_analyzer)
         * reads any output's "parameters" as binary data and fails without binary_data_size */
    } else if (binary) {
        cr_jbuf_lit(b, ",\"parameters\":{\"binary_data_size\":");
        cr_jbuf_u64(b, t->count * cr_dtype_size(t->dt));
        cr_jbuf_put(b, "}", 1);
    } else {
        cr_jbuf_lit(b, ",\"data\":");
        cr_jbuf_numbers(b, t->data, t->count, t->dt);
    }
    cr_jbuf_put(b, "}", 1);
}

/* numpy.linspace(lo, hi, bins + 1) in the data's precision, as the v1 encoder writes edges. */
static void *hist_edges(const cr_hist_task *h, cr_dtype dt)
{
    size_t n = (size_t)h->bins + 1;
    void *e = malloc(n * cr_dtype_size(dt));
    if (!e)
        return NULL;
    double step = (h->hi - h->lo) / h->bins;
    for (size_t i = 0; i < n; i++) {
        double v = i + 1 == n ? h->hi : h->lo + (double)i * step;
        if (dt == CR_DT_F32)
            ((float *)e)[i] = (float)v;
        else
            ((double *)e)[i] = v;
    }
    return e;
}

/* The job's outputs in model order; edges (when asked) in *edges, for the caller to free. */
static int job_tensors(const cr_job *j, const cr_ks_spec *s, cr_ks_output *out, void **edges)
{
    const cr_task *t = &j->req.task;
    *edges = NULL;
    if (t->op != CR_OP_HISTOGRAM) { /* a stack's whole shape */
        cr_shape shape = cr_request_result_shape(&j->req);
        out[0] = (cr_ks_output){"c", t->dtype, shape, cr_task_output(t), cr_shape_count(&shape)};
        return 0;
    }
    const cr_hist_task *h = &t->u.hist;
    out[0] = (cr_ks_output){"counts", CR_DT_U64, {.rank = 1, .dims = {h->bins}}, h->counts, (uint64_t)h->bins};
    cr_dtype edt = cr_hist_edge_dtype(t->dtype);
    if (s->want[1] && !(*edges = hist_edges(h, edt)))
        return -1;
    out[1] = (cr_ks_output){"edges", edt, {.rank = 1, .dims = {h->bins + 1}}, *edges, (uint64_t)h->bins + 1};
    return 0;
}

static void kb_header(cr_jbuf *b, const cr_job *j, const cr_ks_spec *s, const char *backend,
                      const cr_ks_output *ts)
{
    cr_jbuf_lit(b, "{\"model_name\":");
    cr_jbuf_string(b, s->model->name);
    cr_jbuf_lit(b, ",\"model_version\":\"1\"");
    if (s->id) {
        cr_jbuf_lit(b, ",\"id\":");
        cr_jbuf_string(b, s->id);
    }
    cr_jbuf_lit(b, ",\"parameters\":{\"job_id\":");
    cr_jbuf_string(b, j->id);
    cr_jbuf_lit(b, ",\"kernel\":");
    cr_jbuf_string(b, cr_job_kernel_name(j) ? cr_job_kernel_name(j) : "");
    cr_jbuf_lit(b, ",\"backend\":");
    cr_jbuf_string(b, backend);
    cr_jbuf_lit(b, ",\"device\":");
    cr_jbuf_string(b, j->device);
    cr_jbuf_lit(b, ",\"batch\":");
    cr_jbuf_u64(b, (uint64_t)(j->batch > 0 ? j->batch : 1));
    cr_jbuf_lit(b, "},\"outputs\":[");
    bool first = true;
    for (int k = 0; k < s->model->n_outputs; k++) {
        if (!s->want[k])
            continue;
        if (!first)
            cr_jbuf_put(b, ",", 1);
        kb_tensor(b, &ts[k], s->binary[k], &s->shm[k]);
        first = false;
    }
    cr_jbuf_lit(b, "]}");
}

int cr_ks_outputs(const cr_job *j, const cr_ks_spec *s, cr_ks_output *ts, void **edges)
{
    if (job_tensors(j, s, ts, edges))
        return -1;
    for (int k = 0; k < s->model->n_outputs; k++) /* the result itself is in place already */
        if (s->want[k] && s->shm[k].out.p &&
            cr_shm_window_write(&s->shm[k].out, ts[k].data, ts[k].count * cr_dtype_size(ts[k].dt))) {
            free(*edges);
            *edges = NULL;
            return -1;
        }
    return 0;
}

int cr_ks_encode(const cr_job *j, const cr_ks_spec *s, const char *backend, cr_ks_response *out)
{
    cr_ks_output ts[CR_KS_MAX_IO];
    void *edges = NULL;
    cr_jbuf b = {0};
    memset(out, 0, sizeof *out);
    if (cr_ks_outputs(j, s, ts, &edges))
        return -1;
    kb_header(&b, j, s, backend, ts);
    out->header_len = b.len;
    int binary = 0;
    for (int k = 0; k < s->model->n_outputs; k++)
        binary += s->want[k] && s->binary[k];
    if (binary == 1 && s->want[0] && s->binary[0]) { /* the result alone: sent from where it is */
        out->tail = ts[0].data;
        out->tail_len = ts[0].count * cr_dtype_size(ts[0].dt);
        binary = 0;
    }
    for (int k = 0; k < s->model->n_outputs && binary; k++)
        if (s->want[k] && s->binary[k])
            cr_jbuf_put(&b, ts[k].data, ts[k].count * cr_dtype_size(ts[k].dt));
    free(edges);
    if (b.failed) {
        free(b.p);
        return -1;
    }
    out->body = b.p;
    out->len = b.len;
    return 0;
}
