/* AᵀA `basic`: one output per thread, C[i][j] = Σ_k A[k][i]·A[k][j], straight from global
 * memory, the full matrix (no use of symmetry). The baseline of the C2075 write-up. */
#include "kernels/cuda/ata_hist_kernels.h"

#define BASIC_TILE 16

template <typename T, bool TRANS>
__global__ void ata_basic_kernel(const T *__restrict__ a, int64_t m, int64_t n, T *__restrict__ c)
{
    int64_t j = (int64_t)blockIdx.x * BASIC_TILE + threadIdx.x;
    int64_t i = (int64_t)blockIdx.y * BASIC_TILE + threadIdx.y;
    if (i >= n || j >= n)
        return;
    T acc = 0;
    for (int64_t k = 0; k < m; k++) {
        /* stored A (m×n): column i is strided; stored Aᵀ (n×m): row i is contiguous */
        T ai = TRANS ? a[i * m + k] : a[k * n + i];
        T aj = TRANS ? a[j * m + k] : a[k * n + j];
        acc += ai * aj;
    }
    c[i * n + j] = acc;
}

template <typename T>
static cudaError_t launch_basic(const cr_ata_dev *t, cudaStream_t s)
{
    int64_t tiles = (t->n + BASIC_TILE - 1) / BASIC_TILE;
    if (tiles > 65535)
        return cudaErrorInvalidValue; /* grid.y limit: n > 1,048,560 is far past device memory */
    dim3 block(BASIC_TILE, BASIC_TILE), grid((unsigned)tiles, (unsigned)tiles);
    if (t->trans_a)
        ata_basic_kernel<T, true><<<grid, block, 0, s>>>((const T *)t->a, t->m, t->n, (T *)t->c);
    else
        ata_basic_kernel<T, false><<<grid, block, 0, s>>>((const T *)t->a, t->m, t->n, (T *)t->c);
    return cudaGetLastError();
}

extern "C" cudaError_t cr_cuda_ata_basic(const cr_ata_dev *t, cr_dtype dt, cudaStream_t s)
{
    cudaError_t e = cr_ata_begin(t, dt);
    if (e != cudaSuccess)
        return e == cudaErrorNotReady ? cudaSuccess : e;
    return dt == CR_DT_F32 ? launch_basic<float>(t, s) : launch_basic<double>(t, s);
}
