/* Inference tensors in registered shared-memory regions (server/kserve/kserve_internal.h).
 *
 * No copy either way: an input's request slot points into the region's mapping, and so does the
 * output slot of a result written there, so the worker reads and writes the client's memory
 * directly (pinned on cuda: shm_region.c). Such slots are borrowed (server/request.h): never
 * charged to the memory budget, and each holds its region until the slot is freed, so the
 * region cannot be unregistered under a running job. */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/kserve/kserve_internal.h"

#define MAX_EXACT 9007199254740992.0 /* 2^53 */

/* ---- parameters ----------------------------------------------------------------------------- */

static int shm_count(const cJSON *n, const char *tensor, uint64_t *out, cr_error *err)
{
    if (!cJSON_IsNumber(n) || !(n->valuedouble >= 0) || n->valuedouble > MAX_EXACT ||
        n->valuedouble != (double)(uint64_t)n->valuedouble)
        return cr_fail(err, 400, "invalid_field", tensor, "%s: parameter %s must be an integer from 0 to 2^53",
                       tensor, n->string);
    *out = (uint64_t)n->valuedouble;
    return 0;
}

int cr_ks_shm_parse(const cJSON *params, const char *tensor, cr_ks_shm *out, cr_error *err)
{
    memset(out, 0, sizeof *out);
    const cJSON *region = params ? cJSON_GetObjectItemCaseSensitive(params, "shared_memory_region") : NULL;
    const cJSON *size = params ? cJSON_GetObjectItemCaseSensitive(params, "shared_memory_byte_size") : NULL;
    const cJSON *offset = params ? cJSON_GetObjectItemCaseSensitive(params, "shared_memory_offset") : NULL;
    if (!region && !size && !offset)
        return 0;
    if (!region || !size)
        return cr_fail(err, 400, "missing_field", tensor,
                       "%s: shared memory needs both shared_memory_region and shared_memory_byte_size", tensor);
    if (!cJSON_IsString(region) || strlen(region->valuestring) > CR_SHM_NAME_MAX)
        return cr_fail(err, 400, "invalid_field", tensor,
                       "%s: shared_memory_region must be the name of a registered region", tensor);
    if (shm_count(size, tensor, &out->byte_size, err) || (offset && shm_count(offset, tensor, &out->offset, err)))
        return -1;
    snprintf(out->region, sizeof out->region, "%s", region->valuestring);
    out->on = true;
    return 0;
}

/* ---- inputs --------------------------------------------------------------------------------- */

int cr_ks_shm_measure(const cr_ks_shm *s, const char *tensor, uint64_t bytes, cr_error *err)
{
    if (s->byte_size != bytes)
        return cr_fail(err, 400, "invalid_field", tensor,
                       "input %s: shared_memory_byte_size is %llu bytes but shape and datatype make %llu",
                       tensor, (unsigned long long)s->byte_size, (unsigned long long)bytes);
    return 0;
}

void *cr_ks_shm_fill_input(cr_request *r, int slot, const cr_ks_shm *s, const char *tensor, uint64_t bytes,
                           size_t es, cr_error *err)
{
    char what[80];
    void *p = NULL;
    snprintf(what, sizeof what, "input %s", tensor);
    cr_shm_region *hold = cr_shm_acquire(s->region, s->offset, bytes, es, what, &p, err);
    if (!hold)
        return NULL;
    cr_request_adopt_buf(r, slot, p, (size_t)bytes, cr_shm_release, hold);
    return p;
}

/* ---- outputs -------------------------------------------------------------------------------- */

/* Bytes and element size of model output k of the decoded task: the result, or the edges. */
static uint64_t output_bytes(const cr_task *t, int k, size_t *es)
{
    if (k == 1) { /* histogram edges: bins + 1 values of the data's type */
        *es = cr_dtype_size(t->dtype);
        return ((uint64_t)t->u.hist.bins + 1) * *es;
    }
    *es = t->op == CR_OP_HISTOGRAM ? sizeof(uint64_t) : cr_dtype_size(t->dtype);
    return cr_task_output_bytes(t);
}

/* An output region may not share bytes with an input: the kernel would read what it writes. */
static int check_aliasing(const cr_request *r, const cr_ks_spec *s, int k, const void *p, uint64_t n,
                          cr_error *err)
{
    const char *name = s->model->outputs[k].name;
    for (int slot = 0; slot < CR_BUF_OUTPUT; slot++)
        if (r->buf_borrowed[slot] && r->hold_release[slot] == cr_shm_release &&
            cr_shm_overlap(s->shm[k].hold, p, n, r->hold[slot], r->bufs[slot], r->buf_bytes[slot]))
            return cr_fail(err, 400, "invalid_field", name,
                           "output %s: its shared memory overlaps input %s's", name, s->model->inputs[slot].name);
    if (k == 1 && s->shm[0].on &&
        cr_shm_overlap(s->shm[1].hold, p, n, r->hold[CR_BUF_OUTPUT], r->bufs[CR_BUF_OUTPUT], r->buf_bytes[CR_BUF_OUTPUT]))
        return cr_fail(err, 400, "invalid_field", name, "output %s: its shared memory overlaps output %s's", name,
                       s->model->outputs[0].name);
    return 0;
}

/* Holds output k's window [offset, offset + byte_size) and checks the result fits it. */
static int hold_output(cr_request *r, cr_ks_spec *s, int k, cr_error *err)
{
    cr_ks_shm *o = &s->shm[k];
    const char *name = s->model->outputs[k].name;
    size_t es;
    uint64_t bytes = output_bytes(&r->task, k, &es);
    char what[80];
    if (o->byte_size < bytes)
        return cr_fail(err, 400, "invalid_field", name,
                       "output %s: shared_memory_byte_size %llu is smaller than the result's %llu bytes", name,
                       (unsigned long long)o->byte_size, (unsigned long long)bytes);
    snprintf(what, sizeof what, "output %s", name);
    void *p = NULL;
    cr_shm_region *hold = cr_shm_acquire(o->region, o->offset, o->byte_size, es, what, &p, err);
    if (!hold)
        return -1;
    o->hold = hold; /* the spec's until the result slot takes it over: released on any error */
    if (check_aliasing(r, s, k, p, bytes, err))
        return -1;
    if (k == 0) { /* the result slot: the worker writes the region itself */
        o->hold = NULL;
        cr_request_adopt_buf(r, CR_BUF_OUTPUT, p, (size_t)bytes, cr_shm_release, hold);
        return 0;
    }
    o->dst = p;
    return 0;
}

int cr_ks_shm_outputs(cr_request *r, cr_ks_spec *s, cr_error *err)
{
    for (int k = 0; k < s->model->n_outputs; k++)
        if (s->want[k] && s->shm[k].on && hold_output(r, s, k, err))
            return -1;
    return 0;
}

void cr_ks_shm_release_outputs(cr_request *r, cr_ks_spec *s)
{
    if (r && r->buf_borrowed[CR_BUF_OUTPUT]) {
        cr_task_set_output(&r->task, NULL); /* nothing reads the result after its answer */
        cr_request_free_buf(r, CR_BUF_OUTPUT);
    }
    for (int k = 0; k < CR_KS_MAX_IO; k++) {
        cr_shm_release(s->shm[k].hold);
        s->shm[k].hold = NULL;
        s->shm[k].dst = NULL;
    }
}
