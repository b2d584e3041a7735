/* JSON response encoders: a growable buffer, escaped strings and fast numbers (numfmt.c). */
#include "json_response.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "numfmt.h"

/* ---- growable buffer: after a failed allocation every append is a no-op ------------------ */

typedef struct {
    char *p;
    size_t len, cap;
    bool failed;
} jbuf;

static bool jb_reserve(jbuf *b, size_t extra)
{
    if (b->failed)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) {
        if (cap > SIZE_MAX / 2) {
            b->failed = true;
            return false;
        }
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

static void jb_put(jbuf *b, const char *s, size_t n)
{
    if (!jb_reserve(b, n))
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void jb_lit(jbuf *b, const char *s) { jb_put(b, s, strlen(s)); }

/* Hands the text over (NUL-terminated), or frees it all after a failure. */
static char *jb_finish(jbuf *b, size_t *len)
{
    if (!jb_reserve(b, 0)) {
        free(b->p);
        if (len)
            *len = 0;
        return NULL;
    }
    b->p[b->len] = '\0';
    if (len)
        *len = b->len;
    return b->p;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 when invalid. */
size_t cr_utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t need;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        need = 2, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
        need = 3, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
        need = 4, min = 0x10000;
    else
        return 0;
    if (n < need)
        return 0;
    unsigned cp = c & (0x7F >> need);
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return need;
}

static void jb_string(jbuf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)(s ? s : "");
    size_t n = strlen((const char *)u);
    jb_put(b, "\"", 1);
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            jb_put(b, esc, 2);
            i++;
        } else if (c < 0x20) {
            char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            const char *named = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : NULL;
            if (named)
                jb_put(b, named, 2);
            else
                jb_put(b, esc, 6);
            i++;
        } else {
            size_t k = cr_utf8_len(u + i, n - i);
            if (k == 0) {
                jb_lit(b, "\\ufffd");
                i++;
            } else {
                jb_put(b, (const char *)u + i, k);
                i += k;
            }
        }
    }
    jb_put(b, "\"", 1);
}

/* "name": with the comma that separates it from a previous member. */
static void jb_key(jbuf *b, const char *name, bool first)
{
    if (!first)
        jb_put(b, ",", 1);
    jb_string(b, name);
    jb_put(b, ":", 1);
}

static void jb_f64(jbuf *b, double v)
{
    if (jb_reserve(b, CR_NUMFMT_MAX))
        b->len += cr_fmt_f64(b->p + b->len, v);
}

static void jb_f32(jbuf *b, float v)
{
    if (jb_reserve(b, CR_NUMFMT_MAX))
        b->len += cr_fmt_f32(b->p + b->len, v);
}

static void jb_u64(jbuf *b, uint64_t v)
{
    if (jb_reserve(b, CR_NUMFMT_MAX))
        b->len += cr_fmt_u64(b->p + b->len, v);
}

/* ---- pieces ---------------------------------------------------------------------------- */

static void jb_array_f(jbuf *b, const void *data, uint64_t n, cr_dtype dt)
{
    jb_put(b, "[", 1);
    for (uint64_t i = 0; data && i < n && !b->failed; i++) {
        if (i)
            jb_put(b, ",", 1);
        if (dt == CR_DT_F64)
            jb_f64(b, ((const double *)data)[i]);
        else
            jb_f32(b, ((const float *)data)[i]);
    }
    jb_put(b, "]", 1);
}

static void jb_matrix(jbuf *b, int64_t rows, int64_t cols, const void *data, cr_dtype dt)
{
    jb_lit(b, "{\"rows\":");
    jb_u64(b, (uint64_t)rows);
    jb_lit(b, ",\"cols\":");
    jb_u64(b, (uint64_t)cols);
    jb_lit(b, ",\"data\":");
    jb_array_f(b, data, (uint64_t)rows * (uint64_t)cols, dt);
    jb_put(b, "}", 1);
}

/* numpy.linspace(lo, hi, bins + 1): lo + i * step, the last edge exactly hi; in the data's
 * precision, as numpy's edges are. */
static void jb_edges(jbuf *b, const cr_hist_task *h, cr_dtype dt)
{
    double step = (h->hi - h->lo) / h->bins;
    jb_put(b, "[", 1);
    for (int32_t i = 0; i <= h->bins; i++) {
        double e = i == h->bins ? h->hi : h->lo + i * step;
        if (i)
            jb_put(b, ",", 1);
        if (dt == CR_DT_F32)
            jb_f32(b, (float)e);
        else
            jb_f64(b, e);
    }
    jb_put(b, "]", 1);
}

static void jb_histogram(jbuf *b, const cr_request *r)
{
    const cr_hist_task *h = &r->task.u.hist;
    jb_lit(b, "{\"bins\":");
    jb_u64(b, (uint64_t)(h->bins > 0 ? h->bins : 0));
    jb_lit(b, ",\"counts\":[");
    for (int32_t i = 0; h->counts && i < h->bins; i++) {
        if (i)
            jb_put(b, ",", 1);
        jb_u64(b, h->counts[i]);
    }
    jb_put(b, "]", 1);
    if (r->is_float_hist) {
        jb_lit(b, ",\"edges\":");
        jb_edges(b, h, r->task.dtype);
    }
    jb_put(b, "}", 1);
}

static void jb_result(jbuf *b, const cr_request *r)
{
    const cr_task *t = &r->task;
    switch (t->op) {
    case CR_OP_GEMM:
        jb_matrix(b, t->u.gemm.m, t->u.gemm.n, t->u.gemm.c_out, t->dtype);
        break;
    case CR_OP_ATA:
        jb_matrix(b, t->u.ata.n, t->u.ata.n, t->u.ata.c_out, t->dtype);
        break;
    default:
        jb_histogram(b, r);
        break;
    }
}

/* Milliseconds to the nanosecond: full double precision would only add noise digits. */
static double round_ms(double ms) { return isfinite(ms) ? nearbyint(ms * 1e6) / 1e6 : ms; }

static void jb_timings(jbuf *b, const cr_phase_ms *ms)
{
    const char *names[] = {"receive", "queue", "h2d", "kernel", "d2h", "total"};
    double v[] = {ms->receive, ms->queue, ms->h2d, ms->kernel, ms->d2h, ms->total};
    jb_put(b, "{", 1);
    for (int i = 0; i < 6; i++) {
        jb_key(b, names[i], i == 0);
        jb_f64(b, round_ms(v[i]));
    }
    jb_put(b, "}", 1);
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

static void jb_compare(jbuf *b, const cr_job *j)
{
    const char *rate = rate_name(j->req.task.op);
    jb_put(b, "[", 1);
    for (int i = 0; i < j->n_compare; i++) {
        const cr_compare_row *c = &j->compare[i];
        if (i)
            jb_put(b, ",", 1);
        jb_put(b, "{", 1);
        jb_key(b, "kernel", true);
        jb_string(b, c->kernel);
        jb_key(b, "ms", false);
        jb_f64(b, round_ms(c->ms));
        jb_key(b, rate, false);
        jb_f64(b, c->rate);
        jb_key(b, "max_rel_error", false);
        jb_f64(b, c->max_rel_error);
        jb_key(b, "status", false);
        jb_string(b, cr_status_name(c->status));
        jb_put(b, "}", 1);
    }
    jb_put(b, "]", 1);
}

static void jb_error_object(jbuf *b, const cr_error *e)
{
    jb_put(b, "{", 1);
    jb_key(b, "code", true);
    jb_string(b, e->code);
    jb_key(b, "message", false);
    jb_string(b, e->message);
    if (e->field[0]) {
        jb_key(b, "field", false);
        jb_string(b, e->field);
    }
    jb_put(b, "}", 1);
}

/* ---- bodies ---------------------------------------------------------------------------- */

char *cr_json_error(const cr_error *e, size_t *len)
{
    jbuf b = {0};
    jb_lit(&b, "{\"error\":");
    jb_error_object(&b, e);
    jb_put(&b, "}", 1);
    return jb_finish(&b, len);
}

/* Bytes the answer will likely need: numbers at their longest common spelling (float32 ~16,
 * float64 ~25 with the comma). Reserving it up front avoids the doubling reallocations that
 * copy a big answer several times over; pages never written are never resident. */
static size_t answer_estimate(const cr_job *j)
{
    const cr_task *t = &j->req.task;
    size_t per = t->dtype == CR_DT_F32 ? 16 : 25, elems;
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
    jbuf b = {0};
    jb_reserve(&b, answer_estimate(j));
    jb_put(&b, "{", 1);
    jb_key(&b, "id", true);
    jb_string(&b, j->id);
    jb_key(&b, "op", false);
    jb_string(&b, cr_op_name(t->op));
    jb_key(&b, "kernel", false);
    jb_string(&b, j->kernel_used ? j->kernel_used : j->req.kernel);
    jb_key(&b, "backend", false);
    jb_string(&b, backend);
    jb_key(&b, "device", false);
    jb_string(&b, j->device);
    jb_key(&b, "dtype", false);
    jb_string(&b, cr_dtype_name(t->dtype));
    jb_key(&b, "result", false);
    jb_result(&b, &j->req);
    jb_key(&b, "timings_ms", false);
    jb_timings(&b, &j->ms);
    jb_key(&b, rate_name(t->op), false);
    jb_f64(&b, job_rate(t, j->ms.kernel));
    if (j->compare && j->n_compare > 0) {
        jb_key(&b, "kernels", false);
        jb_compare(&b, j);
    }
    jb_put(&b, "}", 1);
    return jb_finish(&b, len);
}

char *cr_json_job_status(const cr_job *j, size_t *len)
{
    cr_job_state s = (cr_job_state)atomic_load(&((cr_job *)j)->state);
    jbuf b = {0};
    jb_put(&b, "{", 1);
    jb_key(&b, "id", true);
    jb_string(&b, j->id);
    jb_key(&b, "op", false);
    jb_string(&b, cr_op_name(j->req.task.op));
    jb_key(&b, "status", false);
    jb_string(&b, cr_job_state_name(s));
    if (s == CR_JOB_DONE || s == CR_JOB_FAILED) {
        jb_key(&b, "timings_ms", false);
        jb_timings(&b, &j->ms);
    }
    if (s == CR_JOB_FAILED || s == CR_JOB_CANCELLED) {
        jb_key(&b, "error", false);
        jb_error_object(&b, &j->error);
    }
    jb_put(&b, "}", 1);
    return jb_finish(&b, len);
}

char *cr_json_accepted(const cr_job *j, size_t *len)
{
    jbuf b = {0};
    jb_put(&b, "{", 1);
    jb_key(&b, "id", true);
    jb_string(&b, j->id);
    jb_key(&b, "status", false);
    jb_string(&b, cr_job_state_name(CR_JOB_QUEUED));
    jb_put(&b, "}", 1);
    return jb_finish(&b, len);
}
