/* Inside the cuda backend: the worker (one per stream) and what run() needs of it. Not part of
 * the backend interface; server/ never sees this. */
#ifndef CRUNCHD_CUDA_WORKER_H
#define CRUNCHD_CUDA_WORKER_H

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_check.h"

enum { EV_START, EV_H2D, EV_KERNEL, EV_D2H, EV_COUNT };

#define CR_CUDA_LANES 3

/* The worker handle's math modes. Both forbid reductions in the output type: with float16 or
 * bfloat16 C, cuBLAS's split-K kernels otherwise round each partial sum to the 16-bit type
 * (a 9x14 by 14x6 bfloat16 product came back up to 2 units off in the last place, as two halves of
 * k rounded to bfloat16 and added), where the job promises FP32 accumulation and one rounding. */
#define CR_CUBLAS_MATH ((cublasMath_t)(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION))
#define CR_CUBLAS_MATH_TF32 \
    ((cublasMath_t)(CUBLAS_TF32_TENSOR_OP_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION))

/* A stream and what is bound to it: a cuBLAS handle, the phases' events, pinned staging. The
 * worker has one for run() and one per lane; a lane's own handle means no two lanes ever share
 * a cuBLAS workspace while both have work queued. */
typedef struct {
    cudaStream_t stream;
    cublasHandle_t blas;     /* bound to `stream` */
    cudaEvent_t ev[EV_COUNT];
    void *pinned;            /* the staging of the task or batch in flight (cr_exec_stage) */
    size_t pinned_bytes;
    void *kept;              /* staging kept between tasks, grown on demand up to CR_EXEC_STAGE_KEEP_BYTES */
    size_t kept_bytes;
    char *dev;               /* device memory for its tasks (cr_exec_device); grown on demand, kept */
    size_t dev_bytes;
    /* whether the task or batch in flight copies from / to the host: a phase without a copy (a
     * resident tensor, a generated operand, a result kept on the device) is timed 0, not as the
     * few microseconds between its two events */
    bool copies_in, copies_out;
} cr_exec;

/* A task queued alone on a lane (run_launch), until run_wait: what its answer still needs. */
typedef struct {
    void *out_host;          /* the output's host buffer, when it comes back through staging */
    size_t out_bytes;
} cr_flight;

/* What a lane has in flight: a batch (cuda_batch.cu), so the next batch's copies run while this
 * one's kernel does, or one task alone (cuda_run.cu). */
typedef struct {
    cr_exec x;
    cr_task *const *tasks;   /* the batch in flight (NULL: none) */
    int n;
    size_t out_off, out_each;/* task i's output at pinned + out_off + i * out_each */
    cr_flight run;           /* the task alone in flight */
    cr_cuda_err e;
} cr_lane;

struct cr_worker {
    int device;
    char device_name[128];
    cudaMemPool_t pool;      /* the device's pool, shared by its workers; memory is kept for reuse */
    cr_exec x;               /* run()'s */
    cr_lane lane[CR_CUDA_LANES];
};

/* Pinned staging of `bytes` for the next task or batch on x, at x->pinned: x's kept buffer,
 * grown (old contents lost) up to CR_EXEC_STAGE_KEEP_BYTES, enough for a small job or a batch of
 * them, or for a bigger task a block of the pinned pool, given back by cr_exec_unstage once the
 * task is done with it (to the pool's cache, which yields to the memory budget). Either way it is
 * counted (cr_staging_bytes) against the budget: kept buffers were once grown to the biggest
 * task each stream ever ran and kept, outside every limit and gauge (the start-up autotune's
 * 512 MiB histogram probe left that much pinned in one worker). */
#define CR_EXEC_STAGE_KEEP_BYTES (4ull << 20)
cudaError_t cr_exec_stage(cr_exec *x, size_t bytes);
void cr_exec_unstage(cr_exec *x);
/* Host memory held as staging by every worker: kept buffers and pool blocks staging a task now. */
uint64_t cr_staging_bytes(void);

/* The phases of the last task or batch on x, from its events (zeros unless measured). */
void cr_exec_timings(const cr_worker *w, const cr_exec *x, bool measured, cr_timings *tm);

/* The backend status for a failed CUDA call. Clears a non-sticky error so the worker stays
 * usable; a sticky one (the context is corrupt) is CR_E_FATAL. */
cr_status cr_cuda_status(cudaError_t e);

/* Runs one task (cuda_run.cu): at once, or queued alone on a lane; see cr_backend.run_launch. */
cr_status cr_cuda_run(cr_worker *w, const cr_task *t, cr_timings *tm, char *err, size_t errlen);
cr_status cr_cuda_run_launch(cr_worker *w, int lane, const cr_task *t, char *err, size_t errlen);
cr_status cr_cuda_run_wait(cr_worker *w, int lane, cr_timings *tm, char *err, size_t errlen);
uint64_t cr_cuda_task_device_bytes(const cr_task *t);

/* Batches (cuda_batch.cu); see cr_backend.batch_launch. */
cr_status cr_cuda_batch_launch(cr_worker *w, int lane, cr_task *const *tasks, int n, cr_status *st, char *err,
                               size_t errlen);
void cr_cuda_batch_wait(cr_worker *w, int lane, cr_status *st, cr_timings *tm, char *err, size_t errlen);

/* Device memory for one task or batch on x (a stream runs one at a time, and orders the next one's
 * use after the last one's): x's own block, kept between tasks and grown on demand up to
 * CR_EXEC_KEEP_BYTES, since a pool allocation and free per task cost the worker more CPU than
 * the launch (14% of a worker's samples serving 256² GEMMs, H100). A bigger task gets a block
 * of its own from the pool (*owned: the caller frees it on x's stream after the task). */
#define CR_EXEC_KEEP_BYTES (64ull << 20)
cudaError_t cr_exec_device(cr_worker *w, cr_exec *x, size_t bytes, char **dev, bool *owned);

/* Device memory for a task or a batch from the worker's pool. Fault builds fail a share of
 * these (CRUNCHD_FAULT_DEVICE_OOM_PERMILLE, 0..1000) as a full device would, so the soak
 * checks that out-of-memory answers 507 and harms no neighbour. */
cudaError_t cr_cuda_pool_alloc(void **p, size_t bytes, cudaMemPool_t pool, cudaStream_t s);

#endif
