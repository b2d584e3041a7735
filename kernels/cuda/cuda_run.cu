/* cuda backend run(): one task on one worker, in phases timed by events on the worker's stream:
 * host → pinned staging → device (h2d), the kernel, device → pinned → host (d2h).
 *
 * Device memory for a task is one block from the device's stream-ordered pool, laid out
 * [inputs | output | scratch] with the inputs packed exactly as in the pinned buffer, so one
 * copy moves them all. The output goes back through the same pinned buffer. An input that a
 * prefetch (prefetch.cu) already copied to this device during its upload takes no room in the
 * block: the kernel reads the prefetch's buffer once its copies are done. */
#include <string.h>

#include "ata_hist_kernels.h" /* first: it gives backend.h C linkage */
#include "cuda_worker.h"
#include "cuda_kernels.h"
#include "prefetch.h"

#define ALIGN 256
#define MAX_INPUTS 3

static size_t align_up(size_t x) { return (x + ALIGN - 1) & ~(size_t)(ALIGN - 1); }

/* Inputs already on this worker's device (prefetched while they were uploaded). */
typedef struct {
    bool on[MAX_INPUTS];
    void *dev[MAX_INPUTS];
    cudaEvent_t done[MAX_INPUTS]; /* their last copy */
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
    bool out_is_input;      /* GEMM with c_in: the output region starts as an input */
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

static void set_output(task_layout *l, void *host, size_t bytes, size_t work_bytes)
{
    l->out_off = l->out_is_input ? l->in_off[l->n_in - 1] : align_up(l->in_end);
    l->out_bytes = bytes;
    l->out_host = host;
    l->work_off = align_up(l->out_off + bytes);
    l->work_bytes = work_bytes;
    l->total = l->work_off + work_bytes;
}

static size_t hist_cub_temp(const cr_task *t)
{
    const cr_hist_task *h = &t->u.hist;
    cr_hist_dev d = {h->count, NULL, h->bins, h->lo, h->hi, NULL};
    size_t bytes = 0;
    return cr_cuda_hist_cub(&d, t->dtype, NULL, &bytes, 0) == cudaSuccess ? bytes : 0;
}

static void plan_task(const cr_task *t, task_layout *l, const resident_inputs *res)
{
    memset(l, 0, sizeof *l);
    if (res)
        l->res = *res;
    size_t es = cr_dtype_size(t->dtype);
    if (t->op == CR_OP_GEMM) {
        const cr_gemm_task *g = &t->u.gemm;
        add_input(l, g->a, (size_t)(g->m * g->k) * es);
        add_input(l, g->b, (size_t)(g->k * g->n) * es);
        if (g->c_in) {
            add_input(l, g->c_in, (size_t)(g->m * g->n) * es);
            l->out_is_input = true;
        }
        set_output(l, g->c_out, (size_t)(g->m * g->n) * es, 0);
    } else if (t->op == CR_OP_ATA) {
        const cr_ata_task *a = &t->u.ata;
        add_input(l, a->a, (size_t)(a->m * a->n) * es);
        cr_ata_dev d = {a->m, a->n, a->trans_a, NULL, NULL, NULL};
        bool symtile = t->kernel && strcmp(t->kernel, "symtile") == 0;
        set_output(l, a->c_out, (size_t)(a->n * a->n) * es,
                   symtile ? cr_cuda_ata_work_bytes(&d, t->dtype, cr_cuda_ata_symtile) : 0);
    } else {
        const cr_hist_task *h = &t->u.hist;
        add_input(l, h->data, (size_t)h->count * es);
        bool cub = t->kernel && strcmp(t->kernel, "cub") == 0;
        set_output(l, h->counts, (size_t)h->bins * sizeof(uint64_t), cub ? hist_cub_temp(t) : 0);
    }
}

uint64_t cr_cuda_task_device_bytes(const cr_task *t)
{
    task_layout l;
    plan_task(t, &l, NULL);
    return l.total;
}

/* ---- the kernel phase, per op ---- */

static int64_t ld_of(int64_t x) { return x > 1 ? x : 1; } /* cuBLAS wants ld >= 1 even when empty */

/* Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: the row-major buffers already are
 * the column-major transposes, so swap the operands and m↔n, no copies. */
static cublasStatus_t cublas_gemm(cr_worker *w, const cr_task *t, const cr_gemm_dev *g)
{
    cublasOperation_t op_b = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_a = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    int ldb = (int)ld_of(g->trans_b ? g->k : g->n), lda = (int)ld_of(g->trans_a ? g->m : g->k);
    int ldc = (int)ld_of(g->n);
    if (t->dtype == CR_DT_F64)
        return cublasDgemm(w->blas, op_b, op_a, (int)g->n, (int)g->m, (int)g->k, &g->alpha,
                           (const double *)g->b, ldb, (const double *)g->a, lda, &g->beta, (double *)g->c, ldc);
    float alpha = (float)g->alpha, beta = (float)g->beta;
    return cublasSgemm(w->blas, op_b, op_a, (int)g->n, (int)g->m, (int)g->k, &alpha, (const float *)g->b,
                       ldb, (const float *)g->a, lda, &beta, (float *)g->c, ldc);
}

/* TF32 tensor-op math for this one call, then back to exact FP32 for the worker's next task. */
static cudaError_t cublas_gemm_tf32(cr_worker *w, const cr_task *t, const cr_gemm_dev *g, cr_cuda_err *e)
{
    bool set = false;
    CR_CHECK(e, cublasSetMathMode(w->blas, CUBLAS_TF32_TENSOR_OP_MATH));
    set = true;
    CR_CHECK(e, cublas_gemm(w, t, g));
cleanup:
    if (set)
        cr_check_record(e, cublasSetMathMode(w->blas, CUBLAS_DEFAULT_MATH), "restore math mode", __FILE__, __LINE__);
    return e->code;
}

static const struct { const char *name; cr_gemm_launcher fn; } gemm_own[] = {
    {"naive", cr_cuda_gemm_naive}, {"regtile", cr_cuda_gemm_regtile}, {"smem", cr_cuda_gemm_smem},
    {"blocktile", cr_cuda_gemm_blocktile}, {"vec", cr_cuda_gemm_vec}, {"dbuf", cr_cuda_gemm_dbuf},
};

static cudaError_t run_gemm(cr_worker *w, const cr_task *t, char *dev, const task_layout *l, cr_cuda_err *e)
{
    const cr_gemm_task *gt = &t->u.gemm;
    cr_gemm_dev g = {gt->m, gt->n, gt->k, gt->trans_a, gt->trans_b, gt->alpha,
                     gt->c_in ? gt->beta : 0.0, l->in_dev[0], l->in_dev[1], dev + l->out_off};
    if (!gt->c_in) /* C treated as zeros: never read uninitialized pool memory, even times 0 */
        CR_CHECK(e, cudaMemsetAsync(g.c, 0, l->out_bytes, w->stream));
    if (strcmp(t->kernel, "cublas") == 0)
        CR_CHECK(e, cublas_gemm(w, t, &g));
    else if (strcmp(t->kernel, "cublas-tf32") == 0)
        CR_CHECK(e, cublas_gemm_tf32(w, t, &g, e));
    else
        for (size_t i = 0; i < sizeof gemm_own / sizeof gemm_own[0]; i++)
            if (strcmp(t->kernel, gemm_own[i].name) == 0)
                CR_CHECK(e, gemm_own[i].fn(&g, t->dtype, w->stream));
cleanup:
    return e->code;
}

/* AᵀA on cuBLAS: the row-major A (m×n) is the column-major X = Aᵀ (n×m), AᵀA = X·Xᵀ; a stored Aᵀ
 * is the column-major A, AᵀA = AᵀA with trans. Column-major lower = row-major upper triangle,
 * which the mirror then copies down. */
static cudaError_t cublas_syrk(cr_worker *w, const cr_task *t, const void *a, void *c, cr_cuda_err *e)
{
    const cr_ata_task *at = &t->u.ata;
    cublasOperation_t op = at->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    int n = (int)at->n, k = (int)at->m, lda = (int)ld_of(at->trans_a ? at->m : at->n);
    if (t->dtype == CR_DT_F64) {
        const double one = 1.0, zero = 0.0;
        CR_CHECK(e, cublasDsyrk(w->blas, CUBLAS_FILL_MODE_LOWER, op, n, k, &one, (const double *)a, lda,
                                &zero, (double *)c, (int)ld_of(n)));
    } else {
        const float one = 1.0f, zero = 0.0f;
        CR_CHECK(e, cublasSsyrk(w->blas, CUBLAS_FILL_MODE_LOWER, op, n, k, &one, (const float *)a, lda,
                                &zero, (float *)c, (int)ld_of(n)));
    }
    CR_CHECK(e, cr_cuda_mirror_upper(c, at->n, t->dtype, w->stream));
cleanup:
    return e->code;
}

/* AᵀA through our fastest own GEMM: C(n×n) = op(A)·op(B) with both operands the one stored A. */
static cudaError_t ata_as_gemm(cr_worker *w, const cr_task *t, const void *a, void *c)
{
    const cr_ata_task *at = &t->u.ata;
    cr_gemm_dev g = {at->n, at->n, at->m, !at->trans_a, at->trans_a, 1.0, 0.0, a, a, c};
    return cr_cuda_gemm_dbuf(&g, t->dtype, w->stream);
}

static cudaError_t run_ata(cr_worker *w, const cr_task *t, char *dev, const task_layout *l, cr_cuda_err *e)
{
    const cr_ata_task *at = &t->u.ata;
    void *a = l->in_dev[0], *c = dev + l->out_off;
    cr_ata_dev d = {at->m, at->n, at->trans_a, a, c, l->work_bytes ? dev + l->work_off : NULL};
    if (at->n == 0)
        return cudaSuccess;
    if (strcmp(t->kernel, "cublas-syrk") == 0)
        CR_CHECK(e, cublas_syrk(w, t, a, c, e));
    else if (strcmp(t->kernel, "gemm") == 0)
        CR_CHECK(e, ata_as_gemm(w, t, a, c));
    else if (strcmp(t->kernel, "basic") == 0)
        CR_CHECK(e, cr_cuda_ata_basic(&d, t->dtype, w->stream));
    else if (strcmp(t->kernel, "symtile") == 0)
        CR_CHECK(e, cr_cuda_ata_symtile(&d, t->dtype, w->stream));
cleanup:
    return e->code;
}

static cudaError_t run_hist(cr_worker *w, const cr_task *t, char *dev, const task_layout *l, cr_cuda_err *e)
{
    const cr_hist_task *h = &t->u.hist;
    cr_hist_dev d = {h->count, l->in_dev[0], h->bins, h->lo, h->hi,
                     (unsigned long long *)(dev + l->out_off)};
    size_t temp_bytes = l->work_bytes;
    if (strcmp(t->kernel, "cub") == 0)
        CR_CHECK(e, cr_cuda_hist_cub(&d, t->dtype, dev + l->work_off, &temp_bytes, w->stream));
    else if (strcmp(t->kernel, "global") == 0)
        CR_CHECK(e, cr_cuda_hist_global(&d, t->dtype, w->stream));
    else if (strcmp(t->kernel, "smem") == 0)
        CR_CHECK(e, cr_cuda_hist_smem(&d, t->dtype, w->stream));
    else if (strcmp(t->kernel, "smem-vec") == 0)
        CR_CHECK(e, cr_cuda_hist_smem_vec(&d, t->dtype, w->stream));
cleanup:
    return e->code;
}

#ifdef CRUNCHD_FAULT_INJECTION
/* Test builds only: a real sticky fault, a store to an address no allocation covers. */
__global__ void fault_illegal_address_kernel(int *p) { *p = 42; }

static cudaError_t inject_illegal_address(cr_worker *w)
{
    fault_illegal_address_kernel<<<1, 1, 0, w->stream>>>((int *)(uintptr_t)0x10);
    cudaError_t e = cudaGetLastError();
    return e != cudaSuccess ? e : cudaStreamSynchronize(w->stream);
}
#endif

static cudaError_t run_kernel(cr_worker *w, const cr_task *t, char *dev, const task_layout *l, cr_cuda_err *e)
{
#ifdef CRUNCHD_FAULT_INJECTION
    if (strcmp(t->kernel, "fault-illegal-address") == 0)
        return inject_illegal_address(w);
#endif
    switch (t->op) {
    case CR_OP_GEMM: return run_gemm(w, t, dev, l, e);
    case CR_OP_ATA: return run_ata(w, t, dev, l, e);
    default: return run_hist(w, t, dev, l, e);
    }
}

/* ---- phases ---- */

/* Between phases: with a cancel flag, wait for the phase and look at the flag. */
static bool cancelled_after(cr_worker *w, const cr_task *t, int ev, cr_cuda_err *e)
{
    if (!t->cancel)
        return false;
    if (cr_check_record(e, cudaEventSynchronize(w->ev[ev]), "cudaEventSynchronize", __FILE__, __LINE__))
        return false;
    return *t->cancel != 0;
}

static void fill_timings(cr_worker *w, cr_timings *tm)
{
    float ms[EV_COUNT] = {0};
    for (int i = 1; i < EV_COUNT; i++)
        if (cudaEventElapsedTime(&ms[i], w->ev[i - 1], w->ev[i]) != cudaSuccess)
            ms[i] = 0;
    tm->h2d_ms = ms[EV_H2D];
    tm->kernel_ms = ms[EV_KERNEL];
    tm->d2h_ms = ms[EV_D2H];
    snprintf(tm->device, sizeof tm->device, "%s", w->device_name);
    tm->device_index = w->device;
}

static cr_status check_kernel(const cr_task *t, char *err, size_t errlen)
{
#ifdef CRUNCHD_FAULT_INJECTION
    if (t->kernel && strcmp(t->kernel, "fault-illegal-address") == 0)
        return CR_OK;
#endif
    const cr_kernel_info *k = NULL;
    size_t n = 0;
    const cr_kernel_info *list = cr_cuda_kernel_list(&n);
    for (size_t i = 0; t->kernel && i < n; i++)
        if (list[i].op == t->op && strcmp(list[i].name, t->kernel) == 0)
            k = &list[i];
    if (!k) {
        snprintf(err, errlen, "no cuda kernel '%s' for %s", t->kernel ? t->kernel : "(null)", cr_op_name(t->op));
        return CR_E_INVALID;
    }
    if (!(k->dtypes & CR_DT_BIT(t->dtype))) {
        snprintf(err, errlen, "kernel '%s' does not handle %s", k->name, cr_dtype_name(t->dtype));
        return CR_E_UNSUPPORTED;
    }
    if (k->tf32 && t->precision != CR_PREC_TF32) {
        snprintf(err, errlen, "kernel '%s' needs precision tf32", k->name);
        return CR_E_UNSUPPORTED;
    }
    return CR_OK;
}

/* Page-locked host memory (cudaHostAlloc), which the copy engines read and write directly. */
static bool is_pinned(const void *p)
{
    cudaPointerAttributes a;
    if (!p || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError(); /* older runtimes call plain malloc memory an invalid value */
        return false;
    }
    return a.type == cudaMemoryTypeHost;
}

static void find_pinned(task_layout *l)
{
    for (int i = 0; i < l->n_in; i++) {
        l->in_pinned[i] = l->in_bytes[i] && is_pinned(l->in_host[i]);
        l->any_in_pinned |= l->in_pinned[i];
    }
    l->out_pinned = l->out_bytes && is_pinned(l->out_host);
}

/* Copies the pageable inputs into the worker's pinned staging; pinned ones stay where they are. */
static cr_status stage_inputs(cr_worker *w, const task_layout *l, char *err, size_t errlen)
{
    size_t staged_in = 0;
    for (int i = 0; i < l->n_in; i++)
        if (!l->in_pinned[i] && l->in_bytes[i])
            staged_in = l->in_off[i] + l->in_bytes[i];
    size_t out = l->out_pinned ? 0 : l->out_bytes;
    size_t need = staged_in > out ? staged_in : out;
    if (need && cr_worker_reserve_pinned(w, need) != cudaSuccess) {
        cudaGetLastError();
        snprintf(err, errlen, "cannot pin %zu bytes of host staging memory", need);
        return CR_E_NOMEM_HOST;
    }
    for (int i = 0; i < l->n_in; i++)
        if (l->in_bytes[i] && !l->in_pinned[i])
            memcpy((char *)w->pinned + l->in_off[i], l->in_host[i], l->in_bytes[i]);
    return CR_OK;
}

/* The prefetched inputs of this task on this worker's device. Never the in-place output (c with
 * beta): the kernel overwrites it, and compare mode's next run must read the original again. */
static bool find_resident(const cr_worker *w, const task_layout *l, resident_inputs *r)
{
    bool any = false;
    memset(r, 0, sizeof *r);
    for (int i = 0; i < l->n_in; i++) {
        bool in_place = l->out_is_input && i == l->n_in - 1;
        r->on[i] = !in_place && l->in_bytes[i] &&
                   cr_prefetch_take(l->in_host[i], l->in_bytes[i], w->device, &r->dev[i], &r->done[i]);
        any |= r->on[i];
    }
    return any;
}

/* One copy of the packed inputs when all were staged; else one per input, each from wherever
 * it is pinned; prefetched inputs only wait for their last chunk. */
static cudaError_t copy_inputs(cr_worker *w, const task_layout *l, char *dev, cr_cuda_err *e)
{
    if (!l->any_in_pinned) {
        if (l->in_end)
            CR_CHECK(e, cudaMemcpyAsync(dev, w->pinned, l->in_end, cudaMemcpyHostToDevice, w->stream));
        return cudaSuccess;
    }
    for (int i = 0; i < l->n_in; i++) {
        if (l->res.on[i])
            CR_CHECK(e, cudaStreamWaitEvent(w->stream, l->res.done[i], 0));
        if (!l->in_bytes[i] || l->res.on[i])
            continue;
        const void *src = l->in_pinned[i] ? l->in_host[i] : (const char *)w->pinned + l->in_off[i];
        CR_CHECK(e, cudaMemcpyAsync(dev + l->in_off[i], src, l->in_bytes[i], cudaMemcpyHostToDevice,
                                    w->stream));
    }
cleanup:
    return e->code;
}

cr_status cr_cuda_run(cr_worker *w, const cr_task *t, cr_timings *tm, char *err, size_t errlen)
{
    cr_cuda_err e = {};
    char *dev = NULL;
    bool cancelled = false;
    task_layout l;
    cr_status st = check_kernel(t, err, errlen);
    if (st != CR_OK)
        return st;
    resident_inputs res;
    plan_task(t, &l, NULL);
    if (find_resident(w, &l, &res))
        plan_task(t, &l, &res); /* again, without room for what is already there */
    find_pinned(&l);
    CR_CHECK(&e, cudaSetDevice(w->device));
    /* device memory first: a task too big for the device fails before any host staging */
    CR_CHECK(&e, cudaMallocFromPoolAsync((void **)&dev, l.total ? l.total : 1, w->pool, w->stream));
    for (int i = 0; i < l.n_in; i++)
        l.in_dev[i] = l.res.on[i] ? (char *)l.res.dev[i] : dev + l.in_off[i];
    if ((st = stage_inputs(w, &l, err, errlen)) != CR_OK)
        goto cleanup;
    CR_CHECK(&e, cudaEventRecord(w->ev[EV_START], w->stream));
    CR_CHECK(&e, copy_inputs(w, &l, dev, &e));
    CR_CHECK(&e, cudaEventRecord(w->ev[EV_H2D], w->stream));
    if ((cancelled = cancelled_after(w, t, EV_H2D, &e)) || e.code)
        goto cleanup;
    CR_CHECK(&e, run_kernel(w, t, dev, &l, &e));
    CR_CHECK(&e, cudaEventRecord(w->ev[EV_KERNEL], w->stream));
    if ((cancelled = cancelled_after(w, t, EV_KERNEL, &e)) || e.code)
        goto cleanup;
    if (l.out_bytes)
        CR_CHECK(&e, cudaMemcpyAsync(l.out_pinned ? l.out_host : w->pinned, dev + l.out_off, l.out_bytes,
                                     cudaMemcpyDeviceToHost, w->stream));
    CR_CHECK(&e, cudaEventRecord(w->ev[EV_D2H], w->stream));
    CR_CHECK(&e, cudaStreamSynchronize(w->stream));
    if (l.out_bytes && !l.out_pinned)
        memcpy(l.out_host, w->pinned, l.out_bytes);
    if (tm)
        fill_timings(w, tm);
cleanup:
    if (dev)
        cudaFreeAsync(dev, w->stream);
    if (e.code != cudaSuccess || cancelled)
        cudaStreamSynchronize(w->stream); /* nothing of this task may still touch the staging */
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
