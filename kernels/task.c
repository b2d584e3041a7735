/* Output access and error measurement on any task, shared by compare mode, the auto table,
 * the GPU tests and the benchmarks. */
#include <math.h>

#include "kernels/backend.h"
#include "kernels/half.h"

void *cr_task_output(const cr_task *t)
{
    switch (t->op) {
    case CR_OP_GEMM: return t->u.gemm.c_out;
    case CR_OP_ATA: return t->u.ata.c_out;
    case CR_OP_HISTOGRAM: return t->u.hist.counts;
    default: return NULL;
    }
}

void cr_task_set_output(cr_task *t, void *out)
{
    switch (t->op) {
    case CR_OP_GEMM: t->u.gemm.c_out = out; break;
    case CR_OP_ATA: t->u.ata.c_out = out; break;
    case CR_OP_HISTOGRAM: t->u.hist.counts = out; break;
    default: break;
    }
}

static size_t output_elements(const cr_task *t)
{
    switch (t->op) {
    case CR_OP_GEMM: return (size_t)t->u.gemm.m * (size_t)t->u.gemm.n * (size_t)cr_task_matrices(t);
    case CR_OP_ATA: return (size_t)t->u.ata.n * (size_t)t->u.ata.n * (size_t)cr_task_matrices(t);
    case CR_OP_HISTOGRAM: return (size_t)t->u.hist.bins;
    default: return 0;
    }
}

size_t cr_task_output_bytes(const cr_task *t)
{
    size_t es = t->op == CR_OP_HISTOGRAM ? sizeof(uint64_t) : cr_dtype_size(t->dtype);
    return output_elements(t) * es;
}

static double element(const cr_task *t, const void *p, size_t i)
{
    if (t->op == CR_OP_HISTOGRAM)
        return (double)((const uint64_t *)p)[i];
    if (t->dtype == CR_DT_F16 || t->dtype == CR_DT_BF16)
        return cr_half_to_float(t->dtype, ((const uint16_t *)p)[i]);
    return t->dtype == CR_DT_F64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
}

double cr_max_rel_error(const cr_task *t, const void *x, const void *ref)
{
    size_t n = output_elements(t);
    double max_diff = 0.0, max_ref = 0.0;
    for (size_t i = 0; i < n; i++) {
        double r = element(t, ref, i), v = element(t, x, i);
        double d = fabs(v - r);
        if (isnan(d))
            return INFINITY; /* an unwritten or broken output must never look correct */
        max_diff = fmax(max_diff, d);
        max_ref = fmax(max_ref, fabs(r));
    }
    if (max_ref == 0.0)
        return max_diff == 0.0 ? 0.0 : INFINITY;
    return max_diff / max_ref;
}
