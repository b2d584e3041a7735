/* Checks of a task's stack (kernels/backend.h's cr_stack) that both backends make before they
 * touch memory, and the byte sizes of a stack's operands. The server builds stacks with
 * cr_stack_plan and has checked them; these exist so that a caller's bug is a status with a
 * message, never a read past an operand. */
#ifndef CRUNCHD_STACK_H
#define CRUNCHD_STACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CR_OK, or CR_E_INVALID with why: a stack on a histogram, a rank over CR_STACK_DIMS, a count
 * that is not the product of dims, an operand the task has with no matrices, a stride that
 * reaches past an operand's matrices, sizes that overflow 64-bit offsets, or c_in == c_out
 * where products do not each read their own C. */
cr_status cr_stack_check(const cr_task *t, char *err, size_t errlen);

/* Elements of one matrix of operand k (CR_STACK_A, _B, _C) of a GEMM or AᵀA task, and of one
 * output matrix. */
int64_t cr_task_operand_elements(const cr_task *t, int k);
int64_t cr_task_output_elements_each(const cr_task *t);

/* Whether product i reads operand k's matrix i, for every i: what an in-place update needs. */
bool cr_stack_identity(const cr_stack *s, int k);

#ifdef __cplusplus
}
#endif

#endif
