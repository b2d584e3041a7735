/* The CPU backend: OpenBLAS for the matrix ops, plain C references, the host as device 0.
 * It exists so the daemon and every HTTP test run on a machine without a GPU. */
#include "kernels/cpu/cpu_internal.h"
#include "kernels/registry.h"

#include <cblas.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <time.h>

struct cr_worker {
    int device; /* always 0; kept so a worker can say where it runs */
    cr_task *const *batch; /* launched, run when waited for */
    int batch_n;
    const cr_task *alone;  /* launched alone, run when waited for */
};

/* CRUNCHD_CPU_THREADS caps OpenBLAS's threads; unset, the cores are shared out among the
 * workers so that parallel jobs do not oversubscribe the machine. */
static cr_status apply_thread_setting(int workers, char *err, size_t errlen)
{
    const char *s = getenv("CRUNCHD_CPU_THREADS");
    if (s == NULL || *s == '\0') {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        long per_worker = workers > 0 && cores > 0 ? cores / workers : 1;
        openblas_set_num_threads(per_worker > 0 ? (int)per_worker : 1);
        return CR_OK;
    }
    char *end = NULL;
    errno = 0;
    long n = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || n < 1 || n > INT_MAX)
        return cpu_fail(CR_E_INVALID, err, errlen,
                        "CRUNCHD_CPU_THREADS must be a positive integer (got \"%s\")", s);
    openblas_set_num_threads((int)n);
    return CR_OK;
}

void cr_cpu_blas_on_caller(void) { openblas_set_num_threads(1); }

static cr_status cpu_init(const cr_backend_opts *o, char *err, size_t errlen)
{
    cpu_model_name(); /* read /proc/cpuinfo now rather than on the first job */
    return apply_thread_setting(o->workers_per_device, err, errlen);
}

static void cpu_shutdown(void) {}

static int cpu_device_count(void) { return 1; }

static cr_status cpu_worker_create(int device, cr_worker **out, char *err, size_t errlen)
{
    if (out == NULL)
        return cpu_fail(CR_E_INTERNAL, err, errlen, "worker_create: out is NULL");
    *out = NULL;
    if (device != 0)
        return cpu_fail(CR_E_INVALID, err, errlen, "cpu backend has one device (0), not %d", device);
    cr_worker *w = calloc(1, sizeof *w);
    if (w == NULL)
        return cpu_fail(CR_E_NOMEM_HOST, err, errlen, "out of host memory for a cpu worker");
    w->device = device;
    *out = w;
    return CR_OK;
}

static void cpu_worker_destroy(cr_worker *w) { free(w); }

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The registry resolved the kernel; a row of another backend or op, or a dtype the row lacks,
 * is a caller's bug and gets a status. tf32 rows do not exist here. */
static cr_status resolve_kernel(const cr_task *t, cr_cpu_launcher *fn, char *err, size_t errlen)
{
    const cr_kernel *k = t->kernel;
    if (k == NULL || k->backend != CR_BACKEND_CPU || k->cpu == NULL || k->op != t->op)
        return cpu_fail(CR_E_INVALID, err, errlen, "no cpu %s kernel \"%s\"", cr_op_name(t->op),
                        k ? k->name : "(null)");
    char why[256];
    cr_kcheck kc = cr_kernel_check(k, t, why, sizeof why);
    if (kc == CR_KCHECK_STACK) /* the registry names the rows that take one */
        return cpu_fail(CR_E_UNSUPPORTED, err, errlen, "%s", why);
    if (kc != CR_KCHECK_OK)
        return cpu_fail(CR_E_UNSUPPORTED, err, errlen, "%s kernel \"%s\" does not support dtype %s",
                        cr_op_name(t->op), k->name, cr_dtype_name(t->dtype));
    *fn = k->cpu;
    return CR_OK;
}

/* precision "tf32" only permits rounding; running exact fp32/fp64 honours it, so it is
 * accepted and ignored here. */
static cr_status cpu_run(cr_worker *w, const cr_task *t, cr_timings *tm, char *err, size_t errlen)
{
    if (tm != NULL) {
        memset(tm, 0, sizeof *tm);
        snprintf(tm->device, sizeof tm->device, "cpu: %s", cpu_model_name());
        tm->device_index = w != NULL ? w->device : 0;
    }
    if (t == NULL)
        return cpu_fail(CR_E_INTERNAL, err, errlen, "run: task is NULL");
    if ((unsigned)t->op >= CR_OP_COUNT)
        return cpu_fail(CR_E_INVALID, err, errlen, "unknown op %d", (int)t->op);
    cr_cpu_launcher fn = NULL;
    cr_status s = resolve_kernel(t, &fn, err, errlen);
    if (s == CR_OK)
        s = cpu_validate_task(t, err, errlen);
    if (s != CR_OK)
        return s;
    if (cpu_cancelled(t))
        return cpu_fail(CR_E_CANCELLED, err, errlen, "cancelled before start");
    double t0 = now_ms();
    s = fn(t, err, errlen);
    if (tm != NULL)
        tm->kernel_ms = now_ms() - t0;
    return s;
}

/* The CPU saves no launch by batching: a batch is its tasks one after another, run when the
 * engine waits for it (one lane), which at least costs the worker one queue visit per batch. */
static cr_status cpu_batch_launch(cr_worker *w, int lane, cr_task *const *tasks, int n, cr_status *st, char *err,
                                  size_t errlen)
{
    (void)lane;
    (void)err;
    (void)errlen;
    w->batch = tasks;
    w->batch_n = n;
    for (int i = 0; i < n; i++)
        st[i] = CR_OK;
    return CR_OK;
}

static void cpu_batch_wait(cr_worker *w, int lane, cr_status *st, cr_timings *tm, char *err, size_t errlen)
{
    (void)lane;
    bool failed = false;
    for (int i = 0; i < w->batch_n; i++) {
        char why[256] = "";
        st[i] = cpu_run(w, w->batch[i], &tm[i], why, sizeof why);
        if (st[i] != CR_OK && !failed) /* the first failure's reason speaks for the batch */
            snprintf(err, errlen, "%s", why), failed = true;
    }
    w->batch = NULL;
    w->batch_n = 0;
}

/* Nor from a task in flight: run_launch keeps it and run_wait runs it, on the one lane, so that the
 * engine's path for tasks on lanes (the cuda backend's) is the one every CPU test takes too. */
static cr_status cpu_run_launch(cr_worker *w, int lane, const cr_task *t, char *err, size_t errlen)
{
    (void)lane;
    (void)err;
    (void)errlen;
    w->alone = t;
    return CR_OK;
}

static cr_status cpu_run_wait(cr_worker *w, int lane, cr_timings *tm, char *err, size_t errlen)
{
    (void)lane;
    const cr_task *t = w->alone;
    w->alone = NULL;
    return cpu_run(w, t, tm, err, errlen);
}

static uint64_t cpu_task_device_bytes(const cr_task *t)
{
    (void)t; /* host memory is all there is, and the server already holds the task's buffers */
    return 0;
}

/* Half-precision GEMM widens A, B and C (gemm_half.c): to float64 for the reference, which
 * compare mode also runs, so that is the bound. A stack widens one matrix per thread at a time
 * (cpu_stack.c): the reference's threads, never fewer than OpenBLAS's, bound it. */
static uint64_t cpu_task_host_bytes(const cr_task *t)
{
    if (t->op != CR_OP_GEMM || !cpu_is_half(t->dtype))
        return 0;
    const cr_gemm_task *g = &t->u.gemm;
    uint64_t each = ((uint64_t)(g->m * g->k) + (uint64_t)(g->k * g->n) + (uint64_t)(g->m * g->n)) * sizeof(double);
    if (t->stack.rank == 0)
        return each;
    if (t->stack.count == 0)
        return 0;
    return each * (uint64_t)cpu_stack_threads(t, CPU_STACK_PLAIN);
}

const cr_backend cr_backend_cpu = {
    .name = "cpu",
    .id = CR_BACKEND_CPU,
    .init = cpu_init,
    .shutdown = cpu_shutdown,
    .device_count = cpu_device_count,
    .device_info = cpu_device_info,
    .worker_create = cpu_worker_create,
    .worker_destroy = cpu_worker_destroy,
    .run = cpu_run,
    .task_device_bytes = cpu_task_device_bytes,
    .task_host_bytes = cpu_task_host_bytes,
    .lanes = 1,
    .batch_launch = cpu_batch_launch,
    .batch_wait = cpu_batch_wait,
    .run_launch = cpu_run_launch,
    .run_wait = cpu_run_wait,
};
