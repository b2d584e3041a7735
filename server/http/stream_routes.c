/* Streams over HTTP; see stream_routes.h. */
#include "server/http/stream_routes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/hist_range.h"
#include "server/clock.h"
#include "server/codec/json_buf.h"
#include "server/codec/json_encode.h"
#include "server/codec/json_matrix.h"
#include "server/codec/json_shm.h"
#include "server/engine/owned.h"
#include "server/engine/streams.h"
#include "server/http/answer.h"
#include "server/http/respond.h"
#include "server/http/submit.h"
#include "server/http/upload.h"

static void owner_of(const cr_conn *c, char *out, size_t n) { cr_peer_client(&c->peer, c->authenticated, out, n); }

/* {id} of /v1/jobs/{id}/...: the first path segment of c->id. */
static void path_id(const cr_conn *c, char *out, size_t n)
{
    size_t k = strcspn(c->id ? c->id : "", "/");
    k = k < n ? k : n - 1;
    memcpy(out, c->id, k);
    out[k] = '\0';
}

/* ---- opening: POST /v1/jobs {"op", "stream": true, ...} --------------------------------------- */

bool cr_stream_asked(const cr_conn *c)
{
    if (c->upload || !c->body || c->len > 4096) /* a stream's opening is a few fields */
        return false;
    cJSON *root = cJSON_ParseWithLength(c->body, c->len);
    bool asked = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "stream"));
    cJSON_Delete(root);
    return asked;
}

static int member_check(const cJSON *root, bool ata, cr_error *err)
{
    static const char *const ata_fields[] = {"op", "stream", "dtype", "cols", "accumulate", "kernel", NULL};
    static const char *const hist_fields[] = {"op", "stream", "dtype", "bins", "range", "kernel", NULL};
    const char *const *allowed = ata ? ata_fields : hist_fields;
    for (const cJSON *f = root->child; f; f = f->next) {
        int i = 0;
        while (allowed[i] && strcmp(allowed[i], f->string))
            i++;
        if (!allowed[i])
            return cr_fail(err, 400, "invalid_field", f->string, "unknown field \"%.64s\" for a %s stream (%s)", f->string,
                           ata ? "ata" : "histogram",
                           ata ? "op, stream, dtype, cols, accumulate, kernel" : "op, stream, dtype, bins, range, kernel");
    }
    return 0;
}

static int spec_dtype(const cJSON *root, bool ata, cr_dtype *dt, cr_error *err)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, "dtype");
    *dt = ata ? CR_DT_F32 : CR_DT_U8;
    if (!n)
        return 0;
    const char *v = cJSON_IsString(n) ? n->valuestring : "";
    if (!strcmp(v, "float32") || !strcmp(v, "float64") || (!ata && !strcmp(v, "uint8"))) {
        *dt = !strcmp(v, "float32") ? CR_DT_F32 : !strcmp(v, "float64") ? CR_DT_F64 : CR_DT_U8;
        return 0;
    }
    return cr_fail(err, 400, "invalid_field", "dtype", "a %s stream's dtype is %s", ata ? "ata" : "histogram",
                   ata ? "float32 or float64" : "uint8, float32 or float64");
}

/* A whole number in [lo, hi] (JSON numbers are doubles: exact up to 2^53). */
static int int_field(const cJSON *root, const char *name, int64_t lo, int64_t hi, int64_t *out, cr_error *err)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!n)
        return 1;
    double v = cJSON_IsNumber(n) ? n->valuedouble : -1.0;
    if (!cJSON_IsNumber(n) || v != (double)(int64_t)v || v < (double)lo || v > (double)hi)
        return cr_fail(err, v > (double)hi && cJSON_IsNumber(n) ? 413 : 400, v > (double)hi && cJSON_IsNumber(n) ?
                       "too_large" : "invalid_field", name, "%s must be an integer from %lld to %lld", name,
                       (long long)lo, (long long)hi);
    *out = (int64_t)v;
    return 0;
}

static int ata_spec(const cJSON *root, const cr_limits *lim, cr_stream_spec *sp, cr_error *err)
{
    int64_t cols = 0, most = 1; /* the largest n whose n x n result is one array within the limits */
    for (int64_t step = 1 << 20; step; step >>= 1)
        while ((most + step) <= (1 << 22) && (uint64_t)((most + step) * (most + step)) <= lim->max_elements)
            most += step;
    int rc = int_field(root, "cols", 1, most, &cols, err);
    if (rc == 1)
        return cr_fail(err, 400, "missing_field", "cols", "an ata stream needs cols: the n of its n-column rows");
    if (rc)
        return -1;
    sp->cols = cols;
    const cJSON *acc = cJSON_GetObjectItemCaseSensitive(root, "accumulate");
    if (acc && !(cJSON_IsString(acc) && (!strcmp(acc->valuestring, "float64") || !strcmp(acc->valuestring, "float32"))))
        return cr_fail(err, 400, "invalid_field", "accumulate", "accumulate is float64 (the default) or float32");
    sp->acc_f32 = acc && !strcmp(acc->valuestring, "float32");
    return 0;
}

static int hist_spec(const cJSON *root, const cr_limits *lim, cr_stream_spec *sp, cr_error *err)
{
    int64_t bins = sp->dtype == CR_DT_U8 ? 256 : 10;
    if (int_field(root, "bins", 1, lim->max_bins, &bins, err) < 0)
        return -1;
    sp->bins = (int32_t)bins;
    const cJSON *range = cJSON_GetObjectItemCaseSensitive(root, "range");
    if (!range && sp->dtype != CR_DT_U8)
        return cr_fail(err, 400, "missing_field", "range", "a float stream needs its range up front: numpy's default, "
                       "the data's min and max, is only known at the end");
    if (!range) {
        sp->lo = 0.0, sp->hi = 256.0;
        return 0;
    }
    if (!cJSON_IsArray(range) || cJSON_GetArraySize(range) != 2 || !cJSON_IsNumber(range->child) ||
        !cJSON_IsNumber(range->child->next))
        return cr_fail(err, 400, "invalid_field", "range", "range must be [lo, hi]");
    sp->lo = range->child->valuedouble, sp->hi = range->child->next->valuedouble;
    cr_range_status st = cr_hist_range_fix(&sp->lo, &sp->hi, sp->dtype);
    if (st == CR_RANGE_OK)
        return 0;
    char why[160];
    cr_hist_range_explain(st, sp->lo, sp->hi, why, sizeof why);
    return cr_fail(err, 400, "invalid_field", "range", "%s", why);
}

static int parse_spec(const cr_conn *c, cr_stream_spec *sp, cr_error *err)
{
    cr_limits lim = cr_request_limits(c->h->deps.cfg);
    cJSON *root = cJSON_ParseWithLength(c->body, c->len);
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(root, "op"), *k = cJSON_GetObjectItemCaseSensitive(root, "kernel");
    int rc = 0;
    memset(sp, 0, sizeof *sp);
    sp->kernel = cr_kernel_choice_auto();
    bool ata = cJSON_IsString(op) && !strcmp(op->valuestring, "ata");
    if (!ata && !(cJSON_IsString(op) && !strcmp(op->valuestring, "histogram")))
        rc = cr_fail(err, 400, op ? "invalid_field" : "missing_field", "op", "a stream is an ata or a histogram");
    else if (k && (!cJSON_IsString(k) || cr_kernel_choice_parse(k->valuestring, &sp->kernel) < 0 ||
                   sp->kernel.mode == CR_KERNEL_ALL))
        rc = cr_fail(err, 400, "invalid_field", "kernel", "kernel is auto or a kernel's name (compare mode does not stream)");
    else {
        sp->op = ata ? CR_OP_ATA : CR_OP_HISTOGRAM;
        rc = member_check(root, ata, err) || spec_dtype(root, ata, &sp->dtype, err) ||
             (ata ? ata_spec(root, &lim, sp, err) : hist_spec(root, &lim, sp, err)) ? -1 : 0;
    }
    cJSON_Delete(root);
    return rc;
}

static void put_progress(cr_jbuf *b, const cr_stream_spec *sp, const cr_stream_progress *p)
{
    double now = cr_now(), wall = cr_wall_now();
    cr_jbuf_lit(b, "{\"open\":");
    cr_jbuf_lit(b, p->finishing ? "false" : "true");
    cr_jbuf_key(b, "parts", false);
    cr_jbuf_u64(b, p->parts);
    cr_jbuf_key(b, "duplicates", false);
    cr_jbuf_u64(b, p->duplicates);
    cr_jbuf_key(b, sp->op == CR_OP_ATA ? "rows" : "values", false);
    cr_jbuf_u64(b, sp->op == CR_OP_ATA ? p->rows : p->values);
    cr_jbuf_key(b, "bytes", false);
    cr_jbuf_u64(b, p->bytes);
    cr_jbuf_key(b, "in_flight", false);
    cr_jbuf_u64(b, (uint64_t)p->in_flight);
    double span = p->last_part_at - p->first_part_at;
    cr_jbuf_key(b, "rate_mb_s", false); /* from the first part's arrival to the last one's end */
    cr_jbuf_f64(b, p->parts && span > 0 ? (double)p->bytes / span / 1e6 : 0.0);
    cr_jbuf_key(b, "opened_at", false);
    cr_jbuf_f64(b, wall - (now - p->opened_at));
    if (p->parts) {
        cr_jbuf_key(b, "last_part_at", false);
        cr_jbuf_f64(b, wall - (now - p->last_part_at));
    }
    if (p->idle_s > 0) { /* when it fails stream_idle unless a part comes */
        double last = p->last_part_at > p->opened_at ? p->last_part_at : p->opened_at;
        cr_jbuf_key(b, "expires_at", false);
        cr_jbuf_f64(b, wall - (now - last) + p->idle_s);
    }
    if (sp->op == CR_OP_ATA) {
        cr_jbuf_key(b, "cols", false);
        cr_jbuf_u64(b, (uint64_t)sp->cols);
        cr_jbuf_key(b, "accumulate", false);
        cr_jbuf_string(b, sp->acc_f32 ? "float32" : "float64");
    } else {
        cr_jbuf_key(b, "bins", false);
        cr_jbuf_u64(b, (uint64_t)sp->bins);
    }
    cr_jbuf_key(b, "dtype", false);
    cr_jbuf_string(b, cr_dtype_name(sp->dtype));
    cr_jbuf_lit(b, "}");
}

/* The job's status document with "stream" added before its closing brace. */
static char *status_with(const cr_job *j, cr_stream *s, size_t *len)
{
    size_t n = 0;
    char *base = cr_json_job_status(j, &n);
    if (!base)
        return NULL;
    if (!s)
        return *len = n, base;
    cr_stream_progress p;
    cr_stream_progress_of(s, &p);
    cr_jbuf b = {0};
    cr_jbuf_put(&b, base, n - 1);
    free(base);
    cr_jbuf_key(&b, "stream", false);
    put_progress(&b, cr_stream_spec_of(s), &p);
    cr_jbuf_lit(&b, "}");
    return cr_jbuf_finish(&b, len);
}

char *cr_stream_status_json(const cr_job *j, size_t *len)
{
    cr_stream *s = cr_job_stream(j);
    if (!s)
        return NULL;
    char *body = status_with(j, s, len);
    cr_stream_release(s);
    return body;
}

bool cr_stream_delete(const cr_job *j)
{
    cr_stream *s = cr_job_stream(j);
    if (!s)
        return false;
    cr_stream_abandon(s);
    cr_stream_release(s);
    return true;
}

enum MHD_Result cr_route_stream_open(cr_conn *c)
{
    cr_error err;
    cr_stream_spec spec;
    char owner[CR_OWNER_MAX], location[64];
    if (cr_engine_draining(c->h->deps.engine))
        return cr_refuse(c, 503, "draining", "", "the daemon is shutting down: open the stream on another instance");
    if (parse_spec(c, &spec, &err) < 0)
        return cr_send_error(c, &err);
    cr_request req = {0};
    cr_job *j = cr_job_new(&req, true);
    if (!j)
        return cr_refuse(c, 503, "host_memory", "", "out of memory");
    owner_of(c, owner, sizeof owner);
    if (cr_apply_job_headers(c, j, &err) < 0 || cr_stream_open(j, owner, &spec, &err) < 0) {
        cr_job_release(j);
        return cr_send_error(c, &err);
    }
    cr_job_table_put(c->h->deps.jobs, j);
    c->job = j; /* for the log line; released when the request completes */
    size_t len = 0;
    char *body = cr_stream_status_json(j, &len);
    struct MHD_Response *r = cr_json_response(c, body, len);
    if (!r)
        return MHD_NO;
    snprintf(location, sizeof location, "/v1/jobs/%s", j->id);
    MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, location);
    MHD_add_response_header(r, "X-Crunchd-Job-Id", j->id);
    return cr_queue(c, 201, r);
}

/* ---- parts: PUT /v1/jobs/{id}/parts/{seq} ----------------------------------------------------- */

static int parse_seq(const cr_conn *c, uint64_t *seq, cr_error *err)
{
    const char *p = strstr(c->id ? c->id : "", "/parts/");
    const char *v = p ? p + 7 : "";
    size_t n = strlen(v);
    if (!n || n > 18 || strspn(v, "0123456789") != n)
        return cr_fail(err, 400, "invalid_parameter", "seq", "a part's seq is a whole number (0 to 10^18), got \"%.24s\"", v);
    *seq = strtoull(v, NULL, 10);
    return 0;
}

/* A part in shared memory: {"shm": {...}, "shape": [...]} (its dtype the stream's), read in place. */
static int part_from_json(cr_conn *c, const cr_stream_spec *sp, cr_request *req, cr_shape *shape, cr_error *err)
{
    cr_limits lim = cr_request_limits(c->h->deps.cfg);
    cJSON *root = cJSON_ParseWithLength(c->body ? c->body : "", c->len);
    cr_jshm_operand op;
    int rc = -1;
    memset(req, 0, sizeof *req);
    if (!cJSON_IsObject(root) || !cr_jshm_is_operand(root))
        cr_fail(err, 400, root ? "invalid_field" : "invalid_json", "shm", "a JSON part names rows in a registered "
                "shared-memory region: {\"shm\": {\"region\", \"offset\"?}, \"shape\"}; send data as raw bytes or .npy");
    else if (!cr_jshm_measure(root, "shm", 0, &lim, &op, err) && cr_jshm_bind(req, CR_BUF_A, &op, sp->dtype, "shm", err)) {
        shape->rank = op.rank;
        memcpy(shape->dims, op.shape, sizeof shape->dims[0] * (size_t)op.rank);
        rc = 0;
    }
    cJSON_Delete(root);
    return rc;
}

/* The part's array as the job of its rows: AᵀA of count/cols × cols, or the histogram of its
 * values over the stream's bins and range. */
static int part_task(cr_request *r, const cr_stream_spec *sp, const cr_shape *shape, cr_dtype dt, cr_error *err)
{
    uint64_t count = cr_shape_count(shape);
    if (dt != sp->dtype)
        return cr_fail(err, 400, "invalid_field", "body", "the part is %s but the stream is %s", cr_dtype_name(dt),
                       cr_dtype_name(sp->dtype));
    if (!count)
        return cr_fail(err, 400, "invalid_field", "body", "the part holds no %s", sp->op == CR_OP_ATA ? "rows" : "values");
    cr_task *t = &r->task;
    t->op = sp->op;
    t->dtype = dt;
    r->kernel = sp->kernel;
    if (sp->op == CR_OP_ATA) {
        if (shape->rank > 2 || (shape->rank == 2 && shape->dims[1] != sp->cols) || count % (uint64_t)sp->cols)
            return cr_fail(err, 422, "shape_mismatch", "body", "the stream's rows have %lld columns: a part is rows x %lld "
                           "(or flat, a whole number of rows)", (long long)sp->cols, (long long)sp->cols);
        t->u.ata.m = (int64_t)(count / (uint64_t)sp->cols);
        t->u.ata.n = sp->cols;
        t->u.ata.a = r->bufs[CR_BUF_A];
        return 0;
    }
    t->u.hist.count = (int64_t)count;
    t->u.hist.data = r->bufs[CR_BUF_A];
    t->u.hist.bins = sp->bins;
    t->u.hist.lo = sp->lo;
    t->u.hist.hi = sp->hi;
    int64_t nan_at = dt == CR_DT_U8 ? -1 : cr_hist_first_nan(t->u.hist.data, t->u.hist.count, dt);
    return nan_at < 0 ? 0 : cr_fail(err, 400, "non_finite", "body", "the part holds NaN (element %lld): a histogram "
                                    "has no bin for it", (long long)nan_at);
}

static enum MHD_Result part_answer(cr_conn *c, cr_job *j)
{
    if (atomic_load(&j->state) != CR_JOB_DONE)
        return cr_send_job(c, j); /* the part's error: the stream stays open, the seq may come again */
    char id[40];
    path_id(c, id, sizeof id);
    cr_jbuf b = {0};
    cr_jbuf_lit(&b, "{\"id\":");
    cr_jbuf_string(&b, id);
    cr_jbuf_key(&b, "seq", false);
    cr_jbuf_u64(&b, j->req.stream_seq);
    cr_jbuf_lit(&b, ",\"status\":\"absorbed\"");
    bool ata = j->req.task.op == CR_OP_ATA;
    cr_jbuf_key(&b, ata ? "rows" : "values", false);
    cr_jbuf_u64(&b, (uint64_t)(ata ? j->req.task.u.ata.m : j->req.task.u.hist.count));
    cr_jbuf_key(&b, "bytes", false);
    cr_jbuf_u64(&b, j->req.stream_bytes);
    cr_jbuf_key(&b, "kernel", false);
    cr_jbuf_string(&b, cr_job_kernel_name(j) ? cr_job_kernel_name(j) : "");
    cr_jbuf_key(&b, "timings_ms", false);
    cr_jbuf_lit(&b, "{\"kernel\":");
    cr_jbuf_f64(&b, j->ms.kernel);
    cr_jbuf_key(&b, "total", false);
    cr_jbuf_f64(&b, j->ms.total);
    cr_jbuf_lit(&b, "}}");
    size_t len = 0;
    char *body = cr_jbuf_finish(&b, &len);
    return cr_send(c, 200, "application/json", body, len);
}

static enum MHD_Result repeat_answer(cr_conn *c, const char *id, uint64_t seq)
{
    char *body = malloc(160);
    size_t len = body ? (size_t)snprintf(body, 160, "{\"id\":\"%s\",\"seq\":%llu,\"status\":\"duplicate\"}", id,
                                         (unsigned long long)seq) : 0;
    return cr_send(c, 200, "application/json", body, len);
}

/* The part decoded into r (the body's array, or a region's rows), as a task of its rows. */
static int decode_part(cr_conn *c, const cr_stream_spec *sp, cr_request *r, cr_error *err)
{
    cr_shape shape;
    cr_dtype dt = sp->dtype;
    if (c->upload ? cr_upload_array(c, r, &shape, &dt, err) < 0 : part_from_json(c, sp, r, &shape, err) < 0)
        return -1;
    r->stream_bytes = cr_shape_count(&shape) * cr_dtype_size(dt);
    return part_task(r, sp, &shape, dt, err);
}

enum MHD_Result cr_route_stream_part(cr_conn *c)
{
    cr_error err;
    char owner[CR_OWNER_MAX], id[40];
    uint64_t seq = 0;
    cr_request req = {0};
    cr_part_admit admit;
    path_id(c, id, sizeof id);
    owner_of(c, owner, sizeof owner);
    if (cr_engine_draining(c->h->deps.engine))
        return cr_refuse(c, 503, "draining", "", "the daemon is shutting down: it takes no new parts");
    if (parse_seq(c, &seq, &err) < 0)
        return cr_send_error(c, &err);
    cr_stream *s = cr_stream_acquire(owner, id, false, &err);
    if (!s)
        return cr_send_error(c, &err);
    if (decode_part(c, cr_stream_spec_of(s), &req, &err) < 0 || cr_stream_part_begin(s, seq, &admit, &err) < 0)
        goto refused;
    if (admit == CR_PART_REPEAT) {
        int same = cr_stream_part_repeat(s, seq, cr_stream_digest(req.bufs[CR_BUF_A], req.stream_bytes), &err);
        cr_request_free(&req);
        cr_stream_release(s);
        return same < 0 ? cr_send_error(c, &err) : repeat_answer(c, id, seq);
    }
    req.stream = s; /* the hold is the part's now: ended by the job's end or by freeing req */
    req.stream_seq = seq;
    req.stream_drop = cr_stream_part_drop;
    req.body_bytes = c->len;
    cr_job *j = cr_job_new(&req, false);
    if (!j) {
        cr_request_free(&req);
        return cr_refuse(c, 503, "host_memory", "", "out of memory");
    }
    if (cr_apply_job_headers(c, j, &err) < 0) {
        cr_job_release(j);
        return cr_send_error(c, &err);
    }
    return cr_run_sync(c, j, part_answer);
refused:
    cr_request_free(&req);
    cr_stream_release(s);
    return cr_send_error(c, &err);
}

/* ---- POST /v1/jobs/{id}/finish ---------------------------------------------------------------- */

enum MHD_Result cr_route_stream_finish(cr_conn *c)
{
    cr_error err;
    char owner[CR_OWNER_MAX], id[40];
    path_id(c, id, sizeof id);
    owner_of(c, owner, sizeof owner);
    cr_job *j = cr_job_table_get(c->h->deps.jobs, id);
    cr_stream *s = j ? cr_stream_acquire(owner, id, true, &err) : NULL;
    if (!s) {
        if (j)
            cr_job_release(j);
        return j ? cr_send_error(c, &err) : cr_refuse(c, 404, "not_found", "id", "no such stream: unknown, expired, "
                                                      "deleted, or on another replica");
    }
    int rc = cr_stream_finish(s, &err);
    cr_stream_release(s);
    c->job = j; /* released when the request completes */
    if (rc < 0)
        return cr_send_error(c, &err);
    size_t len = 0;
    char *body = cr_json_job_status(j, &len);
    return cr_send(c, rc == 1 ? 200 : 202, "application/json", body, len);
}
