/* The JSON request decoder: body -> validated cr_request (design.md, "HTTP API v1").
 *
 * Strict on purpose: unknown fields, wrong types and impossible values are refused with the
 * field named, so a typo never silently becomes a default. Every size is checked against the
 * limits before the arrays are allocated; each array is allocated once, sized from its count,
 * and filled by converting the parsed numbers straight into the request's dtype. An operand may
 * instead lie in a registered shared-memory region, and the result go to one (json_shm.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "kernels/hist_range.h"
#include "server/codec/json_decode.h"
#include "server/codec/json_array.h"
#include "server/codec/json_matrix.h"
#include "server/codec/json_shm.h"
#include "server/engine/tensors.h"

/* ---- body and top level ---------------------------------------------------------------- */

static int is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Where the text holds a control character JSON forbids: raw ones outside strings but for
 * JSON's whitespace (cJSON skips every byte <= 32, NUL included, as whitespace), raw ones inside
 * strings, and "\u0000" (cJSON lets it through, and the NUL ends the C string early, so
 * "float32\u0000junk" would read as "float32"). No field of ours takes one. NULL when none. */
const char *cr_json_stray_control(const char *s, size_t n)
{
    bool in_string = false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!in_string) {
            if (c < 0x20 && !is_json_space((char)c))
                return s + i;
            in_string = c == '"';
        } else if (c == '"') {
            in_string = false;
        } else if (c < 0x20) {
            return s + i;
        } else if (c == '\\' && i + 1 < n) {
            if (s[i + 1] == 'u' && i + 5 < n && memcmp(s + i + 2, "0000", 4) == 0)
                return s + i;
            i++; /* the escaped character: \" does not end the string */
        }
    }
    return NULL;
}

/* cJSON's require_null_terminated needs a NUL inside the buffer, which an HTTP body does not
 * have; so parse by length and check for trailing garbage here instead. cJSON reads the
 * skeleton (numeric arrays blanked to "[]") when there is one; positions in messages are mapped
 * back to the body's. */
cJSON *cr_json_parse_document(const char *body, size_t len, cr_jfast *fast, const char *what,
                              const char *trailing_hint, cr_error *err)
{
    if (!body || len == 0) {
        cr_fail(err, 400, "invalid_json", "", "%s is empty; expected a JSON object", what);
        return NULL;
    }
    if (cr_jfast_scan(body, len, fast) != 0) {
        cr_fail(err, 503, "host_memory", "", "out of memory reading %s", what);
        return NULL;
    }
    const char *text = fast->text, *end = NULL;
    size_t text_len = fast->text_len;
    bool over_budget;
    cJSON *root = cr_jfast_parse(fast, &end, &over_budget);
    if (!root) {
        size_t at = end && end >= text && end <= text + text_len ? (size_t)(end - text) : 0;
        if (over_budget)
            cr_jfast_fail_budget(fast, at, err);
        else
            cr_fail(err, 400, "invalid_json", "", "%s is not valid JSON (error at byte %zu)", what,
                    cr_jfast_body_offset(fast, at));
        return NULL;
    }
    const char *bad = cr_json_stray_control(text, text_len);
    size_t at = (size_t)(end - text);
    while (!bad && at < text_len && is_json_space(text[at]))
        at++;
    if (bad)
        cr_fail(err, 400, "invalid_json", "",
                "control character or \\u0000 where JSON allows none (at byte %zu)",
                cr_jfast_body_offset(fast, (size_t)(bad - text)));
    else if (at < text_len)
        cr_fail(err, 400, "invalid_json", "", "extra bytes after the JSON value (at byte %zu)%s",
                cr_jfast_body_offset(fast, at), trailing_hint ? trailing_hint : "");
    else if (cr_jfast_bind(fast, root) != 0)
        cr_fail(err, 503, "host_memory", "", "out of memory reading %s", what);
    else
        return root;
    cJSON_Delete(root);
    return NULL;
}

static int op_from_name(const char *s, cr_op *op)
{
    for (int i = 0; i < CR_OP_COUNT; i++)
        if (strcmp(s, cr_op_name((cr_op)i)) == 0) {
            *op = (cr_op)i;
            return 0;
        }
    return -1;
}

/* The route's op, or (async form, op == CR_OP_COUNT) the body's "op"; a sync body may repeat
 * its route's op but not name another. */
static int resolve_op(const cJSON *root, cr_op route_op, cr_op *op, cr_error *err)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, "op");
    if (!n) {
        if (route_op == CR_OP_COUNT)
            return cr_fail(err, 400, "missing_field", "op",
                           "op is required: \"gemm\", \"ata\" or \"histogram\"");
        *op = route_op;
        return 0;
    }
    cr_op named;
    if (!cJSON_IsString(n) || op_from_name(n->valuestring, &named) != 0)
        return cr_fail(err, 400, "invalid_field", "op",
                       "op must be \"gemm\", \"ata\" or \"histogram\"");
    if (route_op != CR_OP_COUNT && named != route_op)
        return cr_fail(err, 400, "invalid_field", "op",
                       "op \"%s\" does not match this route (/v1/%s)", n->valuestring,
                       cr_op_name(route_op));
    *op = named;
    return 0;
}

/* Every field must be one this op knows, and appear once. */
static int check_fields(const cJSON *root, const char *const *allowed, cr_error *err)
{
    unsigned seen = 0;
    for (const cJSON *f = root->child; f; f = f->next) {
        int i = 0;
        while (allowed[i] && strcmp(allowed[i], f->string) != 0)
            i++;
        if (!allowed[i])
            return cr_fail(err, 400, "invalid_field", f->string, "unknown field \"%s\"",
                           f->string);
        if (seen & (1u << i))
            return cr_fail(err, 400, "invalid_field", f->string, "field \"%s\" appears twice",
                           f->string);
        seen |= 1u << i;
    }
    return 0;
}

/* ---- scalar fields ------------------------------------------------------------------------ */

static int get_number(const cJSON *root, const char *name, double dflt, double *out,
                      cr_error *err)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, name);
    *out = dflt;
    if (!n)
        return 0;
    if (!cJSON_IsNumber(n))
        return cr_fail(err, 400, "invalid_field", name, "%s must be a number, got %s", name,
                       cr_json_type_name(n));
    if (!isfinite(n->valuedouble))
        return cr_fail(err, 400, "non_finite", name, "%s is not a finite number", name);
    *out = n->valuedouble;
    return 0;
}

static int get_bool(const cJSON *root, const char *name, bool *out, cr_error *err)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, name);
    *out = false;
    if (!n)
        return 0;
    if (!cJSON_IsBool(n))
        return cr_fail(err, 400, "invalid_field", name, "%s must be true or false, got %s", name,
                       cr_json_type_name(n));
    *out = cJSON_IsTrue(n);
    return 0;
}

/* An integer in [lo, hi]; *present says whether the field was there at all. Over hi is a
 * limit (413 too_large) when over_is_limit, else just an invalid value. */
static int get_int(const cJSON *root, const char *name, int64_t lo, int64_t hi, bool over_is_limit,
                   bool *present, int64_t *out, cr_error *err)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, name);
    *present = n != NULL;
    if (!n)
        return 0;
    if (!cJSON_IsNumber(n))
        return cr_fail(err, 400, "invalid_field", name, "%s must be an integer, got %s", name,
                       cr_json_type_name(n));
    double v = n->valuedouble;
    if (!isfinite(v))
        return cr_fail(err, 400, "non_finite", name, "%s is not a finite number", name);
    if (v != floor(v) || v < (double)lo)
        return cr_fail(err, 400, "invalid_field", name, "%s must be an integer >= %lld, got %g",
                       name, (long long)lo, v);
    if (v > (double)hi)
        return over_is_limit
                   ? cr_fail(err, 413, "too_large", name, "%s = %g is over the limit of %lld",
                             name, v, (long long)hi)
                   : cr_fail(err, 400, "invalid_field", name,
                             "%s must be an integer <= %lld, got %g", name, (long long)hi, v);
    *out = (int64_t)v;
    return 0;
}

/* dtype: one of the n_allowed dtypes, by name; dflt when absent. */
static int get_dtype(const cJSON *root, const cr_dtype *allowed, size_t n_allowed, cr_dtype dflt,
                     cr_dtype *out, cr_error *err)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, "dtype");
    *out = dflt;
    if (!n)
        return 0;
    if (cJSON_IsString(n))
        for (size_t i = 0; i < n_allowed; i++)
            if (strcmp(n->valuestring, cr_dtype_name(allowed[i])) == 0) {
                *out = allowed[i];
                return 0;
            }
    char names[96] = "";
    for (size_t i = 0; i < n_allowed; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s\"%s\"",
                 i ? (i + 1 == n_allowed ? " or " : ", ") : "", cr_dtype_name(allowed[i]));
    return cr_fail(err, 400, "invalid_field", "dtype", "dtype must be %s", names);
}

/* kernel and timeout_ms, which every op has. Whether the kernel exists is the engine's call. */
static int get_common(const cJSON *root, cr_request *r, cr_error *err)
{
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(root, "kernel");
    r->kernel = cr_kernel_choice_auto();
    if (k && (!cJSON_IsString(k) || cr_kernel_choice_parse(k->valuestring, &r->kernel) != 0))
        return cr_fail(err, 400, "invalid_field", "kernel",
                       "kernel must be a name of 1..%d characters a-z, 0-9, '-' "
                       "(or \"auto\", \"all\")", CR_KERNEL_NAME_MAX - 1);
    bool present;
    int64_t t = 0;
    if (get_int(root, "timeout_ms", 1, CR_TIMEOUT_MS_MAX, false, &present, &t, err))
        return -1;
    r->timeout_ms = present ? t : 0;
    return 0;
}

/* ---- arrays ------------------------------------------------------------------------------- */

/* Adds `elements` of `elem_size` bytes to the request's total; 413 naming `field` when over. */
static int add_bytes(uint64_t *total, uint64_t elements, size_t elem_size, const cr_limits *lim,
                     const char *field, cr_error *err)
{
    uint64_t bytes, sum;
    if (__builtin_mul_overflow(elements, (uint64_t)elem_size, &bytes) ||
        __builtin_add_overflow(*total, bytes, &sum) || sum > lim->max_total_bytes)
        return cr_fail(err, 413, "too_large", field,
                       "inputs and output together exceed the limit of %llu bytes (at %s)",
                       (unsigned long long)lim->max_total_bytes, field);
    *total = sum;
    return 0;
}

/* A matrix operand (or a stack of them, or a vector): JSON numbers in any array form, a shape
 * in a shared-memory region, or a resident tensor ({"tensor": "ID"}: held from here). */
typedef struct {
    bool in_shm;
    cr_jarray j;
    cr_jshm_operand s;
    cr_tensor *t;
    cr_shape shape;
} operand;

/* Who asks (resident tensors are theirs), for the decode of one request. */
static __thread const char *asker = "";

static bool is_tensor_ref(const cJSON *node)
{
    return cJSON_IsObject(node) && cJSON_GetObjectItemCaseSensitive(node, "tensor") != NULL;
}

static int measure_tensor(const cJSON *node, const char *name, operand *o, cr_error *err)
{
    char field[64];
    snprintf(field, sizeof field, "%s.tensor", name);
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(node, "tensor");
    if (!cJSON_IsString(ref) || cJSON_GetArraySize(node) != 1)
        return cr_fail(err, 400, "invalid_field", field, "%s must be {\"tensor\": \"ID or name\"} and nothing else", name);
    if (!(o->t = cr_tensor_acquire(asker, ref->valuestring, field, err)))
        return -1;
    o->shape = *cr_tensor_shape(o->t);
    return 0;
}

static void operand_free(operand *o)
{
    cr_tensor_release(o->t);
    o->t = NULL;
}

static int measure_operand(const cr_jfast *fast, const cJSON *node, const char *name, const cr_limits *lim,
                           bool any_rank, operand *o, cr_error *err)
{
    o->in_shm = cr_jshm_is_operand(node);
    o->t = NULL;
    if (is_tensor_ref(node)) {
        if (measure_tensor(node, name, o, err))
            return -1;
    } else if (o->in_shm) {
        if (cr_jshm_measure(node, name, CR_JSHM_MATRIX, lim, &o->s, err))
            return -1;
        o->shape.rank = o->s.rank;
        memcpy(o->shape.dims, o->s.shape, sizeof o->shape.dims[0] * (size_t)o->s.rank);
    } else {
        if (cr_jarray_measure(fast, node, name, lim, &o->j, err))
            return -1;
        o->shape = o->j.shape;
    }
    /* c may be a scalar or a row that broadcasts; a and b are matrices, stacks or vectors */
    return any_rank && o->shape.rank == 0 ? 0 : cr_shape_check(&o->shape, name, lim->max_stack, err);
}

static void *fill_operand(cr_request *r, int slot, operand *o, cr_dtype dt, const char *name, cr_error *err)
{
    if (o->t) {
        char field[64];
        snprintf(field, sizeof field, "%s.tensor", name);
        cr_tensor *t = o->t;
        if (cr_tensor_dtype(t) != dt) {
            cr_fail(err, 400, "invalid_field", field, "%s names a %s tensor; the request is %s (one dtype for all "
                    "operands)", field, cr_dtype_name(cr_tensor_dtype(t)), cr_dtype_name(dt));
            return NULL;
        }
        o->t = NULL; /* the slot's from here */
        return cr_request_bind_tensor(r, slot, t, err) ? NULL : cr_tensor_data(t);
    }
    if (o->in_shm)
        return cr_jshm_bind(r, slot, &o->s, dt, name, err);
    void *p = cr_request_alloc_buf(r, slot, (size_t)cr_shape_count(&o->shape) * cr_dtype_size(dt), false, err);
    if (!p || cr_jarray_fill(&o->j, dt, p, err) != 0)
        return NULL;
    return p;
}

/* c broadcast within its matrices (a row, a column, a scalar): its elements, then whole matrices
 * made of them in slot C (the task takes whole matrices; numpy's broadcast rules, shape.h). */
static void *fill_expanded_c(cr_request *r, operand *o, const cr_shape *c_full, cr_dtype dt, cr_error *err)
{
    if (o->t && cr_tensor_device(o->t) >= 0) {
        cr_fail(err, 400, "invalid_field", "c", "c broadcasts within its matrices and lies in device memory: make it "
                "whole (the result's shape) or send it");
        return NULL;
    }
    size_t es = cr_dtype_size(dt), n = (size_t)cr_shape_count(&o->shape);
    void *own = fill_operand(r, CR_BUF_C, o, dt, "c", err);
    void *copy = own ? malloc(n * es + 1) : NULL; /* slot C is about to be replaced */
    if (own && !copy)
        cr_fail(err, 503, "host_memory", "", "out of memory");
    if (!copy)
        return NULL;
    memcpy(copy, own, n * es);
    cr_shape e = cr_expanded_c_shape(c_full, &r->task);
    void *p = cr_request_alloc_buf(r, CR_BUF_C, (size_t)cr_shape_count(&e) * es, false, err);
    if (p)
        cr_expand_c(copy, c_full, &r->task, p, es);
    free(copy);
    return p;
}

/* The result's elements (a stack's all) against the limits, and every array's bytes together. */
static int check_sizes(const cr_request *r, const operand *const *ops, const char *const *names, int n,
                       const cr_shape *expanded_c, const cr_limits *lim, cr_error *err)
{
    size_t es = cr_dtype_size(r->task.dtype);
    uint64_t total = 0, out = cr_shape_count(&r->out_shape);
    const char *last = names[0];
    for (int i = 0; i < n; i++)
        if (ops[i]) {
            uint64_t count = i == 2 && expanded_c ? cr_shape_count(expanded_c) : cr_shape_count(&ops[i]->shape);
            if (add_bytes(&total, count, es, lim, names[i], err))
                return -1;
            last = names[i];
        }
    char text[160];
    cr_shape_format(&r->out_shape, text, sizeof text);
    if (out > lim->max_elements)
        return cr_fail(err, 413, "too_large", last, "the result would have shape %s, over the limit of %llu elements",
                       text, (unsigned long long)lim->max_elements);
    return add_bytes(&total, out, es, lim, last, err);
}

/* The dtype of the tensor a {"tensor": ref} names, if it is one of the asker's. */
static const char *tensor_dtype_name(const cJSON *node)
{
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(node, "tensor");
    cr_error ignored;
    cr_tensor *t = cJSON_IsString(ref) ? cr_tensor_acquire(asker, ref->valuestring, "", &ignored) : NULL;
    const char *name = t ? cr_dtype_name(cr_tensor_dtype(t)) : NULL;
    cr_tensor_release(t);
    return name;
}

/* Without a top-level "dtype", the one the first operand in shared memory names (if it is one of
 * allowed): bytes in a region have a type, numbers in JSON do not. */
static cr_dtype operand_dtype(const cJSON *root, const char *const *names, const cr_dtype *allowed, size_t n_allowed,
                              cr_dtype dflt)
{
    for (int i = 0; names[i]; i++) {
        const cJSON *node = cJSON_GetObjectItemCaseSensitive(root, names[i]);
        const char *dt = is_tensor_ref(node) ? tensor_dtype_name(node) : cr_jshm_dtype_of(node);
        for (size_t k = 0; dt && k < n_allowed; k++)
            if (strcmp(dt, cr_dtype_name(allowed[k])) == 0)
                return allowed[k];
        if (dt)
            return dflt;
    }
    return dflt;
}

static const cJSON *required(const cJSON *root, const char *name, cr_error *err)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!n)
        cr_fail(err, 400, "missing_field", name, "%s is required", name);
    return n;
}

static const cr_dtype matrix_dtypes[] = {CR_DT_F32, CR_DT_F64};
/* GEMM also multiplies half-precision matrices (FP32 accumulation, the answer in their dtype). */
static const cr_dtype gemm_dtypes[] = {CR_DT_F32, CR_DT_F64, CR_DT_F16, CR_DT_BF16};

static int get_precision(const cJSON *root, cr_dtype dt, cr_precision *out, cr_error *err)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, "precision");
    *out = CR_PREC_DEFAULT;
    if (!n)
        return 0;
    if (!cJSON_IsString(n) ||
        (strcmp(n->valuestring, "fp32") != 0 && strcmp(n->valuestring, "tf32") != 0))
        return cr_fail(err, 400, "invalid_field", "precision",
                       "precision must be \"fp32\" or \"tf32\"");
    if (strcmp(n->valuestring, "tf32") == 0) {
        if (dt != CR_DT_F32)
            return cr_fail(err, 400, "unsupported", "precision",
                           "precision \"tf32\" needs dtype float32, not %s", cr_dtype_name(dt));
        *out = CR_PREC_TF32;
    }
    return 0;
}

/* ---- ops ---------------------------------------------------------------------------------- */

static int gemm_body(const cJSON *root, const cr_limits *lim, const cr_jfast *fast, cr_request *r, operand *ops,
                     cr_error *err)
{
    static const char *const fields[] = {"op", "a", "b", "c", "dtype", "precision", "kernel",
                                         "alpha", "beta", "trans_a", "trans_b", "timeout_ms",
                                         "output", NULL};
    static const char *const operands[] = {"a", "b", "c", NULL};
    cr_gemm_task *g = &r->task.u.gemm;
    operand *oa = &ops[0], *ob = &ops[1], *oc = &ops[2];
    const cJSON *a, *b, *c;
    bool trans_a, trans_b, c_expand;
    cr_dtype dflt = operand_dtype(root, operands, gemm_dtypes, 4, CR_DT_F32);
    if (check_fields(root, fields, err) || get_common(root, r, err) ||
        get_dtype(root, gemm_dtypes, 4, dflt, &r->task.dtype, err) ||
        get_precision(root, r->task.dtype, &r->task.precision, err) ||
        get_number(root, "alpha", 1.0, &g->alpha, err) ||
        get_number(root, "beta", 0.0, &g->beta, err) ||
        get_bool(root, "trans_a", &trans_a, err) || get_bool(root, "trans_b", &trans_b, err))
        return -1;
    if (!(a = required(root, "a", err)) || !(b = required(root, "b", err)))
        return -1;
    c = cJSON_GetObjectItemCaseSensitive(root, "c");
    cr_shape c_full;
    if (measure_operand(fast, a, "a", lim, false, oa, err) || measure_operand(fast, b, "b", lim, false, ob, err) ||
        (c && measure_operand(fast, c, "c", lim, true, oc, err)) ||
        cr_matmul_plan(&oa->shape, &ob->shape, c ? &oc->shape : NULL, trans_a, trans_b, &r->task, &r->out_shape,
                       &c_full, &c_expand, err))
        return -1;
    r->shaped = true;
    const operand *sized[3] = {oa, ob, c ? oc : NULL};
    static const char *const names[3] = {"a", "b", "c"};
    cr_shape expanded = c && c_expand ? cr_expanded_c_shape(&c_full, &r->task) : (cr_shape){0};
    if (check_sizes(r, sized, names, 3, c && c_expand ? &expanded : NULL, lim, err))
        return -1;
    if (!(g->a = fill_operand(r, CR_BUF_A, oa, r->task.dtype, "a", err)) ||
        !(g->b = fill_operand(r, CR_BUF_B, ob, r->task.dtype, "b", err)))
        return -1;
    if (c && !(g->c_in = c_expand ? fill_expanded_c(r, oc, &c_full, r->task.dtype, err)
                                  : fill_operand(r, CR_BUF_C, oc, r->task.dtype, "c", err)))
        return -1;
    return 0;
}

/* Every operand a failed decode still holds lets go of its tensor. */
static int release_operands(int rc, operand *ops, int n)
{
    for (int i = 0; i < n; i++)
        operand_free(&ops[i]);
    return rc;
}

static int decode_gemm(const cJSON *root, const cr_limits *lim, const cr_jfast *fast, cr_request *r, cr_error *err)
{
    operand ops[3] = {{0}};
    return release_operands(gemm_body(root, lim, fast, r, ops, err), ops, 3);
}

static int ata_body(const cJSON *root, const cr_limits *lim, const cr_jfast *fast, cr_request *r, operand *op,
                    cr_error *err)
{
    static const char *const fields[] = {"op", "a", "dtype", "kernel", "timeout_ms", "output", NULL};
    static const char *const operands[] = {"a", NULL};
    cr_ata_task *t = &r->task.u.ata;
    operand *oa = op;
    const cJSON *a;
    cr_dtype dflt = operand_dtype(root, operands, matrix_dtypes, 2, CR_DT_F32);
    if (check_fields(root, fields, err) || get_common(root, r, err) ||
        get_dtype(root, matrix_dtypes, 2, dflt, &r->task.dtype, err))
        return -1;
    if (!(a = required(root, "a", err)) || measure_operand(fast, a, "a", lim, false, oa, err) ||
        cr_ata_plan(&oa->shape, false, &r->task, &r->out_shape, err))
        return -1;
    r->shaped = true;
    const operand *sized[1] = {oa};
    static const char *const names[1] = {"a"};
    if (check_sizes(r, sized, names, 1, NULL, lim, err))
        return -1;
    if (!(t->a = fill_operand(r, CR_BUF_A, oa, r->task.dtype, "a", err)))
        return -1;
    return 0;
}

static int decode_ata(const cJSON *root, const cr_limits *lim, const cr_jfast *fast, cr_request *r, cr_error *err)
{
    operand op = {0};
    return release_operands(ata_body(root, lim, fast, r, &op, err), &op, 1);
}

/* "range": [lo, hi], finite, lo <= hi (equal ends widened as numpy does). */
static int get_range(const cJSON *root, cr_dtype dt, bool *present, double *lo, double *hi, cr_error *err)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, "range");
    *present = n != NULL;
    if (!n)
        return 0;
    if (!cJSON_IsArray(n) || cJSON_GetArraySize(n) != 2)
        return cr_fail(err, 400, "invalid_field", "range", "range must be a list [lo, hi]");
    double v[2];
    for (int i = 0; i < 2; i++) {
        const cJSON *e = cJSON_GetArrayItem(n, i);
        char field[24];
        snprintf(field, sizeof field, "range[%d]", i);
        if (!cJSON_IsNumber(e))
            return cr_fail(err, 400, "invalid_field", field, "%s must be a number, got %s",
                           field, cr_json_type_name(e));
        if (!isfinite(e->valuedouble))
            return cr_fail(err, 400, "non_finite", field, "%s is not a finite number", field);
        v[i] = e->valuedouble;
    }
    *lo = v[0];
    *hi = v[1];
    cr_range_status st = cr_hist_range_fix(lo, hi, dt);
    if (st == CR_RANGE_OK)
        return 0;
    char why[160];
    cr_hist_range_explain(st, v[0], v[1], why, sizeof why);
    return cr_fail(err, 400, "invalid_field", "range", "%s", why);
}

/* Checks that depend on the data: NaN with a range, the range of the data without one. */
static int histogram_range(cr_request *r, bool has_range, bool in_memory_of_client, cr_error *err)
{
    cr_hist_task *h = &r->task.u.hist;
    int64_t nan_at = in_memory_of_client && r->is_float_hist && has_range ? cr_hist_first_nan(h->data, h->count, r->task.dtype)
                                                                          : -1;
    if (nan_at >= 0)
        return cr_fail(err, 400, "non_finite", "data",
                       "data holds NaN (element %lld): a histogram has no bin for it", (long long)nan_at);
    cr_range_status st = r->is_float_hist && !has_range
                             ? cr_hist_range_of_data(h->data, h->count, r->task.dtype, &h->lo, &h->hi)
                             : CR_RANGE_OK;
    if (st == CR_RANGE_OK)
        return 0;
    char why[160];
    cr_hist_range_explain(st, h->lo, h->hi, why, sizeof why);
    return cr_fail(err, 400, "invalid_field", "data", "no default range: %s", why);
}

/* data: {"tensor": ref}: a resident tensor's elements, flattened, in its own dtype. */
static int histogram_of_tensor(const cJSON *data, const cr_limits *lim, bool has_range, cr_request *r, cr_error *err)
{
    operand o = {0};
    cr_hist_task *h = &r->task.u.hist;
    if (measure_tensor(data, "data", &o, err))
        return -1;
    cr_tensor *t = o.t;
    cr_dtype dt = cr_tensor_dtype(t);
    if (dt != r->task.dtype) {
        cr_tensor_release(t);
        return cr_fail(err, 400, "invalid_field", "data.tensor", "data.tensor is %s; the request is %s",
                       cr_dtype_name(dt), cr_dtype_name(r->task.dtype));
    }
    if (r->is_float_hist && cr_tensor_device(t) >= 0) {
        cr_tensor_release(t);
        return cr_fail(err, 400, "unsupported", "data.tensor", "float histogram data in device memory is not supported "
                       "(its NaN and range checks run on the host)");
    }
    uint64_t total = 0;
    h->count = (int64_t)cr_shape_count(cr_tensor_shape(t));
    if (add_bytes(&total, (uint64_t)h->bins, sizeof(uint64_t), lim, "bins", err)) {
        cr_tensor_release(t);
        return -1;
    }
    h->data = cr_tensor_data(t);
    return cr_request_bind_tensor(r, CR_BUF_A, t, err) || histogram_range(r, has_range, true, err) ? -1 : 0;
}

static int decode_histogram(const cJSON *root, const cr_limits *lim, const cr_jfast *fast,
                            cr_request *r, cr_error *err)
{
    static const char *const fields[] = {"op", "data", "dtype", "bins", "range", "kernel",
                                         "timeout_ms", "output", NULL};
    static const char *const operands[] = {"data", NULL};
    static const cr_dtype hist_dtypes[] = {CR_DT_U8, CR_DT_F32, CR_DT_F64};
    cr_hist_task *h = &r->task.u.hist;
    const cJSON *data;
    bool has_bins, has_range;
    int64_t bins = 0;
    cr_dtype dflt = operand_dtype(root, operands, hist_dtypes, 3, CR_DT_U8);
    if (check_fields(root, fields, err) || get_common(root, r, err) ||
        get_dtype(root, hist_dtypes, 3, dflt, &r->task.dtype, err) ||
        get_int(root, "bins", 1, lim->max_bins, true, &has_bins, &bins, err) ||
        get_range(root, r->task.dtype, &has_range, &h->lo, &h->hi, err))
        return -1;
    r->is_float_hist = r->task.dtype != CR_DT_U8;
    h->bins = (int32_t)(has_bins ? bins : r->is_float_hist ? 10 : 256);
    if (!r->is_float_hist && !has_range) { /* the byte domain: bin i holds byte value i */
        h->lo = 0.0;
        h->hi = 256.0;
    }
    if (!(data = required(root, "data", err)))
        return -1;
    if (is_tensor_ref(data))
        return histogram_of_tensor(data, lim, has_range, r, err);
    cr_jshm_operand sd;
    bool in_shm = cr_jshm_is_operand(data);
    int64_t count = in_shm ? (cr_jshm_measure(data, "data", 0, lim, &sd, err) ? -1 : (int64_t)sd.count)
                           : cr_jlist_count_in(fast, data, "data", err);
    if (count < 0)
        return -1;
    if ((uint64_t)count > lim->max_elements)
        return cr_fail(err, 413, "too_large", "data",
                       "data has %lld numbers, over the limit of %llu", (long long)count,
                       (unsigned long long)lim->max_elements);
    uint64_t total = 0;
    size_t es = cr_dtype_size(r->task.dtype);
    if (add_bytes(&total, (uint64_t)count, es, lim, "data", err) ||
        add_bytes(&total, (uint64_t)h->bins, sizeof(uint64_t), lim, "bins", err))
        return -1;
    void *p = in_shm ? cr_jshm_bind(r, CR_BUF_A, &sd, r->task.dtype, "data", err)
                     : cr_request_alloc_buf(r, CR_BUF_A, (size_t)count * es, false, err);
    if (!p || (!in_shm && cr_jlist_fill_in(fast, data, "data", count, r->task.dtype, p, err) != 0))
        return -1;
    h->data = p;
    h->count = count;
    /* JSON has no NaN, bytes do: a histogram has no bin for it (without a range, the range of the
     * data refuses it) */
    return histogram_range(r, has_range, in_shm, err);
}

/* "output": {"tensor": {}} or {"tensor": {"name": "x"}} keeps the result as a new resident tensor;
 * {"tensor": "ID or name"} writes it into that one (with c naming it too and beta 1: C += A·B). */
static int tensor_output(const cJSON *out, cr_request *r, cr_error *err)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(out, "tensor");
    if (cJSON_GetArraySize(out) != 1)
        return cr_fail(err, 400, "invalid_field", "output", "output is {\"shm\": ...} or {\"tensor\": ...}, not both");
    if (cJSON_IsString(t))
        return cr_request_result_into(r, asker, t->valuestring, err);
    if (!cJSON_IsObject(t))
        return cr_fail(err, 400, "invalid_field", "output.tensor", "output.tensor is {} (a new tensor), {\"name\": "
                       "\"...\"}, or the id or name of one of yours to write into");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
    for (const cJSON *f = t->child; f; f = f->next)
        if (strcmp(f->string, "name"))
            return cr_fail(err, 400, "invalid_field", "output.tensor", "unknown field \"%.40s\" in output.tensor (name)",
                           f->string);
    if (name && !cJSON_IsString(name))
        return cr_fail(err, 400, "invalid_field", "output.tensor.name", "output.tensor.name must be a string");
    if (name && cr_tensor_check_name(name->valuestring, "output.tensor.name", err))
        return -1;
    return cr_request_keep_result(r, asker, name ? name->valuestring : NULL, err);
}

/* ---- entry points ------------------------------------------------------------------------- */

static int decode_root(cr_op route_op, const cJSON *root, const cr_limits *lim,
                       const cr_jfast *fast, cr_request *r, cr_error *err)
{
    if (!cJSON_IsObject(root))
        return cr_fail(err, 400, "invalid_json", "",
                       "request body must be a JSON object, got %s", cr_json_type_name(root));
    cr_op op = CR_OP_COUNT;
    if (resolve_op(root, route_op, &op, err))
        return -1;
    r->task.op = op;
    r->task.kernel = NULL; /* the engine resolves r->kernel ("auto", "all", a name) */
    static const char *const inputs[CR_OP_COUNT][CR_BUF_OUTPUT] = {
        [CR_OP_GEMM] = {"a", "b", "c"}, [CR_OP_ATA] = {"a", "", ""}, [CR_OP_HISTOGRAM] = {"data", "", ""}};
    bool has_output = false;
    cr_jshm_place output;
    const cJSON *out = cJSON_GetObjectItemCaseSensitive(root, "output");
    bool to_tensor = cJSON_IsObject(out) && cJSON_GetObjectItemCaseSensitive(out, "tensor");
    if (!to_tensor && cr_jshm_parse_output(root, &has_output, &output, err))
        return -1;
    int rc;
    switch (op) {
    case CR_OP_GEMM:
        rc = decode_gemm(root, lim, fast, r, err);
        break;
    case CR_OP_ATA:
        rc = decode_ata(root, lim, fast, r, err);
        break;
    case CR_OP_HISTOGRAM:
        rc = decode_histogram(root, lim, fast, r, err);
        break;
    default:
        return cr_fail(err, 500, "internal", "op", "unexpected op %d", (int)op);
    }
    if (rc)
        return rc;
    if (to_tensor)
        return tensor_output(out, r, err);
    if (!has_output)
        return 0;
    return cr_jshm_bind_output(r, &output, inputs[op], err); /* once the inputs are bound: apart from them */
}

int cr_request_from_json(cr_op op, const char *body, size_t len, const cr_limits *lim,
                         cr_request *out, cr_error *err)
{
    return cr_request_from_json_as(op, body, len, lim, "", out, err);
}

int cr_request_from_json_as(cr_op op, const char *body, size_t len, const cr_limits *lim, const char *owner,
                            cr_request *out, cr_error *err)
{
    asker = owner ? owner : "";
    memset(out, 0, sizeof *out);
    cr_limits dflt = cr_request_limits(NULL);
    if (!lim)
        lim = &dflt;
    cr_jfast fast = {0};
    cJSON *root = cr_json_parse_document(body, len, &fast, "the request body", NULL, err);
    if (!root) {
        cr_jfast_free(&fast);
        return -1;
    }
    int rc = decode_root(op, root, lim, &fast, out, err);
    cJSON_Delete(root);
    cr_jfast_free(&fast);
    if (rc != 0) {
        cr_request_free(out);
        return -1;
    }
    out->body_bytes = len;
    return 0;
}
