/* ModelInferRequest -> cr_request; see infer_request.h. */
#include "server/grpc/infer_request.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/grpc/grpc_service.pb-c.h"
#include "server/codec/json_buf.h"
#include "server/grpc/infer_contents.h"
#include "server/grpc/pb_wire.h"

/* More than any model takes: the decoder names the extra ones. */
#define MAX_TENSORS 64

enum { RAW_INPUT_CONTENTS = 7, REQUEST_ID = 3 };

typedef struct {
    size_t off, len;
} span;

/* A tensor's bytes in the decoder's binary section: where they lie. */
typedef struct {
    uint64_t at;
    const uint8_t *p;
    size_t len;
    bool in_message; /* a raw_input_contents entry (else typed contents turned into bytes) */
} piece;

typedef struct {
    const uint8_t *msg;
    size_t len;
    cr_grpc_buf *buf; /* the message's memory, which a tensor may borrow */
    span raw[MAX_TENSORS];
    size_t n_raw;
    uint8_t *rest_copy;      /* the other fields, when raw_input_contents were not all at the end */
    const uint8_t *rest;
    size_t rest_len;
    Inference__ModelInferRequest *rq;
    piece pieces[MAX_TENSORS];
    size_t n_pieces;
    uint64_t bin_len;
    void *owned[MAX_TENSORS]; /* typed contents turned into bytes */
    size_t n_owned;
    const cr_limits *lim;
} infer_in;

static int malformed(cr_error *err, const char *what)
{
    return cr_fail(err, 400, "invalid_field", "message", "the ModelInferRequest message is malformed (%s)", what);
}

/* ---- the top-level fields -------------------------------------------------------------------- */

/* Records every raw_input_contents entry; the rest of the message is the other fields, in place
 * when the raw entries come last (what every protobuf library writes: fields in number order),
 * else copied together (they are small: names, shapes, parameters). */
static int scan(infer_in *in, cr_error *err)
{
    size_t at = 0, first_raw = SIZE_MAX, raw_bytes = 0;
    bool after_raw = false;
    cr_pb_field f;
    while (at < in->len) {
        if (!cr_pb_next(in->msg, in->len, at, &f))
            return malformed(err, "a field is cut short or invalid");
        if (f.number == RAW_INPUT_CONTENTS) {
            if (f.type != CR_PB_LEN)
                return malformed(err, "raw_input_contents is not bytes");
            if (in->n_raw == MAX_TENSORS)
                return cr_fail(err, 400, "invalid_field", "raw_input_contents",
                               "more than %d raw_input_contents", MAX_TENSORS);
            in->raw[in->n_raw++] = (span){f.value, f.len};
            raw_bytes += f.end - f.start;
            first_raw = first_raw == SIZE_MAX ? f.start : first_raw;
        } else if (first_raw != SIZE_MAX) {
            after_raw = true;
        }
        at = f.end;
    }
    if (!after_raw) {
        in->rest = in->msg;
        in->rest_len = first_raw == SIZE_MAX ? in->len : first_raw;
        return 0;
    }
    if (!(in->rest_copy = malloc(in->len - raw_bytes + 1)))
        return cr_fail(err, 503, "host_memory", "", "out of memory");
    for (at = 0; at < in->len; at = f.end) {
        cr_pb_next(in->msg, in->len, at, &f); /* valid: scanned above */
        if (f.number != RAW_INPUT_CONTENTS) {
            memcpy(in->rest_copy + in->rest_len, in->msg + f.start, f.end - f.start);
            in->rest_len += f.end - f.start;
        }
    }
    in->rest = in->rest_copy;
    return 0;
}

void cr_grpc_infer_id(const uint8_t *msg, size_t len, char *out, size_t n)
{
    cr_pb_field f;
    out[0] = '\0';
    for (size_t at = 0; at < len && cr_pb_next(msg, len, at, &f); at = f.end)
        if (f.number == REQUEST_ID && f.type == CR_PB_LEN) {
            snprintf(out, n, "%.*s", (int)(f.len < n ? f.len : n - 1), (const char *)msg + f.value);
            return;
        }
}

/* ---- the tensors' bytes ---------------------------------------------------------------------- */

static bool has_param(Inference__ModelInferRequest__InferInputTensor__ParametersEntry **p, size_t n, const char *k)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(p[i]->key, k) == 0)
            return true;
    return false;
}

/* The elements and bytes the shape and datatype make; false when they make no count the limits
 * allow (an unknown datatype, a negative or huge dimension): the decoder then says what is wrong. */
static bool declared_size(const Inference__ModelInferRequest__InferInputTensor *t, const cr_limits *lim,
                          uint64_t *count, uint64_t *bytes)
{
    cr_dtype dt;
    if (cr_ks_datatype_parse(t->datatype, &dt) != 0)
        return false;
    *count = 1;
    for (size_t d = 0; d < t->n_shape; d++)
        if (t->shape[d] < 0 || __builtin_mul_overflow(*count, (uint64_t)t->shape[d], count) ||
            *count > lim->max_elements)
            return false;
    *bytes = *count * cr_dtype_size(dt);
    return true;
}

/* The bytes an input's shape and datatype make must be the bytes it came with (said here in
 * gRPC's terms; the decoder would speak of binary_data_size). raw_index < 0: typed contents. */
static int check_size(const infer_in *in, const Inference__ModelInferRequest__InferInputTensor *t, size_t got,
                      long raw_index, cr_error *err)
{
    uint64_t count, want;
    if (!declared_size(t, in->lim, &count, &want) || want == got)
        return 0;
    if (raw_index >= 0)
        return cr_fail(err, 400, "invalid_field", t->name,
                       "input %s: raw_input_contents[%ld] holds %zu bytes but its shape and datatype %s make %" PRIu64,
                       t->name, raw_index, got, t->datatype, want);
    size_t es = count ? (size_t)(want / count) : 1;
    return cr_fail(err, 400, "invalid_field", t->name,
                   "input %s: contents holds %zu values but its shape makes %" PRIu64, t->name, got / es, count);
}

static void add_piece(infer_in *in, const void *p, size_t len, bool in_message)
{
    in->pieces[in->n_pieces++] = (piece){in->bin_len, p, len, in_message};
    in->bin_len += len;
}

static int typed_piece(infer_in *in, const Inference__ModelInferRequest__InferInputTensor *t, bool *has,
                       cr_error *err)
{
    cr_dtype dt;
    *has = false;
    if (in->n_raw)
        return cr_fail(err, 400, "invalid_field", t->name, "input %s: contents and raw_input_contents exclude each "
                       "other (a request sends every tensor one way)", t->name);
    if (cr_ks_datatype_parse(t->datatype, &dt) != 0)
        return 0; /* a datatype crunchd does not take: the decoder refuses it by name */
    const void *bytes;
    size_t len;
    void *owned = NULL;
    if (cr_grpc_contents_bytes(t->contents, t->datatype, t->name, &bytes, &len, &owned, err) < 0)
        return -1;
    if (owned)
        in->owned[in->n_owned++] = owned;
    if (check_size(in, t, len, -1, err) < 0)
        return -1;
    add_piece(in, bytes, len, false);
    return *has = true, 0;
}

/* Each input's data, as Triton pairs them: an input in shared memory has none in the message,
 * one with contents has those, and the others take the raw_input_contents in order. has[i]:
 * whether input i has bytes in the binary section. */
static int collect_pieces(infer_in *in, bool *has, cr_error *err)
{
    const Inference__ModelInferRequest *rq = in->rq;
    size_t next_raw = 0;
    for (size_t i = 0; i < rq->n_inputs; i++) {
        const Inference__ModelInferRequest__InferInputTensor *t = rq->inputs[i];
        has[i] = false;
        if (has_param(t->parameters, t->n_parameters, "binary_data_size"))
            return cr_fail(err, 400, "invalid_field", t->name, "input %s: binary_data_size is HTTP's parameter; over "
                           "gRPC a tensor's bytes are its raw_input_contents entry", t->name);
        /* its data is elsewhere: a shared-memory region, or a resident tensor */
        bool shm = has_param(t->parameters, t->n_parameters, "shared_memory_region");
        if (shm || has_param(t->parameters, t->n_parameters, "tensor")) {
            if (t->contents)
                return cr_fail(err, 400, "invalid_field", t->name, "input %s: contents and %s exclude each other",
                               t->name, shm ? "shared memory" : "a resident tensor");
            continue;
        }
        if (t->contents) {
            if (typed_piece(in, t, &has[i], err) < 0)
                return -1;
            continue;
        }
        if (next_raw == in->n_raw)
            return cr_fail(err, 400, "missing_field", t->name, "input %s has no data: give it a raw_input_contents "
                           "entry, contents, or shared_memory_region", t->name);
        span s = in->raw[next_raw];
        if (check_size(in, t, s.len, (long)next_raw, err) < 0)
            return -1;
        add_piece(in, in->msg + s.off, s.len, true);
        next_raw++;
        has[i] = true;
    }
    if (next_raw != in->n_raw)
        return cr_fail(err, 400, "invalid_field", "raw_input_contents", "%zu raw_input_contents for %zu input(s) "
                       "without shared memory or contents", in->n_raw, next_raw);
    return 0;
}

/* ---- the JSON header -------------------------------------------------------------------------- */

/* A signed integer in JSON (numfmt's digits: snprintf cost more than the rest of a small header). */
static void put_i64(cr_jbuf *b, int64_t v)
{
    if (v < 0)
        cr_jbuf_put(b, "-", 1);
    cr_jbuf_u64(b, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v);
}

static int param_value(cr_jbuf *b, const char *key, const Inference__InferParameter *v, cr_error *err)
{
    switch (v ? v->parameter_choice_case : INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE__NOT_SET) {
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM:
        cr_jbuf_lit(b, v->bool_param ? "true" : "false");
        return 0;
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM:
        put_i64(b, v->int64_param);
        return 0;
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM:
        cr_jbuf_u64(b, v->uint64_param);
        return 0;
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_DOUBLE_PARAM:
        if (!isfinite(v->double_param))
            return cr_fail(err, 400, "non_finite", "parameters", "parameter %.64s is not finite", key);
        cr_jbuf_f64(b, v->double_param);
        return 0;
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM:
        cr_jbuf_string(b, v->string_param);
        return 0;
    default:
        return cr_fail(err, 400, "invalid_field", "parameters", "parameter %.64s has no value", key);
    }
}

/* A parameters map ({key, value} entries of any of the three map types: the same layout). */
typedef struct {
    ProtobufCMessage base;
    char *key;
    Inference__InferParameter *value;
} param_entry;

/* Triton's gRPC front's own parameter, which perf_analyzer sends on every streamed request: an
 * empty final response for decoupled models, which ours are not. Taken (a bool) and dropped;
 * every other parameter goes to the decoder, which refuses the ones it does not know by name. */
static bool frontend_param(const param_entry *e, cr_error *err, int *rc)
{
    if (strcmp(e->key, "triton_enable_empty_final_response") != 0)
        return false;
    *rc = e->value && e->value->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM
              ? 0
              : cr_fail(err, 400, "invalid_field", e->key, "parameter %s must be a bool", e->key);
    return true;
}

static int params_json(cr_jbuf *b, void *const *entries, size_t n, uint64_t binary_size, bool binary,
                       cr_error *err)
{
    size_t kept = 0;
    int rc = 0;
    if (!n && !binary)
        return 0;
    cr_jbuf_lit(b, ",\"parameters\":{");
    for (size_t i = 0; i < n; i++) {
        const param_entry *e = entries[i];
        if (frontend_param(e, err, &rc)) {
            if (rc < 0)
                return -1;
            continue;
        }
        cr_jbuf_key(b, e->key, kept++ == 0);
        if (param_value(b, e->key, e->value, err) < 0)
            return -1;
    }
    if (binary) {
        cr_jbuf_key(b, "binary_data_size", kept == 0);
        cr_jbuf_u64(b, binary_size);
    }
    cr_jbuf_put(b, "}", 1);
    return 0;
}

static int inputs_json(cr_jbuf *b, const infer_in *in, const bool *has, cr_error *err)
{
    const Inference__ModelInferRequest *rq = in->rq;
    size_t p = 0;
    cr_jbuf_lit(b, ",\"inputs\":[");
    for (size_t i = 0; i < rq->n_inputs; i++) {
        const Inference__ModelInferRequest__InferInputTensor *t = rq->inputs[i];
        cr_jbuf_lit(b, i ? ",{\"name\":" : "{\"name\":");
        cr_jbuf_string(b, t->name);
        cr_jbuf_lit(b, ",\"datatype\":");
        cr_jbuf_string(b, t->datatype);
        cr_jbuf_lit(b, ",\"shape\":[");
        for (size_t d = 0; d < t->n_shape; d++) {
            if (d)
                cr_jbuf_put(b, ",", 1);
            put_i64(b, t->shape[d]);
        }
        cr_jbuf_put(b, "]", 1);
        if (params_json(b, (void *const *)t->parameters, t->n_parameters, has[i] ? in->pieces[p].len : 0, has[i],
                        err) < 0)
            return -1;
        p += has[i];
        cr_jbuf_put(b, "}", 1);
    }
    cr_jbuf_put(b, "]", 1);
    return 0;
}

static int outputs_json(cr_jbuf *b, const Inference__ModelInferRequest *rq, cr_error *err)
{
    if (!rq->n_outputs)
        return 0;
    cr_jbuf_lit(b, ",\"outputs\":[");
    for (size_t i = 0; i < rq->n_outputs; i++) {
        const Inference__ModelInferRequest__InferRequestedOutputTensor *o = rq->outputs[i];
        cr_jbuf_lit(b, i ? ",{\"name\":" : "{\"name\":");
        cr_jbuf_string(b, o->name);
        if (params_json(b, (void *const *)o->parameters, o->n_parameters, 0, false, err) < 0)
            return -1;
        cr_jbuf_put(b, "}", 1);
    }
    cr_jbuf_put(b, "]", 1);
    return 0;
}

/* The KServe JSON header of the request, NUL-terminated; NULL with err. */
static char *header_json(const infer_in *in, const bool *has, size_t *len, cr_error *err)
{
    const Inference__ModelInferRequest *rq = in->rq;
    cr_jbuf b = {0};
    cr_jbuf_lit(&b, "{\"id\":");
    cr_jbuf_string(&b, rq->id);
    if (params_json(&b, (void *const *)rq->parameters, rq->n_parameters, 0, false, err) < 0 ||
        inputs_json(&b, in, has, err) < 0 || outputs_json(&b, rq, err) < 0) {
        free(b.p);
        return NULL;
    }
    cr_jbuf_put(&b, "}", 1);
    char *h = cr_jbuf_finish(&b, len);
    if (!h)
        cr_fail(err, 503, "host_memory", "", "out of memory");
    return h;
}

/* ---- the decoder's source -------------------------------------------------------------------- */

typedef struct {
    cr_ks_source src;
    const infer_in *in;
} pieces_source;

/* The piece holding [off, off + n): the decoder asks for each input's bytes whole. */
static const piece *piece_at(const infer_in *in, uint64_t off, size_t n)
{
    for (size_t i = 0; i < in->n_pieces; i++) {
        const piece *p = &in->pieces[i];
        if (off >= p->at && off - p->at <= p->len && n <= p->len - (off - p->at))
            return p;
    }
    return NULL;
}

static int read_piece(cr_ks_source *s, uint64_t off, void *dst, size_t n, cr_error *err)
{
    const piece *p = piece_at(((pieces_source *)s)->in, off, n);
    if (!p)
        return cr_fail(err, 500, "internal", "raw_input_contents", "binary tensor bytes asked for outside any input");
    memcpy(dst, p->p + (off - p->at), n);
    return 0;
}

/* A raw tensor in a message of the backend's host memory, aligned for its elements, stays there. */
static void *piece_in_place(cr_ks_source *s, uint64_t off, size_t n, size_t align, void (**release)(void *hold),
                            void **hold)
{
    const infer_in *in = ((pieces_source *)s)->in;
    const piece *p = piece_at(in, off, n);
    if (!p || !p->in_message || !in->buf || !in->buf->tensor_grade || (uintptr_t)(p->p + (off - p->at)) % align)
        return NULL;
    cr_grpc_buf_ref(in->buf);
    *release = cr_grpc_buf_release;
    *hold = in->buf;
    return (void *)(p->p + (off - p->at));
}

size_t cr_grpc_infer_align(const uint8_t *first, size_t avail)
{
    size_t at = 0;
    uint64_t tag, len;
    while (at < avail && cr_pb_varint(first, avail, &at, &tag)) {
        switch (tag & 7) {
        case CR_PB_VARINT:
            if (!cr_pb_varint(first, avail, &at, &len))
                return 0;
            break;
        case CR_PB_I64: at += 8; break;
        case CR_PB_I32: at += 4; break;
        case CR_PB_LEN:
            if (!cr_pb_varint(first, avail, &at, &len))
                return 0;
            if (tag >> 3 == RAW_INPUT_CONTENTS)
                return at;
            if (len > avail - at)
                return 0;
            at += (size_t)len;
            break;
        default: return 0;
        }
    }
    return 0;
}

/* ---- entry points ---------------------------------------------------------------------------- */

static const cr_ks_model *model_of(const Inference__ModelInferRequest *rq, cr_error *err)
{
    const cr_ks_model *m = cr_ks_model_find(rq->model_name, strlen(rq->model_name));
    if (!m) {
        cr_fail(err, 404, "not_found", "model_name", "unknown model \"%.64s\" (models: gemm, ata, histogram)",
                rq->model_name);
        return NULL;
    }
    if (rq->model_version[0] && strcmp(rq->model_version, "1") != 0) {
        cr_fail(err, 404, "not_found", "model_version", "model %s has one version, \"1\" (asked: \"%.16s\")", m->name,
                rq->model_version);
        return NULL;
    }
    return m;
}

static int decode(infer_in *in, cr_host_allocator alloc, const char *owner, cr_request *req, cr_ks_spec *spec,
                  cr_error *err)
{
    bool has[MAX_TENSORS];
    const cr_ks_model *m;
    if (scan(in, err) < 0)
        return -1;
    if (!(in->rq = inference__model_infer_request__unpack(NULL, in->rest_len, in->rest)))
        return malformed(err, "protobuf-c could not read its fields");
    if (!(m = model_of(in->rq, err)))
        return -1;
    if (in->rq->n_inputs > MAX_TENSORS)
        return cr_fail(err, 400, "invalid_field", "inputs", "%zu inputs; model %s takes %d", in->rq->n_inputs, m->name,
                       m->n_inputs);
    if (collect_pieces(in, has, err) < 0)
        return -1;
    size_t hl;
    char *header = header_json(in, has, &hl, err);
    if (!header)
        return -1;
    pieces_source ps = {{in->bin_len, read_piece, alloc, piece_in_place}, in};
    int rc = cr_request_decode_charge(hl, err);
    if (rc == 0) {
        rc = cr_ks_decode_from_as(m, header, hl, in->n_pieces ? &ps.src : NULL, in->lim, owner, req, spec, err);
        cr_request_decode_release(hl);
    }
    free(header);
    return rc;
}

int cr_grpc_infer_decode(const cr_grpc_msg *m, const cr_limits *lim, cr_host_allocator alloc, const char *owner,
                         cr_request *req, cr_ks_spec *spec, cr_error *err)
{
    infer_in *in = calloc(1, sizeof *in);
    memset(req, 0, sizeof *req);
    memset(spec, 0, sizeof *spec);
    if (!in)
        return cr_fail(err, 503, "host_memory", "", "out of memory");
    in->msg = m->p;
    in->len = m->len;
    in->buf = m->buf;
    in->lim = lim;
    int rc = decode(in, alloc, owner, req, spec, err);
    if (in->rq)
        inference__model_infer_request__free_unpacked(in->rq, NULL);
    for (size_t i = 0; i < in->n_owned; i++)
        free(in->owned[i]);
    free(in->rest_copy);
    free(in);
    if (rc == 0)
        req->body_bytes = m->len; /* the message as received, not its JSON header */
    return rc;
}
