/* The one checking macro for CUDA runtime and cuBLAS calls.
 *
 *     cr_cuda_err e = {0};
 *     CR_CHECK(&e, cudaMemcpyAsync(...));
 *     ...
 * cleanup:
 *     return e.code;
 *
 * On failure it records the first failing call (file:line, the call's text, the library's own
 * error string) into a cr_cuda_err and jumps to the function's `cleanup:` label. Errors are
 * values: nothing here prints or exits. cuBLAS statuses are folded into cudaError_t so one
 * code travels up (allocation failures stay allocation failures; an execution failure asks
 * the runtime what really happened, because a sticky device fault surfaces there). */
#ifndef CRUNCHD_CUDA_CHECK_H
#define CRUNCHD_CUDA_CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>

typedef struct {
    cudaError_t code;  /* cudaSuccess until a checked call fails */
    const char *file;
    int line;
    char msg[256];     /* "file:line: call: error string" */
} cr_cuda_err;

static inline cudaError_t cr_cublas_to_cuda(cublasStatus_t st)
{
    switch (st) {
    case CUBLAS_STATUS_SUCCESS: return cudaSuccess;
    case CUBLAS_STATUS_ALLOC_FAILED: return cudaErrorMemoryAllocation;
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH: return cudaErrorNotSupported;
    case CUBLAS_STATUS_INVALID_VALUE: return cudaErrorInvalidValue;
    case CUBLAS_STATUS_EXECUTION_FAILED: {
        cudaError_t rt = cudaPeekAtLastError();
        return rt != cudaSuccess ? rt : cudaErrorLaunchFailure;
    }
    default: return cudaErrorUnknown;
    }
}

static inline bool cr_check_record(cr_cuda_err *e, cudaError_t code, const char *what,
                                   const char *file, int line)
{
    if (code == cudaSuccess)
        return false;
    if (e->code == cudaSuccess) { /* keep the first failure: later ones are consequences */
        e->code = code;
        e->file = file;
        e->line = line;
        snprintf(e->msg, sizeof e->msg, "%s:%d: %s: %s", file, line, what, cudaGetErrorString(code));
    }
    return true;
}

static inline bool cr_check_record(cr_cuda_err *e, cublasStatus_t st, const char *what,
                                   const char *file, int line)
{
    if (st == CUBLAS_STATUS_SUCCESS)
        return false;
    bool fresh = e->code == cudaSuccess;
    cr_check_record(e, cr_cublas_to_cuda(st), what, file, line);
    if (fresh)
        snprintf(e->msg, sizeof e->msg, "%s:%d: %s: %s", file, line, what, cublasGetStatusString(st));
    return true;
}

#define CR_CHECK(err, call)                                                       \
    do {                                                                          \
        if (cr_check_record((err), (call), #call, __FILE__, __LINE__)) goto cleanup; \
    } while (0)

#endif
