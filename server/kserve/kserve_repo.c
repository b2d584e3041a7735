/* The rest of Triton's HTTP surface that tritonclient calls: model configuration, the model
 * repository index (and load/unload, which built-in models refuse) and inference statistics.
 * The models are the engine's ops, always loaded, one version each. */
#include "server/kserve/kserve.h"

#include <cjson/cJSON.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "server/engine/engine.h"
#include "server/http/respond.h"
#include "server/kserve/kserve_internal.h"

/* ---- statistics ----------------------------------------------------------------------------- */

typedef struct {
    _Atomic uint64_t count, ns;
} duration_stat;

/* Triton's InferStatistics, per model. An execution is one launch: a job that ran in a batch of
 * n counts 1/n of one (in millionths, so that inference_count / execution_count is the mean
 * batch, as perf_analyzer reads it). */
#define EXEC_UNIT 1000000u
typedef struct {
    _Atomic uint64_t last_ms;      /* ms since the epoch of the last inference */
    _Atomic uint64_t inferences, execution_units;
    duration_stat success, fail, queue, compute_input, compute_infer, compute_output;
} model_stats;

#define MAX_MODELS 8
static model_stats stats[MAX_MODELS];

static size_t model_index(const cr_ks_model *m)
{
    size_t n;
    const cr_ks_model *all = cr_ks_models(&n);
    return (size_t)(m - all);
}

static void add(duration_stat *d, double ms)
{
    atomic_fetch_add(&d->count, 1);
    atomic_fetch_add(&d->ns, (uint64_t)(ms > 0 ? ms * 1e6 : 0));
}

void cr_ks_stats_record(const cr_ks_model *m, const cr_job *j)
{
    size_t i = model_index(m);
    if (i >= MAX_MODELS)
        return;
    model_stats *s = &stats[i];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    atomic_store(&s->last_ms, (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000);
    atomic_fetch_add(&s->inferences, 1);
    if (atomic_load(&j->state) != CR_JOB_DONE) {
        add(&s->fail, j->ms.total);
        return;
    }
    atomic_fetch_add(&s->execution_units, EXEC_UNIT / (uint64_t)(j->batch > 1 ? j->batch : 1));
    add(&s->success, j->ms.receive + j->ms.total); /* Triton's: from the request's arrival */
    add(&s->queue, j->ms.queue);
    add(&s->compute_input, j->ms.h2d);
    add(&s->compute_infer, j->ms.kernel);
    add(&s->compute_output, j->ms.d2h);
}

/* An integer as its digits: a double prints 2^53 and up in exponent form, which perf_analyzer's
 * GetUint64() does not take. */
static void add_u64(cJSON *o, const char *name, uint64_t v)
{
    char s[24];
    snprintf(s, sizeof s, "%llu", (unsigned long long)v);
    cJSON_AddRawToObject(o, name, s);
}

static cJSON *duration_pair(uint64_t count, uint64_t ns)
{
    cJSON *o = cJSON_CreateObject();
    add_u64(o, "count", count);
    add_u64(o, "ns", ns);
    return o;
}

static cr_ks_duration duration_read(const duration_stat *d)
{
    return (cr_ks_duration){atomic_load(&d->count), atomic_load(&d->ns)};
}

void cr_ks_stats_read(const cr_ks_model *m, cr_ks_stats *out)
{
    const model_stats *s = &stats[model_index(m)];
    uint64_t units = atomic_load(&s->execution_units);
    *out = (cr_ks_stats){
        .last_ms = atomic_load(&s->last_ms),
        .inferences = atomic_load(&s->inferences),
        .executions = (units + EXEC_UNIT / 2) / EXEC_UNIT,
        .success = duration_read(&s->success),
        .fail = duration_read(&s->fail),
        .queue = duration_read(&s->queue),
        .compute_input = duration_read(&s->compute_input),
        .compute_infer = duration_read(&s->compute_infer),
        .compute_output = duration_read(&s->compute_output),
    };
}

static cJSON *duration_json(cr_ks_duration d)
{
    return duration_pair(d.count, d.ns);
}

static cJSON *model_stats_json(const cr_ks_model *m)
{
    cr_ks_stats s;
    cr_ks_stats_read(m, &s);
    cJSON *o = cJSON_CreateObject(), *inf = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", m->name);
    cJSON_AddStringToObject(o, "version", "1");
    add_u64(o, "last_inference", s.last_ms);
    add_u64(o, "inference_count", s.inferences);
    add_u64(o, "execution_count", s.executions);
    cJSON_AddItemToObject(inf, "success", duration_json(s.success));
    cJSON_AddItemToObject(inf, "fail", duration_json(s.fail));
    cJSON_AddItemToObject(inf, "queue", duration_json(s.queue));
    cJSON_AddItemToObject(inf, "compute_input", duration_json(s.compute_input));
    cJSON_AddItemToObject(inf, "compute_infer", duration_json(s.compute_infer));
    cJSON_AddItemToObject(inf, "compute_output", duration_json(s.compute_output));
    /* no response cache: Triton reports zeros */
    cJSON_AddItemToObject(inf, "cache_hit", duration_pair(0, 0));
    cJSON_AddItemToObject(inf, "cache_miss", duration_pair(0, 0));
    cJSON_AddItemToObject(o, "inference_stats", inf);
    cJSON_AddItemToObject(o, "response_stats", cJSON_CreateObject());
    cJSON_AddItemToObject(o, "batch_stats", cJSON_CreateArray());
    cJSON_AddItemToObject(o, "memory_usage", cJSON_CreateArray());
    return o;
}

/* The model of /v2/models/{model}[/versions/{v}]/..., NULL with a 404 sent; c->id is NULL for
 * /v2/models/stats (every model). */
static bool find_model(cr_conn *c, const cr_ks_model **out)
{
    *out = NULL;
    if (!c->id)
        return true;
    size_t n = strcspn(c->id, "/");
    const char *rest = c->id + n;
    *out = cr_ks_model_find(c->id, n);
    if (!*out) {
        cr_refuse(c, 404, "not_found", "model", "unknown model \"%.*s\" (models: gemm, ata, histogram)",
                  (int)(n < 64 ? n : 64), c->id);
        return false;
    }
    if (strncmp(rest, "/versions/", 10) == 0 && strncmp(rest + 10, "1/", 2) != 0) {
        cr_refuse(c, 404, "not_found", "version", "model %s has one version, \"1\"", (*out)->name);
        return false;
    }
    return true;
}

enum MHD_Result cr_kserve_model_stats(cr_conn *c)
{
    const cr_ks_model *m;
    if (!find_model(c, &m))
        return MHD_YES;
    cJSON *doc = cJSON_CreateObject(), *list = cJSON_CreateArray();
    size_t n;
    const cr_ks_model *all = cr_ks_models(&n);
    for (size_t i = 0; i < n; i++)
        if (!m || m == &all[i])
            cJSON_AddItemToArray(list, model_stats_json(&all[i]));
    cJSON_AddItemToObject(doc, "model_stats", list);
    return cr_send_cjson(c, 200, doc);
}

/* ---- configuration -------------------------------------------------------------------------- */

/* Triton's config tensor: TYPE_FP32 etc., every dimension variable. */
static cJSON *config_tensor(const cr_ks_tensor *t)
{
    char type[32];
    cJSON *o = cJSON_CreateObject(), *dims = cJSON_CreateArray();
    snprintf(type, sizeof type, "TYPE_%s", t->datatypes[0]);
    cJSON_AddStringToObject(o, "name", t->name);
    cJSON_AddStringToObject(o, "data_type", type);
    for (int d = 0; d < t->rank; d++)
        cJSON_AddItemToArray(dims, cJSON_CreateNumber(-1));
    cJSON_AddItemToObject(o, "dims", dims);
    cJSON_AddBoolToObject(o, "optional", t->optional);
    return o;
}

bool cr_ks_dynamic_batching(const cr_config *cfg, int *sizes, int max, int *n)
{
    *n = 0;
    if (cfg->batch_max < 1)
        return false;
    *n = cr_config_preferred(cfg, sizes, max);
    *n = *n < max ? *n : max;
    return true;
}

/* The engine's dynamic batcher as Triton describes its own (--batch-delay-us, --batch-preferred);
 * max_batch_size stays 0: batching joins whole requests, a request has no batch dimension. */
static void add_batching(cJSON *doc, const cr_config *cfg)
{
    int sizes[32], n;
    if (!cr_ks_dynamic_batching(cfg, sizes, 32, &n))
        return;
    cJSON *db = cJSON_CreateObject(), *pref = cJSON_CreateArray();
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(pref, cJSON_CreateNumber(sizes[i]));
    cJSON_AddItemToObject(db, "preferred_batch_size", pref);
    cJSON_AddNumberToObject(db, "max_queue_delay_microseconds", cfg->batch_delay_us);
    cJSON_AddNumberToObject(db, "max_batch_jobs", cfg->batch_max);
    cJSON_AddItemToObject(doc, "dynamic_batching", db);
}

enum MHD_Result cr_kserve_model_config(cr_conn *c)
{
    const cr_ks_model *m;
    if (!find_model(c, &m))
        return MHD_YES;
    cJSON *doc = cJSON_CreateObject(), *in = cJSON_CreateArray(), *out = cJSON_CreateArray();
    cJSON *policy = cJSON_CreateObject(), *latest = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "name", m->name);
    cJSON_AddStringToObject(doc, "platform", "crunchd");
    cJSON_AddStringToObject(doc, "backend", cr_engine_backend(c->h->deps.engine)->name);
    cJSON_AddNumberToObject(latest, "num_versions", 1);
    cJSON_AddItemToObject(policy, "latest", latest);
    cJSON_AddItemToObject(doc, "version_policy", policy);
    cJSON_AddNumberToObject(doc, "max_batch_size", 0);
    for (int i = 0; i < m->n_inputs; i++)
        cJSON_AddItemToArray(in, config_tensor(&m->inputs[i]));
    for (int i = 0; i < m->n_outputs; i++)
        cJSON_AddItemToArray(out, config_tensor(&m->outputs[i]));
    cJSON_AddItemToObject(doc, "input", in);
    cJSON_AddItemToObject(doc, "output", out);
    add_batching(doc, c->h->deps.cfg);
    return cr_send_cjson(c, 200, doc);
}

/* ---- repository ----------------------------------------------------------------------------- */

enum MHD_Result cr_kserve_repository_index(cr_conn *c)
{
    const char *reason = "";
    bool ready = cr_engine_ready(c->h->deps.engine, &reason);
    cJSON *list = cJSON_CreateArray();
    size_t n;
    const cr_ks_model *all = cr_ks_models(&n);
    for (size_t i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", all[i].name);
        cJSON_AddStringToObject(o, "version", "1");
        cJSON_AddStringToObject(o, "state", ready ? "READY" : "UNAVAILABLE");
        if (!ready)
            cJSON_AddStringToObject(o, "reason", reason);
        cJSON_AddItemToArray(list, o);
    }
    return cr_send_cjson(c, 200, list);
}

enum MHD_Result cr_kserve_repository_load(cr_conn *c)
{
    const cr_ks_model *m;
    if (!find_model(c, &m))
        return MHD_YES;
    return cr_refuse(c, 400, "unsupported", "model",
                     "model %s is built in and always loaded: load and unload do not apply", m->name);
}
