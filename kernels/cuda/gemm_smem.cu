/* GEMM, classic shared-memory tiling (the CUDA programming guide's kernel): a block of
 * TS×TS threads computes a TS×TS tile of C, one element per thread, walking k in steps of TS;
 * each step stages a TS×TS tile of op(A) and of op(B) in shared memory, so every global
 * element is read once per tile instead of once per output. Out-of-range elements are staged
 * as zeros, which is what makes any size work. */
#include "kernels/cuda/gemm_common.cuh"

#define TS 32

template <typename T>
__global__ void __launch_bounds__(TS * TS) gemm_smem_kernel(gemm_args<T> p)
{
    /* +1 column: a column walk (sa[*][x]) then hits 32 different banks */
    __shared__ T sa[TS][TS + 1];
    __shared__ T sb[TS][TS + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    int64_t i = (int64_t)blockIdx.y * TS + ty;
    int64_t j = (int64_t)blockIdx.x * TS + tx;
    int64_t ia = (int64_t)blockIdx.y * TS;
    T acc = 0;
    for (int64_t k0 = 0; k0 < p.k; k0 += TS) {
        /* with trans_a the stored A runs along m, so let tx run along m for coalescing */
        if (p.ta)
            sa[tx][ty] = gemm_a_safe(p, ia + tx, k0 + ty);
        else
            sa[ty][tx] = gemm_a_safe(p, i, k0 + tx);
        if (p.tb)
            sb[tx][ty] = gemm_b_safe(p, k0 + tx, (int64_t)blockIdx.x * TS + ty);
        else
            sb[ty][tx] = gemm_b_safe(p, k0 + ty, j);
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < TS; kk++)
            acc += sa[ty][kk] * sb[kk][tx];
        __syncthreads(); /* the next stage overwrites what this one read */
    }
    gemm_store(p, i, j, acc);
}

template <typename T>
static cudaError_t smem_launch(const cr_gemm_dev *g, cudaStream_t s)
{
    dim3 grid;
    cudaError_t e = gemm_grid(gemm_cdiv(g->m, TS), gemm_cdiv(g->n, TS), &grid);
    if (e != cudaSuccess)
        return e;
    gemm_smem_kernel<T><<<grid, dim3(TS, TS), 0, s>>>(gemm_make_args<T>(g));
    return gemm_launched();
}

extern "C" cudaError_t cr_cuda_gemm_smem(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s)
{
    bool nothing;
    cudaError_t e = gemm_check(g, &nothing);
    if (e != cudaSuccess || nothing)
        return e;
    if (dt == CR_DT_F32)
        return smem_launch<float>(g, s);
    if (dt == CR_DT_F64)
        return smem_launch<double>(g, s);
    return cudaErrorNotSupported;
}
