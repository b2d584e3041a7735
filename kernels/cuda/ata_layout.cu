/* Layout helpers for AᵀA: an out-of-place transpose (symtile's trans_a input) and the mirror of
 * the upper triangle onto the lower one (cuBLAS SYRK fills one triangle only). Both move 32×32
 * tiles through shared memory so reads and writes are coalesced; the +1 column of padding keeps
 * the transposed reads off a single bank. */
#include "kernels/cuda/ata_hist_kernels.h"

#define TT 32
#define TT_ROWS 8

/* out(cols×rows) = in(rows×cols)ᵀ. With MIRROR, in == out is n×n and only tiles on or below the
 * diagonal are written, from their upper mirror images (element (i, j), i > j, gets (j, i)). */
template <typename T, bool MIRROR>
__global__ void transpose_kernel(const T *in, T *out, int64_t rows,
                                 int64_t cols)
{
    __shared__ T tile[TT][TT + 1];
    int64_t by = blockIdx.y, bx = blockIdx.x; /* tile of `in`: rows by*TT.., cols bx*TT.. */
    if (MIRROR && by > bx)
        return; /* reads come from the upper triangle only */
    for (int r = threadIdx.y; r < TT; r += TT_ROWS) {
        int64_t i = by * TT + r, j = bx * TT + threadIdx.x;
        if (i < rows && j < cols)
            tile[r][threadIdx.x] = in[i * cols + j];
    }
    __syncthreads();
    for (int r = threadIdx.y; r < TT; r += TT_ROWS) {
        int64_t i = bx * TT + r, j = by * TT + threadIdx.x; /* out row i, col j */
        bool inside = i < cols && j < rows;
        if (MIRROR)
            inside = inside && i > j;
        if (inside)
            out[i * rows + j] = tile[threadIdx.x][r];
    }
}

template <typename T, bool MIRROR>
static cudaError_t launch_transpose(const void *in, void *out, int64_t rows, int64_t cols, cudaStream_t s)
{
    if (rows <= 0 || cols <= 0)
        return cudaSuccess;
    int64_t gx = (cols + TT - 1) / TT, gy = (rows + TT - 1) / TT;
    if (gy > 65535)
        return cudaErrorInvalidValue;
    dim3 grid((unsigned)gx, (unsigned)gy), block(TT, TT_ROWS);
    transpose_kernel<T, MIRROR><<<grid, block, 0, s>>>((const T *)in, (T *)out, rows, cols);
    return cudaGetLastError();
}

extern "C" cudaError_t cr_cuda_transpose(const void *in, void *out, int64_t rows, int64_t cols,
                                         cr_dtype dt, cudaStream_t s)
{
    if (dt == CR_DT_F32)
        return launch_transpose<float, false>(in, out, rows, cols, s);
    if (dt == CR_DT_F64)
        return launch_transpose<double, false>(in, out, rows, cols, s);
    return cudaErrorNotSupported;
}

extern "C" cudaError_t cr_cuda_mirror_upper(void *c, int64_t n, cr_dtype dt, cudaStream_t s)
{
    if (dt == CR_DT_F32)
        return launch_transpose<float, true>(c, c, n, n, s);
    if (dt == CR_DT_F64)
        return launch_transpose<double, true>(c, c, n, n, s);
    return cudaErrorNotSupported;
}
