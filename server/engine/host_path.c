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

/* The smallest biased exponent of the non-zero elements (through *min_exp), and whether any is
 * subnormal, infinite or NaN. */
static bool f32_unusual(const uint32_t *x, int64_t n, unsigned *min_exp)
{
    unsigned bad = 0, mn = 255;
    for (int64_t i = 0; i < n; i++) {
        unsigned e = (x[i] >> 23) & 0xffu, nz = (x[i] & 0x7fffffffu) != 0;
        bad |= (e == 0 && nz) | (e == 0xffu);
        mn = nz && e < mn ? e : mn;
    }
    *min_exp = mn;
    return bad != 0;
}

static bool f64_unusual(const uint64_t *x, int64_t n, unsigned *min_exp)
{
    unsigned bad = 0, mn = 2047;
    for (int64_t i = 0; i < n; i++) {
        unsigned e = (unsigned)(x[i] >> 52) & 0x7ffu, nz = (x[i] & 0x7fffffffffffffffull) != 0;
        bad |= (e == 0 && nz) | (e == 0x7ffu);
        mn = nz && e < mn ? e : mn;
    }
    *min_exp = mn;
    return bad != 0;
}

static bool unusual(const void *x, int64_t n, cr_dtype dt, unsigned *min_exp)
{
    return dt == CR_DT_F32 ? f32_unusual(x, n, min_exp) : f64_unusual(x, n, min_exp);
}

/* Whether the CPU multiplies these operands at its full rate. An x86 core takes a microcode assist
 * for every subnormal input or result: perf_analyzer's default data (random bit patterns, a
 * subnormal product in every other multiply) made a 64x64 GEMM on the host path cost ~800 us of
 * CPU on the H200 machine against ~100 us for ordinary numbers, while a GPU runs them at full
 * speed. So the host takes operands with no subnormal, infinite or NaN element and whose smallest
 * magnitudes cannot multiply into a subnormal; anything else goes to the device. The scan reads
 * the operands once (a few microseconds at the host path's sizes). */
static bool cpu_friendly(const cr_task *t)
{
    if (t->dtype != CR_DT_F32 && t->dtype != CR_DT_F64)
        return true;
    unsigned ea = 0, eb = 0, ec = 0, bias = t->dtype == CR_DT_F32 ? 127 : 1023, emin = 1; /* normal */
    int64_t per = cr_task_operand_matrices(t, CR_STACK_A);
    if (t->op == CR_OP_ATA) {
        const cr_ata_task *a = &t->u.ata;
        return !unusual(a->a, a->m * a->n * per, t->dtype, &ea) && 2 * ea >= bias + emin + 2;
    }
    const cr_gemm_task *g = &t->u.gemm;
    bool bad = unusual(g->a, g->m * g->k * cr_task_operand_matrices(t, CR_STACK_A), t->dtype, &ea) ||
               unusual(g->b, g->k * g->n * cr_task_operand_matrices(t, CR_STACK_B), t->dtype, &eb) ||
               (g->c_in && g->beta != 0 &&
                unusual(g->c_in, g->m * g->n * cr_task_operand_matrices(t, CR_STACK_C), t->dtype, &ec));
    /* a product of magnitudes 2^(ea-bias) and 2^(eb-bias) is normal from 2^(1-bias) up, with
     * two binades to spare for rounding and alpha */
    return !bad && ea + eb >= bias + emin + 2;
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
        atomic_load(&e->draining) || !small_enough(e->cfg, t) || (t->op != CR_OP_HISTOGRAM && !cpu_friendly(t)))
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
