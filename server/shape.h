/* Array shapes and numpy.matmul's rules, the one implementation every decoder uses: /v1 JSON,
 * .npy and multipart, shared-memory operands, KServe tensors. A request's operands arrive as
 * arrays of any rank up to CR_RANK_MAX; these functions turn their shapes into a task (m, n, k,
 * the stack's broadcasting strides, kernels/backend.h's cr_stack) and the result's shape, or into
 * a 4xx naming the field at fault, before any memory is spent on the arrays. */
#ifndef CRUNCHD_SHAPE_H
#define CRUNCHD_SHAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"
#include "server/error.h"

/* Matrices of a stack have two dimensions of their own: 8 in all leaves CR_STACK_DIMS batch ones. */
#define CR_RANK_MAX (CR_STACK_DIMS + 2)

typedef struct {
    int rank;
    int64_t dims[CR_RANK_MAX];
} cr_shape;

/* Elements of a shape (1 for rank 0); UINT64_MAX when the product overflows. */
uint64_t cr_shape_count(const cr_shape *s);
/* "(4, 8, 3)" as numpy prints shapes ("(5,)" for rank 1, "()" for rank 0). */
void cr_shape_format(const cr_shape *s, char *out, size_t n);
/* The shape of a 2-D matrix. */
cr_shape cr_shape_2d(int64_t rows, int64_t cols);

/* GEMM: c = alpha·op(a) @ op(b) + beta·c with numpy.matmul's semantics. a and b of rank >= 1
 * (a 1-D a is promoted to (1, k) and b to (k, 1), the added dimension removed from the result,
 * as numpy does); trans_a / trans_b transpose the last two dimensions of a rank >= 2 operand (a
 * 1-D one has nothing to transpose: 400); the leading dimensions broadcast as numpy broadcasts
 * them. c (NULL: none) must broadcast to the result's shape; *c_expand says that it broadcasts
 * within its matrices (a row, a column, a scalar), which the decoder expands (cr_expand_c) since
 * tasks take whole matrices. Fills t->u.gemm's m, n, k, trans flags and t->stack, and *out. */
int cr_matmul_plan(const cr_shape *a, const cr_shape *b, const cr_shape *c, bool trans_a, bool trans_b,
                   cr_task *t, cr_shape *out, cr_shape *c_full, bool *c_expand, cr_error *err);

/* AᵀA of a[..., m, n] -> [..., n, n] (trans_a: each matrix stored transposed, [..., n, m]). */
int cr_ata_plan(const cr_shape *a, bool trans_a, cr_task *t, cr_shape *out, cr_error *err);

/* c_full (cr_matmul_plan's): c's shape aligned with the whole result's (batch dimensions, m, n),
 * 1 where it broadcasts. The expanded c is whole m×n matrices over those batch dimensions: its
 * shape, and the copy of c's elements (src, es bytes each) into it (dst). */
cr_shape cr_expanded_c_shape(const cr_shape *c_full, const cr_task *t);
void cr_expand_c(const void *src, const cr_shape *c_full, const cr_task *t, void *dst, size_t es);

/* A matrix operand's shape as decoded: rank 1..CR_RANK_MAX, every dimension >= 1, and the batch
 * dimensions' product (the stack's length) at most max_stack. `field` names it in the error. */
int cr_shape_check(const cr_shape *s, const char *field, int64_t max_stack, cr_error *err);

#endif
