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

double cr_task_flops(const cr_task *t)
{
    switch (t->op) {
    case CR_OP_GEMM:
        return 2.0 * (double)t->u.gemm.m * (double)t->u.gemm.n * (double)t->u.gemm.k;
    case CR_OP_ATA: /* counted as the full product, so kernels that skip a triangle look faster */
        return 2.0 * (double)t->u.ata.m * (double)t->u.ata.n * (double)t->u.ata.n;
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
        return es * ((double)g->m * (double)g->k + (double)g->k * (double)g->n + c * (g->c_in ? 2 : 1));
    }
    case CR_OP_ATA:
        return es * ((double)t->u.ata.m * (double)t->u.ata.n + (double)t->u.ata.n * (double)t->u.ata.n);
    case CR_OP_HISTOGRAM:
        return es * (double)t->u.hist.count;
    default:
        return 0.0;
    }
}
