/* Backend-independent helpers: names, sizes, work counts. */
#include "kernels/backend.h"

#include <string.h>

const char *cr_status_name(cr_status s)
{
    static const char *const names[] = {
        [CR_OK] = "ok", [CR_E_INVALID] = "invalid", [CR_E_SHAPE] = "shape_mismatch",
        [CR_E_UNSUPPORTED] = "unsupported", [CR_E_NOMEM_HOST] = "host_memory",
        [CR_E_NOMEM_DEVICE] = "device_memory", [CR_E_CANCELLED] = "cancelled",
        [CR_E_FATAL] = "device_fault", [CR_E_INTERNAL] = "internal",
    };
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "unknown";
}

static const struct { const char *name; size_t size; } dtypes[CR_DT_COUNT] = {
    [CR_DT_F32] = {"float32", 4}, [CR_DT_F64] = {"float64", 8}, [CR_DT_U8] = {"uint8", 1},
    [CR_DT_I8] = {"int8", 1},     [CR_DT_U16] = {"uint16", 2},  [CR_DT_I16] = {"int16", 2},
    [CR_DT_U32] = {"uint32", 4},  [CR_DT_I32] = {"int32", 4},   [CR_DT_I64] = {"int64", 8},
    [CR_DT_U64] = {"uint64", 8},  [CR_DT_F16] = {"float16", 2}, [CR_DT_BF16] = {"bfloat16", 2},
};

const char *cr_dtype_name(cr_dtype d) { return (unsigned)d < CR_DT_COUNT ? dtypes[d].name : "?"; }
size_t cr_dtype_size(cr_dtype d) { return (unsigned)d < CR_DT_COUNT ? dtypes[d].size : 0; }

const char *cr_op_name(cr_op op)
{
    static const char *const names[CR_OP_COUNT] = {"gemm", "ata", "histogram"};
    return (unsigned)op < CR_OP_COUNT ? names[op] : "?";
}

const char *cr_precision_name(cr_precision p) { return p == CR_PREC_TF32 ? "tf32" : "fp32"; }

/* ---- stacks ---- */

int64_t cr_task_matrices(const cr_task *t)
{
    return t->stack.rank > 0 ? t->stack.count : 1;
}

int64_t cr_task_operand_matrices(const cr_task *t, int k)
{
    return t->stack.rank > 0 ? t->stack.mats[k] : 1;
}

int64_t cr_stack_operand_index(const cr_stack *s, int k, int64_t i)
{
    int64_t at = 0;
    for (int d = s->rank - 1; d >= 0; d--) {
        at += (i % s->dims[d]) * s->stride[k][d];
        i /= s->dims[d];
    }
    return at;
}

bool cr_stack_uniform(const cr_stack *s, int k, int64_t *step)
{
    int64_t after = 1; /* products per step along dimension d: those of the dimensions after it */
    bool known = false;
    *step = 0;
    for (int d = s->rank - 1; d >= 0; d--) {
        if (s->dims[d] > 1) {
            if (!known) {
                *step = s->stride[k][d];
                known = true;
            } else if (s->stride[k][d] != *step * after) {
                return false;
            }
        }
        after *= s->dims[d];
    }
    return true;
}

void cr_stack_plan(cr_stack *s, int rank, const int64_t *dims, const int nrank[CR_STACK_OPERANDS],
                   const int64_t ndims[CR_STACK_OPERANDS][CR_STACK_DIMS])
{
    memset(s, 0, sizeof *s);
    s->rank = rank;
    s->count = 1;
    for (int d = 0; d < rank; d++) {
        s->dims[d] = dims[d];
        s->count *= dims[d];
    }
    for (int k = 0; k < CR_STACK_OPERANDS; k++) {
        if (nrank[k] < 0)
            continue;
        int64_t step = 1; /* matrices per step of the operand's own dimension j */
        for (int j = nrank[k] - 1; j >= 0; j--) {
            int d = rank - nrank[k] + j; /* right-aligned */
            s->stride[k][d] = ndims[k][j] == 1 ? 0 : step;
            step *= ndims[k][j];
        }
        s->mats[k] = step;
    }
}

double cr_task_flops(const cr_task *t)
{
    double n = (double)cr_task_matrices(t);
    switch (t->op) {
    case CR_OP_GEMM:
        return n * 2.0 * (double)t->u.gemm.m * (double)t->u.gemm.n * (double)t->u.gemm.k;
    case CR_OP_ATA: /* counted as the full product, so kernels that skip a triangle look faster */
        return n * 2.0 * (double)t->u.ata.m * (double)t->u.ata.n * (double)t->u.ata.n;
    default:
        return 0.0;
    }
}

double cr_task_bytes(const cr_task *t)
{
    double es = (double)cr_dtype_size(t->dtype);
    switch (t->op) {
    case CR_OP_GEMM: {
        const cr_gemm_task *g = &t->u.gemm;
        double c = (double)g->m * (double)g->n;
        return es * ((double)g->m * (double)g->k * (double)cr_task_operand_matrices(t, CR_STACK_A) +
                     (double)g->k * (double)g->n * (double)cr_task_operand_matrices(t, CR_STACK_B) +
                     c * (double)cr_task_matrices(t) + (g->c_in ? c * (double)cr_task_operand_matrices(t, CR_STACK_C) : 0));
    }
    case CR_OP_ATA:
        return es * (double)cr_task_matrices(t) *
               ((double)t->u.ata.m * (double)t->u.ata.n + (double)t->u.ata.n * (double)t->u.ata.n);
    case CR_OP_HISTOGRAM:
        return es * (double)t->u.hist.count;
    default:
        return 0.0;
    }
}
