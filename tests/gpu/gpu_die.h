/* For the GPU test and benchmark programs: a failed CUDA or cuBLAS call ends the program, saying
 * which call failed, where and why. (The daemon's library unwinds instead: kernels/cuda/cuda_check.h.) */
#ifndef CRUNCHD_GPU_DIE_H
#define CRUNCHD_GPU_DIE_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

static inline void gpu_die_on(cudaError_t e, const char *call, const char *file, int line)
{
    if (e == cudaSuccess)
        return;
    fprintf(stderr, "%s:%d: %s: %s\n", file, line, call, cudaGetErrorString(e));
    exit(2);
}

static inline void gpu_die_on(cublasStatus_t s, const char *call, const char *file, int line)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return;
    fprintf(stderr, "%s:%d: %s: %s\n", file, line, call, cublasGetStatusString(s));
    exit(2);
}

#define CK(call) gpu_die_on((call), #call, __FILE__, __LINE__)

#endif
