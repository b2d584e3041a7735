/* Stack pieces computed on the device (stack_ops.h): c broadcast into the output, pointer arrays. */
#include "kernels/cuda/stack_dev.cuh"
#include "kernels/cuda/stack_ops.h"

#define THREADS 256
#define MAX_BLOCKS 65535
#define ARRAY_ALIGN 256

/* Matrices of words_each words, `tpm` threads each (a power of two, so that matrices smaller
 * than a block share it: a 8x8 float matrix is 16 16-byte words). */
template <typename W>
__global__ void __launch_bounds__(THREADS) expand_kernel(W *out, const W *c, cr_stack_dev s, int64_t count,
                                                         int64_t words_each, int tpm)
{
    int per_block = THREADS / tpm, sub = threadIdx.x / tpm, lane = threadIdx.x % tpm;
    for (int64_t i = (int64_t)blockIdx.x * per_block + sub; i < count; i += (int64_t)gridDim.x * per_block) {
        const W *src = c + cr_stack_index(s, CR_STACK_C, i) * words_each;
        W *dst = out + i * words_each;
        for (int64_t w = lane; w < words_each; w += tpm)
            dst[w] = src[w];
    }
}

template <typename W>
static cudaError_t expand_as(void *out, const void *c, const cr_stack *s, size_t bytes_each, cudaStream_t st)
{
    int64_t words = (int64_t)(bytes_each / sizeof(W)), count = s->rank ? s->count : 1;
    int tpm = 1;
    while (tpm < THREADS && tpm < words)
        tpm *= 2;
    int64_t per_block = THREADS / tpm, blocks = (count + per_block - 1) / per_block;
    blocks = blocks < MAX_BLOCKS ? blocks : MAX_BLOCKS;
    expand_kernel<W><<<(unsigned)blocks, THREADS, 0, st>>>((W *)out, (const W *)c, cr_stack_dev_of(s), count,
                                                          words, tpm);
    return cudaGetLastError();
}

static bool aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

cudaError_t cr_cuda_stack_expand(void *out, const void *c, const cr_stack *s, size_t bytes_each, cudaStream_t st)
{
    if ((s->rank && s->count == 0) || bytes_each == 0)
        return cudaSuccess;
    if (bytes_each % 16 == 0 && aligned(out, 16) && aligned(c, 16))
        return expand_as<uint4>(out, c, s, bytes_each, st);
    if (bytes_each % 4 == 0 && aligned(out, 4) && aligned(c, 4))
        return expand_as<uint32_t>(out, c, s, bytes_each, st);
    if (bytes_each % 2 == 0 && aligned(out, 2) && aligned(c, 2))
        return expand_as<uint16_t>(out, c, s, bytes_each, st);
    return expand_as<uint8_t>(out, c, s, bytes_each, st);
}

__global__ void __launch_bounds__(THREADS) pointers_kernel(cr_stack_dev s, int64_t first, int64_t n, const char *a,
                                                           size_t a_bytes, const char *b, size_t b_bytes, char *c,
                                                           size_t c_bytes, const void **pa, const void **pb,
                                                           void **pc)
{
    for (int64_t j = blockIdx.x * (int64_t)THREADS + threadIdx.x; j < n; j += (int64_t)gridDim.x * THREADS) {
        int64_t i = first + j;
        pa[j] = a + cr_stack_index(s, CR_STACK_A, i) * a_bytes;
        pb[j] = b + cr_stack_index(s, CR_STACK_B, i) * b_bytes;
        pc[j] = c + i * c_bytes;
    }
}

cudaError_t cr_cuda_stack_pointers(const cr_stack *s, int64_t first, int64_t n, const void *a, size_t a_bytes,
                                   const void *b, size_t b_bytes, void *c, size_t c_bytes, const void **pa,
                                   const void **pb, void **pc, cudaStream_t st)
{
    if (n <= 0)
        return cudaSuccess;
    int64_t blocks = (n + THREADS - 1) / THREADS;
    blocks = blocks < MAX_BLOCKS ? blocks : MAX_BLOCKS;
    pointers_kernel<<<(unsigned)blocks, THREADS, 0, st>>>(cr_stack_dev_of(s), first, n, (const char *)a, a_bytes,
                                                         (const char *)b, b_bytes, (char *)c, c_bytes, pa, pb, pc);
    return cudaGetLastError();
}

static size_t array_bytes(int64_t n)
{
    return ((size_t)n * sizeof(void *) + ARRAY_ALIGN - 1) & ~(size_t)(ARRAY_ALIGN - 1);
}

size_t cr_cuda_stack_pointer_bytes(int64_t n) { return n > 0 ? 3 * array_bytes(n) : 0; }

void cr_cuda_stack_pointer_arrays(void *scratch, int64_t n, const void ***pa, const void ***pb, void ***pc)
{
    char *p = (char *)scratch;
    *pa = (const void **)p;
    *pb = (const void **)(p + array_bytes(n));
    *pc = (void **)(p + 2 * array_bytes(n));
}
