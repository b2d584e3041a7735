/* A finished job -> KServe v2 inference response (server/kserve_internal.h).
 *
 * One buffer: the JSON header, then (binary tensor data extension) the raw bytes of each binary
 * output in the header's order, each announced by its "binary_data_size". Numbers in JSON go
 * through numfmt.c, so floats read back exactly and non-finite values become null. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kserve.h"
#include "json_response.h"
#include "kserve_internal.h"
#include "numfmt.h"

/* ---- growable buffer: after a failed allocation every append is a no-op ------------------ */

typedef struct {
    char *p;
    size_t len, cap;
    bool failed;
} kbuf;

static bool kb_reserve(kbuf *b, size_t extra)
{
    if (b->failed)
        return false;
    if (b->len + extra <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 512;
    while (cap < b->len + extra) {
        if (cap > SIZE_MAX / 2)
            return (b->failed = true), false;
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p)
        return (b->failed = true), false;
    b->p = p;
    b->cap = cap;
    return true;
}

static void kb_put(kbuf *b, const void *s, size_t n)
{
    if (n && kb_reserve(b, n)) {
        memcpy(b->p + b->len, s, n);
        b->len += n;
    }
}

static void kb_lit(kbuf *b, const char *s)
{
    kb_put(b, s, strlen(s));
}


/* A JSON string. The client's id and the error messages (which quote the client's names) may
 * hold anything: bytes that are not UTF-8 become U+FFFD so the body always parses. */
static void kb_str(kbuf *b, const char *s)
{
    const unsigned char *u = (const unsigned char *)(s ? s : "");
    size_t n = strlen((const char *)u);
    kb_put(b, "\"", 1);
    for (size_t i = 0; i < n;) {
        char esc[8];
        size_t k = cr_utf8_len(u + i, n - i);
        if (u[i] == '"' || u[i] == '\\')
            kb_put(b, (char[]){'\\', (char)u[i]}, 2);
        else if (u[i] < 0x20)
            kb_put(b, esc, (size_t)snprintf(esc, sizeof esc, "\\u%04x", u[i]));
        else if (k == 0)
            kb_lit(b, "\\ufffd");
        else
            kb_put(b, u + i, k);
        i += k ? k : 1;
    }
    kb_put(b, "\"", 1);
}

static void kb_u64(kbuf *b, uint64_t v)
{
    if (kb_reserve(b, CR_NUMFMT_MAX))
        b->len += cr_fmt_u64(b->p + b->len, v);
}

static void kb_num(kbuf *b, double v, cr_dtype dt)
{
    if (kb_reserve(b, CR_NUMFMT_MAX))
        b->len +=
            dt == CR_DT_F32 ? cr_fmt_f32(b->p + b->len, (float)v) : cr_fmt_f64(b->p + b->len, v);
}

/* ---- one output tensor ---------------------------------------------------------------------- */

typedef struct {
    const char *name;
    cr_dtype dt;
    int rank;
    int64_t shape[2];
    const void *data; /* count elements of dt */
    uint64_t count;
} tensor;

static void kb_data(kbuf *b, const tensor *t)
{
    kb_put(b, "[", 1);
    for (uint64_t i = 0; i < t->count && !b->failed; i++) {
        if (i)
            kb_put(b, ",", 1);
        if (t->dt == CR_DT_U64)
            kb_u64(b, ((const uint64_t *)t->data)[i]);
        else if (t->dt == CR_DT_F32)
            kb_num(b, ((const float *)t->data)[i], CR_DT_F32);
        else
            kb_num(b, ((const double *)t->data)[i], CR_DT_F64);
    }
    kb_put(b, "]", 1);
}

static void kb_tensor(kbuf *b, const tensor *t, bool binary)
{
    kb_lit(b, "{\"name\":");
    kb_str(b, t->name);
    kb_lit(b, ",\"datatype\":");
    kb_str(b, cr_ks_datatype_name(t->dt));
    kb_lit(b, ",\"shape\":[");
    for (int d = 0; d < t->rank; d++) {
        if (d)
            kb_put(b, ",", 1);
        kb_u64(b, (uint64_t)t->shape[d]);
    }
    kb_put(b, "]", 1);
    if (binary) {
        kb_lit(b, ",\"parameters\":{\"binary_data_size\":");
        kb_u64(b, t->count * cr_dtype_size(t->dt));
        kb_put(b, "}", 1);
    } else {
        kb_lit(b, ",\"data\":");
        kb_data(b, t);
    }
    kb_put(b, "}", 1);
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
static int job_tensors(const cr_job *j, const cr_ks_spec *s, tensor *out, void **edges)
{
    const cr_task *t = &j->req.task;
    *edges = NULL;
    if (t->op == CR_OP_GEMM) {
        out[0] = (tensor){"c",
                          t->dtype,
                          2,
                          {t->u.gemm.m, t->u.gemm.n},
                          t->u.gemm.c_out,
                          (uint64_t)(t->u.gemm.m * t->u.gemm.n)};
    } else if (t->op == CR_OP_ATA) {
        out[0] = (tensor){"c",
                          t->dtype,
                          2,
                          {t->u.ata.n, t->u.ata.n},
                          t->u.ata.c_out,
                          (uint64_t)(t->u.ata.n * t->u.ata.n)};
    } else {
        const cr_hist_task *h = &t->u.hist;
        out[0] = (tensor){"counts", CR_DT_U64, 1, {h->bins, 0}, h->counts, (uint64_t)h->bins};
        if (s->want[1] && !(*edges = hist_edges(h, t->dtype)))
            return -1;
        out[1] = (tensor){"edges", t->dtype, 1, {h->bins + 1, 0}, *edges, (uint64_t)h->bins + 1};
    }
    return 0;
}

static void kb_header(kbuf *b, const cr_job *j, const cr_ks_spec *s, const char *backend,
                      const tensor *ts)
{
    kb_lit(b, "{\"model_name\":");
    kb_str(b, s->model->name);
    kb_lit(b, ",\"model_version\":\"1\"");
    if (s->id) {
        kb_lit(b, ",\"id\":");
        kb_str(b, s->id);
    }
    kb_lit(b, ",\"parameters\":{\"job_id\":");
    kb_str(b, j->id);
    kb_lit(b, ",\"kernel\":");
    kb_str(b, j->kernel_used ? j->kernel_used : "");
    kb_lit(b, ",\"backend\":");
    kb_str(b, backend);
    kb_lit(b, ",\"device\":");
    kb_str(b, j->device);
    kb_lit(b, "},\"outputs\":[");
    bool first = true;
    for (int k = 0; k < s->model->n_outputs; k++) {
        if (!s->want[k])
            continue;
        if (!first)
            kb_put(b, ",", 1);
        kb_tensor(b, &ts[k], s->binary[k]);
        first = false;
    }
    kb_lit(b, "]}");
}

int cr_ks_encode(const cr_job *j, const cr_ks_spec *s, const char *backend, cr_ks_response *out)
{
    tensor ts[CR_KS_MAX_IO];
    void *edges = NULL;
    kbuf b = {0};
    memset(out, 0, sizeof *out);
    if (job_tensors(j, s, ts, &edges))
        return -1;
    kb_header(&b, j, s, backend, ts);
    out->header_len = b.len;
    for (int k = 0; k < s->model->n_outputs; k++)
        if (s->want[k] && s->binary[k])
            kb_put(&b, ts[k].data, ts[k].count * cr_dtype_size(ts[k].dt));
    free(edges);
    if (b.failed) {
        free(b.p);
        return -1;
    }
    out->body = b.p;
    out->len = b.len;
    return 0;
}

char *cr_kserve_error_json(const cr_error *e, size_t *len)
{
    kbuf b = {0};
    kb_lit(&b, "{\"error\":");
    kb_str(&b, e->message);
    kb_lit(&b, "}");
    kb_put(&b, "", 1); /* NUL-terminated like the v1 encoders; not counted */
    if (b.failed) {
        free(b.p);
        *len = 0;
        return NULL;
    }
    *len = b.len - 1;
    return b.p;
}
