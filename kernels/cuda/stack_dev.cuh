/* A stack (kernels/backend.h's cr_stack) as kernels read it, by value in their parameters: which
 * of operand k's matrices product i reads. A uniform operand (cr_stack_uniform) is one multiply;
 * the general case decodes i over the batch dimensions as cr_stack_operand_index does. */
#ifndef CRUNCHD_STACK_DEV_CUH
#define CRUNCHD_STACK_DEV_CUH

#include <stdint.h>

#include "kernels/backend.h"

struct cr_stack_dev {
    int rank;
    int64_t dims[CR_STACK_DIMS];
    int64_t stride[CR_STACK_OPERANDS][CR_STACK_DIMS];
    int64_t step[CR_STACK_OPERANDS]; /* operand k's matrix is i * step[k]; -1: decode */
};

/* Rank 0 (one matrix) reads matrix 0 of every operand. */
static inline cr_stack_dev cr_stack_dev_of(const cr_stack *s)
{
    cr_stack_dev d = {};
    d.rank = s->rank;
    for (int j = 0; j < s->rank; j++) {
        d.dims[j] = s->dims[j];
        for (int k = 0; k < CR_STACK_OPERANDS; k++)
            d.stride[k][j] = s->stride[k][j];
    }
    for (int k = 0; k < CR_STACK_OPERANDS; k++) {
        int64_t step = 0;
        d.step[k] = s->rank == 0 ? 0 : cr_stack_uniform(s, k, &step) ? step : -1;
    }
    return d;
}

__device__ __forceinline__ int64_t cr_stack_index(const cr_stack_dev &s, int k, int64_t i)
{
    if (s.step[k] >= 0)
        return i * s.step[k];
    int64_t at = 0;
    for (int d = s.rank - 1; d >= 0; d--) {
        at += (i % s.dims[d]) * s.stride[k][d];
        i /= s.dims[d];
    }
    return at;
}

#endif
