/* GEMM, block tile + thread tile (the V100 write-up's 128×128×8 kernel): a block of 256
 * threads owns a BM×BN tile of C, each thread a TM×TN sub-tile in registers. Per k step a
 * thread reads TM values of op(A) and TN of op(B) from shared memory and does TM·TN
 * multiply-adds, so shared-memory traffic per FMA falls by (TM·TN)/(TM+TN) = 4 at 8×8.
 * A is kept m-major in shared memory ([BM][BK]) and each thread's rows are contiguous: this
 * is the version with the bank conflicts that gemm_vec.cu removes. Loads are checked scalars
 * (any size, any alignment, both transposes). FP64 uses a 64×64 tile with 4×4 per thread so
 * that its accumulators (twice the registers per value) still fit without spilling. */
#include "kernels/cuda/gemm_common.cuh"

template <typename T, int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
gemm_blocktile_kernel(gemm_args<T> p)
{
    const int nt = (BM / TM) * (BN / TN);
    __shared__ T sa[BM][BK];
    __shared__ T sb[BK][BN];
    int tid = threadIdx.x;
    int tx = tid % (BN / TN), ty = tid / (BN / TN);
    int64_t bm = (int64_t)blockIdx.y * BM, bn = (int64_t)blockIdx.x * BN;
    T acc[TM][TN];
#pragma unroll
    for (int r = 0; r < TM; r++)
#pragma unroll
        for (int c = 0; c < TN; c++)
            acc[r][c] = 0;
    for (int64_t k0 = 0; k0 < p.k; k0 += BK) {
        /* consecutive threads walk the stored layout's contiguous direction */
#pragma unroll
        for (int e = tid; e < BM * BK; e += nt) {
            int r = p.ta ? e % BM : e / BK, c = p.ta ? e / BM : e % BK;
            sa[r][c] = gemm_a_safe(p, bm + r, k0 + c);
        }
#pragma unroll
        for (int e = tid; e < BK * BN; e += nt) {
            int r = p.tb ? e % BK : e / BN, c = p.tb ? e / BK : e % BN;
            sb[r][c] = gemm_b_safe(p, k0 + r, bn + c);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk++) {
            T av[TM], bv[TN];
#pragma unroll
            for (int r = 0; r < TM; r++)
                av[r] = sa[ty * TM + r][kk];
#pragma unroll
            for (int c = 0; c < TN; c++)
                bv[c] = sb[kk][tx * TN + c];
#pragma unroll
            for (int r = 0; r < TM; r++)
#pragma unroll
                for (int c = 0; c < TN; c++)
                    acc[r][c] += av[r] * bv[c];
        }
        __syncthreads(); /* the next stage overwrites what this one read */
    }
#pragma unroll
    for (int r = 0; r < TM; r++)
#pragma unroll
        for (int c = 0; c < TN; c++)
            gemm_store(p, bm + ty * TM + r, bn + tx * TN + c, acc[r][c]);
}

template <typename T, int BM, int BN, int BK, int TM, int TN>
static cudaError_t blocktile_launch(const cr_gemm_dev *g, cudaStream_t s)
{
    dim3 grid;
    cudaError_t e = gemm_grid(gemm_cdiv(g->m, BM), gemm_cdiv(g->n, BN), &grid);
    if (e != cudaSuccess)
        return e;
    gemm_blocktile_kernel<T, BM, BN, BK, TM, TN>
        <<<grid, (BM / TM) * (BN / TN), 0, s>>>(gemm_make_args<T>(g));
    return gemm_launched();
}

extern "C" cudaError_t cr_cuda_gemm_blocktile(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s)
{
    bool nothing;
    cudaError_t e = gemm_check(g, &nothing);
    if (e != cudaSuccess || nothing)
        return e;
    if (dt == CR_DT_F32)
        return blocktile_launch<float, 128, 128, 8, 8, 8>(g, s);
    if (dt == CR_DT_F64)
        return blocktile_launch<double, 64, 64, 8, 4, 4>(g, s);
    return cudaErrorNotSupported;
}
