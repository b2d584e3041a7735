/* Inference tensors in registered shared-memory regions (server/kserve/kserve_internal.h).
 *
 * No copy either way: an input's request slot points into the region's mapping, and so does the
 * output slot of a result written there, so the worker reads and writes the client's memory
 * directly: host memory of a system region (pinned on cuda: shm_region.c), or device memory of
 * a CUDA region (cuda_shm_region.c), which also sends the job to that device. Such slots are
 * borrowed (server/request.h): never charged to the memory budget, and each holds its region
 * until the slot is freed, so the region cannot be unregistered under a running job. */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "server/kserve/cuda_shm_region.h"
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

/* ---- windows -------------------------------------------------------------------------------- */

/* Holds [offset, offset + bytes) of region `name`, in whichever table has it. */
static int acquire(const char *name, uint64_t offset, uint64_t bytes, size_t align, const char *what,
                   cr_ks_window *w, cr_error *err)
{
    memset(w, 0, sizeof *w);
    w->device = -1;
    if (cr_cuda_shm_registered(name)) {
        w->hold = cr_cuda_shm_acquire(name, offset, bytes, align, what, &w->p, &w->device, err);
        w->release = cr_cuda_shm_release;
    } else {
        w->hold = cr_shm_acquire(name, offset, bytes, align, what, &w->p, err);
        w->release = cr_shm_release;
    }
    return w->hold ? 0 : -1;
}

static void release(cr_ks_window *w)
{
    if (w->hold)
        w->release(w->hold);
    memset(w, 0, sizeof *w);
}

/* The window becomes the request's slot, which releases it when freed. */
static int adopt(cr_request *r, int slot, cr_ks_window *w, uint64_t bytes, cr_error *err)
{
    cr_ks_window taken = *w;
    memset(w, 0, sizeof *w);
    cr_request_adopt_buf(r, slot, taken.p, (size_t)bytes, taken.release, taken.hold);
    return taken.device >= 0 ? cr_request_mark_device(r, slot, taken.device, err) : 0;
}

/* Whether two held windows (p, n of hold a; q, m of hold b) share bytes. Two system regions
 * alias when they map the same object; device pointers of one process alias when they do. */
static bool overlap(void (*ra)(void *), void *a, const void *p, size_t n, void (*rb)(void *), void *b,
                    const void *q, size_t m)
{
    if (ra != rb || !n || !m)
        return false;
    if (ra == cr_shm_release)
        return cr_shm_overlap(a, p, n, b, q, m);
    uintptr_t x = (uintptr_t)p, y = (uintptr_t)q;
    return x < y + m && y < x + n;
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
    cr_ks_window w;
    snprintf(what, sizeof what, "input %s", tensor);
    if (acquire(s->region, s->offset, bytes, es, what, &w, err))
        return NULL;
    void *p = w.p;
    return adopt(r, slot, &w, bytes, err) ? NULL : p;
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
static int check_aliasing(const cr_request *r, const cr_ks_spec *s, int k, uint64_t n, cr_error *err)
{
    const char *name = s->model->outputs[k].name;
    const cr_ks_window *w = &s->shm[k].out;
    for (int slot = 0; slot < CR_BUF_OUTPUT; slot++)
        if (r->buf_borrowed[slot] && overlap(w->release, w->hold, w->p, n, r->hold_release[slot], r->hold[slot],
                                             r->bufs[slot], r->buf_bytes[slot]))
            return cr_fail(err, 400, "invalid_field", name,
                           "output %s: its shared memory overlaps input %s's", name, s->model->inputs[slot].name);
    if (k == 1 && s->shm[0].on &&
        overlap(w->release, w->hold, w->p, n, r->hold_release[CR_BUF_OUTPUT], r->hold[CR_BUF_OUTPUT],
                r->bufs[CR_BUF_OUTPUT], r->buf_bytes[CR_BUF_OUTPUT]))
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
    /* the spec's until the result slot takes it over: released on any error */
    if (acquire(o->region, o->offset, o->byte_size, es, what, &o->out, err) || check_aliasing(r, s, k, bytes, err))
        return -1;
    return k == 0 ? adopt(r, CR_BUF_OUTPUT, &o->out, bytes, err) : 0; /* the worker writes the result there */
}

int cr_ks_shm_outputs(cr_request *r, cr_ks_spec *s, cr_error *err)
{
    for (int k = 0; k < s->model->n_outputs; k++)
        if (s->want[k] && s->shm[k].on && hold_output(r, s, k, err))
            return -1;
    return 0;
}

int cr_ks_shm_write(const cr_ks_shm *s, const void *src, size_t bytes)
{
    if (s->out.device < 0) {
        memcpy(s->out.p, src, bytes);
        return 0;
    }
    return cr_cuda_shm_write(s->out.p, src, bytes);
}

void cr_ks_shm_release_outputs(cr_request *r, cr_ks_spec *s)
{
    if (r && r->buf_borrowed[CR_BUF_OUTPUT]) {
        cr_task_set_output(&r->task, NULL); /* nothing reads the result after its answer */
        cr_request_free_buf(r, CR_BUF_OUTPUT);
    }
    for (int k = 0; k < CR_KS_MAX_IO; k++)
        release(&s->shm[k].out);
}
