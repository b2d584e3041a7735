/* Launchers of our own CUDA kernels, shared between the kernel files, the cuda backend, the GPU
 * tests and the benchmarks. Every launcher is asynchronous on `s`, takes device pointers in the
 * row-major layout of kernels/backend.h, handles any size (1, odd, prime, non-multiples of the
 * tile, K=1) and returns the launch's cudaError_t (cudaErrorNotSupported for a dtype it lacks). */
#ifndef CRUNCHD_CUDA_KERNELS_H
#define CRUNCHD_CUDA_KERNELS_H

#include <cuda_runtime.h>
#include <stdbool.h>
#include <stdint.h>

#include "kernels/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* C(m×n) = alpha·op(A)·op(B) + beta·C; c holds the input C on entry when beta != 0.
 * A is m×k (k×m when trans_a), B is k×n (n×k when trans_b), all row-major, dense. */
typedef struct {
    int64_t m, n, k;
    bool trans_a, trans_b;
    double alpha, beta;
    const void *a, *b;
    void *c;
} cr_gemm_dev;

typedef cudaError_t (*cr_gemm_launcher)(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s);

cudaError_t cr_cuda_gemm_naive(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s);
cudaError_t cr_cuda_gemm_regtile(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s);
cudaError_t cr_cuda_gemm_smem(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s);
cudaError_t cr_cuda_gemm_blocktile(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s);
cudaError_t cr_cuda_gemm_vec(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s);
cudaError_t cr_cuda_gemm_dbuf(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s);
/* dbuf with scratch for split-K (small C, long K): cr_cuda_gemm_dbuf_work_bytes is what its plan
 * wants (0: it will not split); work NULL or shorter: it runs unsplit, as cr_cuda_gemm_dbuf. */
size_t cr_cuda_gemm_dbuf_work_bytes(const cr_gemm_dev *g, cr_dtype dt);
cudaError_t cr_cuda_gemm_dbuf_ws(const cr_gemm_dev *g, cr_dtype dt, void *work, size_t work_bytes, cudaStream_t s);
/* Tensor cores (gemm_tc.cu): tc_tf32 takes CR_DT_F32 and multiplies in TF32; tc takes CR_DT_F16
 * and CR_DT_BF16 (C in the same dtype). Both accumulate in FP32. */
cudaError_t cr_cuda_gemm_tc_tf32(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s);
cudaError_t cr_cuda_gemm_tc(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s);
/* tc_tf32 with device scratch for its wgmma path (cr_cuda_gemm_wgmma_work_bytes); work NULL or
 * short: taken from the stream's memory pool (cudaMallocAsync), as cr_cuda_gemm_tc_tf32 does. */
cudaError_t cr_cuda_gemm_tc_tf32_ws(const cr_gemm_dev *g, cr_dtype dt, void *work, size_t work_bytes,
                                    cudaStream_t s);
/* FP32 at FP32 accuracy on the tensor cores (gemm_3xtf32.cu): both operands split into TF32
 * big and small parts in scratch of cr_cuda_gemm_3xtf32_work_bytes (work NULL or short: taken
 * from the stream's memory pool), three TF32 products through tc_tf32. */
size_t cr_cuda_gemm_3xtf32_work_bytes(const cr_gemm_dev *g, cr_dtype dt);
cudaError_t cr_cuda_gemm_3xtf32_ws(const cr_gemm_dev *g, cr_dtype dt, void *work, size_t work_bytes, cudaStream_t s);
cudaError_t cr_cuda_gemm_3xtf32(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s);
/* The wgmma + TMA path of tc and tc_tf32 (gemm_wgmma.cu, sm_90a, compute capability 9.0 only).
 * F16/BF16: any transposes, base pointers 16-byte aligned and leading dimensions multiples of 8
 * elements. F32 (TF32 multiplies): the K-major operands (A untransposed, B transposed) 16-byte
 * aligned with leading dimensions multiples of 4; MN-major ones are transposed into scratch of
 * cr_cuda_gemm_wgmma_work_bytes (0 for F16/BF16). applies() says whether it takes g (with
 * any_size false, only problems big enough to gain); cr_cuda_gemm_wgmma answers
 * cudaErrorNotSupported where it does not apply and takes its scratch from the stream's pool. */
bool cr_cuda_gemm_wgmma_applies(const cr_gemm_dev *g, cr_dtype dt, bool any_size);
size_t cr_cuda_gemm_wgmma_work_bytes(const cr_gemm_dev *g, cr_dtype dt);
cudaError_t cr_cuda_gemm_wgmma(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s);
cudaError_t cr_cuda_gemm_wgmma_ws(const cr_gemm_dev *g, cr_dtype dt, void *work, size_t work_bytes,
                                  cudaStream_t s);

/* The own batched GEMM (gemm_batched.cu): C_i = alpha·op(A_{a(i)})·op(B_{b(i)}) + beta·C_i for
 * the products i of stack s (rank 0: one), A's and B's matrices packed as the stack says (a(i),
 * b(i): cr_stack_operand_index), C's count matrices dense and holding the input C when beta != 0.
 * FP32 and FP64; any m, n, k, transposes and broadcasting; one launch (unless the stack has over
 * 2^31 tiles of C). */
cudaError_t cr_cuda_gemm_batched(const cr_gemm_dev *g, const cr_stack *s, cr_dtype dt, cudaStream_t st);

#ifdef __cplusplus
}
#endif

#endif
