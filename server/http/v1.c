/* The /v1 routes and service endpoints; see v1.h. */
#include "server/http/v1.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/registry.h"
#include "server/build_info.h"
#include "server/clock.h"
#include "server/codec/json_decode.h"
#include "server/codec/json_encode.h"
#include "server/engine/owned.h"
#include "server/engine/tensors.h"
#include "server/http/answer.h"
#include "server/http/respond.h"
#include "server/http/submit.h"
#include "server/http/upload.h"
#include "server/kserve/cuda_shm_region.h"
#include "server/kserve/shm_region.h"
#include "server/machine.h"

enum MHD_Result cr_route_healthz(cr_conn *c)
{
    return cr_send_text(c, 200, "application/json", "{\"status\":\"ok\"}");
}

enum MHD_Result cr_route_readyz(cr_conn *c)
{
    const char *reason = "";
    if (cr_engine_ready(c->h->deps.engine, &reason))
        return cr_send_text(c, 200, "application/json", "{\"ready\":true}");
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddBoolToObject(doc, "ready", 0);
    cJSON_AddStringToObject(doc, "reason", reason);
    return cr_send_cjson(c, 503, doc);
}

static const char *cuda_version(void)
{
#ifdef CRUNCHD_HAVE_CUDA
    return CRUNCHD_CUDA_VERSION;
#else
    return "none";
#endif
}

/* Host memory, and each device where tensors live there. */
static void tensor_gauges(cr_conn *c, cr_metrics_gauges *g)
{
    const cr_backend *b = cr_engine_backend(c->h->deps.engine);
    int devices = b->tensor_alloc ? cr_engine_device_count(c->h->deps.engine) : 0;
    for (int d = -1; d < devices && d < CR_METRICS_MAX_DEVICES; d++) {
        cr_tensor_usage u;
        cr_tensors_usage(d, &u);
        int i = g->tensor_places++;
        if (d < 0)
            snprintf(g->tensors[i].name, sizeof g->tensors[i].name, "host");
        else
            snprintf(g->tensors[i].name, sizeof g->tensors[i].name, "%d", d);
        g->tensors[i].count = u.count;
        g->tensors[i].bytes = u.bytes;
        g->tensors[i].created = u.created;
        g->tensors[i].expired = u.expired;
    }
}

enum MHD_Result cr_route_metrics(cr_conn *c)
{
    cr_metrics_gauges g = {.backend = cr_engine_backend(c->h->deps.engine)->name,
                           .version = CRUNCHD_VERSION, .cuda = cuda_version()};
    size_t len = 0;
    cr_engine_gauges(c->h->deps.engine, &g);
    g.results_kept_bytes = cr_job_table_bytes(c->h->deps.jobs);
    cr_shm_usage(&g.shm_regions, &g.shm_registered_bytes);
    cr_cuda_shm_usage(&g.cuda_shm_regions, &g.cuda_shm_registered_bytes);
    tensor_gauges(c, &g);
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
    cJSON_AddNumberToObject(l, "http_threads", cfg->http_threads);
    cJSON_AddNumberToObject(l, "batch_max", cfg->batch_max);
    cJSON_AddNumberToObject(l, "batch_delay_us", cfg->batch_delay_us);
    cJSON_AddNumberToObject(l, "host_max_flops", (double)cfg->host_max_flops);
    cJSON_AddNumberToObject(l, "host_max_values", (double)cfg->host_max_values);
    int sizes[16], n = cr_config_preferred(cfg, sizes, 16);
    cJSON *pref = cJSON_CreateArray();
    for (int i = 0; i < n && i < 16; i++)
        cJSON_AddItemToArray(pref, cJSON_CreateNumber(sizes[i]));
    cJSON_AddItemToObject(l, "batch_preferred", pref);
    cr_machine m;
    cr_machine_read(&m);
    cJSON_AddNumberToObject(l, "cpus", m.cpus);
    cJSON_AddNumberToObject(l, "job_timeout_ms", (double)cfg->job_timeout_ms);
    cJSON_AddNumberToObject(l, "result_ttl_s", cfg->result_ttl_s);
    cJSON_AddNumberToObject(l, "result_cap_bytes", (double)((uint64_t)cfg->result_cap_mb << 20));
    cJSON_AddNumberToObject(l, "max_memory_bytes", (double)((uint64_t)cfg->max_memory_mb << 20));
    cJSON_AddNumberToObject(l, "shm_max_bytes", (double)((uint64_t)cfg->shm_max_mb << 20));
    cJSON_AddNumberToObject(l, "gzip_level", cfg->gzip_level);
    return l;
}

/* The same record as `crunchd --version`. */
static cJSON *build_json(void)
{
    cr_build_info b;
    cr_build_info_get(&b);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "version", b.version);
    cJSON_AddStringToObject(o, "git_revision", b.git_revision);
    cJSON_AddStringToObject(o, "flags", b.build_flags);
    cJSON_AddStringToObject(o, "cuda_toolkit", b.cuda_toolkit);
    cJSON_AddStringToObject(o, "cuda_runtime", b.cuda_runtime);
    cJSON_AddStringToObject(o, "cuda_driver", b.cuda_driver);
    return o;
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
    cJSON_AddItemToObject(doc, "build", build_json());
    return cr_send_cjson(c, 200, doc);
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
    const cr_auto_table *tab = cr_engine_auto_table(e);
    const cr_auto_row *rows = tab->rows;
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < tab->n; i++) {
        if (!rows[i].kernel)
            continue;
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "op", cr_op_name(rows[i].op));
        cJSON_AddStringToObject(r, "dtype", cr_dtype_name(rows[i].dtype));
        cJSON_AddStringToObject(r, "size", cr_size_class_name(rows[i].cls));
        cJSON_AddStringToObject(r, "precision", cr_precision_name(rows[i].precision));
        cJSON_AddStringToObject(r, "kernel", rows[i].kernel->name);
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
    const cr_kernel *k = cr_kernels(b, &n);
    cJSON *doc = cJSON_CreateObject(), *list = cJSON_CreateArray();
    cJSON_AddStringToObject(doc, "backend", b->name);
    for (size_t i = 0; i < n; i++) {
        if (k[i].hidden)
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "op", cr_op_name(k[i].op));
        cJSON_AddStringToObject(o, "name", k[i].name);
        cJSON_AddItemToObject(o, "dtypes", dtypes_json(k[i].dtypes));
        cJSON_AddStringToObject(o, "precision", cr_precision_name(k[i].precision));
        cJSON_AddBoolToObject(o, "reference", k[i].reference);
        cJSON_AddBoolToObject(o, "batchable", k[i].batchable);
        cJSON_AddBoolToObject(o, "stacks", k[i].stacks);
        cJSON_AddBoolToObject(o, "named_only", k[i].named_only);
        cJSON_AddStringToObject(o, "summary", k[i].summary ? k[i].summary : "");
        cJSON_AddItemToArray(list, o);
    }
    cJSON_AddItemToObject(doc, "kernels", list);
    cJSON_AddItemToObject(doc, "auto", auto_table_json(c->h->deps.engine));
    return cr_send_cjson(c, 200, doc);
}

static enum MHD_Result first_key(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind, (void)value;
    snprintf(cls, 64, "%s", key ? key : "");
    return MHD_NO;
}

/* Query parameters configure binary bodies; a JSON body carries its own. Ignoring them would
 * run with alpha or a kernel the client did not ask for (?alpha=5&kernel=nonsense gave 200). */
static int refuse_query_on_json(cr_conn *c, cr_error *err)
{
    char key[64] = "";
    if (cr_query_each(c, first_key, key) == 0)
        return 0;
    return cr_fail(err, 400, "invalid_parameter", key,
                   "query parameter \"%.40s\" on a JSON request: query parameters are for binary "
                   "bodies (.npy, raw bytes); put it in the JSON body", key);
}

static int json_request(cr_conn *c, cr_op op, cr_request *req, cr_error *err)
{
    cr_limits lim = cr_request_limits(c->h->deps.cfg);
    if (refuse_query_on_json(c, err) < 0 || cr_request_decode_charge(c->len, err) < 0)
        return -1;
    char owner[CR_OWNER_MAX];
    cr_peer_client(&c->peer, c->authenticated, owner, sizeof owner);
    int rc = cr_request_from_json_as(op, c->body ? c->body : "", c->len, &lim, owner, req, err);
    cr_request_decode_release(c->len);
    return rc;
}

/* Decodes the body into a new job; NULL with the error answered. */
static cr_job *job_from_body(cr_conn *c, cr_op op, bool async, cr_error *err)
{
    cr_request req;
    if (c->upload ? cr_upload_request(c, &req, err) < 0 : json_request(c, op, &req, err) < 0)
        return NULL;
    if (!async && cr_answer_plan(c, &req, err) < 0) {
        cr_request_free(&req);
        return NULL;
    }
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
    return cr_run_sync(c, j, NULL);
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
    struct MHD_Response *r = cr_json_response(c, body, len);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, location);
    MHD_add_response_header(r, "X-Crunchd-Job-Id", j->id);
    return cr_queue(c, 202, r);
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
    return cr_refuse(c, 404, "not_found", "id", "no such job: unknown, expired, deleted, or on another replica");
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
        return cr_refuse(c, 409, "not_done", "id", "the job has not finished; poll GET /v1/jobs/{id}");
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
