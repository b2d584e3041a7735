/* Stack checks and sizes; see stack.h. */
#include "kernels/stack.h"

#include <stdio.h>

int64_t cr_task_operand_elements(const cr_task *t, int k)
{
    if (t->op == CR_OP_ATA)
        return t->u.ata.m * t->u.ata.n;
    const cr_gemm_task *g = &t->u.gemm;
    return k == CR_STACK_A ? g->m * g->k : k == CR_STACK_B ? g->k * g->n : g->m * g->n;
}

int64_t cr_task_output_elements_each(const cr_task *t)
{
    return t->op == CR_OP_ATA ? t->u.ata.n * t->u.ata.n : t->u.gemm.m * t->u.gemm.n;
}

bool cr_stack_identity(const cr_stack *s, int k)
{
    int64_t step;
    if (s->rank == 0)
        return true;
    return s->mats[k] == s->count && cr_stack_uniform(s, k, &step) && (step == 1 || s->count <= 1);
}

static bool operand_present(const cr_task *t, int k)
{
    if (t->op == CR_OP_ATA)
        return k == CR_STACK_A;
    return k != CR_STACK_C || t->u.gemm.c_in != NULL;
}

/* The highest matrix index any product reads of operand k; INT64_MAX past int64. */
static int64_t highest_index(const cr_stack *s, int k)
{
    int64_t at = 0, step;
    for (int d = 0; d < s->rank; d++)
        if (__builtin_mul_overflow(s->dims[d] - 1, s->stride[k][d], &step) || __builtin_add_overflow(at, step, &at))
            return INT64_MAX;
    return at;
}

static bool fits(int64_t a, int64_t b, size_t es)
{
    int64_t ab, bytes;
    return a >= 0 && b >= 0 && !__builtin_mul_overflow(a, b, &ab) && !__builtin_mul_overflow(ab, (int64_t)es, &bytes);
}

static cr_status fail(char *err, size_t errlen, const char *what)
{
    snprintf(err, errlen, "stack: %s", what);
    return CR_E_INVALID;
}

static cr_status check_operand(const cr_task *t, int k, char *err, size_t errlen)
{
    const cr_stack *s = &t->stack;
    if (s->mats[k] < 0 || (s->mats[k] == 0 && s->count > 0))
        return fail(err, errlen, "an operand of the task holds no matrices");
    for (int d = 0; d < s->rank; d++)
        if (s->stride[k][d] < 0)
            return fail(err, errlen, "an operand's batch stride is negative");
    if (s->count > 0 && highest_index(s, k) >= s->mats[k])
        return fail(err, errlen, "a product reads past an operand's matrices");
    if (!fits(s->mats[k], cr_task_operand_elements(t, k), cr_dtype_size(t->dtype)))
        return fail(err, errlen, "an operand's size overflows 64-bit offsets");
    return CR_OK;
}

cr_status cr_stack_check(const cr_task *t, char *err, size_t errlen)
{
    const cr_stack *s = &t->stack;
    if (s->rank == 0)
        return CR_OK;
    if (t->op == CR_OP_HISTOGRAM || s->rank < 0 || s->rank > CR_STACK_DIMS)
        return fail(err, errlen, t->op == CR_OP_HISTOGRAM ? "a histogram has no batch dimensions"
                                                          : "rank outside 0..6");
    int64_t count = 1;
    for (int d = 0; d < s->rank; d++)
        if (s->dims[d] < 0 || __builtin_mul_overflow(count, s->dims[d], &count))
            return fail(err, errlen, "batch dimensions negative or overflowing");
    if (count != s->count)
        return fail(err, errlen, "count is not the product of the batch dimensions");
    if (!fits(count, cr_task_output_elements_each(t), cr_dtype_size(t->dtype)))
        return fail(err, errlen, "the output's size overflows 64-bit offsets");
    for (int k = 0; k < CR_STACK_OPERANDS; k++) {
        if (!operand_present(t, k))
            continue;
        cr_status st = check_operand(t, k, err, errlen);
        if (st != CR_OK)
            return st;
    }
    if (t->op == CR_OP_GEMM && t->u.gemm.c_in && t->u.gemm.c_in == t->u.gemm.c_out &&
        !cr_stack_identity(s, CR_STACK_C))
        return fail(err, errlen, "c_in is c_out, and products do not each read their own C");
    return CR_OK;
}
