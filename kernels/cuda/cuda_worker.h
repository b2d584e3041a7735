/* Inside the cuda backend: the worker (one per stream) and what run() needs of it. Not part of
 * the backend interface; server/ never sees this. */
#ifndef CRUNCHD_CUDA_WORKER_H
#define CRUNCHD_CUDA_WORKER_H

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_check.h"

enum { EV_START, EV_H2D, EV_KERNEL, EV_D2H, EV_COUNT };

struct cr_worker {
    int device;
    char device_name[128];
    cudaStream_t stream;
    cublasHandle_t blas;     /* bound to `stream` */
    cudaMemPool_t pool;      /* the device's pool, shared by its workers; memory is kept for reuse */
    cudaEvent_t ev[EV_COUNT];
    void *pinned;            /* staging for inputs, then outputs; grown on demand, kept */
    size_t pinned_bytes;
};

/* Grows the pinned staging buffer to at least `bytes` (the old contents are not kept). */
cudaError_t cr_worker_reserve_pinned(cr_worker *w, size_t bytes);

/* The backend status for a failed CUDA call. Clears a non-sticky error so the worker stays
 * usable; a sticky one (the context is corrupt) is CR_E_FATAL. */
cr_status cr_cuda_status(cudaError_t e);

/* Runs one task (cuda_run.cu). */
cr_status cr_cuda_run(cr_worker *w, const cr_task *t, cr_timings *tm, char *err, size_t errlen);
uint64_t cr_cuda_task_device_bytes(const cr_task *t);

#endif
