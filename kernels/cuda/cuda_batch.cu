/* Batches on the cuda backend (cr_backend.batch_launch / batch_wait): small tasks with one batch
 * key (kernels/registry.h) run as one host-to-device copy, one launch and one device-to-host copy
 * on a lane of the worker: its own stream, events and pinned staging, so that while one lane's
 * kernel runs the next lane's copies proceed, and the worker thread only waits when it has
 * nothing else to start.
 *
 * Layout, in the pinned staging and in one device block alike, operand by operand so that cuBLAS
 * can stride over them:  GEMM [A × n | B × n | C × n],  AᵀA [A × n | C × n],
 * histograms [data of each, aligned | one cr_hist_job each | counts × n].  The inputs are
 * everything before the outputs (GEMM's C too when it is an input), so each way is one copy. */
#include <string.h>

#include "kernels/cuda/ata_hist_kernels.h"
#include "kernels/cuda/launch.h"

#define ALIGN 256

static size_t align_up(size_t x) { return (x + ALIGN - 1) & ~(size_t)(ALIGN - 1); }

typedef struct {
    size_t in_off[2], in_each[2]; /* GEMM A, B; AᵀA A; histograms: unused (data offsets below) */
    size_t jobs_off;              /* histograms: the cr_hist_job array */
    size_t in_end;                /* bytes copied to the device */
    size_t out_off, out_each;
    size_t total;
    int64_t max_count;
} batch_layout;

/* Where histogram i's data starts: packed one after another, each aligned. */
static size_t hist_data_off(cr_task *const *t, int i, size_t es)
{
    size_t off = 0;
    for (int k = 0; k < i; k++)
        off = align_up(off + (size_t)t[k]->u.hist.count * es);
    return off;
}

static void plan(cr_task *const *t, int n, batch_layout *l)
{
    size_t es = cr_dtype_size(t[0]->dtype);
    memset(l, 0, sizeof *l);
    if (t[0]->op == CR_OP_GEMM) {
        const cr_gemm_task *g = &t[0]->u.gemm;
        l->in_each[0] = (size_t)(g->m * g->k) * es;
        l->in_each[1] = (size_t)(g->k * g->n) * es;
        l->in_off[1] = align_up(n * l->in_each[0]);
        l->out_off = align_up(l->in_off[1] + n * l->in_each[1]);
        l->out_each = (size_t)(g->m * g->n) * es;
        l->total = l->out_off + n * l->out_each;
        l->in_end = g->c_in ? l->total : l->out_off;
    } else if (t[0]->op == CR_OP_ATA) {
        const cr_ata_task *a = &t[0]->u.ata;
        l->in_each[0] = (size_t)(a->m * a->n) * es;
        l->out_off = align_up(n * l->in_each[0]);
        l->out_each = (size_t)(a->n * a->n) * es;
        l->total = l->out_off + n * l->out_each;
        l->in_end = l->out_off;
    } else {
        for (int i = 0; i < n; i++)
            l->max_count = t[i]->u.hist.count > l->max_count ? t[i]->u.hist.count : l->max_count;
        l->jobs_off = hist_data_off(t, n, es);
        l->in_end = l->jobs_off + n * sizeof(cr_hist_job);
        l->out_off = align_up(l->in_end);
        l->out_each = (size_t)t[0]->u.hist.bins * sizeof(uint64_t);
        l->total = l->out_off + n * l->out_each;
    }
}

/* Packs the inputs into the pinned staging; histograms also get their job descriptions, which
 * point into the device block. */
static cudaError_t pack(cr_lane *L, const batch_layout *l, char *dev, cr_task *const *t, int n)
{
    char *p = (char *)L->x.pinned;
    size_t es = cr_dtype_size(t[0]->dtype);
    if (t[0]->op == CR_OP_HISTOGRAM) {
        cr_hist_job *jobs = (cr_hist_job *)(p + l->jobs_off);
        for (int i = 0; i < n; i++) {
            const cr_hist_task *h = &t[i]->u.hist;
            size_t off = hist_data_off(t, i, es);
            if (h->count)
                memcpy(p + off, h->data, (size_t)h->count * es);
            cr_hist_dev d = {h->count, dev + off, h->bins, h->lo, h->hi,
                             (unsigned long long *)(dev + l->out_off + i * l->out_each)};
            cudaError_t e = cr_hist_job_make(&d, t[i]->dtype, &jobs[i]);
            if (e != cudaSuccess)
                return e;
        }
        return cudaSuccess;
    }
    for (int i = 0; i < n; i++) {
        if (t[i]->op == CR_OP_GEMM) {
            const cr_gemm_task *g = &t[i]->u.gemm;
            memcpy(p + i * l->in_each[0], g->a, l->in_each[0]);
            memcpy(p + l->in_off[1] + i * l->in_each[1], g->b, l->in_each[1]);
            if (g->c_in)
                memcpy(p + l->out_off + i * l->out_each, g->c_in, l->out_each);
        } else {
            memcpy(p + i * l->in_each[0], t[i]->u.ata.a, l->in_each[0]);
        }
    }
    return cudaSuccess;
}

static cudaError_t launch_kernel(cr_lane *L, const batch_layout *l, char *dev, cr_task *const *t, int n)
{
    cr_cuda_err *e = &L->e;
    const cr_task *t0 = t[0];
    if (t0->op == CR_OP_HISTOGRAM) {
        CR_CHECK(e, cudaMemsetAsync(dev + l->out_off, 0, n * l->out_each, L->x.stream));
        CR_CHECK(e, cr_cuda_hist_batched((const cr_hist_job *)(dev + l->jobs_off), n, t0->u.hist.bins,
                                         l->max_count, t0->dtype, L->x.stream));
        return cudaSuccess;
    }
    if (t0->op == CR_OP_GEMM)
        CR_CHECK(e, cr_cublas_gemm_batched(L->x.blas, &t0->u.gemm, t0->dtype, t0->precision == CR_PREC_TF32, dev,
                                           dev + l->in_off[1], dev + l->out_off, n));
    else if (t0->u.ata.n > 0)
        CR_CHECK(e, cr_cublas_ata_batched(L->x.blas, &t0->u.ata, t0->dtype, dev, dev + l->out_off, n));
cleanup:
    return e->code;
}

static void fail_all(cr_status s, cr_status *st, int n)
{
    for (int i = 0; i < n; i++)
        st[i] = s;
}

cr_status cr_cuda_batch_launch(cr_worker *w, int lane, cr_task *const *t, int n, cr_status *st,
                                          char *err, size_t errlen)
{
    cr_lane *L = &w->lane[lane];
    cr_cuda_err *e = &L->e;
    char *dev = NULL;
    bool owned = false;
    batch_layout l;
    memset(e, 0, sizeof *e);
    plan(t, n, &l);
    CR_CHECK(e, cudaSetDevice(w->device));
    if (cr_exec_stage(&L->x, l.total ? l.total : 1) != cudaSuccess) {
        cudaGetLastError();
        snprintf(err, errlen, "cannot pin %zu bytes of host staging for a batch of %d", l.total, n);
        fail_all(CR_E_NOMEM_HOST, st, n);
        return CR_E_NOMEM_HOST;
    }
    CR_CHECK(e, cr_exec_device(w, &L->x, l.total ? l.total : 1, &dev, &owned));
    CR_CHECK(e, pack(L, &l, dev, t, n));
    CR_CHECK(e, cudaEventRecord(L->x.ev[EV_START], L->x.stream));
    L->x.copies_in = l.in_end > 0;
    L->x.copies_out = true;
    if (l.in_end)
        CR_CHECK(e, cudaMemcpyAsync(dev, L->x.pinned, l.in_end, cudaMemcpyHostToDevice, L->x.stream));
    CR_CHECK(e, cudaEventRecord(L->x.ev[EV_H2D], L->x.stream));
    CR_CHECK(e, launch_kernel(L, &l, dev, t, n));
    CR_CHECK(e, cudaEventRecord(L->x.ev[EV_KERNEL], L->x.stream));
    CR_CHECK(e, cudaMemcpyAsync((char *)L->x.pinned + l.out_off, dev + l.out_off, n * l.out_each,
                                cudaMemcpyDeviceToHost, L->x.stream));
    CR_CHECK(e, cudaEventRecord(L->x.ev[EV_D2H], L->x.stream));
    if (owned)
        cudaFreeAsync(dev, L->x.stream); /* stream-ordered: after the copy back */
    L->tasks = t;
    L->n = n;
    L->out_off = l.out_off;
    L->out_each = l.out_each;
    fail_all(CR_OK, st, n);
    return CR_OK;
cleanup:
    if (owned && dev)
        cudaFreeAsync(dev, L->x.stream);
    cudaStreamSynchronize(L->x.stream); /* nothing of this batch may still touch the staging */
    cr_exec_unstage(&L->x);
    cr_status s = cr_cuda_status(e->code);
    if (s == CR_E_NOMEM_DEVICE)
        snprintf(err, errlen, "a batch of %d needs %zu bytes of device memory on %s (device %d): %s", n, l.total,
                 w->device_name, w->device, e->msg);
    else
        snprintf(err, errlen, "%s", e->msg);
    fail_all(s, st, n);
    return s;
}

void cr_cuda_batch_wait(cr_worker *w, int lane, cr_status *st, cr_timings *tm, char *err, size_t errlen)
{
    cr_lane *L = &w->lane[lane];
    cr_timings phases = {};
    cudaError_t rc = cudaEventSynchronize(L->x.ev[EV_D2H]);
    if (rc != cudaSuccess) {
        cr_check_record(&L->e, rc, "cudaEventSynchronize(batch)", __FILE__, __LINE__);
        snprintf(err, errlen, "%s", L->e.msg);
        fail_all(cr_cuda_status(rc), st, L->n);
    }
    cr_exec_timings(w, &L->x, rc == cudaSuccess, &phases);
    for (int i = 0; i < L->n; i++) {
        if (st[i] == CR_OK)
            memcpy(cr_task_output(L->tasks[i]), (char *)L->x.pinned + L->out_off + i * L->out_each, L->out_each);
        tm[i] = phases;
    }
    cr_exec_unstage(&L->x);
    L->tasks = NULL;
    L->n = 0;
}
