/* What a CUDA launcher of the registry receives: the task, its buffers on the device, and the
 * worker whose stream and cuBLAS handle it runs on. The worker (cuda_run.cu) lays the buffers
 * out and copies; a launcher only enqueues its kernel or library call. */
#ifndef CRUNCHD_CUDA_LAUNCH_H
#define CRUNCHD_CUDA_LAUNCH_H

#include "kernels/cuda/cuda_worker.h"

struct cr_cuda_launch {
    cr_worker *w;
    const cr_task *t;
    const void *in[3];    /* device inputs: gemm a, b; ata a; histogram data */
    void *out;            /* device output: C (holding c_in on entry when beta applies) or counts */
    void *scratch;        /* the row's scratch() bytes, NULL when none */
    size_t scratch_bytes;
    cr_cuda_err *e;       /* the first failure, with the call that failed */
};
typedef struct cr_cuda_launch cr_cuda_launch;

/* The worker handle's math modes. Both forbid reductions in the output type: with float16 or
 * bfloat16 C, cuBLAS's split-K kernels otherwise round each partial sum to the 16-bit type
 * (a 9x14 by 14x6 bfloat16 product came back up to 2 units off in the last place, as two halves of
 * k rounded to bfloat16 and added), where the job promises FP32 accumulation and one rounding. */
#define CR_CUBLAS_MATH ((cublasMath_t)(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION))
#define CR_CUBLAS_MATH_TF32 \
    ((cublasMath_t)(CUBLAS_TF32_TENSOR_OP_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION))

/* cuBLAS over `batch` equal-shaped problems at equal strides (elements) in device memory, on the
 * handle's current stream (launchers.cu); batch 1 is one plain call. tf32: tensor-op math for
 * this call only. */
cublasStatus_t cr_cublas_gemm_batched(cublasHandle_t h, const cr_gemm_task *g, cr_dtype dt, bool tf32,
                                      const void *a, const void *b, void *c, int batch);
cublasStatus_t cr_cublas_ata_batched(cublasHandle_t h, const cr_ata_task *t, cr_dtype dt, const void *a, void *c,
                                     int batch);

#endif
