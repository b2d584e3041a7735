/* GEMM, naive: one thread per element of C, operands straight from global memory.
 * The baseline the other variants are measured against; threadIdx.x runs along n so that a
 * warp's reads of B (untransposed) and its writes of C are coalesced. */
#include "kernels/cuda/gemm_common.cuh"

#define NAIVE_BX 32
#define NAIVE_BY 8

template <typename T>
__global__ void __launch_bounds__(NAIVE_BX * NAIVE_BY) gemm_naive_kernel(gemm_args<T> p)
{
    int64_t j = (int64_t)blockIdx.x * NAIVE_BX + threadIdx.x;
    int64_t i = (int64_t)blockIdx.y * NAIVE_BY + threadIdx.y;
    if (i >= p.m || j >= p.n)
        return;
    T acc = 0;
    for (int64_t kk = 0; kk < p.k; kk++)
        acc += gemm_a_at(p, i, kk) * gemm_b_at(p, kk, j);
    gemm_store(p, i, j, acc);
}

template <typename T>
static cudaError_t naive_launch(const cr_gemm_dev *g, cudaStream_t s)
{
    dim3 grid;
    cudaError_t e = gemm_grid(gemm_cdiv(g->m, NAIVE_BY), gemm_cdiv(g->n, NAIVE_BX), &grid);
    if (e != cudaSuccess)
        return e;
    gemm_naive_kernel<T><<<grid, dim3(NAIVE_BX, NAIVE_BY), 0, s>>>(gemm_make_args<T>(g));
    return gemm_launched();
}

extern "C" cudaError_t cr_cuda_gemm_naive(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s)
{
    bool nothing;
    cudaError_t e = gemm_check(g, &nothing);
    if (e != cudaSuccess || nothing)
        return e;
    if (dt == CR_DT_F32)
        return naive_launch<float>(g, s);
    if (dt == CR_DT_F64)
        return naive_launch<double>(g, s);
    return cudaErrorNotSupported;
}
