/* Route handlers: what each URL does, in terms of the engine, the job table and the encoders. */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "engine.h"
#include "http_conn.h"
#include "json_response.h"
#include "upload.h"

static pthread_mutex_t resume_mu = PTHREAD_MUTEX_INITIALIZER;

static enum MHD_Result send_text(cr_conn *c, int status, const char *type, const char *text)
{
    size_t len = strlen(text);
    char *body = malloc(len + 1);
    if (body)
        memcpy(body, text, len + 1);
    return cr_send(c, status, type, body, len);
}

static enum MHD_Result send_cjson(cr_conn *c, int status, cJSON *doc)
{
    char *body = doc ? cJSON_PrintUnformatted(doc) : NULL;
    cJSON_Delete(doc);
    return cr_send(c, status, "application/json", body, body ? strlen(body) : 0);
}

static enum MHD_Result fail(cr_conn *c, int status, const char *code, const char *field, const char *msg)
{
    cr_error e;
    cr_fail(&e, status, code, field, "%s", msg);
    return cr_send_error(c, &e);
}

enum MHD_Result cr_route_healthz(cr_conn *c)
{
    return send_text(c, 200, "application/json", "{\"status\":\"ok\"}");
}

enum MHD_Result cr_route_readyz(cr_conn *c)
{
    const char *reason = "";
    if (cr_engine_ready(c->h->deps.engine, &reason))
        return send_text(c, 200, "application/json", "{\"ready\":true}");
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddBoolToObject(doc, "ready", 0);
    cJSON_AddStringToObject(doc, "reason", reason);
    return send_cjson(c, 503, doc);
}

static const char *cuda_version(void)
{
#ifdef CRUNCHD_HAVE_CUDA
    return CRUNCHD_CUDA_VERSION;
#else
    return "none";
#endif
}

enum MHD_Result cr_route_metrics(cr_conn *c)
{
    cr_metrics_gauges g = {.backend = cr_engine_backend(c->h->deps.engine)->name,
                           .version = CRUNCHD_VERSION, .cuda = cuda_version()};
    size_t len = 0;
    cr_engine_gauges(c->h->deps.engine, &g);
    char *text = cr_metrics_render(&g, &len);
    return cr_send(c, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
}

static cJSON *limits_json(const cr_config *cfg)
{
    cJSON *l = cJSON_CreateObject();
    cJSON_AddNumberToObject(l, "max_body_bytes", (double)((uint64_t)cfg->max_body_mb << 20));
    cJSON_AddNumberToObject(l, "max_json_bytes", (double)((uint64_t)cfg->max_json_mb << 20));
    cJSON_AddNumberToObject(l, "max_elements", (double)cfg->max_elements);
    cJSON_AddNumberToObject(l, "max_bins", cfg->max_bins);
    cJSON_AddNumberToObject(l, "queue_depth", cfg->queue_depth);
    cJSON_AddNumberToObject(l, "workers", cfg->workers);
    cJSON_AddNumberToObject(l, "job_timeout_ms", (double)cfg->job_timeout_ms);
    cJSON_AddNumberToObject(l, "result_ttl_s", cfg->result_ttl_s);
    return l;
}

enum MHD_Result cr_route_info(cr_conn *c)
{
    cr_engine *e = c->h->deps.engine;
    const cr_backend *b = cr_engine_backend(e);
    cJSON *doc = cJSON_CreateObject(), *devs = cJSON_CreateArray();
    cJSON_AddStringToObject(doc, "name", "crunchd");
    cJSON_AddStringToObject(doc, "version", CRUNCHD_VERSION);
    cJSON_AddStringToObject(doc, "backend", b->name);
    cJSON_AddStringToObject(doc, "cuda", cuda_version());
    for (int d = 0; d < cr_engine_device_count(e); d++) {
        cr_device_info info = {0};
        if (b->device_info(d, &info) != CR_OK)
            continue;
        cJSON *dev = cJSON_CreateObject();
        cJSON_AddNumberToObject(dev, "index", d);
        cJSON_AddStringToObject(dev, "name", info.name);
        cJSON_AddNumberToObject(dev, "memory_total_bytes", (double)info.memory_total);
        cJSON_AddNumberToObject(dev, "memory_free_bytes", (double)info.memory_free);
        cJSON_AddNumberToObject(dev, "multiprocessors", info.multiprocessors);
        if (info.cc_major) {
            char cc[16];
            snprintf(cc, sizeof cc, "%d.%d", info.cc_major, info.cc_minor);
            cJSON_AddStringToObject(dev, "compute_capability", cc);
        }
        cJSON_AddItemToArray(devs, dev);
    }
    cJSON_AddItemToObject(doc, "devices", devs);
    cJSON_AddItemToObject(doc, "limits", limits_json(c->h->deps.cfg));
    return send_cjson(c, 200, doc);
}

static cJSON *dtypes_json(uint32_t mask)
{
    cJSON *a = cJSON_CreateArray();
    for (int d = 0; d < CR_DT_COUNT; d++)
        if (mask & CR_DT_BIT(d))
            cJSON_AddItemToArray(a, cJSON_CreateString(cr_dtype_name((cr_dtype)d)));
    return a;
}

static cJSON *auto_table_json(const cr_engine *e)
{
    size_t n = 0;
    const cr_auto_row *rows = cr_engine_auto_table(e, &n);
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) {
        if (!rows[i].kernel)
            continue;
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "op", cr_op_name(rows[i].op));
        cJSON_AddStringToObject(r, "dtype", cr_dtype_name(rows[i].dtype));
        cJSON_AddStringToObject(r, "size", rows[i].size);
        cJSON_AddStringToObject(r, "precision", rows[i].precision == CR_PREC_TF32 ? "tf32" : "fp32");
        cJSON_AddStringToObject(r, "kernel", rows[i].kernel);
        cJSON_AddNumberToObject(r, "ms", rows[i].ms);
        cJSON_AddStringToObject(r, "probe", rows[i].probe);
        cJSON_AddItemToArray(a, r);
    }
    return a;
}

enum MHD_Result cr_route_kernels(cr_conn *c)
{
    const cr_backend *b = cr_engine_backend(c->h->deps.engine);
    size_t n = 0;
    const cr_kernel_info *k = b->kernels(&n);
    cJSON *doc = cJSON_CreateObject(), *list = cJSON_CreateArray();
    cJSON_AddStringToObject(doc, "backend", b->name);
    for (size_t i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "op", cr_op_name(k[i].op));
        cJSON_AddStringToObject(o, "name", k[i].name);
        cJSON_AddItemToObject(o, "dtypes", dtypes_json(k[i].dtypes));
        cJSON_AddStringToObject(o, "precision", k[i].tf32 ? "tf32" : "fp32");
        cJSON_AddBoolToObject(o, "reference", k[i].reference);
        cJSON_AddStringToObject(o, "summary", k[i].summary ? k[i].summary : "");
        cJSON_AddItemToArray(list, o);
    }
    cJSON_AddItemToObject(doc, "kernels", list);
    cJSON_AddItemToObject(doc, "auto", auto_table_json(c->h->deps.engine));
    return send_cjson(c, 200, doc);
}

cr_limits cr_request_limits(const cr_config *cfg)
{
    return (cr_limits){.max_elements = (uint64_t)cfg->max_elements,
                       .max_total_bytes = (uint64_t)cfg->max_body_mb << 20,
                       .max_bins = cfg->max_bins};
}

/* Headers that shape a job: a deadline, and the test-only delay. */
int cr_apply_job_headers(cr_conn *c, cr_job *j, cr_error *err)
{
    const char *timeout = cr_header(c, "X-Crunchd-Timeout-Ms");
    if (timeout && j->req.timeout_ms == 0) {
        char *end = NULL;
        long long v = strtoll(timeout, &end, 10);
        if (end == timeout || *end || v <= 0)
            return cr_fail(err, 400, "invalid_parameter", "X-Crunchd-Timeout-Ms",
                           "expected a positive integer of milliseconds");
        j->req.timeout_ms = v;
    }
    const char *delay = cr_header(c, "X-Crunchd-Debug-Delay-Ms");
    if (delay && c->h->deps.cfg->test_hooks)
        j->debug_delay_ms = strtoll(delay, NULL, 10);
    return 0;
}

/* Decodes the body into a new job; NULL with the error answered. */
static cr_job *job_from_body(cr_conn *c, cr_op op, bool async, cr_error *err)
{
    cr_request req;
    cr_limits lim = cr_request_limits(c->h->deps.cfg);
    if (c->upload ? cr_upload_request(c, &req, err) < 0
                  : cr_request_from_json(op, c->body ? c->body : "", c->len, &lim, &req, err) < 0)
        return NULL;
    req.body_bytes = c->len;
    cr_job *j = cr_job_new(&req, async);
    if (!j) {
        cr_request_free(&req);
        cr_fail(err, 503, "host_memory", "", "out of memory");
        return NULL;
    }
    if (cr_apply_job_headers(c, j, err) < 0) {
        cr_job_release(j);
        return NULL;
    }
    return j;
}

static void resume_on_done(cr_job *j)
{
    pthread_mutex_lock(&resume_mu);
    if (j->conn)
        MHD_resume_connection(j->conn);
    pthread_mutex_unlock(&resume_mu);
}

void cr_routes_forget_conn(cr_conn *c)
{
    if (c->waiting)
        cr_waiting_remove(c);
    if (!c->job)
        return;
    pthread_mutex_lock(&resume_mu);
    c->job->conn = NULL;
    pthread_mutex_unlock(&resume_mu);
    if (c->waiting && !cr_job_finished(c->job))
        cr_engine_cancel(c->h->deps.engine, c->job); /* nobody is left to answer */
    cr_job_release(c->job);
    c->job = NULL;
}

static cr_op op_of_path(const char *path)
{
    if (strcmp(path, "/v1/gemm") == 0)
        return CR_OP_GEMM;
    if (strcmp(path, "/v1/ata") == 0)
        return CR_OP_ATA;
    return CR_OP_HISTOGRAM;
}

enum MHD_Result cr_route_op(cr_conn *c)
{
    cr_error err;
    cr_job *j = job_from_body(c, op_of_path(c->path), false, &err);
    if (!j)
        return cr_send_error(c, &err);
    return cr_run_sync(c, j, cr_send_job);
}

/* Suspends before queueing so a fast worker can never resume a connection not yet suspended. */
enum MHD_Result cr_run_sync(cr_conn *c, cr_job *j, cr_conn_encoder enc)
{
    j->ms.receive = (cr_now() - c->t0) * 1e3;
    c->encode = enc;
    c->job = j;
    j->conn = c->conn;
    j->on_done = resume_on_done;
    c->waiting = true;
    MHD_suspend_connection(c->conn);
    cr_waiting_add(c);
    if (cr_engine_submit(c->h->deps.engine, j, &c->pending) < 0) {
        c->has_pending = true;
        resume_on_done(j);
    }
    return MHD_YES;
}

enum MHD_Result cr_route_op_resumed(cr_conn *c)
{
    if (c->has_pending)
        return cr_send_error(c, &c->pending);
    if (!cr_job_finished(c->job)) /* a spurious wake-up: keep waiting */
        return MHD_suspend_connection(c->conn), MHD_YES;
    return c->encode ? c->encode(c, c->job) : cr_send_job(c, c->job);
}

enum MHD_Result cr_route_job_submit(cr_conn *c)
{
    cr_error err;
    cr_job *j = job_from_body(c, CR_OP_COUNT, true, &err);
    if (!j)
        return cr_send_error(c, &err);
    j->ms.receive = (cr_now() - c->t0) * 1e3;
    cr_job_table_put(c->h->deps.jobs, j);
    if (cr_engine_submit(c->h->deps.engine, j, &err) < 0) {
        cr_job_release(cr_job_table_take(c->h->deps.jobs, j->id));
        cr_job_release(j);
        return cr_send_error(c, &err);
    }
    c->job = j; /* for the log line; released when the request completes */
    size_t len = 0;
    char location[64];
    snprintf(location, sizeof location, "/v1/jobs/%s", j->id);
    char *body = cr_json_accepted(j, &len);
    struct MHD_Response *r = body ? MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE) : NULL;
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, location);
    MHD_add_response_header(r, "X-Crunchd-Job-Id", j->id);
    c->status = 202;
    enum MHD_Result ret = MHD_queue_response(c->conn, 202, r);
    MHD_destroy_response(r);
    return ret;
}

static cr_job *lookup(cr_conn *c)
{
    char id[40];
    size_t n = strcspn(c->id, "/");
    if (n >= sizeof id)
        return NULL;
    memcpy(id, c->id, n);
    id[n] = '\0';
    return cr_job_table_get(c->h->deps.jobs, id);
}

static enum MHD_Result not_found(cr_conn *c)
{
    return fail(c, 404, "not_found", "id", "no such job: unknown, expired, deleted, or on another replica");
}

enum MHD_Result cr_route_job_status(cr_conn *c)
{
    cr_job *j = lookup(c);
    if (!j)
        return not_found(c);
    size_t len = 0;
    char *body = cr_json_job_status(j, &len);
    cr_job_release(j);
    return cr_send(c, 200, "application/json", body, len);
}

enum MHD_Result cr_route_job_result(cr_conn *c)
{
    cr_job *j = lookup(c);
    if (!j)
        return not_found(c);
    c->job = j; /* released when the request completes */
    int state = atomic_load(&j->state);
    if (state == CR_JOB_QUEUED || state == CR_JOB_RUNNING)
        return fail(c, 409, "not_done", "id", "the job has not finished; poll GET /v1/jobs/{id}");
    atomic_store(&j->fetched, true);
    return cr_send_job(c, j);
}

/* DELETE cancels a pending job and forgets it, or forgets a finished one: 404 from then on. */
enum MHD_Result cr_route_job_delete(cr_conn *c)
{
    cr_job *j = lookup(c);
    if (!j)
        return not_found(c);
    cr_job_release(cr_job_table_take(c->h->deps.jobs, j->id));
    size_t len = 0;
    char *body;
    if (!cr_job_finished(j)) {
        cr_engine_cancel(c->h->deps.engine, j);
        /* a running job stops at its next phase boundary; to the client it is cancelled now */
        body = malloc(160);
        if (body)
            len = (size_t)snprintf(body, 160, "{\"id\":\"%s\",\"op\":\"%s\",\"status\":\"cancelled\"}",
                                   j->id, cr_op_name(j->req.task.op));
    } else {
        body = cr_json_job_status(j, &len);
    }
    cr_job_release(j);
    return cr_send(c, 200, "application/json", body, len);
}
