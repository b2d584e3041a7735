/* The walk the vectorised histogram kernels make over their data: each thread of a persistent
 * grid reads 16-byte vectors (16 / sizeof(T) elements each) at a grid stride and hands every
 * element to a counting functor. Elements before the first 16-byte boundary (an unaligned
 * start) and after the last whole vector (lengths not a multiple of the vector) are read one by
 * one. UNROLL vectors are loaded before the first is counted, so that many bytes per thread are
 * in flight: a grid of one 1024-thread block per SM needs two to cover DRAM's latency. */
#ifndef CRUNCHD_HIST_WALK_CUH
#define CRUNCHD_HIST_WALK_CUH

#include <cuda_runtime.h>
#include <stdint.h>

/* Elements before the first 16-byte boundary; all of them when the pointer is not even aligned
 * to its element (then no vector load is possible). */
template <typename T> __device__ __forceinline__ int64_t cr_hist_head_elems(const T *p, int64_t count)
{
    uintptr_t a = (uintptr_t)p;
    int64_t h = (a % sizeof(T)) ? count : (int64_t)(((16 - (a & 15)) & 15) / sizeof(T));
    return h < count ? h : count;
}

template <int UNROLL, typename T, typename CountOne>
__device__ __forceinline__ void cr_hist_walk(const T *__restrict__ data, int64_t count, CountOne count_one)
{
    constexpr int per_vec = 16 / sizeof(T);
    union vec {
        uint4 raw;
        T e[per_vec];
    };
    int64_t head = cr_hist_head_elems(data, count);
    const uint4 *body = reinterpret_cast<const uint4 *>(data + head);
    int64_t nvec = (count - head) / per_vec;
    int64_t tail = head + nvec * per_vec;
    int64_t gtid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = gtid; i < head; i += stride) /* a loop: head is everything if misaligned */
        count_one(data[i]);
    if (gtid < count - tail) /* fewer than per_vec elements, and every grid has more threads */
        count_one(data[tail + gtid]);
    int64_t i = gtid;
    if constexpr (UNROLL > 1) {
        for (; i + (UNROLL - 1) * stride < nvec; i += UNROLL * stride) {
            vec v[UNROLL]; /* all loads issued before the first count */
#pragma unroll
            for (int u = 0; u < UNROLL; u++)
                v[u].raw = __ldcs(body + i + u * stride);
#pragma unroll
            for (int u = 0; u < UNROLL; u++)
#pragma unroll
                for (int e = 0; e < per_vec; e++)
                    count_one(v[u].e[e]);
        }
    }
    for (; i < nvec; i += stride) {
        vec v;
        v.raw = __ldcs(body + i);
#pragma unroll
        for (int e = 0; e < per_vec; e++)
            count_one(v.e[e]);
    }
}

#endif
