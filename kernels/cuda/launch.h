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

#endif
