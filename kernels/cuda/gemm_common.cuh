/* Shared pieces of our own GEMM kernels (kernels/cuda/gemm_*.cu): element access with the
 * transpose flags, the alpha/beta epilogue, the launch-time checks, grid helpers.
 *
 * Layout (kernels/backend.h): everything row-major and dense. A is m×k (stored k×m when
 * trans_a), B is k×n (stored n×k when trans_b), C is m×n. So the leading dimensions are
 * lda = trans_a ? m : k, ldb = trans_b ? k : n, ldc = n. Indices are 64-bit wherever a
 * product of two sizes can pass 2^31. */
#ifndef CRUNCHD_GEMM_COMMON_CUH
#define CRUNCHD_GEMM_COMMON_CUH

#include <stdint.h>

#include "kernels/cuda/cuda_kernels.h"

/* Everything a kernel needs, by value (kernel parameters live in constant memory). */
template <typename T>
struct gemm_args {
    int64_t m, n, k;
    int64_t lda, ldb; /* leading dimensions as stored */
    bool ta, tb;
    T alpha, beta;
    const T *__restrict__ a;
    const T *__restrict__ b;
    T *__restrict__ c;
};

template <typename T>
static gemm_args<T> gemm_make_args(const cr_gemm_dev *g)
{
    gemm_args<T> p;
    p.m = g->m;
    p.n = g->n;
    p.k = g->k;
    p.ta = g->trans_a;
    p.tb = g->trans_b;
    p.lda = g->trans_a ? g->m : g->k;
    p.ldb = g->trans_b ? g->k : g->n;
    p.alpha = (T)g->alpha;
    p.beta = (T)g->beta;
    p.a = (const T *)g->a;
    p.b = (const T *)g->b;
    p.c = (T *)g->c;
    return p;
}

/* op(A)[i][p], unchecked: the caller has bounds-checked i < m and p < k. */
template <typename T>
__device__ __forceinline__ T gemm_a_at(const gemm_args<T> &p, int64_t i, int64_t kk)
{
    return p.ta ? p.a[kk * p.lda + i] : p.a[i * p.lda + kk];
}

/* op(B)[p][j], unchecked. */
template <typename T>
__device__ __forceinline__ T gemm_b_at(const gemm_args<T> &p, int64_t kk, int64_t j)
{
    return p.tb ? p.b[j * p.ldb + kk] : p.b[kk * p.ldb + j];
}

/* Bounds-checked versions: zero outside, so a partial tile adds nothing to the sum. */
template <typename T>
__device__ __forceinline__ T gemm_a_safe(const gemm_args<T> &p, int64_t i, int64_t kk)
{
    return (i < p.m && kk < p.k) ? gemm_a_at(p, i, kk) : (T)0;
}

template <typename T>
__device__ __forceinline__ T gemm_b_safe(const gemm_args<T> &p, int64_t kk, int64_t j)
{
    return (kk < p.k && j < p.n) ? gemm_b_at(p, kk, j) : (T)0;
}

/* C[i][j] = alpha·acc + beta·C[i][j]. With beta == 0, C is never read: it may hold NaN. */
template <typename T>
__device__ __forceinline__ void gemm_store(const gemm_args<T> &p, int64_t i, int64_t j, T acc)
{
    if (i >= p.m || j >= p.n)
        return;
    T *c = p.c + i * p.n + j;
    T v = p.alpha * acc;
    if (p.beta != (T)0)
        v += p.beta * *c;
    *c = v;
}

/* Launch-time checks shared by every launcher. Returns cudaSuccess and sets *nothing when
 * there is nothing to compute (m or n is 0), an error for arguments no kernel can take. */
static inline cudaError_t gemm_check(const cr_gemm_dev *g, bool *nothing)
{
    *nothing = false;
    if (!g || g->m < 0 || g->n < 0 || g->k < 0)
        return cudaErrorInvalidValue;
    if (g->m == 0 || g->n == 0) {
        *nothing = true;
        return cudaSuccess;
    }
    if (!g->c || (g->k > 0 && (!g->a || !g->b)))
        return cudaErrorInvalidValue;
    return cudaSuccess;
}

/* gemm_check for the FP32-only launchers: an empty product is done whatever dt; otherwise dt
 * must be float32. */
static inline cudaError_t gemm_check_f32(const cr_gemm_dev *g, cr_dtype dt, bool *nothing)
{
    cudaError_t e = gemm_check(g, nothing);
    if (e != cudaSuccess || *nothing)
        return e;
    return dt == CR_DT_F32 ? cudaSuccess : cudaErrorNotSupported;
}

__host__ __device__ static inline int64_t gemm_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Which tile of C this block owns in a 1-D grid: groups of `group` tile-rows, column-major
 * inside a group, so consecutive (co-resident) blocks reuse one B panel and a few A panels in L2
 * instead of streaming all of B. */
__device__ __forceinline__ void gemm_grouped_tile_of(int group, int64_t tiles_m, int64_t tiles_n, int64_t bid,
                                                     int64_t *tm, int64_t *tn)
{
    int64_t per_group = (int64_t)group * tiles_n;
    int64_t first = bid / per_group * group;
    int64_t rows = tiles_m - first < group ? tiles_m - first : group;
    int64_t in = bid % per_group;
    *tm = first + in % rows;
    *tn = in / rows;
}

/* The tile of this block (gemm_grouped_tile_of takes any tile number: dbuf's stream-K tail). */
__device__ __forceinline__ void gemm_grouped_tile(int group, int64_t tiles_m, int64_t tiles_n, int64_t *tm,
                                                  int64_t *tn)
{
    gemm_grouped_tile_of(group, tiles_m, tiles_n, blockIdx.x, tm, tn);
}

/* A 2-D grid of tiles; y is limited to 65535, so very tall C takes the rest from x. */
static inline cudaError_t gemm_grid(int64_t tiles_m, int64_t tiles_n, dim3 *grid)
{
    if (tiles_n > INT32_MAX || tiles_m > 65535)
        return cudaErrorInvalidConfiguration;
    *grid = dim3((unsigned)tiles_n, (unsigned)tiles_m, 1);
    return cudaSuccess;
}

/* The launch's own error (a bad configuration) or an earlier asynchronous fault. */
static inline cudaError_t gemm_launched(void) { return cudaGetLastError(); }

static inline bool gemm_aligned16(const void *ptr) { return ((uintptr_t)ptr & 15u) == 0; }

/* ---- FP32 tile staging shared by the vec and dbuf kernels ----------------------------------
 * A tile of op(A) (BO=BM rows of m × BK of k) or of op(B) (BO=BN columns of n × BK of k) is
 * kept in shared memory k-major: S[kk][o], row length BO+4. k-major is what the inner product
 * loop wants (for a fixed kk, a thread's 4 consecutive o are one float4), and the +4 keeps
 * float4 alignment while moving the transposed stores off a single bank.
 *
 * In global memory the tile runs either along k (A untransposed, B transposed: KCONTIG) or
 * along o (A transposed, B untransposed). Each thread fetches groups of 4 consecutive stored
 * elements: one float4 when VEC (base 16-byte aligned, leading dimension a multiple of 4, so
 * a group is either wholly inside the matrix or wholly outside), else 4 checked scalars.
 * KCONTIG groups are stored transposed (4 scalar stores), the others as one float4. */
#define GEMM_PAD 4

template <int BO, int BK, int NT>
struct gemm_tile_shape {
    static constexpr int groups = BO * BK / 4;     /* float4 groups in a tile */
    static constexpr int per_thread = groups / NT; /* each thread's share */
    static_assert(groups % NT == 0, "tile must split evenly over the threads");
};

/* Fetch this thread's groups of the tile whose corner is (o0, k0) into v. The matrix X is
 * O×K in op() terms with leading dimension ld as stored. */
template <int BO, int BK, int NT, bool KCONTIG, bool VEC>
__device__ __forceinline__ void gemm_tile_fetch(const float *__restrict__ x, int64_t ld, int64_t O,
                                                int64_t K, int64_t o0, int64_t k0, int tid,
                                                float4 (&v)[gemm_tile_shape<BO, BK, NT>::per_thread])
{
#pragma unroll
    for (int g = 0; g < gemm_tile_shape<BO, BK, NT>::per_thread; g++) {
        int e = tid + g * NT;
        /* consecutive threads take consecutive groups along the stored row: coalesced */
        int64_t o = KCONTIG ? o0 + e / (BK / 4) : o0 + (e % (BO / 4)) * 4;
        int64_t kk = KCONTIG ? k0 + (e % (BK / 4)) * 4 : k0 + e / (BO / 4);
        const float *src = KCONTIG ? x + o * ld + kk : x + kk * ld + o;
        float4 r = make_float4(0.f, 0.f, 0.f, 0.f);
        if (VEC) {
            if (o < O && kk < K)
                r = __ldg((const float4 *)src);
        } else if (KCONTIG) {
            if (o < O) {
                if (kk + 0 < K) r.x = __ldg(src + 0);
                if (kk + 1 < K) r.y = __ldg(src + 1);
                if (kk + 2 < K) r.z = __ldg(src + 2);
                if (kk + 3 < K) r.w = __ldg(src + 3);
            }
        } else if (kk < K) {
            if (o + 0 < O) r.x = __ldg(src + 0);
            if (o + 1 < O) r.y = __ldg(src + 1);
            if (o + 2 < O) r.z = __ldg(src + 2);
            if (o + 3 < O) r.w = __ldg(src + 3);
        }
        v[g] = r;
    }
}

/* Store group g of what gemm_tile_fetch fetched into the k-major shared tile s[BK][BO + GEMM_PAD]
 * (dbuf's big configuration stores its groups one at a time, between FFMAs). */
template <int BO, int BK, int NT, bool KCONTIG>
__device__ __forceinline__ void gemm_tile_store_group(float *s, int tid, int g, float4 v)
{
    const int ls = BO + GEMM_PAD, e = tid + g * NT;
    if (KCONTIG) {
        const int o = e / (BK / 4), kk = (e % (BK / 4)) * 4;
        s[(kk + 0) * ls + o] = v.x;
        s[(kk + 1) * ls + o] = v.y;
        s[(kk + 2) * ls + o] = v.z;
        s[(kk + 3) * ls + o] = v.w;
    } else {
        const int o = (e % (BO / 4)) * 4, kk = e / (BO / 4);
        *(float4 *)&s[kk * ls + o] = v;
    }
}

/* Store all of what gemm_tile_fetch fetched. */
template <int BO, int BK, int NT, bool KCONTIG>
__device__ __forceinline__ void gemm_tile_store(float *s, int tid,
                                                const float4 (&v)[gemm_tile_shape<BO, BK, NT>::per_thread])
{
#pragma unroll
    for (int g = 0; g < gemm_tile_shape<BO, BK, NT>::per_thread; g++)
        gemm_tile_store_group<BO, BK, NT, KCONTIG>(s, tid, g, v[g]);
}

/* float4 path is safe for a matrix when its base is 16-byte aligned and every stored row
 * starts 16-byte aligned too (ld % 4 == 0). */
static inline bool gemm_vec_ok(const void *ptr, int64_t ld) { return gemm_aligned16(ptr) && ld % 4 == 0; }

/* Epilogue for 4 consecutive columns j..j+3 of row i: one float4 when the row of C is
 * 16-byte aligned and all 4 are inside, else the checked scalar store. */
__device__ __forceinline__ void gemm_store4(const gemm_args<float> &p, bool cvec, int64_t i,
                                            int64_t j, float4 acc)
{
    if (i >= p.m)
        return;
    if (cvec && j + 3 < p.n) {
        float4 *c = (float4 *)(p.c + i * p.n + j);
        float4 r = make_float4(p.alpha * acc.x, p.alpha * acc.y, p.alpha * acc.z, p.alpha * acc.w);
        if (p.beta != 0.f) {
            float4 o = *c;
            r.x += p.beta * o.x;
            r.y += p.beta * o.y;
            r.z += p.beta * o.z;
            r.w += p.beta * o.w;
        }
        *c = r;
        return;
    }
    gemm_store(p, i, j + 0, acc.x);
    gemm_store(p, i, j + 1, acc.y);
    gemm_store(p, i, j + 2, acc.z);
    gemm_store(p, i, j + 3, acc.w);
}

#endif
