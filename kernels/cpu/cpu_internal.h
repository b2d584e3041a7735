/* Shared between the CPU backend's files; nothing outside kernels/cpu includes this. */
#ifndef CRUNCHD_CPU_INTERNAL_H
#define CRUNCHD_CPU_INTERNAL_H

#include "kernels/backend.h"

/* The CPU kernels, rows of kernels/registry.c (cr_cpu_launcher): validated task in, status out,
 * err filled on failure. */
cr_status cpu_gemm_openblas(const cr_task *t, char *err, size_t errlen);
cr_status cpu_gemm_reference(const cr_task *t, char *err, size_t errlen);
cr_status cpu_ata_openblas(const cr_task *t, char *err, size_t errlen);
cr_status cpu_ata_reference(const cr_task *t, char *err, size_t errlen);
cr_status cpu_hist_reference(const cr_task *t, char *err, size_t errlen);

/* A float16/bfloat16 GEMM of one matrix (rank 0) through wide_kernel: operands widened to
 * wide_dt (F32 or F64), the result rounded back (gemm_half.c). A stack widens matrix by matrix
 * (cpu_stack.c calls this per product), so at most one matrix per thread is widened at a time. */
cr_status cpu_gemm_half(const cr_task *t, cr_status (*wide_kernel)(const cr_task *, char *, size_t),
                        cr_dtype wide_dt, char *err, size_t errlen);
static inline bool cpu_is_half(cr_dtype dt) { return dt == CR_DT_F16 || dt == CR_DT_BF16; }

/* A stack (t->stack.rank > 0): each product as a task of one matrix through fn, over threads
 * where that pays (cpu_stack.c). BLAS: fn is an OpenBLAS call, which threads itself from a size
 * up; PLAIN: fn is one-threaded C. cpu_stack_threads: how many threads a run takes (1: in the
 * caller's thread), which also bounds the working memory fn's of a run hold at once. */
typedef cr_status (*cpu_matrix_fn)(const cr_task *one, char *err, size_t errlen);
typedef enum { CPU_STACK_BLAS, CPU_STACK_PLAIN } cpu_stack_kind;
cr_status cpu_stack_run(const cr_task *t, cpu_matrix_fn fn, cpu_stack_kind kind, char *err, size_t errlen);
int cpu_stack_threads(const cr_task *t, cpu_stack_kind kind);

/* Row primitives of the reference kernels: products of doubles with stored elements, summed in
 * double whatever the stored type, so the reference is more exact than what it checks. */
void cpu_axpy_f32(double a, const float *x, double *acc, int64_t len);
void cpu_axpy_f64(double a, const double *x, double *acc, int64_t len);
double cpu_dot_f32(const double *row, const float *x, int64_t len);
double cpu_dot_f64(const double *row, const double *x, int64_t len);

/* Element i of a float32 or float64 array, widened to double; and the narrowing store. */
static inline double cpu_load(const void *p, int64_t i, int f64)
{
    return f64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
}

static inline void cpu_store(void *p, int64_t i, double v, int f64)
{
    if (f64)
        ((double *)p)[i] = v;
    else
        ((float *)p)[i] = (float)v;
}

/* Shape and pointer checks the server already made; repeated so a bad caller gets a status,
 * not a crash. */
cr_status cpu_validate_task(const cr_task *t, char *err, size_t errlen);

/* The host as device 0: model name, memory from sysconf, online CPUs as "multiprocessors". */
cr_status cpu_device_info(int index, cr_device_info *out);

/* The host's CPU model ("CPU" when /proc/cpuinfo does not say); read once, thread-safe. */
const char *cpu_model_name(void);

/* snprintf into err when there is room; returns s so call sites can `return cpu_fail(...)`. */
cr_status cpu_fail(cr_status s, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Cancellation is advisory: a NULL flag means the caller never cancels. */
static inline int cpu_cancelled(const cr_task *t)
{
    return t->cancel != NULL && *t->cancel != 0;
}

#endif
