/* GEMM, register tile: each thread computes RT×RT elements of C in registers, operands from
 * global memory (the caches do the reuse). A loaded value of op(A) feeds RT products instead
 * of one, so the loads per multiply-add drop by RT. The thread's rows and columns are strided
 * by the block's extent (not contiguous) so that neighbouring threads still touch neighbouring
 * addresses and every access stays coalesced. */
#include "kernels/cuda/gemm_common.cuh"

#define RT 4
#define REG_BX 16
#define REG_BY 16

template <typename T>
__global__ void __launch_bounds__(REG_BX * REG_BY) gemm_regtile_kernel(gemm_args<T> p)
{
    int64_t i0 = (int64_t)blockIdx.y * (REG_BY * RT) + threadIdx.y;
    int64_t j0 = (int64_t)blockIdx.x * (REG_BX * RT) + threadIdx.x;
    T acc[RT][RT];
#pragma unroll
    for (int r = 0; r < RT; r++)
#pragma unroll
        for (int c = 0; c < RT; c++)
            acc[r][c] = 0;
    for (int64_t kk = 0; kk < p.k; kk++) {
        T av[RT], bv[RT];
#pragma unroll
        for (int r = 0; r < RT; r++)
            av[r] = gemm_a_safe(p, i0 + r * REG_BY, kk);
#pragma unroll
        for (int c = 0; c < RT; c++)
            bv[c] = gemm_b_safe(p, kk, j0 + c * REG_BX);
#pragma unroll
        for (int r = 0; r < RT; r++)
#pragma unroll
            for (int c = 0; c < RT; c++)
                acc[r][c] += av[r] * bv[c];
    }
#pragma unroll
    for (int r = 0; r < RT; r++)
#pragma unroll
        for (int c = 0; c < RT; c++)
            gemm_store(p, i0 + r * REG_BY, j0 + c * REG_BX, acc[r][c]);
}

template <typename T>
static cudaError_t regtile_launch(const cr_gemm_dev *g, cudaStream_t s)
{
    dim3 grid;
    cudaError_t e = gemm_grid(gemm_cdiv(g->m, REG_BY * RT), gemm_cdiv(g->n, REG_BX * RT), &grid);
    if (e != cudaSuccess)
        return e;
    gemm_regtile_kernel<T><<<grid, dim3(REG_BX, REG_BY), 0, s>>>(gemm_make_args<T>(g));
    return gemm_launched();
}

extern "C" cudaError_t cr_cuda_gemm_regtile(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s)
{
    bool nothing;
    cudaError_t e = gemm_check(g, &nothing);
    if (e != cudaSuccess || nothing)
        return e;
    if (dt == CR_DT_F32)
        return regtile_launch<float>(g, s);
    if (dt == CR_DT_F64)
        return regtile_launch<double>(g, s);
    return cudaErrorNotSupported;
}
