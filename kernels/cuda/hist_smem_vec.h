/* The paths of the `smem-vec` histogram (hist_smem_vec.cu), by where the privatized counters
 * live. The kernel row takes AUTO (the least shared memory that holds the bins in one pass,
 * else GLOBAL); the GPU tests and the benchmark force each path to check and time it beside
 * the others. */
#ifndef CRUNCHD_HIST_SMEM_VEC_H
#define CRUNCHD_HIST_SMEM_VEC_H

#include "kernels/cuda/ata_hist_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    CR_HIST_VEC_AUTO,
    CR_HIST_VEC_SMEM48,   /* one copy per 512-thread block in 48 KiB, 4 blocks per SM: bins <= 12,288 */
    CR_HIST_VEC_ONE_COPY, /* one copy per 1024-thread block in opt-in shared memory: bins <= 58,112 on Hopper */
    CR_HIST_VEC_CLUSTER,  /* one copy spread over a cluster of up to 16 blocks, windows beyond
                             (AUTO: clusters of 2, then GLOBAL) */
    CR_HIST_VEC_CLUSTER8, /* the same with clusters of at most 8 (the portable size) */
    CR_HIST_VEC_GLOBAL,   /* no privatization: the `global` kernel's 64-bit atomics */
} cr_hist_vec_path;

/* smem-vec through one path; cudaErrorInvalidValue when that path cannot hold h->bins. */
cudaError_t cr_cuda_hist_smem_vec_path(const cr_hist_dev *h, cr_dtype dt, cr_hist_vec_path path, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
