/* What a CUDA launcher of the registry receives: the task, its buffers on the device, and the
 * stream and cuBLAS handle it runs on (the worker's own, or a lane's). The worker (cuda_run.cu)
 * lays the buffers out and copies; a launcher only enqueues its kernel or library call. */
#ifndef CRUNCHD_CUDA_LAUNCH_H
#define CRUNCHD_CUDA_LAUNCH_H

#include "kernels/cuda/cuda_worker.h"

struct cr_cuda_launch {
    const cr_exec *x;
    const cr_task *t;
    const void *in[3];    /* device inputs: gemm a, b; ata a; histogram data. A stack's (t->stack):
                           * each operand all of its matrices, packed as they came */
    void *out;            /* device output: C (holding c_in on entry when beta applies, broadcast into
                           * every product's matrix for a stack) or counts; a stack's count matrices */
    void *scratch;        /* the row's scratch() bytes, NULL when none */
    size_t scratch_bytes;
    cr_cuda_err *e;       /* the first failure, with the call that failed */
};
typedef struct cr_cuda_launch cr_cuda_launch;

/* cuBLAS over `batch` equal-shaped problems at equal strides (elements) in device memory, on the
 * handle's current stream (launchers.cu); batch 1 is one plain call. tf32: tensor-op math for
 * this call only. */
cublasStatus_t cr_cublas_gemm_batched(cublasHandle_t h, const cr_gemm_task *g, cr_dtype dt, bool tf32,
                                      const void *a, const void *b, void *c, int batch);
cublasStatus_t cr_cublas_ata_batched(cublasHandle_t h, const cr_ata_task *t, cr_dtype dt, const void *a, void *c,
                                     int batch);

#endif
