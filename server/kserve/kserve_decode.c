/* KServe v2 inference request -> validated cr_request (server/kserve_internal.h).
 *
 * Strict like the v1 decoder: unknown fields, inputs, outputs and parameters are refused by
 * name. Everything is measured first (datatypes, shapes, element counts against the limits,
 * binary sizes against the body) and only then allocated and filled, one buffer per input in
 * the same r->bufs slots as json_request.c so the engine and cr_request_free need nothing new.
 * Binary tensors are consecutive in the body after the JSON header, in input order. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/codec/json_array.h"
#include "server/codec/json_matrix.h"
#include "server/engine/tensors.h"
#include "server/kserve/kserve_internal.h"
#include "kernels/hist_range.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "binary tensor data is little-endian; this decoder copies it as is"
#endif

#define MAX_EXACT_INT 9007199254740992.0 /* 2^53 */

/* One input as measured: where its numbers are and what they will become. */
typedef struct {
    bool present;
    int index; /* position in "inputs", for messages */
    cr_dtype dt;
    cr_shape shape;
    uint64_t count;
    const cJSON *data; /* JSON numbers, or NULL for binary */
    cr_jarray json;    /* data's form and shape, measured */
    char field[64];    /* "a.data": json's name, which must outlive the measure (the fill names it too) */
    cr_tensor *tensor; /* parameters.tensor: a resident tensor, held until the slot takes it */
    bool binary;       /* binary: its bytes are the binary section's [bin_off, + count * size) */
    uint64_t bin_off;
    cr_ks_shm shm;     /* or in a registered shared-memory region (kserve_shm.c) */
} ks_input;

/* The request's "parameters", every op's together; *_set says which were given. */
typedef struct {
    double alpha, beta, range_lo, range_hi;
    bool trans_a, trans_b, binary_output, tf32;
    bool has_range_lo, has_range_hi, has_bins;
    int64_t bins, timeout_ms;
    cr_kernel_choice kernel;
} ks_params;

typedef struct {
    const cr_ks_model *m;
    const cr_limits *lim;
    const cr_jfast *fast; /* the header's numeric arrays, outside cJSON */
    ks_input in[CR_KS_MAX_IO];
    cr_ks_source *src; /* the binary section after the header; NULL when none */
    const char *owner; /* who asks: the resident tensors inputs name are theirs */
    cr_shape c_full;   /* gemm: c aligned with the result (server/shape.h) */
    bool c_expand;     /* c broadcasts within its matrices: expanded once filled */
    uint64_t bin_used;
    ks_params p;
} ks_ctx;

/* Every member must be one of allowed, once. */
static int check_members(const cJSON *obj, const char *what, const char *const *allowed,
                         cr_error *err)
{
    unsigned seen = 0;
    for (const cJSON *f = obj->child; f; f = f->next) {
        int i = 0;
        while (allowed[i] && strcmp(allowed[i], f->string) != 0)
            i++;
        if (!allowed[i])
            return cr_fail(err, 400, "invalid_field", f->string, "unknown field \"%s\" in %s",
                           f->string, what);
        if (seen & (1u << i))
            return cr_fail(err, 400, "invalid_field", f->string, "field \"%s\" appears twice in %s",
                           f->string, what);
        seen |= 1u << i;
    }
    return 0;
}

/* A non-negative integer up to 2^53 (shapes, sizes, bins). */
static int get_count(const cJSON *n, const char *field, int64_t *out, cr_error *err)
{
    if (!cJSON_IsNumber(n))
        return cr_fail(err, 400, "invalid_field", field, "%s must be an integer, got %s", field,
                       cr_json_type_name(n));
    double v = n->valuedouble;
    if (!isfinite(v) || v != floor(v) || v < 0)
        return cr_fail(err, 400, "invalid_field", field, "%s must be an integer >= 0, got %g",
                       field, v);
    if (v > MAX_EXACT_INT)
        return cr_fail(err, 413, "too_large", field, "%s = %g is over any size limit", field, v);
    *out = (int64_t)v;
    return 0;
}

/* ---- parameters ----------------------------------------------------------------------------- */

static int param_number(const cJSON *n, double *out, cr_error *err)
{
    if (!cJSON_IsNumber(n))
        return cr_fail(err, 400, "invalid_field", n->string,
                       "parameter %s must be a number, got %s", n->string, cr_json_type_name(n));
    if (!isfinite(n->valuedouble))
        return cr_fail(err, 400, "non_finite", n->string, "parameter %s is not finite", n->string);
    *out = n->valuedouble;
    return 0;
}

static int param_bool(const cJSON *n, bool *out, cr_error *err)
{
    if (!cJSON_IsBool(n))
        return cr_fail(err, 400, "invalid_field", n->string,
                       "parameter %s must be true or false, got %s", n->string,
                       cr_json_type_name(n));
    *out = cJSON_IsTrue(n);
    return 0;
}

static int param_kernel(const cJSON *n, ks_params *p, cr_error *err)
{
    if (cr_kernel_choice_parse(cJSON_IsString(n) ? n->valuestring : "", &p->kernel) != 0)
        return cr_fail(err, 400, "invalid_field", "kernel",
                       "parameter kernel must be a kernel name (GET /v1/kernels) or \"auto\"");
    if (p->kernel.mode == CR_KERNEL_ALL) /* the comparison table has no place in an inference response */
        return cr_fail(err, 400, "unsupported", "kernel",
                       "kernel \"all\" is a /v1 feature; name one kernel or \"auto\"");
    return 0;
}

/* Triton's "timeout" is in microseconds; the engine's deadline in whole milliseconds. */
static int param_timeout(const cJSON *n, ks_params *p, cr_error *err)
{
    int64_t us;
    if (get_count(n, "timeout", &us, err))
        return -1;
    if (us == 0)
        return cr_fail(err, 400, "invalid_field", "timeout",
                       "parameter timeout (microseconds) must be > 0");
    p->timeout_ms = (us + 999) / 1000;
    return 0;
}

static int param_precision(const cJSON *n, ks_params *p, cr_error *err)
{
    if (!cJSON_IsString(n) || (strcmp(n->valuestring, "fp32") && strcmp(n->valuestring, "tf32")))
        return cr_fail(err, 400, "invalid_field", "precision",
                       "parameter precision must be \"fp32\" or \"tf32\"");
    p->tf32 = strcmp(n->valuestring, "tf32") == 0;
    return 0;
}

static int param_bins(const cJSON *n, const cr_limits *lim, ks_params *p, cr_error *err)
{
    if (get_count(n, "bins", &p->bins, err))
        return -1;
    if (p->bins < 1)
        return cr_fail(err, 400, "invalid_field", "bins", "parameter bins must be >= 1");
    if (p->bins > lim->max_bins)
        return cr_fail(err, 413, "too_large", "bins", "bins = %lld is over the limit of %d",
                       (long long)p->bins, lim->max_bins);
    p->has_bins = true;
    return 0;
}

/* One parameter the op knows; the names per op are in parse_params. */
static int param_one(const cJSON *n, const cr_limits *lim, ks_params *p, cr_error *err)
{
    const char *k = n->string;
    if (!strcmp(k, "alpha"))
        return param_number(n, &p->alpha, err);
    if (!strcmp(k, "beta"))
        return param_number(n, &p->beta, err);
    if (!strcmp(k, "trans_a"))
        return param_bool(n, &p->trans_a, err);
    if (!strcmp(k, "trans_b"))
        return param_bool(n, &p->trans_b, err);
    if (!strcmp(k, "binary_data_output"))
        return param_bool(n, &p->binary_output, err);
    if (!strcmp(k, "kernel"))
        return param_kernel(n, p, err);
    if (!strcmp(k, "precision"))
        return param_precision(n, p, err);
    if (!strcmp(k, "timeout"))
        return param_timeout(n, p, err);
    if (!strcmp(k, "bins"))
        return param_bins(n, lim, p, err);
    if (!strcmp(k, "range_lo"))
        return (p->has_range_lo = true), param_number(n, &p->range_lo, err);
    if (!strcmp(k, "range_hi"))
        return (p->has_range_hi = true), param_number(n, &p->range_hi, err);
    if (!strcmp(k,
                "priority")) /* Triton's scheduling hint: one queue here, so accepted and unused */
        return cJSON_IsNumber(n)
                   ? 0
                   : cr_fail(err, 400, "invalid_field", k, "parameter priority must be a number");
    return cr_fail(err, 500, "internal", k, "parameter %s has no reader", k);
}

static int parse_params(const cJSON *root, ks_ctx *x, cr_error *err)
{
    static const char *const gemm[] = {"alpha",   "beta",     "trans_a",
                                       "trans_b", "kernel",   "precision",
                                       "timeout", "priority", "binary_data_output",
                                       NULL};
    static const char *const ata[] = {"kernel", "timeout", "priority", "binary_data_output", NULL};
    static const char *const hist[] = {"bins",    "range_lo", "range_hi",           "kernel",
                                       "timeout", "priority", "binary_data_output", NULL};
    const char *const *allowed = x->m->op == CR_OP_GEMM ? gemm : x->m->op == CR_OP_ATA ? ata : hist;
    ks_params *p = &x->p;
    memset(p, 0, sizeof *p);
    p->alpha = 1.0;
    p->kernel = cr_kernel_choice_auto();
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(root, "parameters");
    if (!params)
        return 0;
    if (!cJSON_IsObject(params))
        return cr_fail(err, 400, "invalid_field", "parameters",
                       "parameters must be an object, got %s", cr_json_type_name(params));
    if (check_members(params, "parameters", allowed, err))
        return -1;
    for (const cJSON *n = params->child; n; n = n->next)
        if (param_one(n, x->lim, p, err))
            return -1;
    if (p->has_range_lo != p->has_range_hi)
        return cr_fail(err, 400, "missing_field", p->has_range_lo ? "range_hi" : "range_lo",
                       "parameters range_lo and range_hi go together");
    if (p->has_range_lo && p->range_lo > p->range_hi)
        return cr_fail(err, 400, "invalid_field", "range_lo", "range_lo %g is above range_hi %g",
                       p->range_lo, p->range_hi);
    return 0;
}

/* ---- inputs: measuring ---------------------------------------------------------------------- */

/* Matrix operands (gemm, ata) of 1 to 8 dimensions (a stack, a vector), c of 0 to 8 (it broadcasts);
 * histogram data of any rank up to 8 (counted flat, as numpy.histogram flattens it). */
static int input_shape(const ks_ctx *x, const cJSON *t, const cr_ks_tensor *spec, ks_input *in, const cr_limits *lim,
                       cr_error *err)
{
    char field[64];
    snprintf(field, sizeof field, "%s.shape", spec->name);
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(t, "shape");
    if (!shape)
        return cr_fail(err, 400, "missing_field", field, "input %s has no shape", spec->name);
    bool matrix = spec->rank == 2, scalar_ok = !matrix || spec->optional; /* c may be a scalar */
    /* a long list of numbers is a span (json_fastarray.h): its length is the fast path's */
    int64_t n = cJSON_IsArray(shape) ? cr_jfast_size(x->fast, shape) : -1;
    if (n < (scalar_ok ? 0 : 1) || n > CR_RANK_MAX)
        return cr_fail(err, 400, "invalid_field", field, "input %s must have a shape of %d to %d dimensions%s",
                       spec->name, scalar_ok ? 0 : 1, CR_RANK_MAX,
                       matrix ? " (a matrix, a stack of them, or a vector)" : "");
    in->shape.rank = (int)n;
    in->count = 1;
    int d = 0;
    for (const cJSON *e = shape->child; e; e = e->next, d++) {
        if (get_count(e, field, &in->shape.dims[d], err))
            return -1;
        if (matrix && in->shape.dims[d] < 1)
            return cr_fail(err, 400, "invalid_field", field,
                           "input %s: matrix dimensions must be >= 1", spec->name);
        if (__builtin_mul_overflow(in->count, (uint64_t)in->shape.dims[d], &in->count))
            in->count = UINT64_MAX;
    }
    if (in->count > lim->max_elements)
        return cr_fail(err, 413, "too_large", spec->name,
                       "input %s has %llu elements, over the limit of %llu", spec->name,
                       (unsigned long long)in->count, (unsigned long long)lim->max_elements);
    return matrix && n > 0 ? cr_shape_check(&in->shape, spec->name, lim->max_stack, err) : 0;
}

static int input_datatype(const cJSON *t, const cr_ks_tensor *spec, ks_input *in, cr_error *err)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(t, "datatype");
    char field[64];
    snprintf(field, sizeof field, "%s.datatype", spec->name);
    if (!n)
        return cr_fail(err, 400, "missing_field", field, "input %s has no datatype", spec->name);
    const char *name = cJSON_IsString(n) ? n->valuestring : "";
    for (int i = 0; spec->datatypes[i]; i++)
        if (strcmp(spec->datatypes[i], name) == 0)
            return cr_ks_datatype_parse(name, &in->dt)
                       ? cr_fail(err, 500, "internal", field, "no dtype for %s", name)
                       : 0;
    char list[64] = "";
    for (int i = 0; spec->datatypes[i]; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                 spec->datatypes[i]);
    return cr_fail(err, 400, "unsupported", field, "input %s: datatype %s is not accepted (%s)",
                   spec->name, cJSON_IsString(n) ? name : cr_json_type_name(n), list);
}

/* JSON data: a flat row-major list of exactly count numbers, or nested lists of exactly the
 * declared shape (json_array.h reads either). */
static int measure_json_data(const ks_ctx *x, const cJSON *data, const cr_ks_tensor *spec, ks_input *in,
                             cr_error *err)
{
    char want[160], got[160], *field = in->field;
    snprintf(in->field, sizeof in->field, "%s.data", spec->name);
    if (!cJSON_IsArray(data))
        return cr_fail(err, 400, "invalid_field", field, "%s must be a list of numbers, got %s",
                       field, cr_json_type_name(data));
    if (cr_jarray_measure(x->fast, data, field, x->lim, &in->json, err)) /* keeps the name: not on the stack */
        return -1;
    const cr_shape *s = &in->json.shape;
    if (s->rank == 1 && (uint64_t)s->dims[0] == in->count)
        return 0;
    bool same = s->rank == in->shape.rank && !memcmp(s->dims, in->shape.dims, sizeof s->dims[0] * (size_t)s->rank);
    if (same)
        return 0;
    cr_shape_format(&in->shape, want, sizeof want);
    cr_shape_format(s, got, sizeof got);
    if (s->rank == 1)
        return cr_fail(err, 400, "invalid_field", field, "%s has %lld numbers but the shape makes %llu", field,
                       (long long)s->dims[0], (unsigned long long)in->count);
    return cr_fail(err, 400, "invalid_field", field, "%s is nested as %s but the shape says %s", field, got, want);
}

/* Binary data: the next binary_data_size bytes of the body, exactly the shape's size. */
static int measure_binary(const cJSON *size_node, const cr_ks_tensor *spec, ks_input *in, ks_ctx *x,
                          cr_error *err)
{
    int64_t size;
    if (get_count(size_node, "binary_data_size", &size, err))
        return -1;
    if (!x->src)
        return cr_fail(
            err, 400, "invalid_field", spec->name,
            "input %s has binary_data_size but the request has no Inference-Header-Content-Length",
            spec->name);
    uint64_t want = in->count * cr_dtype_size(in->dt); /* count <= max_elements: no overflow */
    if ((uint64_t)size != want)
        return cr_fail(err, 400, "invalid_field", spec->name,
                       "input %s: binary_data_size is %lld bytes but shape and datatype make %llu",
                       spec->name, (long long)size, (unsigned long long)want);
    if ((uint64_t)size > x->src->len - x->bin_used)
        return cr_fail(err, 400, "invalid_field", spec->name,
                       "input %s: %lld bytes of binary data announced, only %llu left in the body",
                       spec->name, (long long)size, (unsigned long long)(x->src->len - x->bin_used));
    in->binary = true;
    in->bin_off = x->bin_used;
    x->bin_used += (uint64_t)size;
    return 0;
}

/* "parameters" of an input: binary_data_size, or where in shared memory its data is. */
static int input_params(const cJSON *t, const cJSON **size, const cJSON **tensor, const char *name, cr_error *err)
{
    static const char *const allowed[] = {"binary_data_size", "shared_memory_region",
                                          "shared_memory_byte_size", "shared_memory_offset", "tensor", NULL};
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(t, "parameters");
    *size = *tensor = NULL;
    if (!p)
        return 0;
    if (!cJSON_IsObject(p))
        return cr_fail(err, 400, "invalid_field", name, "input %s: parameters must be an object",
                       name);
    if (check_members(p, "an input's parameters", allowed, err))
        return -1;
    *size = cJSON_GetObjectItemCaseSensitive(p, "binary_data_size");
    *tensor = cJSON_GetObjectItemCaseSensitive(p, "tensor");
    if (*tensor && !cJSON_IsString(*tensor))
        return cr_fail(err, 400, "invalid_field", name, "input %s: parameters.tensor must be a resident tensor's id or "
                       "name", name);
    return 0;
}

/* parameters.tensor: a resident tensor of the asker's (held from here), of the input's shape and
 * datatype exactly. */
static int measure_tensor(ks_ctx *x, const cJSON *ref, const cr_ks_tensor *spec, ks_input *in, cr_error *err)
{
    char field[64], want[160], got[160];
    snprintf(field, sizeof field, "%s.parameters.tensor", spec->name);
    if (!(in->tensor = cr_tensor_acquire(x->owner, ref->valuestring, field, err)))
        return -1;
    const cr_shape *s = cr_tensor_shape(in->tensor);
    if (cr_tensor_dtype(in->tensor) != in->dt)
        return cr_fail(err, 400, "invalid_field", field, "input %s is %s but tensor %.64s is %s", spec->name,
                       cr_ks_datatype_name(in->dt), ref->valuestring, cr_dtype_name(cr_tensor_dtype(in->tensor)));
    if (s->rank != in->shape.rank || memcmp(s->dims, in->shape.dims, sizeof s->dims[0] * (size_t)s->rank)) {
        cr_shape_format(s, got, sizeof got);
        cr_shape_format(&in->shape, want, sizeof want);
        return cr_fail(err, 400, "invalid_field", field, "input %s has shape %s but tensor %.64s is %s", spec->name,
                       want, ref->valuestring, got);
    }
    return 0;
}

static int measure_input(const cJSON *t, int index, ks_ctx *x, cr_error *err)
{
    static const char *const fields[] = {"name", "datatype", "shape", "data", "parameters", NULL};
    if (!cJSON_IsObject(t))
        return cr_fail(err, 400, "invalid_field", "inputs", "inputs[%d] must be an object", index);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
    if (!cJSON_IsString(name))
        return cr_fail(err, 400, "missing_field", "inputs", "inputs[%d] has no name", index);
    int slot = cr_ks_input_index(x->m, name->valuestring);
    if (slot < 0)
        return cr_fail(err, 400, "invalid_field", "inputs", "model %s has no input \"%.64s\"",
                       x->m->name, name->valuestring);
    const cr_ks_tensor *spec = &x->m->inputs[slot];
    ks_input *in = &x->in[slot];
    if (in->present)
        return cr_fail(err, 400, "invalid_field", spec->name, "input %s appears twice", spec->name);
    in->present = true;
    in->index = index;
    const cJSON *size, *tensor, *data = cJSON_GetObjectItemCaseSensitive(t, "data");
    if (check_members(t, "an input", fields, err) || input_datatype(t, spec, in, err) ||
        input_shape(x, t, spec, in, x->lim, err) || input_params(t, &size, &tensor, spec->name, err) ||
        cr_ks_shm_parse(cJSON_GetObjectItemCaseSensitive(t, "parameters"), spec->name, &in->shm, err))
        return -1;
    if ((data != NULL) + (size != NULL) + in->shm.on + (tensor != NULL) != 1)
        return cr_fail(err, 400, "invalid_field", spec->name,
                       "input %s needs exactly one of data, parameters.binary_data_size, "
                       "parameters.shared_memory_region or parameters.tensor",
                       spec->name);
    in->data = data;
    if (tensor)
        return measure_tensor(x, tensor, spec, in, err);
    if (in->shm.on)
        return cr_ks_shm_measure(&in->shm, spec->name, in->count * cr_dtype_size(in->dt), err);
    return data ? measure_json_data(x, data, spec, in, err) : measure_binary(size, spec, in, x, err);
}

static int measure_inputs(const cJSON *root, ks_ctx *x, cr_error *err)
{
    const cJSON *inputs = cJSON_GetObjectItemCaseSensitive(root, "inputs");
    if (!inputs)
        return cr_fail(err, 400, "missing_field", "inputs", "inputs is required");
    if (!cJSON_IsArray(inputs))
        return cr_fail(err, 400, "invalid_field", "inputs", "inputs must be a list, got %s",
                       cr_json_type_name(inputs));
    if (cr_jfast_find(x->fast, inputs)) /* numbers or lists of them, where objects belong */
        return cr_fail(err, 400, "invalid_field", "inputs", "inputs[0] must be an object");
    int i = 0;
    for (const cJSON *t = inputs->child; t; t = t->next, i++)
        if (measure_input(t, i, x, err))
            return -1;
    for (int k = 0; k < x->m->n_inputs; k++)
        if (!x->in[k].present && !x->m->inputs[k].optional)
            return cr_fail(err, 400, "missing_field", x->m->inputs[k].name,
                           "model %s needs input %s", x->m->name, x->m->inputs[k].name);
    if (x->src && x->bin_used != x->src->len)
        return cr_fail(err, 400, "invalid_field", "binary_data_size",
                       "%llu bytes of binary data follow the header but the inputs announce %llu",
                       (unsigned long long)x->src->len, (unsigned long long)x->bin_used);
    for (int k = 1; k < x->m->n_inputs; k++) /* matrices of one GEMM share their element type */
        if (x->in[k].present && x->in[k].dt != x->in[0].dt)
            return cr_fail(err, 400, "unsupported", x->m->inputs[k].name,
                           "input %s is %s but a is %s", x->m->inputs[k].name,
                           cr_ks_datatype_name(x->in[k].dt), cr_ks_datatype_name(x->in[0].dt));
    return 0;
}

/* ---- the task ------------------------------------------------------------------------------- */

static int add_bytes(uint64_t *total, uint64_t elements, size_t es, const cr_limits *lim,
                     const char *field, cr_error *err)
{
    uint64_t bytes, sum;
    if (__builtin_mul_overflow(elements, (uint64_t)es, &bytes) ||
        __builtin_add_overflow(*total, bytes, &sum) || sum > lim->max_total_bytes)
        return cr_fail(err, 413, "too_large", field,
                       "inputs and output together exceed the limit of %llu bytes",
                       (unsigned long long)lim->max_total_bytes);
    *total = sum;
    return 0;
}

static int output_elements(const cr_request *r, const ks_ctx *x, const char *field, uint64_t *out, cr_error *err)
{
    char text[160];
    *out = cr_shape_count(&r->out_shape);
    cr_shape_format(&r->out_shape, text, sizeof text);
    if (*out > x->lim->max_elements)
        return cr_fail(err, 413, "too_large", field, "the output would have shape %s, over the limit of %llu elements",
                       text, (unsigned long long)x->lim->max_elements);
    return 0;
}

static int gemm_task(ks_ctx *x, cr_request *r, cr_error *err)
{
    cr_gemm_task *g = &r->task.u.gemm;
    const ks_input *a = &x->in[0], *b = &x->in[1], *c = &x->in[2];
    g->alpha = x->p.alpha;
    g->beta = x->p.beta;
    if (cr_matmul_plan(&a->shape, &b->shape, c->present ? &c->shape : NULL, x->p.trans_a, x->p.trans_b, &r->task,
                       &r->out_shape, &x->c_full, &x->c_expand, err))
        return -1;
    r->shaped = true;
    if (x->p.tf32 && r->task.dtype != CR_DT_F32)
        return cr_fail(err, 400, "unsupported", "precision",
                       "precision \"tf32\" needs FP32 inputs");
    r->task.precision = x->p.tf32 ? CR_PREC_TF32 : CR_PREC_DEFAULT;
    size_t es = cr_dtype_size(r->task.dtype);
    cr_shape e = c->present && x->c_expand ? cr_expanded_c_shape(&x->c_full, &r->task) : c->shape;
    uint64_t total = 0, out, cn = c->present ? cr_shape_count(&e) : 0;
    return add_bytes(&total, a->count, es, x->lim, "a", err) ||
                   add_bytes(&total, b->count, es, x->lim, "b", err) ||
                   add_bytes(&total, cn, es, x->lim, "c", err) ||
                   output_elements(r, x, "c", &out, err) ||
                   add_bytes(&total, out, es, x->lim, "c", err)
               ? -1
               : 0;
}

static int ata_task(ks_ctx *x, cr_request *r, cr_error *err)
{
    if (cr_ata_plan(&x->in[0].shape, false, &r->task, &r->out_shape, err))
        return -1;
    r->shaped = true;
    size_t es = cr_dtype_size(r->task.dtype);
    uint64_t total = 0, out;
    return add_bytes(&total, x->in[0].count, es, x->lim, "a", err) ||
                   output_elements(r, x, "c", &out, err) ||
                   add_bytes(&total, out, es, x->lim, "c", err)
               ? -1
               : 0;
}

static int hist_task(ks_ctx *x, cr_request *r, cr_error *err)
{
    cr_hist_task *h = &r->task.u.hist;
    r->is_float_hist = r->task.dtype != CR_DT_U8;
    h->count = (int64_t)x->in[0].count;
    h->bins = (int32_t)(x->p.has_bins ? x->p.bins : r->is_float_hist ? 10 : 256);
    h->lo = x->p.has_range_lo ? x->p.range_lo : 0.0;
    h->hi = x->p.has_range_lo ? x->p.range_hi : 256.0; /* the byte domain: bin i holds byte i */
    cr_range_status st = x->p.has_range_lo ? cr_hist_range_fix(&h->lo, &h->hi, r->task.dtype) : CR_RANGE_OK;
    if (st != CR_RANGE_OK) {
        char why[160];
        cr_hist_range_explain(st, x->p.range_lo, x->p.range_hi, why, sizeof why);
        return cr_fail(err, 400, "invalid_field", "range_lo", "%s", why);
    }
    uint64_t total = 0;
    return add_bytes(&total, x->in[0].count, cr_dtype_size(r->task.dtype), x->lim, "data", err) ||
                   add_bytes(&total, (uint64_t)h->bins, sizeof(uint64_t), x->lim, "bins", err)
               ? -1
               : 0;
}

/* ---- inputs: filling ------------------------------------------------------------------------ */

/* A binary input's bytes, read from the source into a buffer of the source's allocator (the
 * backend's pinned memory on cuda: the worker copies it to the device without staging). */
static void *fill_binary(const ks_ctx *x, cr_request *r, int slot, cr_error *err)
{
    const ks_input *in = &x->in[slot];
    size_t bytes = (size_t)in->count * cr_dtype_size(in->dt);
    cr_ks_source *s = x->src;
    void (*release)(void *hold) = NULL;
    void *hold = NULL, *at = s->in_place && bytes ? s->in_place(s, in->bin_off, bytes, cr_dtype_size(in->dt), &release,
                                                                &hold)
                                                  : NULL;
    if (at) { /* no copy: the slot borrows the bytes where they arrived */
        cr_request_adopt_buf(r, slot, at, bytes, release, hold);
        return at;
    }
    void *p = cr_request_alloc_from(r, slot, bytes, false, s->alloc.alloc, s->alloc.free, err);
    if (!p || (bytes && s->read(s, in->bin_off, p, bytes, err) != 0))
        return NULL;
    return p;
}

static void *fill_input(const ks_ctx *x, cr_request *r, int slot, cr_error *err)
{
    const ks_input *in = &x->in[slot];
    const cr_ks_tensor *spec = &x->m->inputs[slot];
    size_t es = cr_dtype_size(in->dt), bytes = (size_t)in->count * es;
    if (in->binary)
        return fill_binary(x, r, slot, err);
    void *p = cr_request_alloc_buf(r, slot, bytes, false, err);
    if (!p)
        return NULL;
    (void)spec;
    return cr_jarray_fill(&in->json, in->dt, p, err) ? NULL : p;
}

/* c broadcast within its matrices (a row, a column, a scalar), made whole ones (shape.h). */
static int expand_c(ks_ctx *x, cr_request *r, cr_error *err)
{
    if (r->buf_on_device[CR_BUF_C])
        return cr_fail(err, 400, "unsupported", "c", "input c broadcasts within its matrices: send it in the body or "
                       "in system shared memory, not CUDA shared memory");
    size_t es = cr_dtype_size(r->task.dtype), n = (size_t)x->in[2].count;
    void *copy = malloc(n * es + 1);
    if (!copy)
        return cr_fail(err, 503, "host_memory", "", "out of memory");
    memcpy(copy, r->task.u.gemm.c_in, n * es);
    cr_shape e = cr_expanded_c_shape(&x->c_full, &r->task);
    void *p = cr_request_alloc_buf(r, CR_BUF_C, (size_t)cr_shape_count(&e) * es, false, err);
    if (p)
        cr_expand_c(copy, &x->c_full, &r->task, p, es);
    free(copy);
    r->task.u.gemm.c_in = p;
    return p ? 0 : -1;
}

static int refuse_nan(const cr_hist_task *h, cr_dtype dt, cr_error *err)
{
    int64_t i = cr_hist_first_nan(h->data, h->count, dt);
    return i < 0 ? 0
                 : cr_fail(err, 400, "non_finite", "data",
                           "input data holds NaN (element %lld): a histogram has no bin for it", (long long)i);
}

/* An input's buffer: its bytes in shared memory, as they are, or a copy of what the body holds. */
static void *input_buffer(ks_ctx *x, cr_request *r, int slot, cr_error *err)
{
    ks_input *in = &x->in[slot];
    size_t es = cr_dtype_size(in->dt);
    if (in->tensor) {
        cr_tensor *t = in->tensor;
        in->tensor = NULL; /* the slot's from here */
        return cr_request_bind_tensor(r, slot, t, err) ? NULL : cr_tensor_data(t);
    }
    if (in->shm.on)
        return cr_ks_shm_fill_input(r, slot, &in->shm, x->m->inputs[slot].name, in->count * es, es, err);
    return fill_input(x, r, slot, err);
}

/* The inputs' buffers; binary ones first, in the order of their bytes in the body, which a source
 * reading a socket gives only once and in order. */
static int fill_inputs(ks_ctx *x, cr_request *r, void **p, cr_error *err)
{
    bool done[CR_KS_MAX_IO] = {false};
    for (;;) {
        int next = -1;
        for (int k = 0; k < x->m->n_inputs; k++)
            if (x->in[k].present && x->in[k].binary && !done[k] &&
                (next < 0 || x->in[k].bin_off < x->in[next].bin_off))
                next = k;
        if (next < 0)
            break;
        done[next] = true;
        if (!(p[next] = input_buffer(x, r, next, err)))
            return -1;
    }
    for (int k = 0; k < x->m->n_inputs; k++)
        if (x->in[k].present && !done[k] && !(p[k] = input_buffer(x, r, k, err)))
            return -1;
    return 0;
}

static int fill_task(ks_ctx *x, cr_request *r, cr_error *err)
{
    void *p[CR_KS_MAX_IO] = {NULL};
    if (fill_inputs(x, r, p, err))
        return -1;
    switch (x->m->op) {
    case CR_OP_GEMM:
        r->task.u.gemm.a = p[0];
        r->task.u.gemm.b = p[1];
        r->task.u.gemm.c_in = p[2];
        return p[2] && x->c_expand ? expand_c(x, r, err) : 0;
    case CR_OP_ATA:
        r->task.u.ata.a = p[0];
        return 0;
    default: {
        cr_hist_task *h = &r->task.u.hist;
        h->data = p[0];
        if (!r->is_float_hist)
            return 0;
        if (r->buf_on_device[0]) /* the NaN and range checks below read the data on the host */
            return cr_fail(err, 400, "unsupported", "data",
                           "float histogram data in CUDA shared memory is not supported (its NaN and range "
                           "checks run on the host): send it in the body or in system shared memory");
        if (x->p.has_range_lo) /* without a range, the range of the data refuses NaN below */
            return refuse_nan(h, r->task.dtype, err);
        cr_range_status st = cr_hist_range_of_data(h->data, h->count, r->task.dtype, &h->lo, &h->hi);
        if (st == CR_RANGE_OK)
            return 0;
        char why[160];
        cr_hist_range_explain(st, h->lo, h->hi, why, sizeof why);
        return cr_fail(err, 400, "invalid_field", "data", "no default range (give range_lo and range_hi): %s", why);
    }
    }
}

/* ---- outputs -------------------------------------------------------------------------------- */

static int requested_output(const cJSON *o, int index, ks_ctx *x, cr_ks_spec *s, cr_error *err)
{
    static const char *const fields[] = {"name", "parameters", NULL};
    static const char *const params[] = {"binary_data", "shared_memory_region", "shared_memory_byte_size",
                                         "shared_memory_offset", NULL};
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
    if (!cJSON_IsObject(o) || !cJSON_IsString(name))
        return cr_fail(err, 400, "invalid_field", "outputs",
                       "outputs[%d] must be an object with a name", index);
    int k = cr_ks_output_index(x->m, name->valuestring);
    if (k < 0)
        return cr_fail(err, 400, "invalid_field", "outputs", "model %s has no output \"%.64s\"",
                       x->m->name, name->valuestring);
    if (s->want[k])
        return cr_fail(err, 400, "invalid_field", "outputs", "output %s is requested twice",
                       name->valuestring);
    if (check_members(o, "an output", fields, err))
        return -1;
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "parameters");
    if (p && !cJSON_IsObject(p))
        return cr_fail(err, 400, "invalid_field", "outputs",
                       "outputs[%d].parameters must be an object", index);
    if (p && check_members(p, "an output's parameters", params, err))
        return -1;
    const cJSON *bin = p ? cJSON_GetObjectItemCaseSensitive(p, "binary_data") : NULL;
    if ((bin && param_bool(bin, &s->binary[k], err)) || cr_ks_shm_parse(p, name->valuestring, &s->shm[k], err))
        return -1;
    if (s->shm[k].on && s->binary[k])
        return cr_fail(err, 400, "invalid_field", "outputs",
                       "output %s: binary_data and shared_memory_region exclude each other", name->valuestring);
    s->want[k] = true;
    return 0;
}

/* The outputs asked for, or when none are named all of them (edges only for float data), in
 * JSON unless the request's binary_data_output parameter says binary. */
static int parse_outputs(const cJSON *root, ks_ctx *x, const cr_request *r, cr_ks_spec *s,
                         cr_error *err)
{
    const cJSON *outs = cJSON_GetObjectItemCaseSensitive(root, "outputs");
    bool float_hist = x->m->op == CR_OP_HISTOGRAM && r->is_float_hist;
    if (outs && !cJSON_IsArray(outs))
        return cr_fail(err, 400, "invalid_field", "outputs", "outputs must be a list, got %s",
                       cr_json_type_name(outs));
    if (outs && cr_jfast_find(x->fast, outs)) /* numbers or lists of them, not objects */
        return cr_fail(err, 400, "invalid_field", "outputs",
                       "outputs[0] must be an object with a name");
    int i = 0;
    for (const cJSON *o = outs ? outs->child : NULL; o; o = o->next, i++)
        if (requested_output(o, i, x, s, err))
            return -1;
    if (i == 0)
        for (int k = 0; k < x->m->n_outputs; k++) {
            s->want[k] = !x->m->outputs[k].optional || float_hist;
            s->binary[k] = x->p.binary_output;
        }
    return 0;
}

/* ---- entry points --------------------------------------------------------------------------- */

static int decode_root(const cJSON *root, ks_ctx *x, cr_request *r, cr_ks_spec *s, cr_error *err)
{
    static const char *const fields[] = {"id", "parameters", "inputs", "outputs", NULL};
    if (!cJSON_IsObject(root))
        return cr_fail(err, 400, "invalid_json", "", "the inference request must be a JSON object");
    if (check_members(root, "the request", fields, err) || parse_params(root, x, err) ||
        measure_inputs(root, x, err))
        return -1;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "id");
    if (id && !cJSON_IsString(id))
        return cr_fail(err, 400, "invalid_field", "id", "id must be a string, got %s",
                       cr_json_type_name(id));
    if (id && !(s->id = strdup(id->valuestring)))
        return cr_fail(err, 503, "host_memory", "", "out of memory");
    r->task.op = x->m->op;
    r->task.dtype = x->in[0].dt;
    r->timeout_ms = x->p.timeout_ms;
    r->kernel = x->p.kernel;
    int rc = x->m->op == CR_OP_GEMM  ? gemm_task(x, r, err)
             : x->m->op == CR_OP_ATA ? ata_task(x, r, err)
                                     : hist_task(x, r, err);
    if (rc || parse_outputs(root, x, r, s, err) || fill_task(x, r, err))
        return -1;
    return cr_ks_shm_outputs(r, s, err);
}

/* The binary section of a body held whole in memory. */
typedef struct {
    cr_ks_source src;
    const char *bin;
} memory_source;

static int read_memory(cr_ks_source *s, uint64_t off, void *dst, size_t n, cr_error *err)
{
    (void)err;
    memcpy(dst, ((memory_source *)s)->bin + off, n); /* off + n <= len: measured */
    return 0;
}

int cr_ks_decode(const cr_ks_model *m, const char *body, size_t len, int64_t header_len,
                 const cr_limits *lim, cr_request *req, cr_ks_spec *spec, cr_error *err)
{
    return cr_ks_decode_alloc(m, body, len, header_len, lim, (cr_host_allocator){0}, "", req, spec, err);
}

int cr_ks_decode_alloc(const cr_ks_model *m, const char *body, size_t len, int64_t header_len,
                       const cr_limits *lim, cr_host_allocator alloc, const char *owner, cr_request *req,
                       cr_ks_spec *spec, cr_error *err)
{
    size_t hl = header_len < 0 ? len : (size_t)header_len;
    memory_source ms = {{len - hl, read_memory, alloc, NULL}, body + hl};
    return cr_ks_decode_from_as(m, body, hl, header_len < 0 ? NULL : &ms.src, lim, owner, req, spec, err);
}

int cr_ks_decode_from(const cr_ks_model *m, const char *header, size_t hl, cr_ks_source *src,
                      const cr_limits *lim, cr_request *req, cr_ks_spec *spec, cr_error *err)
{
    return cr_ks_decode_from_as(m, header, hl, src, lim, "", req, spec, err);
}

int cr_ks_decode_from_as(const cr_ks_model *m, const char *header, size_t hl, cr_ks_source *src, const cr_limits *lim,
                         const char *owner, cr_request *req, cr_ks_spec *spec, cr_error *err)
{
    memset(req, 0, sizeof *req);
    memset(spec, 0, sizeof *spec);
    spec->model = m;
    cr_jfast fast = {0};
    ks_ctx x = {.m = m, .lim = lim, .fast = &fast, .src = src, .owner = owner ? owner : ""};
    /* through the fast path (server/codec/json_fastarray.h): its numeric arrays never become
     * cJSON nodes, and what does is bounded */
    cJSON *root = cr_json_parse_document(header, hl, &fast, "the inference request",
                                         " (binary tensors need the Inference-Header-Content-Length header)", err);
    int rc = root ? decode_root(root, &x, req, spec, err) : -1;
    cJSON_Delete(root);
    cr_jfast_free(&fast);
    for (int k = 0; k < CR_KS_MAX_IO; k++) /* a failed decode's held tensors */
        cr_tensor_release(x.in[k].tensor);
    if (rc) {
        cr_request_free(req);
        cr_ks_spec_free(spec);
        return -1;
    }
    req->body_bytes = hl + (src ? src->len : 0);
    return 0;
}

void cr_ks_spec_free(cr_ks_spec *s)
{
    if (!s)
        return;
    free(s->id);
    s->id = NULL;
    cr_ks_shm_release_outputs(NULL, s);
}
