/* Inference tensors in registered shared-memory regions (server/kserve/kserve_internal.h).
 *
 * No copy either way: an input's request slot points into the region, and so does the output
 * slot of a result written there, so the worker reads and writes the client's memory directly:
 * host memory of a system region (pinned on cuda: shm_region.c) or device memory of a CUDA
 * region (cuda_shm_region.c). The rules (sizes, bounds, alignment, outputs apart from inputs)
 * are shm_tensor.c's, shared with /v1; this file maps Triton's parameters onto them. */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "kernels/hist_range.h"
#include "server/kserve/kserve_internal.h"
#include "server/kserve/shm_tensor.h"

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
    char what[80];
    snprintf(what, sizeof what, "input %s", tensor);
    return cr_shm_input_size(s->byte_size, bytes, what, "shared_memory_byte_size", err);
}

void *cr_ks_shm_fill_input(cr_request *r, int slot, const cr_ks_shm *s, const char *tensor, uint64_t bytes,
                           size_t es, cr_error *err)
{
    char what[80];
    snprintf(what, sizeof what, "input %s", tensor);
    return cr_shm_bind_input(r, slot, s->region, s->offset, bytes, es, true, what, err);
}

/* ---- outputs -------------------------------------------------------------------------------- */

/* Bytes and element size of model output k of the decoded task: the result, or the edges. */
static uint64_t output_bytes(const cr_task *t, int k, size_t *es)
{
    if (k == 1) { /* histogram edges: bins + 1 values of numpy's edge type */
        *es = cr_dtype_size(cr_hist_edge_dtype(t->dtype));
        return ((uint64_t)t->u.hist.bins + 1) * *es;
    }
    *es = t->op == CR_OP_HISTOGRAM ? sizeof(uint64_t) : cr_dtype_size(t->dtype);
    return cr_task_output_bytes(t);
}

/* Edges and counts both in shared memory may not share bytes either (the rules for inputs are
 * shm_tensor.c's); the counts' window is the result slot's by then. */
static int check_outputs_apart(const cr_request *r, const cr_ks_spec *s, uint64_t n, cr_error *err)
{
    cr_shm_window counts = {r->hold[CR_BUF_OUTPUT], r->hold_release[CR_BUF_OUTPUT], r->bufs[CR_BUF_OUTPUT], -1};
    if (!s->shm[0].on || !cr_shm_windows_overlap(&s->shm[1].out, n, &counts, r->buf_bytes[CR_BUF_OUTPUT]))
        return 0;
    return cr_fail(err, 400, "invalid_field", s->model->outputs[1].name,
                   "output %s: its shared memory overlaps output %s's", s->model->outputs[1].name,
                   s->model->outputs[0].name);
}

/* Holds output k's window [offset, offset + byte_size) and checks the result fits it. */
static int hold_output(cr_request *r, cr_ks_spec *s, int k, cr_error *err)
{
    cr_ks_shm *o = &s->shm[k];
    const char *inputs[CR_BUF_OUTPUT] = {""};
    for (int i = 0; i < s->model->n_inputs && i < CR_BUF_OUTPUT; i++)
        inputs[i] = s->model->inputs[i].name;
    size_t es;
    uint64_t bytes = output_bytes(&r->task, k, &es);
    char what[80];
    snprintf(what, sizeof what, "output %s", s->model->outputs[k].name);
    /* the spec's until the result slot takes it over: released on any error */
    if (cr_shm_hold_output(r, o->region, o->offset, o->byte_size, bytes, es, true, what, "shared_memory_byte_size",
                           inputs, &o->out, err))
        return -1;
    if (k == 1)
        return check_outputs_apart(r, s, bytes, err);
    return cr_shm_bind_output(r, &o->out, bytes, err); /* the worker writes the result there */
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
    for (int k = 0; k < CR_KS_MAX_IO; k++)
        cr_shm_window_release(&s->shm[k].out);
}
