/* The own batched GEMM (registry row `batched`, GEMM and AᵀA): a whole stack of equal-shaped
 * products in one launch, FP32 or FP64 on the FMA lanes, exact as SGEMM/DGEMM are.
 *
 * Why it should beat cuBLAS's strided-batched GEMM on small matrices: below ~84 on a side (FP32 on
 * the H200: 67 TFLOP/s over 4.8 TB/s is 14 flops a byte, and an n³ product of n² matrices does
 * n/6) a stack is a stream of bytes, and the kernel that wins moves them at the memory's rate.
 * cuBLAS runs one thread block per matrix with a tile made for bigger ones (most of a 64x64 or
 * 128x128 tile idle on a 16x16 product, its loads as wide as the tiny matrix). Here a block holds
 * G = 256 / P whole products at once (P threads each: 4x4 outputs per thread, so 4 threads for
 * 8x8, 16 for 16x16, 64 for 32x32, 256 for 64x64), its loads run along the stored rows of G
 * consecutive matrices (contiguous in a dense stack: 16-byte loads over kilobytes), and every
 * block stages k in slices of up to 16 through two shared-memory buffers, so the next slice's
 * loads are in flight while this one is multiplied. Larger matrices are tiled: 128x128 tiles of
 * C (8x8 outputs per thread, k slices of 8; FP64 64x64, 4x4) with the same two-buffer pipeline, one grid for
 * the whole stack, each block decoding its own product (one multiply for a uniform stack, the
 * per-dimension decode of cr_stack_operand_index for broadcasting ones), so a stack of any
 * pattern is one launch and nothing is copied to expand a broadcast operand.
 *
 * Shared memory is k-major for both operands (S[q][o]: for a fixed q a thread's 4 consecutive
 * rows or columns are one 16-byte load), rows padded so that the transposing stores of a
 * k-contiguous operand spread over the banks. Loads are 16 bytes wide where every matrix and row
 * of an operand starts 16-byte aligned, else one element each (odd and prime sizes). Index
 * arithmetic inside the loops uses multiply-and-shift division (fastdiv) by constants of the
 * launch. alpha == 0 reads neither A nor B, beta == 0 never reads C (BLAS's rules). */
#include <stdint.h>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/smem_opt_in.cuh"
#include "kernels/cuda/stack_dev.cuh"

namespace {

constexpr int NT = 256;       /* threads per block, every configuration */
constexpr int SMEM_SM = 224 << 10; /* shared memory an SM gives its blocks (228 KB less reserves) */

/* n / d for n < 2^32 by a multiply and a shift (Granlund and Montgomery). */
struct fastdiv {
    uint32_t d, mul, shift;
};

fastdiv fastdiv_make(uint32_t d)
{
    fastdiv f = {d, 0, 0};
    while ((1ull << f.shift) < d)
        f.shift++;
    f.mul = (uint32_t)(((1ull << 32) * ((1ull << f.shift) - d)) / d + 1);
    return f;
}

__device__ __forceinline__ uint32_t fdiv(uint32_t n, const fastdiv &f)
{
    return (uint32_t)(((uint64_t)__umulhi(n, f.mul) + n) >> f.shift);
}

template <typename T> struct vec16;
template <> struct vec16<float> {
    typedef float4 type;
    static constexpr int W = 4;
};
template <> struct vec16<double> {
    typedef double2 type;
    static constexpr int W = 2;
};

/* One operand as the loader sees it: op(X) is O×K (A: m×k, B: n×k as k-major columns), its
 * panel po rows (or columns) of O, stored with leading dimension ld; kcontig: stored along k (A
 * untransposed, B transposed). Chunks of a stage: the loads of W elements (or 1) the block makes,
 * decoded as panel = e / all, then (kcontig) o = (r >> 3) / row * 8 + (r & 7), k group =
 * (r >> 3) % row: eight consecutive threads take eight rows at one k, so their transposing stores
 * land in eight consecutive banks and a warp still reads 64 contiguous bytes of each row; or (else)
 * k = r / row, column group = r % row. */
struct operand {
    int64_t ld, O;
    bool kcontig;
    int po, po_s;
    fastdiv all, row;
    uint32_t chunks;
};

template <typename T>
struct bargs {
    const T *a, *b;
    T *c;
    int64_t m, n, k;
    T alpha, beta;
    int64_t a_each, b_each, c_each; /* elements of one matrix */
    int64_t first;                  /* the first product of this launch */
    uint32_t panels;                /* products of this launch x tiles */
    int kc, G, P;                   /* k per stage, panels per block, threads per panel */
    int64_t nst;                    /* stages (0: alpha is 0, or k is) */
    bool cvec;                      /* C rows 16-byte aligned, n a multiple of 4 */
    fastdiv tiles, tiles_n, p_div, thr_n;
    int half_m, half_n;             /* 8x8 fragments: where a thread's second 4 rows, 4 columns start */
    operand A, B;
    cr_stack_dev s;
};

/* Shared memory of a block: per panel its matrices' bases and tile corner, then the stages. */
struct block_meta {
    const void **a, **b;
    void **c;
    int64_t *r0, *c0;
};

__host__ __device__ constexpr size_t meta_bytes(int G) { return (((size_t)G * 5 * 8) + 15) & ~(size_t)15; }

__device__ __forceinline__ block_meta meta_of(unsigned char *smem, int G)
{
    block_meta m;
    m.a = (const void **)smem;
    m.b = m.a + G;
    m.c = (void **)(m.b + G);
    m.r0 = (int64_t *)(m.c + G);
    m.c0 = m.r0 + G;
    return m;
}

template <typename T>
__device__ void fill_meta(const bargs<T> &p, const block_meta &mt)
{
    for (int g = threadIdx.x; g < p.G; g += NT) {
        uint32_t panel = blockIdx.x * (uint32_t)p.G + g;
        if (panel >= p.panels) { /* the last block's tail: nothing to load, compute or store */
            mt.a[g] = mt.b[g] = NULL;
            mt.c[g] = NULL;
            continue;
        }
        uint32_t prod = fdiv(panel, p.tiles), tile = panel - prod * p.tiles.d;
        uint32_t tm = fdiv(tile, p.tiles_n), tn = tile - tm * p.tiles_n.d;
        int64_t i = p.first + prod;
        mt.a[g] = p.a + cr_stack_index(p.s, CR_STACK_A, i) * p.a_each;
        mt.b[g] = p.b + cr_stack_index(p.s, CR_STACK_B, i) * p.b_each;
        mt.c[g] = p.c + i * p.c_each;
        mt.r0[g] = (int64_t)tm * p.A.po;
        mt.c0[g] = (int64_t)tn * p.B.po;
    }
}

__device__ __forceinline__ void unpack(float4 t, float *v) { v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w; }
__device__ __forceinline__ void unpack(double2 t, double *v) { v[0] = t.x, v[1] = t.y; }
__device__ __forceinline__ void pack(const float *v, float *d) { *(float4 *)d = make_float4(v[0], v[1], v[2], v[3]); }
__device__ __forceinline__ void pack(const double *v, double *d) { *(double2 *)d = make_double2(v[0], v[1]); }

/* Staging registers: RV 16-byte vectors' worth. A 16-byte load fills W of them; a one-element
 * load (unaligned operands) one, so the scalar path has W times as many chunks, in as many registers. */
template <typename T, bool VEC, int RV>
struct slots {
    static constexpr int W = VEC ? vec16<T>::W : 1; /* elements a chunk */
    static constexpr int N = RV * vec16<T>::W / W;  /* chunks a thread */
};

/* Chunk e of a stage: its panel g, row or column o of the panel and k index q within the stage;
 * false past the panel's rows (kcontig's groups of eight round them up). */
template <int W>
__device__ __forceinline__ bool chunk_at(const operand &op, uint32_t e, uint32_t *g, int64_t *o, int64_t *q)
{
    *g = fdiv(e, op.all);
    uint32_t rem = e - *g * op.all.d;
    if (op.kcontig) {
        uint32_t t = rem >> 3, hi = fdiv(t, op.row);
        *o = (int64_t)hi * 8 + (rem & 7);
        *q = (int64_t)(t - hi * op.row.d) * W;
        return *o < op.po;
    }
    uint32_t x = fdiv(rem, op.row);
    *q = x;
    *o = (int64_t)(rem - x * op.row.d) * W;
    return true;
}

/* This thread's chunks of one operand's stage at k0, into registers (zeros outside). */
template <typename T, bool VEC, int RV>
__device__ __forceinline__ void fetch(const operand &op, const void *const *base, const int64_t *o0, int64_t K,
                                      int64_t k0, T (&v)[RV * vec16<T>::W])
{
    constexpr int W = slots<T, VEC, RV>::W, N = slots<T, VEC, RV>::N;
#pragma unroll
    for (int r = 0; r < N; r++) {
        uint32_t e = threadIdx.x + r * NT, g;
        int64_t o, q;
#pragma unroll
        for (int w = 0; w < W; w++)
            v[r * W + w] = (T)0;
        if (e >= op.chunks || !chunk_at<W>(op, e, &g, &o, &q))
            continue;
        const T *src = (const T *)base[g];
        if (!src || o0[g] + o >= op.O || k0 + q >= K)
            continue;
        src += op.kcontig ? (o0[g] + o) * op.ld + k0 + q : (k0 + q) * op.ld + o0[g] + o;
        if (VEC)
            unpack(__ldg((const typename vec16<T>::type *)src), &v[r * W]);
        else
            v[r] = __ldg(src);
    }
}

/* The registers of fetch into the k-major stage s[g][q][o]: transposed (kcontig) or as they are. */
template <typename T, bool VEC, int RV>
__device__ __forceinline__ void store(const operand &op, T *s, int kc, const T (&v)[RV * vec16<T>::W])
{
    constexpr int W = slots<T, VEC, RV>::W, N = slots<T, VEC, RV>::N;
#pragma unroll
    for (int r = 0; r < N; r++) {
        uint32_t e = threadIdx.x + r * NT, g;
        int64_t o, q;
        if (e >= op.chunks || !chunk_at<W>(op, e, &g, &o, &q))
            continue;
        T *d = s + (size_t)g * kc * op.po_s;
        if (op.kcontig) {
#pragma unroll
            for (int w = 0; w < W; w++)
                d[(q + w) * op.po_s + o] = v[r * W + w];
        } else if (VEC) {
            pack(&v[r * W], &d[q * op.po_s + o]);
        } else {
            d[q * op.po_s + o] = v[r];
        }
    }
}

/* Four consecutive elements of a stage row into r[at..at+3] (16-byte aligned: po_s and the
 * 4-groups are). */
template <int N> __device__ __forceinline__ void load4(const float *p, float (&r)[N], int at)
{
    float4 v = *(const float4 *)p;
    r[at] = v.x, r[at + 1] = v.y, r[at + 2] = v.z, r[at + 3] = v.w;
}

template <int N> __device__ __forceinline__ void load4(const double *p, double (&r)[N], int at)
{
    double2 u = *(const double2 *)p, v = *(const double2 *)(p + 2);
    r[at] = u.x, r[at + 1] = u.y, r[at + 2] = v.x, r[at + 3] = v.y;
}

/* A thread's TM rows (or columns) of a stage row: 4 at t*4, and with TM 8 also 4 at half + t*4
 * (half: 4 x the threads along that side, so a phase of 8 threads loads side by side: no bank
 * conflict). */
template <typename T, int TM>
__device__ __forceinline__ void load_frag(const T *row, int t, int half, T (&r)[TM])
{
    load4(row + t * 4, r, 0);
    if (TM == 8)
        load4(row + half + t * 4, r, 4);
}

/* acc += the stage's kq slices of this thread's TM x TM outputs. */
template <typename T, int TM>
__device__ __forceinline__ void multiply(const T *as, const T *bs, int pm_s, int pn_s, int ti, int tj, int half_m,
                                         int half_n, int kq, T (&acc)[TM][TM])
{
    constexpr int UNROLL = TM == 8 ? 2 : 4; /* 8x8: more in flight spills the 64 accumulators */
#pragma unroll UNROLL
    for (int q = 0; q < kq; q++) {
        T a[TM], b[TM];
        load_frag<T, TM>(as + q * pm_s, ti, half_m, a);
        load_frag<T, TM>(bs + q * pn_s, tj, half_n, b);
#pragma unroll
        for (int i = 0; i < TM; i++)
#pragma unroll
            for (int j = 0; j < TM; j++)
                acc[i][j] = fma(a[i], b[j], acc[i][j]);
    }
}

template <int TM> __device__ __forceinline__ int frag_at(int t, int half, int r)
{
    return TM == 8 && r >= 4 ? half + t * 4 + r - 4 : t * 4 + r;
}

__device__ __forceinline__ void store4(float *c, float v0, float v1, float v2, float v3, float alpha, float beta)
{
    float4 r = make_float4(alpha * v0, alpha * v1, alpha * v2, alpha * v3);
    if (beta != 0.f) {
        float4 o = *(const float4 *)c;
        r.x += beta * o.x, r.y += beta * o.y, r.z += beta * o.z, r.w += beta * o.w;
    }
    *(float4 *)c = r;
}

__device__ __forceinline__ void store4(double *c, double v0, double v1, double v2, double v3, double alpha,
                                       double beta)
{
    double2 u = make_double2(alpha * v0, alpha * v1), w = make_double2(alpha * v2, alpha * v3);
    if (beta != 0.0) {
        double2 o = *(const double2 *)c, o2 = *(const double2 *)(c + 2);
        u.x += beta * o.x, u.y += beta * o.y, w.x += beta * o2.x, w.y += beta * o2.y;
    }
    *(double2 *)c = u;
    *(double2 *)(c + 2) = w;
}

template <typename T, int TM>
__device__ __forceinline__ void epilogue(const bargs<T> &p, T *c, int64_t r0, int64_t c0, int ti, int tj,
                                         const T (&acc)[TM][TM])
{
#pragma unroll
    for (int r = 0; r < TM; r++) {
        int64_t i = r0 + frag_at<TM>(ti, p.half_m, r);
        if (i >= p.m)
            continue;
#pragma unroll
        for (int cg = 0; cg < TM; cg += 4) {
            int64_t j = c0 + frag_at<TM>(tj, p.half_n, cg);
            T *cp = c + i * p.n + j;
            if (p.cvec && j + 3 < p.n) {
                store4(cp, acc[r][cg], acc[r][cg + 1], acc[r][cg + 2], acc[r][cg + 3], p.alpha, p.beta);
                continue;
            }
#pragma unroll
            for (int w = 0; w < 4; w++)
                if (j + w < p.n) {
                    T v = p.alpha * acc[r][cg + w];
                    if (p.beta != (T)0)
                        v += p.beta * cp[w];
                    cp[w] = v;
                }
        }
    }
}

/* MINB blocks an SM at least (the register cap), RV 16-byte staging registers' worth a thread and
 * operand (the planner keeps every stage's loads to them). */
template <typename T, int TM, bool VEC, int MINB, int RV>
__global__ void __launch_bounds__(NT, MINB) batched_kernel(bargs<T> p)
{
    extern __shared__ __align__(16) unsigned char smem[];
    block_meta mt = meta_of(smem, p.G);
    T *stage = (T *)(smem + meta_bytes(p.G));
    const size_t a_elems = (size_t)p.G * p.kc * p.A.po_s, stage_elems = a_elems + (size_t)p.G * p.kc * p.B.po_s;
    fill_meta(p, mt);
    __syncthreads();
    int gme = fdiv(threadIdx.x, p.p_div), t = threadIdx.x - gme * p.P;
    int ti = fdiv(t, p.thr_n), tj = t - ti * p.thr_n.d;
    bool active = gme < p.G && mt.a[gme] != NULL;
    T acc[TM][TM];
#pragma unroll
    for (int i = 0; i < TM; i++)
#pragma unroll
        for (int j = 0; j < TM; j++)
            acc[i][j] = (T)0;
    T va[RV * vec16<T>::W], vb[RV * vec16<T>::W];
    if (p.nst > 0) {
        fetch<T, VEC, RV>(p.A, mt.a, mt.r0, p.k, 0, va);
        fetch<T, VEC, RV>(p.B, mt.b, mt.c0, p.k, 0, vb);
        store<T, VEC, RV>(p.A, stage, p.kc, va);
        store<T, VEC, RV>(p.B, stage + a_elems, p.kc, vb);
    }
    __syncthreads();
    for (int64_t s = 0; s < p.nst; s++) {
        T *cur = stage + (size_t)(s & 1) * stage_elems, *next = stage + (size_t)((s + 1) & 1) * stage_elems;
        int64_t k0 = (int64_t)s * p.kc;
        if (s + 1 < p.nst) {
            fetch<T, VEC, RV>(p.A, mt.a, mt.r0, p.k, k0 + p.kc, va);
            fetch<T, VEC, RV>(p.B, mt.b, mt.c0, p.k, k0 + p.kc, vb);
        }
        if (active) {
            int kq = p.k - k0 < p.kc ? (int)(p.k - k0) : p.kc;
            const T *as = cur + (size_t)gme * p.kc * p.A.po_s, *bs = cur + a_elems + (size_t)gme * p.kc * p.B.po_s;
            multiply<T, TM>(as, bs, p.A.po_s, p.B.po_s, ti, tj, p.half_m, p.half_n, kq, acc);
        }
        if (s + 1 < p.nst) {
            store<T, VEC, RV>(p.A, next, p.kc, va);
            store<T, VEC, RV>(p.B, next + a_elems, p.kc, vb);
        }
        __syncthreads();
    }
    if (active)
        epilogue<T, TM>(p, (T *)mt.c[gme], mt.r0[gme], mt.c0[gme], ti, tj, acc);
}

/* ---- the plan: configuration, stage size, launches ---- */

struct config {
    int tm;     /* outputs per thread along each side: 4 or 8 */
    int pm, pn; /* the panel (C tile) of a block's panel */
    int thr_m, thr_n, P, G;
    int64_t tiles_m, tiles_n;
    bool tiled; /* tiles of C (one panel a block), not whole products */
};

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int rup(int64_t a, int b) { return (int)(cdiv(a, b) * b); }

/* Whole products when a product's fragments (tm x tm outputs a thread) fit one block; else tiles
 * of 128 (FP32, 8x8 fragments) or 64 (FP64, 4x4). */
template <typename T>
config choose(int64_t m, int64_t n, int tm)
{
    int64_t tmm = cdiv(m, tm), tnn = cdiv(n, tm);
    if (tmm * tnn <= NT)
        return config{tm, (int)m, (int)n, (int)tmm, (int)tnn, (int)(tmm * tnn), (int)(NT / (tmm * tnn)), 1, 1, false};
    int side = sizeof(T) == 4 ? 128 : 64;
    return config{sizeof(T) == 4 ? 8 : 4, side, side, 16, 16, NT, 1, cdiv(m, side), cdiv(n, side), true};
}

uint32_t chunks_of(bool kcontig, int G, int po, int kc, int w)
{
    return (uint32_t)G * (uint32_t)(kcontig ? (int)cdiv(po, 8) * 8 * (kc / w) : kc * (int)cdiv(po, w));
}

operand operand_of(int64_t ld, int64_t O, bool kcontig, int po, int po_s, int G, int kc, int w)
{
    operand o;
    o.ld = ld, o.O = O, o.kcontig = kcontig, o.po = po, o.po_s = po_s;
    uint32_t row = kcontig ? (uint32_t)(kc / w) : (uint32_t)cdiv(po, w);
    uint32_t all = kcontig ? (uint32_t)cdiv(po, 8) * 8 * row : (uint32_t)kc * row;
    o.row = fastdiv_make(row);
    o.all = fastdiv_make(all);
    o.chunks = (uint32_t)G * all;
    return o;
}

/* A stage row's length: rows of 8 or more padded so that transposing stores spread over the banks
 * (FP32: 4 mod 8 words; FP64: 2 mod 4 doubles), tiny ones only to a 16-byte load's 4 elements. */
int pad_row(int po, size_t es)
{
    if (po <= 4)
        return 4;
    return es == 4 ? rup(po, 8) + 4 : rup(po, 4) + 2;
}

/* A tuning of the whole-product configuration (the tiled one keeps 128x8 slices, 2 blocks an SM):
 * k per stage at most, blocks an SM the register cap allows, staging registers a thread, and
 * fragments of 8x8 outputs (FP32, products of 32 or more on both sides) rather than 4x4. */
struct tuning {
    int kc_max, minb, rv;
    bool tm8;
};

/* Variants for bench/batched.cu (cr_cuda_gemm_batched_variant); 0 is the one the row runs, which
 * picks among 2-4 by shape (tuned_for). Measured on the H200 (bench/results/batched-tune-h200.log,
 * stacks of ~400 MB, ms): FP32 8² x 500,000: v2 0.172, v3 0.153, v4 0.150; 16² x 100,000: 0.138,
 * 0.159, 0.128; 32² x 32,768: 0.211, 0.174, 0.191; 64² x 8,192: 0.263, 0.221, 0.242; 17x33x9:
 * 0.690, 0.532, 0.435; 255x7x33: 1.130, 0.856, 0.669; 1x64x64: 0.210, 0.182, 0.203. FP64 at every
 * shape best with v2 or within 5% of the best (3 blocks an SM spill FP64's registers). 8x8
 * fragments (v5, v6: half the shared-memory loads per FMA) gained nothing at 32-128: the kernel
 * waits on memory latency there, not on shared memory. */
const tuning tunings[] = {{0, 0, 0, false},  {16, 2, 4, false}, {64, 2, 4, false}, {64, 3, 4, false},
                          {32, 3, 2, false}, {32, 2, 2, true},  {16, 2, 1, true}};

/* Variant 0's choice: FP32 takes 3 blocks an SM (v3), with half the staging registers and k
 * slices of 32 (v4) where k is short or C narrow; FP64 keeps 2 (v2). */
int tuned_for(size_t es, int64_t n, int64_t k)
{
    if (es != 4)
        return 2;
    return k <= 16 || n < 8 ? 4 : 3;
}

size_t stage_bytes(const config &c, int kc, size_t es)
{
    return (size_t)c.G * kc * (pad_row(c.pm, es) + pad_row(c.pn, es)) * es;
}

/* The largest k slice (a multiple of the load width, at most kc_max and no more than k needs)
 * whose loads fit rv chunks per thread for both operands and whose stage fits the shared memory
 * of one of minb blocks (two stages each); a slice of one load width always fits the registers
 * (a block's panels hold at most 4 NT rows or columns: P threads take 4x4 outputs each), and
 * *G shrinks until it fits the shared memory too. */
int choose_kc(config &c, int64_t k, bool a_kc, bool b_kc, int w, int rv, const tuning &tu, size_t es)
{
    int most = c.tiled && c.tm == 8 ? 8 : c.tiled ? 16 : tu.kc_max; /* 128-wide tiles: 128x8 slices */
    size_t room = (size_t)SMEM_SM / (c.tiled ? 2 : tu.minb) / 2 - meta_bytes(c.G);
    auto fits = [&](int kc) {
        return chunks_of(a_kc, c.G, c.pm, kc, w) <= (uint32_t)(rv * NT) &&
               chunks_of(b_kc, c.G, c.pn, kc, w) <= (uint32_t)(rv * NT) && stage_bytes(c, kc, es) <= room;
    };
    while (c.G > 1 && !fits(w))
        c.G = c.G / 2;
    int best = 0, top = k >= most ? most : rup(k > 0 ? k : 1, w);
    for (int kc = w; kc <= top; kc += w)
        if (fits(kc))
            best = kc;
    return best; /* 0: no slice fits (the caller refuses the plan rather than drop loads) */
}

/* More than 48 KB of shared memory needs the kernel's opt-in, which holds once per device: to the
 * device's most, since the next launch of the same kernel may need more than this one. */
template <typename K>
cudaError_t opt_in(cr_smem_opt_in &opt, K kernel, size_t smem)
{
    int dev = 0, most = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (e != cudaSuccess)
        return e;
    if (smem > (size_t)most)
        return cudaErrorInvalidConfiguration; /* no plan asks for this much: a bug, refused */
    return cr_opt_in_smem(opt, kernel, (size_t)most);
}

template <typename T, int TM, bool VEC, int MINB, int RV>
cudaError_t launch_as(bargs<T> p, int64_t count, int64_t tiles, size_t smem, cudaStream_t st)
{
    static cr_smem_opt_in opt;
    cudaError_t e = cudaSuccess;
    if (smem > 48 * 1024 && (e = opt_in(opt, batched_kernel<T, TM, VEC, MINB, RV>, smem)) != cudaSuccess)
        return e;
    /* panel numbers stay under 2^31 (32-bit decode); a bigger stack takes several launches */
    int64_t per = ((int64_t)1 << 31) / tiles - NT;
    per = per > 0 ? per : 1;
    for (int64_t first = 0; first < count; first += per) {
        int64_t here = count - first < per ? count - first : per;
        p.first = first;
        p.panels = (uint32_t)(here * tiles);
        int64_t blocks = cdiv(here * tiles, p.G);
        batched_kernel<T, TM, VEC, MINB, RV><<<(unsigned)blocks, NT, smem, st>>>(p);
        if ((e = cudaGetLastError()) != cudaSuccess)
            return e;
    }
    return cudaSuccess;
}

bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

template <typename T, bool VEC>
cudaError_t launch_tuned(const bargs<T> &p, const config &c, const tuning &tu, int64_t count, int64_t tiles,
                         size_t smem, cudaStream_t st)
{
    if constexpr (sizeof(T) == 4) /* 8x8 fragments: FP32 only */
        if (c.tm == 8) {
            if (c.tiled || tu.rv == 1)
                return launch_as<T, 8, VEC, 2, 1>(p, count, tiles, smem, st);
            return launch_as<T, 8, VEC, 2, 2>(p, count, tiles, smem, st);
        }
    if (c.tiled) /* FP64 tiles: 2 blocks an SM, whatever the tuning of whole products says */
        return launch_as<T, 4, VEC, 2, 4>(p, count, tiles, smem, st);
    if (tu.minb == 3)
        return tu.rv == 2 ? launch_as<T, 4, VEC, 3, 2>(p, count, tiles, smem, st)
                          : launch_as<T, 4, VEC, 3, 4>(p, count, tiles, smem, st);
    return launch_as<T, 4, VEC, 2, 4>(p, count, tiles, smem, st);
}

template <typename T>
cudaError_t run(const cr_gemm_dev *g, const cr_stack *s, cudaStream_t st, int variant)
{
    constexpr int W = vec16<T>::W;
    int64_t count = s->rank ? s->count : 1, lda = g->trans_a ? g->m : g->k, ldb = g->trans_b ? g->k : g->n;
    if (count == 0 || g->m == 0 || g->n == 0)
        return cudaSuccess;
    if (g->m < 0 || g->n < 0 || g->k < 0 || !g->c || (g->k > 0 && (!g->a || !g->b)))
        return cudaErrorInvalidValue;
    if (variant < 0 || variant >= (int)(sizeof tunings / sizeof tunings[0]))
        return cudaErrorInvalidValue;
    const tuning &tu = tunings[variant ? variant : tuned_for(sizeof(T), g->n, g->k)];
    bool tm8 = sizeof(T) == 4 && tu.tm8 && g->m >= 32 && g->n >= 32;
    config c = choose<T>(g->m, g->n, tm8 ? 8 : 4);
    bool vec = aligned16(g->a) && aligned16(g->b) && lda % W == 0 && ldb % W == 0;
    int rv_vec = c.tiled ? (c.tm == 8 ? 1 : 4) : c.tm == 8 && tu.rv > 2 ? 2 : tu.rv, w = vec ? W : 1;
    int rv = rv_vec * W / w; /* chunks a thread: slots<>::N */
    bool a_kc = !g->trans_a, b_kc = g->trans_b;
    bargs<T> p = {};
    p.a = (const T *)g->a, p.b = (const T *)g->b, p.c = (T *)g->c;
    p.m = g->m, p.n = g->n, p.k = g->k;
    p.alpha = (T)g->alpha, p.beta = (T)g->beta;
    p.a_each = g->m * g->k, p.b_each = g->k * g->n, p.c_each = g->m * g->n;
    p.kc = choose_kc(c, g->k, a_kc, b_kc, w, rv, tu, sizeof(T));
    if (p.kc == 0)
        return cudaErrorInvalidConfiguration; /* no stage fits: never silently drop a load */
    p.G = c.G, p.P = c.P;
    p.nst = g->alpha != 0.0 ? cdiv(g->k, p.kc) : 0;
    p.cvec = aligned16(g->c) && g->n % 4 == 0;
    p.tiles = fastdiv_make((uint32_t)(c.tiles_m * c.tiles_n));
    p.tiles_n = fastdiv_make((uint32_t)c.tiles_n);
    p.p_div = fastdiv_make((uint32_t)c.P);
    p.thr_n = fastdiv_make((uint32_t)c.thr_n);
    p.half_m = 4 * c.thr_m, p.half_n = 4 * c.thr_n;
    p.A = operand_of(lda, g->m, a_kc, c.pm, pad_row(c.pm, sizeof(T)), c.G, p.kc, w);
    p.B = operand_of(ldb, g->n, b_kc, c.pn, pad_row(c.pn, sizeof(T)), c.G, p.kc, w);
    p.s = cr_stack_dev_of(s);
    size_t smem = meta_bytes(c.G) + (p.nst > 1 ? 2 : 1) * stage_bytes(c, p.kc, sizeof(T));
    int64_t tiles = c.tiles_m * c.tiles_n;
    if (tiles > (int64_t)1 << 30)
        return cudaErrorInvalidConfiguration; /* a matrix of over 2^30 tiles: 10^13 elements */
    return vec ? launch_tuned<T, true>(p, c, tu, count, tiles, smem, st)
               : launch_tuned<T, false>(p, c, tu, count, tiles, smem, st);
}

} // namespace

/* A tuning variant (bench/batched.cu); 0 is what cr_cuda_gemm_batched runs. */
extern "C" cudaError_t cr_cuda_gemm_batched_variant(const cr_gemm_dev *g, const cr_stack *s, cr_dtype dt,
                                                    cudaStream_t st, int variant)
{
    if (!g || !s)
        return cudaErrorInvalidValue;
    if (dt == CR_DT_F32)
        return run<float>(g, s, st, variant);
    if (dt == CR_DT_F64)
        return run<double>(g, s, st, variant);
    return cudaErrorNotSupported;
}

extern "C" cudaError_t cr_cuda_gemm_batched(const cr_gemm_dev *g, const cr_stack *s, cr_dtype dt, cudaStream_t st)
{
    return cr_cuda_gemm_batched_variant(g, s, dt, st, 0);
}
