/* The CPU backend: OpenBLAS for the matrix ops, plain C references, the host as device 0.
 * It exists so the daemon and every HTTP test run on a machine without a GPU. */
#include "kernels/cpu/cpu_internal.h"

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
};

/* Order matters: kernel_fns[i] runs kernel_list[i]. */
static const cr_kernel_info kernel_list[] = {
    {"openblas", CR_OP_GEMM, CR_DT_BIT(CR_DT_F32) | CR_DT_BIT(CR_DT_F64), false, false,
     "OpenBLAS SGEMM/DGEMM"},
    {"reference", CR_OP_GEMM, CR_DT_BIT(CR_DT_F32) | CR_DT_BIT(CR_DT_F64), false, true,
     "plain C, accumulates in double"},
    {"openblas", CR_OP_ATA, CR_DT_BIT(CR_DT_F32) | CR_DT_BIT(CR_DT_F64), false, false,
     "OpenBLAS SSYRK/DSYRK, upper triangle mirrored"},
    {"reference", CR_OP_ATA, CR_DT_BIT(CR_DT_F32) | CR_DT_BIT(CR_DT_F64), false, true,
     "plain C, accumulates in double"},
    {"reference", CR_OP_HISTOGRAM, (1u << CR_DT_COUNT) - 1u, false, true,
     "plain C, numpy.histogram bin edges; uint8 256-bin counting fast path"},
};

static const cpu_kernel_fn kernel_fns[] = {
    cpu_gemm_openblas, cpu_gemm_reference, cpu_ata_openblas, cpu_ata_reference,
    cpu_hist_reference,
};

_Static_assert(sizeof kernel_list / sizeof kernel_list[0] == sizeof kernel_fns / sizeof kernel_fns[0],
               "every CPU kernel needs a run function");

#define KERNEL_COUNT (sizeof kernel_list / sizeof kernel_list[0])

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

static cr_status cpu_init(int workers_per_device, char *err, size_t errlen)
{
    cpu_model_name(); /* read /proc/cpuinfo now rather than on the first job */
    return apply_thread_setting(workers_per_device, err, errlen);
}

static void cpu_shutdown(void) {}

static int cpu_device_count(void) { return 1; }

static const cr_kernel_info *cpu_kernels(size_t *count)
{
    if (count != NULL)
        *count = KERNEL_COUNT;
    return kernel_list;
}

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

/* Finds the kernel's run function and checks it takes this dtype. */
static cr_status resolve_kernel(const cr_task *t, cpu_kernel_fn *fn, char *err, size_t errlen)
{
    if (t->kernel == NULL)
        return cpu_fail(CR_E_INVALID, err, errlen, "no kernel named for %s", cr_op_name(t->op));
    const cr_kernel_info *k = cr_find_kernel(&cr_backend_cpu, t->op, t->kernel);
    if (k == NULL)
        return cpu_fail(CR_E_INVALID, err, errlen, "unknown %s kernel \"%s\" on the cpu backend",
                        cr_op_name(t->op), t->kernel);
    if ((unsigned)t->dtype >= CR_DT_COUNT || !(k->dtypes & CR_DT_BIT(t->dtype)))
        return cpu_fail(CR_E_UNSUPPORTED, err, errlen, "%s kernel \"%s\" does not support dtype %s",
                        cr_op_name(t->op), t->kernel, cr_dtype_name(t->dtype));
    *fn = kernel_fns[k - kernel_list];
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
    cpu_kernel_fn fn = NULL;
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

static uint64_t cpu_task_device_bytes(const cr_task *t)
{
    (void)t; /* host memory is all there is, and the server already holds the task's buffers */
    return 0;
}

const cr_backend cr_backend_cpu = {
    .name = "cpu",
    .init = cpu_init,
    .shutdown = cpu_shutdown,
    .device_count = cpu_device_count,
    .device_info = cpu_device_info,
    .kernels = cpu_kernels,
    .worker_create = cpu_worker_create,
    .worker_destroy = cpu_worker_destroy,
    .run = cpu_run,
    .task_device_bytes = cpu_task_device_bytes,
};
