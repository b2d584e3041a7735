/* The request's life cycle; see request.h. */
#include "server/request.h"

#include <stdlib.h>
#include <string.h>

#include "server/memory.h"

cr_limits cr_request_limits(const cr_config *cfg)
{
    if (!cfg)
        return (cr_limits){.max_elements = 1ull << 28, .max_total_bytes = 4ull << 30, .max_bins = 1 << 20,
                           .max_stack = 1 << 24};
    return (cr_limits){.max_elements = (uint64_t)cfg->max_elements,
                       .max_total_bytes = (uint64_t)cfg->max_body_mb << 20,
                       .max_bins = cfg->max_bins, .max_stack = cfg->max_stack};
}

void *cr_request_alloc_from(cr_request *r, int slot, size_t bytes, bool zeroed, void *(*alloc)(size_t),
                            void (*release)(void *), cr_error *err)
{
    size_t n = bytes ? bytes : 1; /* malloc(0) may return NULL; an empty histogram is valid */
    if (cr_mem_charge(CR_MEM_ARRAYS, n, slot == CR_BUF_OUTPUT ? "the result" : "an input array", err) < 0)
        return NULL;
    void *p = NULL;
    if (alloc && (p = alloc(n)) != NULL) {
        if (zeroed)
            memset(p, 0, n);
    } else {
        release = NULL;
        p = zeroed ? calloc(1, n) : malloc(n); /* pinned memory can run out: plain memory works */
    }
    if (!p) {
        cr_mem_release(CR_MEM_ARRAYS, n);
        cr_fail(err, 503, "host_memory", "", "could not allocate %zu bytes for the request", bytes);
        return NULL;
    }
    cr_request_free_buf(r, slot);
    r->bufs[slot] = p;
    r->buf_bytes[slot] = bytes;
    r->buf_free[slot] = release;
    return p;
}

void *cr_request_alloc_buf(cr_request *r, int slot, size_t bytes, bool zeroed, cr_error *err)
{
    bool out = slot == CR_BUF_OUTPUT;
    return cr_request_alloc_from(r, slot, bytes, zeroed, out ? r->out_alloc : NULL, out ? r->out_free : NULL, err);
}

/* Bytes of the task's output, overflow-checked (requests come from several decoders). */
static int output_bytes(const cr_task *t, size_t *bytes)
{
    uint64_t elems;
    size_t es = cr_dtype_size(t->dtype);
    switch (t->op) {
    case CR_OP_GEMM:
        if (t->u.gemm.m < 0 || t->u.gemm.n < 0 ||
            __builtin_mul_overflow((uint64_t)t->u.gemm.m, (uint64_t)t->u.gemm.n, &elems))
            return -1;
        break;
    case CR_OP_ATA:
        if (t->u.ata.n < 0 || __builtin_mul_overflow((uint64_t)t->u.ata.n, (uint64_t)t->u.ata.n, &elems))
            return -1;
        break;
    case CR_OP_HISTOGRAM:
        if (t->u.hist.bins < 1)
            return -1;
        elems = (uint64_t)t->u.hist.bins;
        es = sizeof(uint64_t);
        break;
    default:
        return -1;
    }
    uint64_t per = (uint64_t)cr_task_matrices(t); /* every matrix of a stack */
    return per < 1 || __builtin_mul_overflow(elems, per, &elems) || __builtin_mul_overflow(elems, (uint64_t)es, bytes)
               ? -1
               : 0;
}

void cr_request_adopt_buf(cr_request *r, int slot, void *p, size_t bytes, void (*release)(void *hold),
                          void *hold)
{
    cr_request_free_buf(r, slot);
    r->bufs[slot] = p;
    r->buf_bytes[slot] = bytes;
    r->buf_borrowed[slot] = true;
    r->hold[slot] = hold;
    r->hold_release[slot] = release;
}

int cr_request_mark_device(cr_request *r, int slot, int device, cr_error *err)
{
    if (r->on_device && r->device != device)
        return cr_fail(err, 400, "invalid_field", "shared_memory_region",
                       "the request's tensors are in the memory of devices %d and %d; one job runs on one device",
                       r->device, device);
    r->buf_on_device[slot] = true;
    r->on_device = true;
    r->device = device;
    return 0;
}

/* The decoder sized a borrowed output for this very task; anything else is its bug. */
static int use_borrowed_output(cr_request *r, size_t bytes, cr_error *err)
{
    if (r->buf_bytes[CR_BUF_OUTPUT] != bytes)
        return cr_fail(err, 500, "internal", "", "the output buffer given (%zu bytes) is not the result's %zu",
                       r->buf_bytes[CR_BUF_OUTPUT], bytes);
    /* host kernels add to the counts; device ones clear their own */
    if (r->task.op == CR_OP_HISTOGRAM && !r->buf_on_device[CR_BUF_OUTPUT])
        memset(r->bufs[CR_BUF_OUTPUT], 0, bytes);
    cr_task_set_output(&r->task, r->bufs[CR_BUF_OUTPUT]);
    return 0;
}

int cr_request_alloc_output(cr_request *r, cr_error *err)
{
    size_t bytes;
    if (output_bytes(&r->task, &bytes) != 0)
        return cr_fail(err, 500, "internal", "", "cannot size the output of this task");
    if (r->buf_borrowed[CR_BUF_OUTPUT])
        return use_borrowed_output(r, bytes, err);
    void *p = cr_request_alloc_buf(r, CR_BUF_OUTPUT, bytes, r->task.op == CR_OP_HISTOGRAM, err);
    if (!p)
        return -1;
    cr_task_set_output(&r->task, p);
    return 0;
}

/* A slot's buffer taken out of a request (cr_request_take_buf): how to let it go. */
typedef struct {
    void *p;
    size_t bytes;
    bool borrowed;
    void (*free_fn)(void *p);
    void *hold;
    void (*hold_release)(void *hold);
} taken_buf;

static void taken_free(void *o)
{
    taken_buf *t = o;
    if (!t)
        return;
    if (t->borrowed) {
        if (t->hold_release)
            t->hold_release(t->hold);
    } else {
        cr_mem_release(CR_MEM_ARRAYS, t->bytes ? t->bytes : 1);
        if (t->free_fn)
            t->free_fn(t->p);
        else
            free(t->p);
    }
    free(t);
}

void *cr_request_take_buf(cr_request *r, int slot, void (**release)(void *owner))
{
    taken_buf *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    *t = (taken_buf){r->bufs[slot], r->buf_bytes[slot], r->buf_borrowed[slot], r->buf_free[slot], r->hold[slot],
                     r->hold_release[slot]};
    r->bufs[slot] = NULL;
    r->buf_bytes[slot] = 0;
    r->buf_borrowed[slot] = r->buf_on_device[slot] = false;
    r->hold[slot] = NULL;
    r->hold_release[slot] = NULL;
    r->buf_free[slot] = NULL;
    *release = taken_free;
    return t;
}

void cr_request_free_buf(cr_request *r, int slot)
{
    if (r->buf_borrowed[slot]) {
        if (r->hold_release[slot])
            r->hold_release[slot](r->hold[slot]);
    } else if (r->bufs[slot]) {
        cr_mem_release(CR_MEM_ARRAYS, r->buf_bytes[slot] ? r->buf_bytes[slot] : 1);
        if (r->buf_free[slot])
            r->buf_free[slot](r->bufs[slot]);
        else
            free(r->bufs[slot]);
    }
    r->bufs[slot] = NULL;
    r->buf_bytes[slot] = 0;
    r->buf_free[slot] = NULL;
    r->buf_borrowed[slot] = false;
    r->buf_on_device[slot] = false;
    r->hold[slot] = NULL;
    r->hold_release[slot] = NULL;
}

void cr_request_free_inputs(cr_request *r)
{
    for (int slot = 0; slot < CR_BUF_OUTPUT; slot++)
        cr_request_free_buf(r, slot);
    if (r->work_bytes)
        cr_mem_release(CR_MEM_SCRATCH, r->work_bytes);
    r->work_bytes = 0;
}

int cr_request_charge_work(cr_request *r, uint64_t bytes, cr_error *err)
{
    if (!bytes)
        return 0;
    if (cr_mem_charge(CR_MEM_SCRATCH, bytes, "the backend's working copy of the operands", err) < 0)
        return -1;
    r->work_bytes += bytes;
    return 0;
}

void cr_request_end(cr_request *r)
{
    cr_request_free_inputs(r);
    if (!r->buf_borrowed[CR_BUF_OUTPUT] || r->out_stream)
        return;
    cr_task_set_output(&r->task, NULL);
    cr_request_free_buf(r, CR_BUF_OUTPUT);
}

void cr_request_free(cr_request *r)
{
    if (!r)
        return;
    cr_request_free_inputs(r);
    cr_request_free_buf(r, CR_BUF_OUTPUT);
    memset(r, 0, sizeof *r);
}

int cr_request_decode_charge(size_t body_bytes, cr_error *err)
{
    return cr_mem_charge(CR_MEM_DECODE, CR_DECODE_BYTES(body_bytes), "decoding the body", err);
}

void cr_request_decode_release(size_t body_bytes)
{
    cr_mem_release(CR_MEM_DECODE, CR_DECODE_BYTES(body_bytes));
}

cr_shape cr_request_result_shape(const cr_request *r)
{
    const cr_task *t = &r->task;
    if (r->shaped)
        return r->out_shape;
    switch (t->op) {
    case CR_OP_GEMM: return cr_shape_2d(t->u.gemm.m, t->u.gemm.n);
    case CR_OP_ATA: return cr_shape_2d(t->u.ata.n, t->u.ata.n);
    default: {
        cr_shape s = {.rank = 1};
        s.dims[0] = t->u.hist.bins;
        return s;
    }
    }
}
