/* cuda backend run(): one task on one worker, in phases timed by events on the worker's stream:
 * host → pinned staging → device (h2d), the kernel, device → pinned → host (d2h).
 *
 * Device memory for a task is one block from the device's stream-ordered pool, laid out
 * [inputs | output | scratch] with the inputs packed exactly as in the pinned buffer, so one
 * copy moves them all. The output goes back through the same pinned buffer. An input that a
 * prefetch (prefetch.cu) already copied to this device during its upload takes no room in the
 * block: the kernel reads the prefetch's buffer once its copies are done. Tensors in a client's
 * device memory (CUDA shared memory, ipc.cu) are neither copied nor given room: the kernel reads
 * such inputs and writes such an output where they are.
 *
 * A stack (t->stack.rank > 0) is laid out the same way, each operand all of its matrices (mats[k],
 * densely packed as they came) and the output its count matrices: still one copy in and one copy
 * out. Its C is an input only when beta applies; when products each read their own C matrix it is
 * updated in place as a single task's is, else (c broadcast) the output starts as c expanded on
 * the device into every product's matrix (stack_ops.cu), never copied count times from the host.
 * Stacks take every path a single task does: lanes, prefetched and resident inputs. */
#include <string.h>

#include "kernels/cuda/launch.h"
#include "kernels/cuda/prefetch.h"
#include "kernels/cuda/stack_ops.h"
#include "kernels/registry.h"
#include "kernels/stack.h"

#define ALIGN 256
#define MAX_INPUTS 3

static size_t align_up(size_t x) { return (x + ALIGN - 1) & ~(size_t)(ALIGN - 1); }

/* Inputs already on this worker's device: prefetched while they were uploaded (done: their last
 * copy) or in a client's device memory (no event: nothing to wait for); and an output that is. */
typedef struct {
    bool on[MAX_INPUTS];
    void *dev[MAX_INPUTS];
    cudaEvent_t done[MAX_INPUTS];
    void *out;
} resident_inputs;

/* Where each piece of a task lives in the device block (and, for inputs, in pinned memory). */
typedef struct {
    resident_inputs res;
    char *in_dev[MAX_INPUTS]; /* set once the block is allocated */
    const void *in_host[MAX_INPUTS];
    size_t in_off[MAX_INPUTS], in_bytes[MAX_INPUTS];
    int n_in;
    size_t in_end;          /* inputs occupy [0, in_end) */
    size_t out_off, out_bytes;
    bool out_is_input;      /* GEMM with c_in in the block: the output region starts as it */
    bool c_copy;            /* GEMM with c_in elsewhere: copied into the output before the kernel */
    bool c_expand;          /* a stack whose c broadcasts: expanded into the output before the kernel */
    void *out_host;
    /* Host buffers already pinned (binary uploads): copied to/from directly, never staged. */
    bool in_pinned[MAX_INPUTS], out_pinned, any_in_pinned;
    size_t work_off, work_bytes;
    size_t total;
} task_layout;

static void add_input(task_layout *l, const void *host, size_t bytes)
{
    int i = l->n_in++;
    l->in_host[i] = host;
    l->in_bytes[i] = bytes;
    l->in_off[i] = align_up(l->in_end);
    l->in_end = l->in_off[i] + (l->res.on[i] ? 0 : bytes);
}

/* The output's room in the block: c's own when the kernel updates c in place, none when the
 * output is in a client's device memory. */
static void set_output(task_layout *l, void *host, size_t bytes, size_t work_bytes)
{
    l->out_off = l->out_is_input ? l->in_off[l->n_in - 1] : align_up(l->in_end);
    l->out_bytes = bytes;
    l->out_host = host;
    l->work_off = align_up(l->out_off + (l->res.out ? 0 : bytes));
    l->work_bytes = work_bytes;
    l->total = l->work_off + work_bytes;
}

static void plan_task(const cr_task *t, task_layout *l, const resident_inputs *res)
{
    memset(l, 0, sizeof *l);
    if (res)
        l->res = *res;
    size_t es = cr_dtype_size(t->dtype);
    size_t scratch = t->kernel && t->kernel->scratch ? (size_t)t->kernel->scratch(t) : 0;
    size_t na = (size_t)cr_task_operand_matrices(t, CR_STACK_A), out_n = (size_t)cr_task_matrices(t);
    bool stack = t->stack.rank > 0;
    if (t->op == CR_OP_GEMM) {
        const cr_gemm_task *g = &t->u.gemm;
        add_input(l, g->a, (size_t)(g->m * g->k) * es * na);
        add_input(l, g->b, (size_t)(g->k * g->n) * es * (size_t)cr_task_operand_matrices(t, CR_STACK_B));
        if (g->c_in && (!stack || g->beta != 0.0)) {
            add_input(l, g->c_in, (size_t)(g->m * g->n) * es * (size_t)cr_task_operand_matrices(t, CR_STACK_C));
            bool own_c = !stack || cr_stack_identity(&t->stack, CR_STACK_C); /* product i reads C matrix i */
            l->out_is_input = own_c && !l->res.on[2] && !l->res.out;
            l->c_copy = own_c && !l->out_is_input;
            l->c_expand = !own_c;
        }
        set_output(l, g->c_out, (size_t)(g->m * g->n) * es * out_n, scratch);
    } else if (t->op == CR_OP_ATA) {
        const cr_ata_task *a = &t->u.ata;
        add_input(l, a->a, (size_t)(a->m * a->n) * es * na);
        set_output(l, a->c_out, (size_t)(a->n * a->n) * es * out_n, scratch);
    } else {
        const cr_hist_task *h = &t->u.hist;
        add_input(l, h->data, (size_t)h->count * es);
        set_output(l, h->counts, (size_t)h->bins * sizeof(uint64_t), scratch);
    }
}

uint64_t cr_cuda_task_device_bytes(const cr_task *t)
{
    task_layout l;
    plan_task(t, &l, NULL);
    return l.total;
}

/* ---- the kernel phase ---- */

/* The op's prologue (C is zeros without c_in, or a stack's c that beta 0 leaves unread: never
 * read uninitialized pool memory, even times 0; an empty AᵀA or stack has nothing to launch),
 * then the registry row's launcher. */
static cudaError_t run_kernel(const cr_exec *x, const cr_task *t, char *dev, const task_layout *l, cr_cuda_err *e)
{
    void *out = l->res.out ? l->res.out : dev + l->out_off;
    cr_cuda_launch launch = {x, t, {l->in_dev[0], l->in_dev[1], l->n_in > 2 ? l->in_dev[2] : NULL},
                             out, l->work_bytes ? dev + l->work_off : NULL, l->work_bytes, e};
    if (t->op == CR_OP_GEMM && l->n_in < 3)
        CR_CHECK(e, cudaMemsetAsync(launch.out, 0, l->out_bytes, x->stream));
    /* the kernel updates C in place: never the client's input c itself, unless c is the output
     * (a resident tensor accumulated into: C += A·B) */
    if (l->c_copy && out != l->in_dev[2])
        CR_CHECK(e, cudaMemcpyAsync(out, l->in_dev[2], l->out_bytes, cudaMemcpyDeviceToDevice, x->stream));
    if (l->c_expand)
        CR_CHECK(e, cr_cuda_stack_expand(out, l->in_dev[2], &t->stack,
                                         (size_t)(t->u.gemm.m * t->u.gemm.n) * cr_dtype_size(t->dtype), x->stream));
    if ((t->op == CR_OP_ATA && t->u.ata.n == 0) || cr_task_matrices(t) == 0)
        return cudaSuccess;
    CR_CHECK(e, (cudaError_t)t->kernel->cuda(&launch));
cleanup:
    return e->code;
}

/* ---- phases ---- */

/* Between phases: with a cancel flag, wait for the phase and look at the flag. */
static bool cancelled_after(const cr_exec *x, const cr_task *t, int ev, cr_cuda_err *e)
{
    if (!t->cancel)
        return false;
    if (cr_check_record(e, cudaEventSynchronize(x->ev[ev]), "cudaEventSynchronize", __FILE__, __LINE__))
        return false;
    return *t->cancel != 0;
}

/* The registry resolved the kernel for this task; a row of another backend, or one that cannot
 * run the task, is a caller's bug and gets a status, not a launch. */
static cr_status check_kernel(const cr_task *t, char *err, size_t errlen)
{
    if (!t->kernel || t->kernel->backend != CR_BACKEND_CUDA || !t->kernel->cuda) {
        snprintf(err, errlen, "no cuda kernel '%s' for %s", t->kernel ? t->kernel->name : "(null)",
                 cr_op_name(t->op));
        return CR_E_INVALID;
    }
    switch (cr_kernel_check(t->kernel, t, err, errlen)) {
    case CR_KCHECK_OK: return cr_stack_check(t, err, errlen);
    case CR_KCHECK_OP: return CR_E_INVALID;
    default: return CR_E_UNSUPPORTED;
    }
}

/* Page-locked host memory, which the copy engines read and write directly: cudaHostAlloc's
 * blocks (binary uploads) and memory locked in place by cudaHostRegister (registered shared-
 * memory regions, backend_cuda.cu's host_register) answer alike. A tensor lies inside one
 * block or one region, so its first byte speaks for all of it. */
static bool is_pinned(const void *p)
{
    cudaPointerAttributes a;
    if (!p || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError(); /* older runtimes call plain malloc memory an invalid value */
        return false;
    }
    return a.type == cudaMemoryTypeHost;
}

/* Which buffers need no staging: pinned host memory, and what is already on the device (the
 * device-memory case marks them pinned so the per-input copy path, which skips them, is taken). */
static void find_pinned(task_layout *l)
{
    for (int i = 0; i < l->n_in; i++) {
        l->in_pinned[i] = l->in_bytes[i] && (l->res.on[i] || is_pinned(l->in_host[i]));
        l->any_in_pinned |= l->in_pinned[i];
    }
    l->out_pinned = l->out_bytes && (l->res.out || is_pinned(l->out_host));
}

/* Copies the pageable inputs into the worker's pinned staging; pinned ones stay where they are. */
static cr_status stage_inputs(cr_exec *x, const task_layout *l, char *err, size_t errlen)
{
    size_t staged_in = 0;
    for (int i = 0; i < l->n_in; i++)
        if (!l->in_pinned[i] && l->in_bytes[i])
            staged_in = l->in_off[i] + l->in_bytes[i];
    size_t out = l->out_pinned ? 0 : l->out_bytes;
    size_t need = staged_in > out ? staged_in : out;
    if (need && cr_exec_stage(x, need) != cudaSuccess) {
        cudaGetLastError();
        snprintf(err, errlen, "cannot pin %zu bytes of host staging memory", need);
        return CR_E_NOMEM_HOST;
    }
    for (int i = 0; i < l->n_in; i++)
        if (l->in_bytes[i] && !l->in_pinned[i])
            memcpy((char *)x->pinned + l->in_off[i], l->in_host[i], l->in_bytes[i]);
    return CR_OK;
}

/* Where p points: 1 this worker's device memory, 0 host memory, -1 another device's. */
static int device_memory(const cr_worker *w, const void *p)
{
    cudaPointerAttributes a;
    if (!p || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    if (a.type != cudaMemoryTypeDevice)
        return 0;
    return a.device == w->device ? 1 : -1;
}

/* The tensors of this task that are on this worker's device already: a client's device memory,
 * and inputs prefetched there. Never the in-place output (c with beta) from a prefetch: the
 * kernel overwrites it, and compare mode's next run must read the original again. -1 when a
 * tensor is in another device's memory (the engine places such jobs; this is its bug). */
static int find_resident(const cr_worker *w, const task_layout *l, resident_inputs *r)
{
    int any = 0, where;
    memset(r, 0, sizeof *r);
    for (int i = 0; i < l->n_in; i++) {
        if (!l->in_bytes[i])
            continue;
        if ((where = device_memory(w, l->in_host[i])) < 0)
            return -1;
        bool in_place = l->out_is_input && i == l->n_in - 1;
        r->on[i] = where ? (r->dev[i] = (void *)l->in_host[i], true)
                         : !in_place && cr_prefetch_take(l->in_host[i], l->in_bytes[i], w->device, &r->dev[i],
                                                         &r->done[i]);
        any |= r->on[i];
    }
    if (l->out_bytes && (where = device_memory(w, l->out_host)) != 0) {
        if (where < 0)
            return -1;
        r->out = l->out_host;
        any = 1;
    }
    return any;
}

/* Whether copy_inputs copies anything from the host (resident and prefetched inputs do not). */
static bool copies_inputs(const task_layout *l)
{
    if (!l->any_in_pinned)
        return l->in_end > 0;
    for (int i = 0; i < l->n_in; i++)
        if (l->in_bytes[i] && !l->res.on[i])
            return true;
    return false;
}

/* One copy of the packed inputs when all were staged; else one per input, each from wherever
 * it is pinned; prefetched inputs only wait for their last chunk. */
static cudaError_t copy_inputs(const cr_exec *x, const task_layout *l, char *dev, cr_cuda_err *e)
{
    if (!l->any_in_pinned) {
        if (l->in_end)
            CR_CHECK(e, cudaMemcpyAsync(dev, x->pinned, l->in_end, cudaMemcpyHostToDevice, x->stream));
        return cudaSuccess;
    }
    for (int i = 0; i < l->n_in; i++) {
        if (l->res.on[i] && l->res.done[i])
            CR_CHECK(e, cudaStreamWaitEvent(x->stream, l->res.done[i], 0));
        if (!l->in_bytes[i] || l->res.on[i])
            continue;
        const void *src = l->in_pinned[i] ? l->in_host[i] : (const char *)x->pinned + l->in_off[i];
        CR_CHECK(e, cudaMemcpyAsync(dev + l->in_off[i], src, l->in_bytes[i], cudaMemcpyHostToDevice,
                                    x->stream));
    }
cleanup:
    return e->code;
}

/* Queues the task on x's stream: its copies in, the kernel, the copy out (and the free of its
 * device block when it needed one of its own: stream-ordered, so nothing waits here). With check_cancel, waits after each
 * phase to look at the job's cancel flag (run(): a lane's task is answered once it is done). On
 * failure nothing of the task is left queued, and err says why. *f: what the wait needs. */
static cr_status enqueue(cr_worker *w, cr_exec *x, const cr_task *t, bool check_cancel, cr_flight *f, char *err,
                         size_t errlen)
{
    cr_cuda_err e = {};
    char *dev = NULL;
    bool cancelled = false, owned = false;
    task_layout l;
    cr_status st = check_kernel(t, err, errlen);
    if (st != CR_OK)
        return st;
    resident_inputs res;
    plan_task(t, &l, NULL);
    int resident = find_resident(w, &l, &res);
    if (resident < 0) {
        snprintf(err, errlen, "a tensor of this task is in another device's memory than %s (device %d)",
                 w->device_name, w->device);
        return CR_E_INVALID;
    }
    if (resident)
        plan_task(t, &l, &res); /* again, without room for what is already there */
    find_pinned(&l);
    CR_CHECK(&e, cudaSetDevice(w->device));
    /* device memory first: a task too big for the device fails before any host staging */
    CR_CHECK(&e, cr_exec_device(w, x, l.total ? l.total : 1, &dev, &owned));
    for (int i = 0; i < l.n_in; i++)
        l.in_dev[i] = l.res.on[i] ? (char *)l.res.dev[i] : dev + l.in_off[i];
    if ((st = stage_inputs(x, &l, err, errlen)) != CR_OK)
        goto cleanup;
    CR_CHECK(&e, cudaEventRecord(x->ev[EV_START], x->stream));
    x->copies_in = copies_inputs(&l);
    x->copies_out = l.out_bytes && !l.res.out;
    CR_CHECK(&e, copy_inputs(x, &l, dev, &e));
    CR_CHECK(&e, cudaEventRecord(x->ev[EV_H2D], x->stream));
    if (check_cancel && ((cancelled = cancelled_after(x, t, EV_H2D, &e)) || e.code))
        goto cleanup;
    CR_CHECK(&e, run_kernel(x, t, dev, &l, &e));
    CR_CHECK(&e, cudaEventRecord(x->ev[EV_KERNEL], x->stream));
    if (check_cancel && ((cancelled = cancelled_after(x, t, EV_KERNEL, &e)) || e.code))
        goto cleanup;
    if (l.out_bytes && !l.res.out)
        CR_CHECK(&e, cudaMemcpyAsync(l.out_pinned ? l.out_host : x->pinned, dev + l.out_off, l.out_bytes,
                                     cudaMemcpyDeviceToHost, x->stream));
    CR_CHECK(&e, cudaEventRecord(x->ev[EV_D2H], x->stream));
    *f = (cr_flight){l.out_bytes && !l.out_pinned ? l.out_host : NULL, l.out_bytes};
cleanup:
    if (owned && dev)
        cudaFreeAsync(dev, x->stream); /* stream-ordered: after the task */
    if (e.code != cudaSuccess || cancelled || st != CR_OK) {
        cudaStreamSynchronize(x->stream); /* nothing of this task may still touch the staging */
        cr_exec_unstage(x);
    }
    if (st != CR_OK && e.code == cudaSuccess)
        return st; /* host staging failed; err says why */
    if (cancelled && !e.code) {
        snprintf(err, errlen, "cancelled");
        return CR_E_CANCELLED;
    }
    if (e.code == cudaSuccess)
        return CR_OK;
    st = cr_cuda_status(e.code);
    if (st == CR_E_NOMEM_DEVICE)
        snprintf(err, errlen, "task needs %zu bytes of device memory on %s (device %d): %s", l.total,
                 w->device_name, w->device, e.msg);
    else
        snprintf(err, errlen, "%s", e.msg);
    return st;
}

/* Waits for a queued task: its output copied from the staging where it came back through it. */
static cr_status complete(cr_worker *w, cr_exec *x, const cr_flight *f, cr_timings *tm, char *err, size_t errlen)
{
    cr_cuda_err e = {};
    CR_CHECK(&e, cudaStreamSynchronize(x->stream));
    if (f->out_host)
        memcpy(f->out_host, x->pinned, f->out_bytes);
cleanup:
    cr_exec_unstage(x);
    if (tm)
        cr_exec_timings(w, x, e.code == cudaSuccess, tm);
    if (e.code == cudaSuccess)
        return CR_OK;
    snprintf(err, errlen, "%s", e.msg);
    return cr_cuda_status(e.code);
}

cr_status cr_cuda_run(cr_worker *w, const cr_task *t, cr_timings *tm, char *err, size_t errlen)
{
    cr_flight f;
    cr_status st = enqueue(w, &w->x, t, true, &f, err, errlen);
    return st != CR_OK ? st : complete(w, &w->x, &f, tm, err, errlen);
}

cr_status cr_cuda_run_launch(cr_worker *w, int lane, const cr_task *t, char *err, size_t errlen)
{
    return enqueue(w, &w->lane[lane].x, t, false, &w->lane[lane].run, err, errlen);
}

cr_status cr_cuda_run_wait(cr_worker *w, int lane, cr_timings *tm, char *err, size_t errlen)
{
    return complete(w, &w->lane[lane].x, &w->lane[lane].run, tm, err, errlen);
}
