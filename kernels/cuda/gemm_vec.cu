/* GEMM, bank-conflict-free with vector loads (the V100 write-up's third step): 128×128×8
 * block, 256 threads, 8×8 outputs per thread, but
 *  - op(A) is stored k-major (transposed) in shared memory, so a thread's 4 consecutive
 *    rows for one k are one float4 read instead of 4 strided scalars;
 *  - each thread's 8×8 is split into 2×2 quadrants of 4×4, 64 apart: the 16 threads of a
 *    half-warp then read 16 consecutive float4 of B (no bank conflict) and share the A reads
 *    (broadcast);
 *  - global loads are float4 when pointers and leading dimensions allow (else checked
 *    scalars, gemm_common.cuh), and C is written as float4 where aligned.
 * Single-buffered: load, barrier, compute, barrier. FP32 only. */
#include "kernels/cuda/gemm_common.cuh"

#define VBM 128
#define VBN 128
#define VBK 8
#define VNT 256

template <bool TA, bool TB, bool VEC>
__global__ void __launch_bounds__(VNT) gemm_vec_kernel(gemm_args<float> p, bool cvec)
{
    __shared__ __align__(16) float sa[VBK * (VBM + GEMM_PAD)];
    __shared__ __align__(16) float sb[VBK * (VBN + GEMM_PAD)];
    const int la = VBM + GEMM_PAD, lb = VBN + GEMM_PAD;
    int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    int64_t bm = (int64_t)blockIdx.y * VBM, bn = (int64_t)blockIdx.x * VBN;
    float acc[8][8] = {};
    for (int64_t k0 = 0; k0 < p.k; k0 += VBK) {
        float4 va[gemm_tile_shape<VBM, VBK, VNT>::per_thread];
        float4 vb[gemm_tile_shape<VBN, VBK, VNT>::per_thread];
        gemm_tile_fetch<VBM, VBK, VNT, !TA, VEC>(p.a, p.lda, p.m, p.k, bm, k0, tid, va);
        gemm_tile_fetch<VBN, VBK, VNT, TB, VEC>(p.b, p.ldb, p.n, p.k, bn, k0, tid, vb);
        gemm_tile_store<VBM, VBK, VNT, !TA>(sa, tid, va);
        gemm_tile_store<VBN, VBK, VNT, TB>(sb, tid, vb);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < VBK; kk++) {
            float4 a0 = *(const float4 *)&sa[kk * la + ty * 4];
            float4 a1 = *(const float4 *)&sa[kk * la + ty * 4 + 64];
            float4 b0 = *(const float4 *)&sb[kk * lb + tx * 4];
            float4 b1 = *(const float4 *)&sb[kk * lb + tx * 4 + 64];
            float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int r = 0; r < 8; r++)
#pragma unroll
                for (int c = 0; c < 8; c++)
                    acc[r][c] += av[r] * bv[c];
        }
        __syncthreads(); /* the next stage overwrites what this one read */
    }
#pragma unroll
    for (int r = 0; r < 8; r++) {
        int64_t i = bm + ty * 4 + (r % 4) + (r / 4) * 64;
        gemm_store4(p, cvec, i, bn + tx * 4, make_float4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]));
        gemm_store4(p, cvec, i, bn + tx * 4 + 64, make_float4(acc[r][4], acc[r][5], acc[r][6], acc[r][7]));
    }
}

template <bool TA, bool TB>
static cudaError_t vec_launch(const gemm_args<float> &p, dim3 grid, cudaStream_t s)
{
    bool vec = gemm_vec_ok(p.a, p.lda) && gemm_vec_ok(p.b, p.ldb);
    bool cvec = gemm_vec_ok(p.c, p.n);
    if (vec)
        gemm_vec_kernel<TA, TB, true><<<grid, VNT, 0, s>>>(p, cvec);
    else
        gemm_vec_kernel<TA, TB, false><<<grid, VNT, 0, s>>>(p, cvec);
    return gemm_launched();
}

extern "C" cudaError_t cr_cuda_gemm_vec(const cr_gemm_dev *g, cr_dtype dt, cudaStream_t s)
{
    bool nothing;
    cudaError_t e = gemm_check_f32(g, dt, &nothing);
    if (e != cudaSuccess || nothing)
        return e;
    dim3 grid;
    e = gemm_grid(gemm_cdiv(g->m, VBM), gemm_cdiv(g->n, VBN), &grid);
    if (e != cudaSuccess)
        return e;
    gemm_args<float> p = gemm_make_args<float>(g);
    if (!p.ta && !p.tb)
        return vec_launch<false, false>(p, grid, s);
    if (p.ta && !p.tb)
        return vec_launch<true, false>(p, grid, s);
    if (!p.ta && p.tb)
        return vec_launch<false, true>(p, grid, s);
    return vec_launch<true, true>(p, grid, s);
}
