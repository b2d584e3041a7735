/* KServe v2 routes (server/kserve/kserve.h): metadata and health from the engine, inference as a
 * synchronous job run exactly like POST /v1/{op} (cr_run_sync), with this protocol's decoder,
 * encoder and error bodies. */
#include "server/kserve/kserve.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/engine/engine.h"
#include "server/codec/json_encode.h"
#include "server/http/respond.h"
#include "server/http/submit.h"
#include "server/engine/owned.h"
#include "server/http/upload.h"
#include "server/kserve/kserve_internal.h"

#define HEADER_LEN "Inference-Header-Content-Length"

/* ---- which model: /v2/models/{model}[/versions/{version}][/ready|/infer] ------------------- */

/* The model of the path, or NULL with a 404 sent (unknown model, or a version other than 1). */
const cr_ks_model *cr_ks_path_model(cr_conn *c)
{
    size_t n = strcspn(c->id, "/");
    const cr_ks_model *m = cr_ks_model_find(c->id, n);
    if (!m) {
        char name[72];
        snprintf(name, sizeof name, "%.*s", (int)(n < 64 ? n : 64), c->id);
        cr_refuse(c, 404, "not_found", "model", "unknown model \"%s\" (models: gemm, ata, histogram)",
               name);
        return NULL;
    }
    const char *rest = c->id + n;
    if (strncmp(rest, "/versions/", 10) == 0) {
        const char *v = rest + 10;
        size_t vn = strcspn(v, "/");
        if (vn != 1 || v[0] != '1') {
            cr_refuse(c, 404, "not_found", "version", "model %s has one version, \"1\"", m->name);
            return NULL;
        }
    }
    c->label = m->op == CR_OP_GEMM  ? CR_ROUTE_GEMM
               : m->op == CR_OP_ATA ? CR_ROUTE_ATA
                                    : CR_ROUTE_HISTOGRAM;
    return m;
}

/* ---- metadata and health -------------------------------------------------------------------- */

enum MHD_Result cr_kserve_server_metadata(cr_conn *c)
{
    cJSON *doc = cJSON_CreateObject(), *ext = cJSON_CreateArray();
    const char *names[8];
    size_t n = cr_ks_extensions(cr_engine_backend(c->h->deps.engine), names, 8);
    cJSON_AddStringToObject(doc, "name", "crunchd");
    cJSON_AddStringToObject(doc, "version", CRUNCHD_VERSION);
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(ext, cJSON_CreateString(names[i]));
    cJSON_AddItemToObject(doc, "extensions", ext);
    return cr_send_cjson(c, 200, doc);
}

enum MHD_Result cr_kserve_live(cr_conn *c)
{
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddBoolToObject(doc, "live", 1);
    return cr_send_cjson(c, 200, doc);
}

/* 200 or 503, as /readyz: the models are the engine, always loaded. */
static enum MHD_Result send_ready(cr_conn *c, const char *model)
{
    const char *reason = "";
    bool ready = cr_engine_ready(c->h->deps.engine, &reason);
    cJSON *doc = cJSON_CreateObject();
    if (model)
        cJSON_AddStringToObject(doc, "name", model);
    cJSON_AddBoolToObject(doc, "ready", ready);
    if (!ready)
        cJSON_AddStringToObject(doc, "reason", reason);
    return cr_send_cjson(c, ready ? 200 : 503, doc);
}

enum MHD_Result cr_kserve_ready(cr_conn *c)
{
    return send_ready(c, NULL);
}

enum MHD_Result cr_kserve_model_ready(cr_conn *c)
{
    const cr_ks_model *m = cr_ks_path_model(c);
    return m ? send_ready(c, m->name) : MHD_YES;
}

/* {name, datatype, shape} with -1 for every (variable) dimension; "datatypes" lists all the
 * accepted ones where the protocol's single datatype cannot. */
static cJSON *tensor_json(const cr_ks_tensor *t)
{
    cJSON *o = cJSON_CreateObject(), *shape = cJSON_CreateArray(), *types = cJSON_CreateArray();
    cJSON_AddStringToObject(o, "name", t->name);
    cJSON_AddStringToObject(o, "datatype", t->datatypes[0]);
    for (int d = 0; d < t->rank; d++)
        cJSON_AddItemToArray(shape, cJSON_CreateNumber(-1));
    cJSON_AddItemToObject(o, "shape", shape);
    for (int i = 0; t->datatypes[i]; i++)
        cJSON_AddItemToArray(types, cJSON_CreateString(t->datatypes[i]));
    cJSON_AddItemToObject(o, "datatypes", types);
    cJSON_AddBoolToObject(o, "optional", t->optional);
    return o;
}

enum MHD_Result cr_kserve_model_metadata(cr_conn *c)
{
    const cr_ks_model *m = cr_ks_path_model(c);
    if (!m)
        return MHD_YES;
    cJSON *doc = cJSON_CreateObject(), *versions = cJSON_CreateArray();
    cJSON *in = cJSON_CreateArray(), *out = cJSON_CreateArray();
    cJSON_AddStringToObject(doc, "name", m->name);
    cJSON_AddItemToArray(versions, cJSON_CreateString("1"));
    cJSON_AddItemToObject(doc, "versions", versions);
    cJSON_AddStringToObject(doc, "platform", "crunchd");
    for (int i = 0; i < m->n_inputs; i++)
        cJSON_AddItemToArray(in, tensor_json(&m->inputs[i]));
    for (int i = 0; i < m->n_outputs; i++)
        cJSON_AddItemToArray(out, tensor_json(&m->outputs[i]));
    cJSON_AddItemToObject(doc, "inputs", in);
    cJSON_AddItemToObject(doc, "outputs", out);
    return cr_send_cjson(c, 200, doc);
}

/* ---- inference ------------------------------------------------------------------------------ */

/* Inference-Header-Content-Length: absent (-1), or digits only, up to 2^53. -2 when malformed. */
static int64_t header_length(cr_conn *c)
{
    const char *s = cr_header(c, HEADER_LEN);
    if (!s)
        return -1;
    size_t n = strlen(s);
    if (n == 0 || n > 16 || strspn(s, "0123456789") != n)
        return -2;
    return strtoll(s, NULL, 10);
}

static bool accepted_type(const char *ct)
{
    static const char *const types[] = {"application/json", "application/octet-stream", NULL};
    if (!ct)
        return true; /* tritonclient sends none */
    for (int i = 0; types[i]; i++) {
        size_t n = strlen(types[i]);
        if (strncasecmp(ct, types[i], n) == 0 && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' '))
            return true;
    }
    return false;
}

enum MHD_Result cr_kserve_begin(cr_conn *c)
{
    const cr_config *cfg = c->h->deps.cfg;
    if (c->handler != cr_kserve_infer) {
        /* Triton's own C++ client posts registrations with libcurl's default type
         * (application/x-www-form-urlencoded) and unregister-all with an empty body: these
         * bodies are read as JSON whatever their type says, and refused (400) when they are not */
        c->limit = (size_t)cfg->max_json_mb << 20;
        c->limit_msg = "the JSON body is larger than --max-json-mb";
        return MHD_YES;
    }
    if (!accepted_type(cr_header(c, MHD_HTTP_HEADER_CONTENT_TYPE)))
        return cr_refuse(c, 415, "unsupported_media_type", "Content-Type",
                      "send application/json, or application/octet-stream with %s", HEADER_LEN);
    int64_t hl = header_length(c);
    if (hl == -2)
        return cr_refuse(c, 400, "invalid_parameter", HEADER_LEN,
                      "%s must be a byte count (digits only)", HEADER_LEN);
    bool binary = hl >= 0;
    c->limit = (size_t)(binary ? cfg->max_body_mb : cfg->max_json_mb) << 20;
    c->limit_msg = binary ? "the body is larger than --max-body-mb"
                          : "the JSON body is larger than --max-json-mb";
    const char *cl = cr_header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > c->limit)
        return cr_refuse(c, 413, "too_large", "body", "%s", c->limit_msg);
    return MHD_YES;
}

/* An answer whose binary part is the job's result, sent straight from its buffer after the JSON
 * header (an iovec on either transport: no copy of a 256x256 result per request); the job is
 * kept until the answer has gone. */
typedef struct {
    cr_job *job;
    char *header;
} tail_answer;

static void tail_answer_free(void *cls)
{
    tail_answer *a = cls;
    cr_job_release(a->job);
    free(a->header);
    free(a);
}

static enum MHD_Result send_with_tail(cr_conn *c, cr_job *j, cr_ks_response *r)
{
    tail_answer *a = calloc(1, sizeof *a);
    if (!a) {
        free(r->body);
        return cr_refuse(c, 503, "host_memory", "", "out of memory encoding the response");
    }
    cr_job_ref(j);
    a->job = j;
    a->header = r->body;
    cr_span spans[2] = {{r->body, r->header_len}, {r->tail, r->tail_len}};
    c->extra_header = HEADER_LEN;
    snprintf(c->extra_value, sizeof c->extra_value, "%zu", r->header_len);
    return cr_send_spans(c, 200, "application/octet-stream", spans, 2, tail_answer_free, a);
}

/* The job is finished: its shared-memory outputs are written (by the worker, or by the encoder
 * for edges) and released before the client can read the answer and unregister them. */
static enum MHD_Result encode_done(cr_conn *c, cr_job *j)
{
    cr_ks_response r;
    cr_ks_spec *spec = c->ctx;
    cr_ks_stats_record(spec->model, j);
    if (atomic_load(&j->state) != CR_JOB_DONE) {
        cr_ks_shm_release_outputs(&j->req, spec);
        return cr_send_error(c, &j->error);
    }
    int rc = cr_ks_encode(j, spec, cr_job_backend_name(j, cr_engine_backend(c->h->deps.engine)->name), &r);
    /* a result left in shared memory leaves the job without an output buffer: the non-finite
     * check below, which is about JSON numbers, then has nothing to look at */
    cr_ks_shm_release_outputs(&j->req, spec);
    if (rc != 0)
        return cr_refuse(c, 503, "host_memory", "", "out of memory encoding the response");
    cr_error err;
    if (r.header_len == r.len && !r.tail && cr_json_nonfinite_result(j, &err) < 0) {
        free(r.body);
        return cr_send_error(c, &err);
    }
    if (r.tail)
        return send_with_tail(c, j, &r);
    if (r.header_len == r.len)
        return cr_send(c, 200, "application/json", r.body, r.len);
    c->extra_header = HEADER_LEN;
    snprintf(c->extra_value, sizeof c->extra_value, "%zu", r.header_len);
    return cr_send(c, 200, "application/octet-stream", r.body, r.len);
}

static void spec_free(void *p)
{
    cr_ks_spec_free(p);
    free(p);
}

/* The body libmicrohttpd read whole: decoded into *req, *spec (NULL when out of memory). */
static int decode_body(cr_conn *c, const cr_ks_model *m, cr_request *req, cr_ks_spec **spec, cr_error *err)
{
    int64_t hl = header_length(c); /* well-formed: cr_kserve_begin checked */
    if (hl > (int64_t)c->len)
        return cr_fail(err, 400, "invalid_parameter", HEADER_LEN, "%s %lld is larger than the body (%zu bytes)",
                       HEADER_LEN, (long long)hl, c->len);
    if (!(*spec = calloc(1, sizeof **spec)))
        return cr_fail(err, 503, "host_memory", "", "out of memory");
    cr_limits lim = cr_request_limits(c->h->deps.cfg);
    if (cr_request_decode_charge(c->len, err) < 0)
        return -1;
    /* binary tensors into the backend's host memory (pinned on cuda), without its device sinks */
    cr_host_allocator alloc = cr_upload_allocator(c);
    alloc.sink = NULL;
    char owner[CR_OWNER_MAX];
    cr_peer_client(&c->peer, c->authenticated, owner, sizeof owner);
    int rc = cr_ks_decode_alloc(m, c->body ? c->body : "", c->len, hl, &lim, alloc, owner, req, *spec, err);
    cr_request_decode_release(c->len);
    return rc;
}

enum MHD_Result cr_kserve_infer(cr_conn *c)
{
    const cr_ks_model *m = cr_ks_path_model(c);
    if (!m)
        return MHD_YES;
    cr_error err;
    cr_request req;
    cr_ks_spec *spec = NULL;
    int rc = c->ks_upload ? cr_kserve_direct_take(c, &req, &spec, &err) : decode_body(c, m, &req, &spec, &err);
    if (spec) {
        c->ctx = spec;
        c->ctx_free = spec_free;
    }
    if (rc != 0)
        return cr_send_error(c, &err);
    cr_job *j = cr_job_new(&req, false);
    if (!j) {
        cr_request_free(&req);
        return cr_refuse(c, 503, "host_memory", "", "out of memory");
    }
    if (cr_apply_job_headers(c, j, &err) != 0) {
        cr_job_release(j);
        return cr_send_error(c, &err);
    }
    return cr_run_sync(c, j, encode_done);
}
