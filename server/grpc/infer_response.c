/* The answer to a finished inference; see infer_response.h. */
#include "server/grpc/infer_response.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/grpc/grpc_service.pb-c.h"
#include "server/grpc/grpc_frame.h"
#include "server/grpc/pb_wire.h"

enum { RAW_OUTPUT_CONTENTS = 6, INFER_RESPONSE = 2 };

/* Small parts (prefix, packed fields, entry headers) in head; tensors where they lie. */
typedef struct {
    cr_grpc_out out;
    cr_job *job;
    void *edges;
    uint8_t *head;
} answer;

static void answer_free(cr_grpc_hold *h)
{
    answer *a = (answer *)h;
    cr_job_release(a->job);
    free(a->edges);
    free(a->head);
    free(a);
}

/* The fields of ModelInferResponse that protobuf-c packs: everything but raw_output_contents. */
typedef struct {
    Inference__ModelInferResponse r;
    Inference__ModelInferResponse__InferOutputTensor t[CR_KS_MAX_IO], *tp[CR_KS_MAX_IO];
    int64_t dims[CR_KS_MAX_IO][CR_RANK_MAX];
    Inference__ModelInferResponse__ParametersEntry e[5], *ep[5];
    Inference__InferParameter v[5];
    char batch[24];
} header_parts;

static void string_param(header_parts *h, int i, const char *key, const char *value)
{
    h->v[i] = (Inference__InferParameter)INFERENCE__INFER_PARAMETER__INIT;
    h->v[i].parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM;
    h->v[i].string_param = (char *)value;
    h->e[i] = (Inference__ModelInferResponse__ParametersEntry)INFERENCE__MODEL_INFER_RESPONSE__PARAMETERS_ENTRY__INIT;
    h->e[i].key = (char *)key;
    h->e[i].value = &h->v[i];
    h->ep[i] = &h->e[i];
}

static void header_of(const cr_job *j, const cr_ks_spec *s, const char *backend, const cr_ks_output *ts,
                      header_parts *h)
{
    Inference__ModelInferResponse *r = &h->r;
    *r = (Inference__ModelInferResponse)INFERENCE__MODEL_INFER_RESPONSE__INIT;
    r->model_name = (char *)s->model->name;
    r->model_version = "1";
    r->id = s->id ? s->id : "";
    string_param(h, 0, "job_id", j->id);
    string_param(h, 1, "kernel", cr_job_kernel_name(j) ? cr_job_kernel_name(j) : "");
    string_param(h, 2, "backend", backend);
    string_param(h, 3, "device", j->device);
    string_param(h, 4, "batch", "");
    h->v[4].parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
    h->v[4].int64_param = j->batch > 0 ? j->batch : 1;
    r->n_parameters = 5;
    r->parameters = h->ep;
    size_t n = 0;
    for (int k = 0; k < s->model->n_outputs; k++) {
        if (!s->want[k])
            continue;
        Inference__ModelInferResponse__InferOutputTensor *t = h->tp[n] = &h->t[n];
        *t = (Inference__ModelInferResponse__InferOutputTensor)INFERENCE__MODEL_INFER_RESPONSE__INFER_OUTPUT_TENSOR__INIT;
        t->name = (char *)ts[k].name;
        t->datatype = (char *)cr_ks_datatype_name(ts[k].dt);
        for (int d = 0; d < ts[k].shape.rank; d++)
            h->dims[n][d] = ts[k].shape.dims[d];
        t->n_shape = (size_t)ts[k].shape.rank;
        t->shape = h->dims[n];
        n++;
    }
    r->n_outputs = n;
    r->outputs = h->tp;
}

/* Bytes of output k in the answer: none for one in shared memory, it is there already. */
static uint64_t raw_bytes(const cr_ks_spec *s, const cr_ks_output *ts, int k)
{
    return s->shm[k].on ? 0 : ts[k].count * cr_dtype_size(ts[k].dt);
}

/* Lays the answer out: head = prefix, [stream wrapper], packed fields, then each entry's header
 * with the tensor after it as its own span. */
static int lay_out(answer *a, const header_parts *h, const cr_ks_spec *s, const cr_ks_output *ts, bool stream,
                   cr_error *err)
{
    size_t packed = inference__model_infer_response__get_packed_size(&h->r);
    uint64_t inner = packed;
    for (int k = 0; k < s->model->n_outputs; k++)
        if (s->want[k])
            inner += cr_pb_len_field_size(RAW_OUTPUT_CONTENTS, raw_bytes(s, ts, k));
    uint64_t total = stream ? cr_pb_len_field_size(INFER_RESPONSE, inner) : inner;
    if (total > CR_GRPC_MESSAGE_MAX)
        return cr_fail(err, 413, "too_large", "outputs", "the answer would be %llu bytes, over gRPC's 2 GiB",
                       (unsigned long long)total);
    if (!(a->head = malloc(5 + 15 + packed + 15 * CR_KS_MAX_IO)))
        return cr_fail(err, 503, "host_memory", "", "out of memory for the answer");
    uint8_t *p = a->head, *span_start = p;
    cr_grpc_put_prefix(p, total);
    p += 5;
    if (stream)
        p += cr_pb_put_len_header(p, INFER_RESPONSE, inner);
    p += inference__model_infer_response__pack(&h->r, p);
    cr_grpc_out *o = &a->out;
    for (int k = 0; k < s->model->n_outputs; k++) {
        if (!s->want[k])
            continue;
        uint64_t n = raw_bytes(s, ts, k);
        p += cr_pb_put_len_header(p, RAW_OUTPUT_CONTENTS, n);
        o->iov[o->n++] = (struct iovec){span_start, (size_t)(p - span_start)};
        if (n)
            o->iov[o->n++] = (struct iovec){(void *)ts[k].data, (size_t)n};
        span_start = p;
    }
    if (p > span_start)
        o->iov[o->n++] = (struct iovec){span_start, (size_t)(p - span_start)};
    o->len = 5 + total;
    return 0;
}

cr_grpc_out *cr_grpc_infer_answer(cr_job *j, const cr_ks_spec *s, const char *backend, bool stream, cr_error *err)
{
    answer *a = calloc(1, sizeof *a);
    header_parts *h = calloc(1, sizeof *h);
    cr_ks_output ts[CR_KS_MAX_IO];
    if (!a || !h) {
        cr_fail(err, 503, "host_memory", "", "out of memory for the answer");
        goto fail;
    }
    a->out.hold = (cr_grpc_hold){1, answer_free};
    cr_job_ref(j);
    a->job = j;
    if (cr_ks_outputs(j, s, ts, &a->edges) < 0) {
        cr_fail(err, 503, "host_memory", "", "out of memory writing the outputs");
        goto fail;
    }
    header_of(j, s, backend, ts, h);
    if (lay_out(a, h, s, ts, stream, err) < 0)
        goto fail;
    free(h);
    return &a->out;
fail:
    free(h);
    if (a && a->job)
        answer_free(&a->out.hold);
    else
        free(a);
    return NULL;
}

cr_grpc_out *cr_grpc_stream_error(const char *id, const char *message)
{
    Inference__ModelInferResponse inner = INFERENCE__MODEL_INFER_RESPONSE__INIT;
    inner.id = (char *)(id ? id : "");
    Inference__ModelStreamInferResponse r = INFERENCE__MODEL_STREAM_INFER_RESPONSE__INIT;
    r.error_message = (char *)message;
    r.infer_response = &inner;
    uint8_t *body;
    cr_grpc_out *o = cr_grpc_out_bytes(inference__model_stream_infer_response__get_packed_size(&r), &body);
    if (o)
        inference__model_stream_infer_response__pack(&r, body);
    return o;
}
