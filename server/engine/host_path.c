/* Tiny jobs on the thread that decoded them; see engine.h (cr_engine_run_here).
 *
 * A 16x16 GEMM is a few thousand multiply-adds, well under a microsecond of one core, while its
 * trip through the queue costs a worker's wake-up, a copy each way, a launch, the wait for the
 * device and the connection's suspend and resume: measured on the H100 machine, GET /healthz ran
 * at 692k/s against 132k/s for 16x16 GEMMs. Such a job is cheaper run where it is, on the host
 * with the CPU backend's kernels, than anywhere else; above --host-max-flops (--host-max-values
 * for histograms) the device wins and the job queues as before. Only "auto" chooses this: a
 * named kernel and compare mode still run where the client said. */
#include <stdio.h>

#include "server/clock.h"
#include "server/engine/engine_internal.h"

/* The CPU backend's row for the job: OpenBLAS for the matrix ops, the histogram reference (its
 * uint8 path counts directly). Half precision widens into memory the budget must be asked for
 * first, so it takes the worker's path. NULL: not for the host. */
static const cr_kernel *host_row(const cr_task *t)
{
    if (t->dtype == CR_DT_F16 || t->dtype == CR_DT_BF16)
        return NULL;
    const cr_kernel *k = cr_kernel_find(&cr_backend_cpu, t->op, t->op == CR_OP_HISTOGRAM ? "reference" : "openblas");
    return k && cr_kernel_check(k, t, NULL, 0) == CR_KCHECK_OK ? k : NULL;
}

/* A limit of 0 is "never", even for an empty job's 0 flops. */
static bool small_enough(const cr_config *c, const cr_task *t)
{
    if (t->op == CR_OP_HISTOGRAM)
        return c->host_max_values > 0 && (double)t->u.hist.count + (double)t->u.hist.bins <= (double)c->host_max_values;
    return c->host_max_flops > 0 && cr_task_flops(t) <= (double)c->host_max_flops;
}

/* Async jobs keep their queue (their 202 says "queued"), test-delayed jobs must be seen queued
 * and running, and tensors in a client's device memory are the device's to read. */
static const cr_kernel *host_choice(const cr_engine *e, const cr_job *j)
{
    const cr_task *t = &j->req.task;
    if (j->async || j->req.kernel.mode != CR_KERNEL_AUTO || j->debug_delay_ms > 0 || j->req.on_device ||
        atomic_load(&e->draining) || !small_enough(e->cfg, t))
        return NULL;
    return host_row(t);
}

int cr_engine_run_here(cr_engine *e, cr_job *j, cr_error *err)
{
    const cr_kernel *row = host_choice(e, j);
    if (!row)
        return 0;
    cr_task *t = &j->req.task;
    t->kernel = row;
    if (cr_request_alloc_output(&j->req, err) < 0)
        return -1;
    char msg[256] = "";
    cr_timings tm = {0};
    j->enqueued_at = j->started_at = cr_now();
    atomic_store(&j->state, CR_JOB_RUNNING);
    t->cancel = &j->cancel;
    j->ran = true;
    j->batch = 1;
    cr_status st = cr_backend_cpu.run(NULL, t, &tm, msg, sizeof msg);
    snprintf(j->device, sizeof j->device, "%s", tm.device);
    j->ms.kernel = tm.kernel_ms;
    atomic_fetch_add(&e->host_jobs, 1);
    if (st != CR_OK)
        cr_engine_fail_status(e, j, st, msg);
    else
        cr_engine_finish(e, j, CR_JOB_DONE);
    return 1;
}
