/* The CUDA launchers the registry's rows name (kernels/cuda/launchers.cu): plain C declarations,
 * so kernels/registry.c can list them without CUDA headers. Each takes the launch a worker
 * prepared (kernels/cuda/launch.h) and returns a cudaError_t as an int. */
#ifndef CRUNCHD_CUDA_LAUNCHERS_H
#define CRUNCHD_CUDA_LAUNCHERS_H

#include <stdint.h>

#include "kernels/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cr_cuda_launch; /* kernels/cuda/launch.h */

int cr_cuda_launch_gemm_naive(struct cr_cuda_launch *l);
int cr_cuda_launch_gemm_regtile(struct cr_cuda_launch *l);
int cr_cuda_launch_gemm_smem(struct cr_cuda_launch *l);
int cr_cuda_launch_gemm_blocktile(struct cr_cuda_launch *l);
int cr_cuda_launch_gemm_vec(struct cr_cuda_launch *l);
int cr_cuda_launch_gemm_dbuf(struct cr_cuda_launch *l);
uint64_t cr_cuda_scratch_gemm_dbuf(const cr_task *t);
int cr_cuda_launch_gemm_cublas(struct cr_cuda_launch *l);
int cr_cuda_launch_gemm_cublas_tf32(struct cr_cuda_launch *l);
/* cublas and cublas-tf32 on a stack that broadcasts with no common stride: the pointer arrays of
 * cublasGemmBatchedEx, written on the device (stack_ops.cu); 0 for anything else. */
uint64_t cr_cuda_scratch_gemm_cublas(const cr_task *t);
int cr_cuda_launch_gemm_batched(struct cr_cuda_launch *l);
int cr_cuda_launch_gemm_tc_tf32(struct cr_cuda_launch *l);
uint64_t cr_cuda_scratch_gemm_tc_tf32(const cr_task *t);
int cr_cuda_launch_gemm_tc_3xtf32(struct cr_cuda_launch *l);
uint64_t cr_cuda_scratch_gemm_tc_3xtf32(const cr_task *t);
int cr_cuda_launch_gemm_tc(struct cr_cuda_launch *l);

int cr_cuda_launch_ata_gemm(struct cr_cuda_launch *l);
int cr_cuda_launch_ata_basic(struct cr_cuda_launch *l);
int cr_cuda_launch_ata_symtile(struct cr_cuda_launch *l);
int cr_cuda_launch_ata_dmma(struct cr_cuda_launch *l);
int cr_cuda_launch_ata_cublas_syrk(struct cr_cuda_launch *l);
int cr_cuda_launch_ata_cublas_gemm(struct cr_cuda_launch *l);
int cr_cuda_launch_ata_batched(struct cr_cuda_launch *l);
uint64_t cr_cuda_scratch_ata_symtile(const cr_task *t);

int cr_cuda_launch_hist_global(struct cr_cuda_launch *l);
int cr_cuda_launch_hist_smem(struct cr_cuda_launch *l);
int cr_cuda_launch_hist_smem_vec(struct cr_cuda_launch *l);
int cr_cuda_launch_hist_cub(struct cr_cuda_launch *l);
uint64_t cr_cuda_scratch_hist_cub(const cr_task *t);
int cr_cuda_launch_hist_batched(struct cr_cuda_launch *l);
uint64_t cr_cuda_scratch_hist_batched(const cr_task *t);

#ifdef CRUNCHD_FAULT_INJECTION
/* Test builds only: a real sticky fault, a store to an address no allocation covers. */
int cr_cuda_launch_fault_illegal_address(struct cr_cuda_launch *l);
#endif

#ifdef __cplusplus
}
#endif

#endif
