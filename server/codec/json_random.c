/* Generated operands; see json_random.h. */
#include "server/codec/json_random.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/random.h"

#define MAX_EXACT 9007199254740992.0 /* 2^53: JSON numbers are exact up to here */

static const cr_backend *backend;
static int devices;
static atomic_uint next_device;

void cr_jrandom_init(const cr_backend *b, int n)
{
    backend = b;
    devices = n;
}

bool cr_jrandom_is_operand(const cJSON *node)
{
    return cJSON_IsObject(node) && cJSON_GetObjectItemCaseSensitive(node, "random") != NULL;
}

/* ---- measuring ---------------------------------------------------------------------------- */

/* An integer from 0 to 2^53 (JSON's exact range), as a double. */
static bool is_count(const cJSON *n)
{
    return cJSON_IsNumber(n) && n->valuedouble >= 0 && n->valuedouble <= MAX_EXACT &&
           n->valuedouble == floor(n->valuedouble);
}

static int read_shape(const cr_jfast *fast, const cJSON *shape, const char *field, const cr_limits *lim,
                      cr_shape *out, cr_error *err)
{
    if (!shape)
        return cr_fail(err, 400, "missing_field", field, "%s is required: a list of dimensions", field);
    int64_t n = cJSON_IsArray(shape) ? cr_jfast_size(fast, shape) : -1; /* a long list is a span */
    if (n < 0 || n > CR_RANK_MAX)
        return cr_fail(err, 400, "invalid_field", field, "%s must be a list of 0 to %d dimensions", field, CR_RANK_MAX);
    out->rank = (int)n;
    int d = 0;
    for (const cJSON *e = shape->child; e; e = e->next, d++) {
        if (!is_count(e))
            return cr_fail(err, 400, "invalid_field", field, "%s[%d] must be an integer from 0 to 2^53", field, d);
        out->dims[d] = (int64_t)e->valuedouble;
    }
    uint64_t count = cr_shape_count(out);
    if (count > lim->max_elements) {
        char text[160];
        cr_shape_format(out, text, sizeof text);
        return cr_fail(err, 413, "too_large", field, "%s %s is over the limit of %llu elements per array", field, text,
                       (unsigned long long)lim->max_elements);
    }
    return 0;
}

static int read_dist(const cJSON *dist, const char *field, bool *normal, cr_error *err)
{
    *normal = false;
    if (!dist)
        return 0;
    if (cJSON_IsString(dist) && (strcmp(dist->valuestring, "uniform") == 0 || strcmp(dist->valuestring, "normal") == 0)) {
        *normal = dist->valuestring[0] == 'n';
        return 0;
    }
    return cr_fail(err, 400, "invalid_field", field, "%s must be \"uniform\" or \"normal\"", field);
}

static int read_seed(const cJSON *seed, const char *field, uint64_t *out, cr_error *err)
{
    *out = 0;
    if (!seed)
        return 0;
    if (!is_count(seed))
        return cr_fail(err, 400, "invalid_field", field, "%s must be an integer from 0 to 2^53", field);
    *out = (uint64_t)seed->valuedouble;
    return 0;
}

/* The members of "random": shape, dist, seed, each once; field is name.random. */
static int check_members(const cJSON *spec, const char *field, cr_error *err)
{
    static const char *const members[] = {"shape", "dist", "seed", NULL};
    unsigned seen = 0;
    char where[160];
    for (const cJSON *m = spec->child; m; m = m->next) {
        int i = 0;
        while (members[i] && strcmp(members[i], m->string) != 0)
            i++;
        snprintf(where, sizeof where, "%s.%.40s", field, m->string);
        if (!members[i])
            return cr_fail(err, 400, "invalid_field", where, "unknown member \"%.40s\" in %s (shape, dist, seed)",
                           m->string, field);
        if (seen & (1u << i))
            return cr_fail(err, 400, "invalid_field", where, "%s appears twice", where);
        seen |= 1u << i;
    }
    return 0;
}

int cr_jrandom_measure(const cr_jfast *fast, const cJSON *node, const char *name, const cr_limits *lim,
                       cr_jrandom *out, cr_error *err)
{
    char field[64], member[96];
    snprintf(field, sizeof field, "%s%srandom", name, name[0] ? "." : ""); /* "": a body's own member */
    memset(out, 0, sizeof *out);
    out->device = -1;
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(node, "random");
    if (cJSON_GetArraySize(node) != 1 || !cJSON_IsObject(spec))
        return cr_fail(err, 400, "invalid_field", field,
                       "%s must be {\"random\": {\"shape\": [...], \"dist\": ..., \"seed\": ...}} and nothing else", name);
    if (check_members(spec, field, err))
        return -1;
    snprintf(member, sizeof member, "%s.shape", field);
    if (read_shape(fast, cJSON_GetObjectItemCaseSensitive(spec, "shape"), member, lim, &out->shape, err))
        return -1;
    snprintf(member, sizeof member, "%s.dist", field);
    if (read_dist(cJSON_GetObjectItemCaseSensitive(spec, "dist"), member, &out->normal, err))
        return -1;
    snprintf(member, sizeof member, "%s.seed", field);
    return read_seed(cJSON_GetObjectItemCaseSensitive(spec, "seed"), member, &out->seed, err);
}

/* ---- making ------------------------------------------------------------------------------- */

/* Device memory a request slot holds (its hold): freed with the backend that made it. */
typedef struct {
    const cr_backend *b;
    int device;
    void *p;
} device_block;

static void device_block_free(void *hold)
{
    device_block *d = hold;
    d->b->tensor_free(d->device, d->p);
    free(d);
}

static bool on_devices(const cr_jrandom *op)
{
    return !op->on_host && backend && backend->tensor_alloc && backend->fill_random && devices > 0;
}

/* The request's device if it has one already, the one its other tensors are on, else the next. */
static int device_for(const cr_request *r, const cr_jrandom *op)
{
    if (r->on_device)
        return r->device;
    if (op->device >= 0 && op->device < devices)
        return op->device;
    return (int)(atomic_fetch_add(&next_device, 1u) % (unsigned)devices);
}

static void *fill_on_device(cr_request *r, int slot, const cr_jrandom *op, cr_dtype dt, const char *field,
                            cr_error *err)
{
    uint64_t count = cr_shape_count(&op->shape);
    size_t bytes = (size_t)count * cr_dtype_size(dt);
    int device = device_for(r, op);
    device_block *d = malloc(sizeof *d);
    void *p = d ? backend->tensor_alloc(device, bytes) : NULL;
    if (!d || !p) {
        free(d);
        return d ? (cr_fail(err, 507, "device_memory", field, "no room for %s's %zu bytes on device %d", field, bytes,
                            device), NULL)
                 : (cr_fail(err, 503, "host_memory", "", "out of memory"), NULL);
    }
    *d = (device_block){backend, device, p};
    cr_request_adopt_buf(r, slot, p, bytes, device_block_free, d); /* the slot frees it from here */
    if (cr_jrandom_make(op, dt, device, p, field, err) < 0)
        return NULL;
    return cr_request_mark_device(r, slot, device, err) ? NULL : p;
}

/* uint8 data is uniform only. */
static int check_dist(const cr_jrandom *op, cr_dtype dt, const char *field, cr_error *err)
{
    char dist[80];
    snprintf(dist, sizeof dist, "%s.dist", field);
    if (cr_random_supports(dt, op->normal))
        return 0;
    return cr_fail(err, 400, "invalid_field", dist, "%s: %s data is made uniform only (every value equally likely)",
                   dist, cr_dtype_name(dt));
}

int cr_jrandom_make(const cr_jrandom *op, cr_dtype dt, int device, void *p, const char *field, cr_error *err)
{
    char why[256] = "";
    if (check_dist(op, dt, field, err))
        return -1;
    uint64_t count = cr_shape_count(&op->shape);
    if (device < 0) {
        cr_random_fill_host(p, count, dt, op->normal, op->seed);
        return 0;
    }
    if (!backend || !backend->fill_random)
        return cr_fail(err, 500, "internal", field, "the backend cannot make %s on device %d", field, device);
    cr_status st = backend->fill_random(device, p, count, dt, op->normal, op->seed, why, sizeof why);
    if (st == CR_OK)
        return 0;
    return cr_fail(err, st == CR_E_FATAL ? 503 : 500, st == CR_E_FATAL ? "device_fault" : "internal", field,
                   "making %s on device %d: %s", field, device, why);
}

void *cr_jrandom_fill(cr_request *r, int slot, const cr_jrandom *op, cr_dtype dt, const char *name, cr_error *err)
{
    char field[64];
    snprintf(field, sizeof field, "%s.random", name);
    if (check_dist(op, dt, field, err))
        return NULL; /* before any memory is spent */
    if (on_devices(op))
        return fill_on_device(r, slot, op, dt, field, err);
    void *p = cr_request_alloc_buf(r, slot, (size_t)cr_shape_count(&op->shape) * cr_dtype_size(dt), false, err);
    return p && cr_jrandom_make(op, dt, -1, p, field, err) == 0 ? p : NULL;
}
