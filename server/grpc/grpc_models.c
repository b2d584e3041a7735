/* The server's and the models' health, metadata, configuration and statistics, and the model
 * repository, over gRPC (grpc_handlers.h): the answers of /v2's routes (server/kserve/), in
 * Triton's messages. Every answer is built on the stack and packed once. */
#include <stdio.h>
#include <string.h>

#include "api/grpc/grpc_service.pb-c.h"
#include "server/grpc/grpc_handlers.h"
#include "server/grpc/grpc_pb.h"
#include "server/kserve/kserve_internal.h"

#define UNPACK(type, fn, c, m) ((type *)cr_grpc_unpack((c), &fn##__descriptor, (m)))

/* The model named, version "" or "1" (its only one); NULL with the call ended NOT_FOUND. */
static const cr_ks_model *find_model(cr_grpc_call *c, const char *name, const char *version)
{
    const cr_ks_model *m = cr_ks_model_find(name, strlen(name));
    if (!m) {
        cr_grpc_failf(c, 404, "not_found", "model", "unknown model \"%.64s\" (models: gemm, ata, histogram)", name);
        return NULL;
    }
    if (version[0] && strcmp(version, "1") != 0) {
        cr_grpc_failf(c, 404, "not_found", "version", "model %s has one version, \"1\" (asked: \"%.16s\")", m->name,
                      version);
        return NULL;
    }
    return m;
}

static bool engine_ready(cr_grpc_call *c)
{
    const char *reason = "";
    return cr_engine_ready(c->srv->engine, &reason);
}

/* ---- health and metadata -------------------------------------------------------------------- */

void cr_grpc_server_live(cr_grpc_call *c, cr_grpc_msg *m)
{
    Inference__ServerLiveRequest *rq = UNPACK(Inference__ServerLiveRequest, inference__server_live_request, c, m);
    if (!rq)
        return;
    inference__server_live_request__free_unpacked(rq, NULL);
    Inference__ServerLiveResponse r = INFERENCE__SERVER_LIVE_RESPONSE__INIT;
    r.live = 1;
    cr_grpc_reply_pb(c, &r.base);
}

void cr_grpc_server_ready(cr_grpc_call *c, cr_grpc_msg *m)
{
    Inference__ServerReadyRequest *rq = UNPACK(Inference__ServerReadyRequest, inference__server_ready_request, c, m);
    if (!rq)
        return;
    inference__server_ready_request__free_unpacked(rq, NULL);
    Inference__ServerReadyResponse r = INFERENCE__SERVER_READY_RESPONSE__INIT;
    r.ready = engine_ready(c);
    cr_grpc_reply_pb(c, &r.base);
}

void cr_grpc_model_ready(cr_grpc_call *c, cr_grpc_msg *m)
{
    Inference__ModelReadyRequest *rq = UNPACK(Inference__ModelReadyRequest, inference__model_ready_request, c, m);
    if (!rq)
        return;
    const cr_ks_model *model = find_model(c, rq->name, rq->version);
    inference__model_ready_request__free_unpacked(rq, NULL);
    if (!model)
        return;
    Inference__ModelReadyResponse r = INFERENCE__MODEL_READY_RESPONSE__INIT;
    r.ready = engine_ready(c);
    cr_grpc_reply_pb(c, &r.base);
}

void cr_grpc_server_metadata(cr_grpc_call *c, cr_grpc_msg *m)
{
    Inference__ServerMetadataRequest *rq =
        UNPACK(Inference__ServerMetadataRequest, inference__server_metadata_request, c, m);
    if (!rq)
        return;
    inference__server_metadata_request__free_unpacked(rq, NULL);
    const char *ext[8];
    Inference__ServerMetadataResponse r = INFERENCE__SERVER_METADATA_RESPONSE__INIT;
    r.name = "crunchd";
    r.version = CRUNCHD_VERSION;
    r.n_extensions = cr_ks_extensions(cr_engine_backend(c->srv->engine), ext, 8);
    r.extensions = (char **)ext;
    cr_grpc_reply_pb(c, &r.base);
}

/* Every dimension variable, as /v2 says it. */
static const int64_t variable[] = {-1, -1, -1, -1, -1, -1, -1, -1};
_Static_assert(sizeof variable / sizeof variable[0] >= CR_RANK_MAX, "a -1 for every dimension");
#define variable_dims ((int64_t *)variable) /* protobuf-c's messages are not const; it only reads */

static void tensor_metadata(const cr_ks_tensor *t, Inference__ModelMetadataResponse__TensorMetadata *out)
{
    *out = (Inference__ModelMetadataResponse__TensorMetadata)INFERENCE__MODEL_METADATA_RESPONSE__TENSOR_METADATA__INIT;
    out->name = (char *)t->name;
    out->datatype = (char *)t->datatypes[0];
    out->n_shape = (size_t)t->rank;
    out->shape = variable_dims;
}

void cr_grpc_model_metadata(cr_grpc_call *c, cr_grpc_msg *m)
{
    Inference__ModelMetadataRequest *rq =
        UNPACK(Inference__ModelMetadataRequest, inference__model_metadata_request, c, m);
    if (!rq)
        return;
    const cr_ks_model *model = find_model(c, rq->name, rq->version);
    inference__model_metadata_request__free_unpacked(rq, NULL);
    if (!model)
        return;
    Inference__ModelMetadataResponse__TensorMetadata in[CR_KS_MAX_IO], out[CR_KS_MAX_IO];
    Inference__ModelMetadataResponse__TensorMetadata *inp[CR_KS_MAX_IO], *outp[CR_KS_MAX_IO];
    for (int i = 0; i < model->n_inputs; i++)
        tensor_metadata(&model->inputs[i], inp[i] = &in[i]);
    for (int i = 0; i < model->n_outputs; i++)
        tensor_metadata(&model->outputs[i], outp[i] = &out[i]);
    static char *versions[] = {"1"};
    Inference__ModelMetadataResponse r = INFERENCE__MODEL_METADATA_RESPONSE__INIT;
    r.name = (char *)model->name;
    r.n_versions = 1;
    r.versions = versions;
    r.platform = "crunchd";
    r.n_inputs = (size_t)model->n_inputs;
    r.inputs = inp;
    r.n_outputs = (size_t)model->n_outputs;
    r.outputs = outp;
    cr_grpc_reply_pb(c, &r.base);
}

/* ---- configuration -------------------------------------------------------------------------- */

/* "FP32" -> TYPE_FP32, Triton's config type of a KServe datatype. */
static int config_type(const char *datatype)
{
    char name[32];
    snprintf(name, sizeof name, "TYPE_%s", datatype);
    const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value_by_name(&inference__data_type__descriptor, name);
    return v ? v->value : INFERENCE__DATA_TYPE__TYPE_INVALID;
}

typedef struct {
    Inference__ModelInput in[CR_KS_MAX_IO], *inp[CR_KS_MAX_IO];
    Inference__ModelOutput out[CR_KS_MAX_IO], *outp[CR_KS_MAX_IO];
    Inference__ModelVersionPolicy policy;
    Inference__ModelVersionPolicy__Latest latest;
    Inference__ModelDynamicBatching batching;
    int32_t sizes[32];
    Inference__ModelConfig config;
} config_parts;

static void config_tensors(const cr_ks_model *model, config_parts *p)
{
    for (int i = 0; i < model->n_inputs; i++) {
        const cr_ks_tensor *t = &model->inputs[i];
        Inference__ModelInput *x = p->inp[i] = &p->in[i];
        *x = (Inference__ModelInput)INFERENCE__MODEL_INPUT__INIT;
        x->name = (char *)t->name;
        x->data_type = config_type(t->datatypes[0]);
        x->n_dims = (size_t)t->rank;
        x->dims = variable_dims;
        x->optional = t->optional;
    }
    for (int i = 0; i < model->n_outputs; i++) {
        const cr_ks_tensor *t = &model->outputs[i];
        Inference__ModelOutput *x = p->outp[i] = &p->out[i];
        *x = (Inference__ModelOutput)INFERENCE__MODEL_OUTPUT__INIT;
        x->name = (char *)t->name;
        x->data_type = config_type(t->datatypes[0]);
        x->n_dims = (size_t)t->rank;
        x->dims = variable_dims;
    }
}

/* What GET /v2/models/{m}/config answers (kserve_repo.c), max_batch_size 0 included: batching
 * joins whole requests, a request has no batch dimension. */
static void config_of(cr_grpc_call *c, const cr_ks_model *model, config_parts *p)
{
    config_tensors(model, p);
    p->latest = (Inference__ModelVersionPolicy__Latest)INFERENCE__MODEL_VERSION_POLICY__LATEST__INIT;
    p->latest.num_versions = 1;
    p->policy = (Inference__ModelVersionPolicy)INFERENCE__MODEL_VERSION_POLICY__INIT;
    p->policy.policy_choice_case = INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_LATEST;
    p->policy.latest = &p->latest;
    Inference__ModelConfig *cf = &p->config;
    *cf = (Inference__ModelConfig)INFERENCE__MODEL_CONFIG__INIT;
    cf->name = (char *)model->name;
    cf->platform = "crunchd";
    cf->backend = (char *)cr_engine_backend(c->srv->engine)->name;
    cf->version_policy = &p->policy;
    cf->n_input = (size_t)model->n_inputs;
    cf->input = p->inp;
    cf->n_output = (size_t)model->n_outputs;
    cf->output = p->outp;
    int sizes[32], n;
    if (!cr_ks_dynamic_batching(c->srv->cfg, sizes, 32, &n))
        return;
    p->batching = (Inference__ModelDynamicBatching)INFERENCE__MODEL_DYNAMIC_BATCHING__INIT;
    for (int i = 0; i < n; i++)
        p->sizes[i] = sizes[i];
    p->batching.n_preferred_batch_size = (size_t)n;
    p->batching.preferred_batch_size = p->sizes;
    p->batching.max_queue_delay_microseconds = (uint64_t)c->srv->cfg->batch_delay_us;
    cf->scheduling_choice_case = INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_DYNAMIC_BATCHING;
    cf->dynamic_batching = &p->batching;
}

void cr_grpc_model_config(cr_grpc_call *c, cr_grpc_msg *m)
{
    Inference__ModelConfigRequest *rq = UNPACK(Inference__ModelConfigRequest, inference__model_config_request, c, m);
    if (!rq)
        return;
    const cr_ks_model *model = find_model(c, rq->name, rq->version);
    inference__model_config_request__free_unpacked(rq, NULL);
    if (!model)
        return;
    config_parts p;
    config_of(c, model, &p);
    Inference__ModelConfigResponse r = INFERENCE__MODEL_CONFIG_RESPONSE__INIT;
    r.config = &p.config;
    cr_grpc_reply_pb(c, &r.base);
}

/* ---- statistics ----------------------------------------------------------------------------- */

enum { N_DURATIONS = 8 };

typedef struct {
    Inference__StatisticDuration d[N_DURATIONS];
    Inference__InferStatistics inf;
    Inference__ModelStatistics ms;
} stats_parts;

static Inference__StatisticDuration *duration(Inference__StatisticDuration *d, cr_ks_duration v)
{
    *d = (Inference__StatisticDuration)INFERENCE__STATISTIC_DURATION__INIT;
    d->count = v.count;
    d->ns = v.ns;
    return d;
}

/* The same counters as /v2/models/{m}/stats; no response cache: its two are zeros. */
static void stats_of(const cr_ks_model *model, stats_parts *p)
{
    cr_ks_stats s;
    cr_ks_stats_read(model, &s);
    cr_ks_duration zero = {0, 0};
    Inference__InferStatistics *inf = &p->inf;
    *inf = (Inference__InferStatistics)INFERENCE__INFER_STATISTICS__INIT;
    inf->success = duration(&p->d[0], s.success);
    inf->fail = duration(&p->d[1], s.fail);
    inf->queue = duration(&p->d[2], s.queue);
    inf->compute_input = duration(&p->d[3], s.compute_input);
    inf->compute_infer = duration(&p->d[4], s.compute_infer);
    inf->compute_output = duration(&p->d[5], s.compute_output);
    inf->cache_hit = duration(&p->d[6], zero);
    inf->cache_miss = duration(&p->d[7], zero);
    Inference__ModelStatistics *ms = &p->ms;
    *ms = (Inference__ModelStatistics)INFERENCE__MODEL_STATISTICS__INIT;
    ms->name = (char *)model->name;
    ms->version = "1";
    ms->last_inference = s.last_ms;
    ms->inference_count = s.inferences;
    ms->execution_count = s.executions;
    ms->inference_stats = inf;
}

void cr_grpc_model_statistics(cr_grpc_call *c, cr_grpc_msg *m)
{
    Inference__ModelStatisticsRequest *rq =
        UNPACK(Inference__ModelStatisticsRequest, inference__model_statistics_request, c, m);
    if (!rq)
        return;
    const cr_ks_model *only = NULL;
    bool ok = true;
    if (rq->name[0]) /* none: every model */
        ok = (only = find_model(c, rq->name, rq->version)) != NULL;
    inference__model_statistics_request__free_unpacked(rq, NULL);
    if (!ok)
        return;
    size_t n_models;
    const cr_ks_model *all = cr_ks_models(&n_models);
    stats_parts parts[8];
    Inference__ModelStatistics *list[8];
    size_t n = 0;
    for (size_t i = 0; i < n_models && n < 8; i++)
        if (!only || only == &all[i]) {
            stats_of(&all[i], &parts[n]);
            list[n] = &parts[n].ms;
            n++;
        }
    Inference__ModelStatisticsResponse r = INFERENCE__MODEL_STATISTICS_RESPONSE__INIT;
    r.n_model_stats = n;
    r.model_stats = list;
    cr_grpc_reply_pb(c, &r.base);
}

/* ---- repository ----------------------------------------------------------------------------- */

void cr_grpc_repository_index(cr_grpc_call *c, cr_grpc_msg *m)
{
    Inference__RepositoryIndexRequest *rq =
        UNPACK(Inference__RepositoryIndexRequest, inference__repository_index_request, c, m);
    if (!rq)
        return;
    bool ready_only = rq->ready;
    inference__repository_index_request__free_unpacked(rq, NULL);
    const char *reason = "";
    bool ready = cr_engine_ready(c->srv->engine, &reason);
    size_t n_models, n = 0;
    const cr_ks_model *all = cr_ks_models(&n_models);
    Inference__RepositoryIndexResponse__ModelIndex idx[8], *list[8];
    for (size_t i = 0; i < n_models && i < 8 && (ready || !ready_only); i++) {
        Inference__RepositoryIndexResponse__ModelIndex *x = list[n] = &idx[n];
        *x = (Inference__RepositoryIndexResponse__ModelIndex)INFERENCE__REPOSITORY_INDEX_RESPONSE__MODEL_INDEX__INIT;
        x->name = (char *)all[i].name;
        x->version = "1";
        x->state = ready ? "READY" : "UNAVAILABLE";
        x->reason = ready ? "" : (char *)reason;
        n++;
    }
    Inference__RepositoryIndexResponse r = INFERENCE__REPOSITORY_INDEX_RESPONSE__INIT;
    r.n_models = n;
    r.models = list;
    cr_grpc_reply_pb(c, &r.base);
}

/* The models are the engine's ops: always loaded, as /v2/repository/models/{m}/load says. */
static void refuse_load(cr_grpc_call *c, const char *name)
{
    const cr_ks_model *model = find_model(c, name, "");
    if (model)
        cr_grpc_failf(c, 400, "unsupported", "model",
                      "model %s is built in and always loaded: load and unload do not apply", model->name);
}

void cr_grpc_repository_load(cr_grpc_call *c, cr_grpc_msg *m)
{
    Inference__RepositoryModelLoadRequest *rq =
        UNPACK(Inference__RepositoryModelLoadRequest, inference__repository_model_load_request, c, m);
    if (!rq)
        return;
    refuse_load(c, rq->model_name);
    inference__repository_model_load_request__free_unpacked(rq, NULL);
}

void cr_grpc_repository_unload(cr_grpc_call *c, cr_grpc_msg *m)
{
    Inference__RepositoryModelUnloadRequest *rq =
        UNPACK(Inference__RepositoryModelUnloadRequest, inference__repository_model_unload_request, c, m);
    if (!rq)
        return;
    refuse_load(c, rq->model_name);
    inference__repository_model_unload_request__free_unpacked(rq, NULL);
}
