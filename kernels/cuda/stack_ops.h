/* Device-side pieces of a stack beside its product (stack_ops.cu): c broadcast into every output
 * matrix, and the per-product pointer arrays a pointer-array batched library call reads, both
 * computed on the device from the stack's dims and strides so the host copies nothing per product. */
#ifndef CRUNCHD_STACK_OPS_H
#define CRUNCHD_STACK_OPS_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

/* out matrix i = c matrix cr_stack_operand_index(s, CR_STACK_C, i), for the stack's count
 * matrices of `bytes_each` bytes each (c: mats[C] of them). Asynchronous on st. */
cudaError_t cr_cuda_stack_expand(void *out, const void *c, const cr_stack *s, size_t bytes_each, cudaStream_t st);

/* pa[i] = a + index(A, i) * a_bytes, pb[i] = b + index(B, i) * b_bytes, pc[i] = c + i * c_bytes
 * for products [first, first + n) of the stack, into device arrays of n pointers each. */
cudaError_t cr_cuda_stack_pointers(const cr_stack *s, int64_t first, int64_t n, const void *a, size_t a_bytes,
                                   const void *b, size_t b_bytes, void *c, size_t c_bytes, const void **pa,
                                   const void **pb, void **pc, cudaStream_t st);

/* Bytes of device scratch cr_cuda_stack_pointers needs for n products: three arrays, each
 * aligned (stack_pointer_arrays gives their places in it). */
size_t cr_cuda_stack_pointer_bytes(int64_t n);
void cr_cuda_stack_pointer_arrays(void *scratch, int64_t n, const void ***pa, const void ***pb, void ***pc);

#endif
