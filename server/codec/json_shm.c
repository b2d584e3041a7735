/* /v1 JSON operands and results in shared-memory regions; see json_shm.h. */
#include "server/codec/json_shm.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "server/kserve/shm_tensor.h"

#define MAX_EXACT 9007199254740992.0 /* 2^53: JSON numbers are exact up to here */

/* Every member one of allowed, none twice: a typo is an error, never a default. */
static int check_members(const cJSON *obj, const char *field, const char *const *allowed, cr_error *err)
{
    unsigned seen = 0;
    for (const cJSON *m = obj->child; m; m = m->next) {
        int i = 0;
        while (allowed[i] && strcmp(allowed[i], m->string) != 0)
            i++;
        if (!allowed[i])
            return cr_fail(err, 400, "invalid_field", field, "%s: unknown member \"%.64s\"", field, m->string);
        if (seen & (1u << i))
            return cr_fail(err, 400, "invalid_field", field, "%s: member \"%s\" appears twice", field, m->string);
        seen |= 1u << i;
    }
    return 0;
}

/* An integer from 0 to 2^53 (JSON's exact range). */
static int get_count(const cJSON *n, const char *field, uint64_t *out, cr_error *err)
{
    if (!cJSON_IsNumber(n) || !(n->valuedouble >= 0) || n->valuedouble > MAX_EXACT ||
        n->valuedouble != floor(n->valuedouble))
        return cr_fail(err, 400, "invalid_field", field, "%s must be an integer from 0 to 2^53", field);
    *out = (uint64_t)n->valuedouble;
    return 0;
}

/* {"region": name, "offset": N?, "byte_size": N?} */
static int parse_place(const cJSON *shm, const char *field, cr_jshm_place *out, cr_error *err)
{
    static const char *const members[] = {"region", "offset", "byte_size", NULL};
    char where[80];
    snprintf(where, sizeof where, "%s.shm", field);
    memset(out, 0, sizeof *out);
    if (!cJSON_IsObject(shm))
        return cr_fail(err, 400, "invalid_field", where, "%s must be an object {\"region\", \"offset\", \"byte_size\"}",
                       where);
    if (check_members(shm, where, members, err))
        return -1;
    const cJSON *region = cJSON_GetObjectItemCaseSensitive(shm, "region");
    const cJSON *offset = cJSON_GetObjectItemCaseSensitive(shm, "offset");
    const cJSON *size = cJSON_GetObjectItemCaseSensitive(shm, "byte_size");
    snprintf(where, sizeof where, "%s.shm.region", field);
    if (!region)
        return cr_fail(err, 400, "missing_field", where, "%s is required: the name of a registered region", where);
    if (!cJSON_IsString(region) || !region->valuestring[0] || strlen(region->valuestring) > CR_SHM_NAME_MAX)
        return cr_fail(err, 400, "invalid_field", where, "%s must be the name of a registered region", where);
    snprintf(out->region, sizeof out->region, "%s", region->valuestring);
    snprintf(where, sizeof where, "%s.shm.offset", field);
    if (offset && get_count(offset, where, &out->offset, err))
        return -1;
    snprintf(where, sizeof where, "%s.shm.byte_size", field);
    if (size && get_count(size, where, &out->byte_size, err))
        return -1;
    out->has_byte_size = size != NULL;
    return 0;
}

bool cr_jshm_is_operand(const cJSON *node)
{
    return cJSON_IsObject(node) && cJSON_GetObjectItemCaseSensitive(node, "shm") != NULL;
}

const char *cr_jshm_dtype_of(const cJSON *node)
{
    const cJSON *dt = cr_jshm_is_operand(node) ? cJSON_GetObjectItemCaseSensitive(node, "dtype") : NULL;
    return cJSON_IsString(dt) ? dt->valuestring : NULL;
}

static int parse_shape(const cJSON *shape, const char *field, int rank, const cr_limits *lim, cr_jshm_operand *out,
                       cr_error *err)
{
    char where[80];
    snprintf(where, sizeof where, "%s.shape", field);
    if (!shape)
        return cr_fail(err, 400, "missing_field", where, "%s is required with shm", where);
    int n = cJSON_IsArray(shape) ? cJSON_GetArraySize(shape) : -1;
    if (rank > 0 ? n != rank : (n < 1 || n > CR_JSHM_MAX_RANK))
        return rank > 0 ? cr_fail(err, 400, "invalid_field", where, "%s must be a list of %d dimensions", where, rank)
                        : cr_fail(err, 400, "invalid_field", where, "%s must be a list of 1 to %d dimensions", where,
                                  CR_JSHM_MAX_RANK);
    out->rank = n;
    out->count = 1;
    int d = 0;
    for (const cJSON *e = shape->child; e; e = e->next, d++) {
        uint64_t v;
        if (get_count(e, where, &v, err))
            return -1;
        if (rank != 0 && v < 1)
            return cr_fail(err, 400, "invalid_field", where, "%s: matrix dimensions must be >= 1", where);
        out->shape[d] = (int64_t)v;
        if (__builtin_mul_overflow(out->count, v, &out->count))
            out->count = UINT64_MAX;
    }
    if (out->count > lim->max_elements)
        return cr_fail(err, 413, "too_large", field, "%s has %llu elements, over the limit of %llu", field,
                       (unsigned long long)out->count, (unsigned long long)lim->max_elements);
    return 0;
}

int cr_jshm_measure(const cJSON *node, const char *field, int rank, const cr_limits *lim, cr_jshm_operand *out,
                    cr_error *err)
{
    static const char *const members[] = {"shm", "shape", "dtype", NULL};
    memset(out, 0, sizeof *out);
    if (check_members(node, field, members, err) ||
        parse_place(cJSON_GetObjectItemCaseSensitive(node, "shm"), field, &out->at, err) ||
        parse_shape(cJSON_GetObjectItemCaseSensitive(node, "shape"), field, rank, lim, out, err))
        return -1;
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(node, "dtype");
    if (dt && !cJSON_IsString(dt)) {
        char where[80];
        snprintf(where, sizeof where, "%s.dtype", field);
        return cr_fail(err, 400, "invalid_field", where, "%s must be a dtype name such as \"float32\"", where);
    }
    out->dtype = dt ? dt->valuestring : NULL;
    return 0;
}

void *cr_jshm_bind(cr_request *r, int slot, const cr_jshm_operand *op, cr_dtype dt, const char *field,
                   cr_error *err)
{
    char where[80];
    if (op->dtype && strcmp(op->dtype, cr_dtype_name(dt)) != 0) {
        snprintf(where, sizeof where, "%s.dtype", field);
        cr_fail(err, 400, "invalid_field", where, "%s is \"%.32s\" but the request's dtype is %s", where, op->dtype,
                cr_dtype_name(dt));
        return NULL;
    }
    size_t es = cr_dtype_size(dt);
    uint64_t bytes = op->count * es; /* count <= max_elements <= 2^59: no overflow */
    if (op->at.has_byte_size && cr_shm_input_size(op->at.byte_size, bytes, field, "shm.byte_size", err))
        return NULL;
    return cr_shm_bind_input(r, slot, op->at.region, op->at.offset, bytes, es, false, field, err);
}

int cr_jshm_parse_output(const cJSON *root, bool *present, cr_jshm_place *out, cr_error *err)
{
    static const char *const members[] = {"shm", NULL};
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "output");
    *present = o != NULL;
    if (!o)
        return 0;
    if (!cJSON_IsObject(o) || !cJSON_GetObjectItemCaseSensitive(o, "shm"))
        return cr_fail(err, 400, "invalid_field", "output",
                       "output must be {\"shm\": {\"region\", \"offset\", \"byte_size\"}}: where to write the result");
    return check_members(o, "output", members, err) ||
                   parse_place(cJSON_GetObjectItemCaseSensitive(o, "shm"), "output", out, err)
               ? -1
               : 0;
}

int cr_jshm_bind_output(cr_request *r, const cr_jshm_place *out, const char *const input_names[CR_BUF_OUTPUT],
                        cr_error *err)
{
    const cr_task *t = &r->task;
    size_t es = t->op == CR_OP_HISTOGRAM ? sizeof(uint64_t) : cr_dtype_size(t->dtype);
    uint64_t bytes = cr_task_output_bytes(t);
    uint64_t window = out->has_byte_size ? out->byte_size : bytes;
    cr_shm_window w;
    if (cr_shm_hold_output(r, out->region, out->offset, window, bytes, es, false, "output", "shm.byte_size",
                           input_names, &w, err) ||
        cr_shm_bind_output(r, &w, bytes, err))
        return -1;
    r->result_shm.on = true;
    snprintf(r->result_shm.region, sizeof r->result_shm.region, "%s", out->region);
    r->result_shm.offset = out->offset;
    r->result_shm.bytes = bytes;
    return 0;
}
