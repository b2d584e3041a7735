/* Launchers of our own AᵀA and histogram kernels, shared by the cuda backend, the GPU tests and
 * the benchmarks. Same conventions as cuda_kernels.h: asynchronous on `s`, device pointers in
 * the row-major layout of kernels/backend.h, any size, return the launch's cudaError_t
 * (cudaErrorNotSupported for a dtype a launcher lacks, cudaErrorInvalidValue for arguments no
 * size makes valid). */
#ifndef CRUNCHD_ATA_HIST_KERNELS_H
#define CRUNCHD_ATA_HIST_KERNELS_H

#include <cuda_runtime.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* C(n×n) = AᵀA, A is m×n row-major (n×m when trans_a), C is written in full. `work` is scratch
 * of cr_cuda_ata_work_bytes() bytes (NULL when that is 0). */
typedef struct {
    int64_t m, n;
    bool trans_a;
    const void *a;
    void *c;
    void *work;
} cr_ata_dev;

typedef cudaError_t (*cr_ata_launcher)(const cr_ata_dev *t, cr_dtype dt, cudaStream_t s);

/* What every AᵀA launcher checks first: cudaSuccess to go on, cudaErrorNotReady (never a
 * launcher's own result) when n == 0 leaves nothing to compute, else the error to return. */
static inline cudaError_t cr_ata_begin(const cr_ata_dev *t, cr_dtype dt)
{
    if (dt != CR_DT_F32 && dt != CR_DT_F64)
        return cudaErrorNotSupported;
    if (t->m < 0 || t->n < 0)
        return cudaErrorInvalidValue;
    return t->n == 0 ? cudaErrorNotReady : cudaSuccess;
}

/* Scratch a launcher needs: symtile transposes a trans_a input into it and, in FP32, keeps the
 * partial tiles of its shared last wave there (ata_symtile.cu); basic needs none. */
size_t cr_cuda_ata_work_bytes(const cr_ata_dev *t, cr_dtype dt, cr_ata_launcher k);

cudaError_t cr_cuda_ata_basic(const cr_ata_dev *t, cr_dtype dt, cudaStream_t s);
cudaError_t cr_cuda_ata_symtile(const cr_ata_dev *t, cr_dtype dt, cudaStream_t s);
/* FP64 only, on the FP64 tensor cores (ata_dmma.cu); reads a stored Aᵀ directly: no scratch. */
cudaError_t cr_cuda_ata_dmma(const cr_ata_dev *t, cr_dtype dt, cudaStream_t s);

/* Copies the upper triangle of the row-major n×n `c` onto its lower triangle (after SYRK). */
cudaError_t cr_cuda_mirror_upper(void *c, int64_t n, cr_dtype dt, cudaStream_t s);
/* out(cols×rows) = in(rows×cols)ᵀ, row-major, out-of-place. */
cudaError_t cr_cuda_transpose(const void *in, void *out, int64_t rows, int64_t cols, cr_dtype dt,
                              cudaStream_t s);

/* Histogram with numpy.histogram semantics (see cr_hist_task). dtypes: U8, F32, F64. The launchers
 * zero `counts` themselves and add into it with atomics. */
typedef struct {
    int64_t count;
    const void *data;
    int32_t bins;
    double lo, hi;
    unsigned long long *counts; /* bins entries */
} cr_hist_dev;

typedef cudaError_t (*cr_hist_launcher)(const cr_hist_dev *h, cr_dtype dt, cudaStream_t s);

cudaError_t cr_cuda_hist_global(const cr_hist_dev *h, cr_dtype dt, cudaStream_t s);
cudaError_t cr_cuda_hist_smem(const cr_hist_dev *h, cr_dtype dt, cudaStream_t s);
cudaError_t cr_cuda_hist_smem_vec(const cr_hist_dev *h, cr_dtype dt, cudaStream_t s);

/* CUB DeviceHistogram::HistogramEven. With temp == NULL only sets *temp_bytes (the scratch it
 * needs, from the caller's pool); otherwise runs with temp of at least that size. */
cudaError_t cr_cuda_hist_cub(const cr_hist_dev *h, cr_dtype dt, void *temp, size_t *temp_bytes,
                             cudaStream_t s);

/* One histogram of a batch (hist_batched.cu): its data, length, range and counts, in device
 * memory as an array the kernel reads, so histograms of different lengths and ranges share a
 * launch. lo/hi/span/step/bins as cr_hist_make_params computes them (hist_bin.cuh). */
typedef struct {
    const void *data;
    long long count;
    double lo, hi, span, step;
    int bins;
    int identity;                /* every byte its own bin */
    unsigned long long *counts;  /* bins entries, zeroed by the caller */
} cr_hist_job;

/* The histograms jobs[0..n) (all of dtype dt and `bins` bins, the longest max_count elements) in
 * one launch: a grid row of privatized-bin blocks per histogram. Batches stop at
 * CR_BATCH_MAX_BINS; a single histogram (the smem-batched row) may have any bins. */
cudaError_t cr_cuda_hist_batched(const cr_hist_job *jobs, int n, int bins, int64_t max_count, cr_dtype dt,
                                 cudaStream_t s);
/* Fills a job from a histogram's device view; cudaErrorInvalidValue when its range is invalid. */
cudaError_t cr_hist_job_make(const cr_hist_dev *h, cr_dtype dt, cr_hist_job *out);

/* True when every byte is its own bin (U8, 256 bins over [0, 256]): the fast path. */
bool cr_hist_is_byte_identity(const cr_hist_dev *h, cr_dtype dt);

#ifdef __cplusplus
}
#endif

#endif
