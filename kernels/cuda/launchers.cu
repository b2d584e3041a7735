/* The registry's CUDA launchers (kernels/cuda/launchers.h): each turns a prepared launch into one
 * kernel or library call on the stream it is given. Row-major C = op(A)·op(B) is column-major
 * Cᵀ = op(B)ᵀ·op(A)ᵀ for cuBLAS: the row-major buffers already are the column-major transposes,
 * so operands swap and m↔n, no copies. */
#include "kernels/cuda/ata_hist_kernels.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/launchers.h"
#include "kernels/cuda/stack_ops.h"

/* Products per cuBLAS call of a stack: batch counts are ints, and the pointer arrays of a stack
 * that needs them take 24 bytes of scratch a product. */
#define STACK_CHUNK ((int64_t)1 << 20)

static int64_t ld_of(int64_t x) { return x > 1 ? x : 1; } /* cuBLAS wants ld >= 1 even when empty */

static cr_gemm_dev gemm_dev(const cr_cuda_launch *l)
{
    const cr_gemm_task *g = &l->t->u.gemm;
    return (cr_gemm_dev){g->m, g->n, g->k, g->trans_a, g->trans_b, g->alpha, g->c_in ? g->beta : 0.0,
                         l->in[0], l->in[1], l->out};
}

#define OWN_GEMM(NAME)                                                                            \
    extern "C" int cr_cuda_launch_gemm_##NAME(cr_cuda_launch *l)                                  \
    {                                                                                             \
        cr_gemm_dev g = gemm_dev(l);                                                              \
        return cr_cuda_gemm_##NAME(&g, l->t->dtype, l->x->stream);                                \
    }

OWN_GEMM(naive)
OWN_GEMM(regtile)
OWN_GEMM(smem)
OWN_GEMM(blocktile)
OWN_GEMM(vec)
OWN_GEMM(tc)

/* Kernels with scratch: the launcher hands the row's scratch to KERNEL_ws, and the row's scratch
 * function asks KERNEL_work_bytes, for the task's shape (no pointers yet: an unused scratch is
 * only memory). dbuf splits K into it when its plan wants (gemm_dbuf.cu; with less, it runs
 * unsplit); tc-3xtf32 splits both operands into TF32 parts there (gemm_3xtf32.cu). */
#define SCRATCH_GEMM(ROW, KERNEL)                                                                 \
    extern "C" int cr_cuda_launch_gemm_##ROW(cr_cuda_launch *l)                                   \
    {                                                                                             \
        cr_gemm_dev g = gemm_dev(l);                                                              \
        return cr_cuda_gemm_##KERNEL##_ws(&g, l->t->dtype, l->scratch, l->scratch_bytes, l->x->stream); \
    }                                                                                             \
    extern "C" uint64_t cr_cuda_scratch_gemm_##ROW(const cr_task *t)                              \
    {                                                                                             \
        const cr_gemm_task *a = &t->u.gemm;                                                       \
        cr_gemm_dev g = {a->m, a->n, a->k, a->trans_a, a->trans_b, 1.0, 0.0, NULL, NULL, NULL};   \
        return cr_cuda_gemm_##KERNEL##_work_bytes(&g, t->dtype);                                  \
    }

SCRATCH_GEMM(dbuf, dbuf)
SCRATCH_GEMM(tc_3xtf32, 3xtf32)

/* tc-tf32's wgmma path transposes its MN-major operands into the row's scratch */
extern "C" int cr_cuda_launch_gemm_tc_tf32(cr_cuda_launch *l)
{
    cr_gemm_dev g = gemm_dev(l);
    return cr_cuda_gemm_tc_tf32_ws(&g, l->t->dtype, l->scratch, l->scratch_bytes, l->x->stream);
}

/* what the wgmma path may need: the transposed operands, for every problem its size rule could
 * take (pointers are not known yet; an unused scratch is only memory) */
extern "C" uint64_t cr_cuda_scratch_gemm_tc_tf32(const cr_task *t)
{
    const cr_gemm_task *a = &t->u.gemm;
    if ((double)a->m * (double)a->n * (double)a->k < 512.0 * 512.0 * 512.0)
        return 0;
    cr_gemm_dev g = {a->m, a->n, a->k, a->trans_a, a->trans_b, 1.0, 0.0, NULL, NULL, NULL};
    return cr_cuda_gemm_wgmma_work_bytes(&g, t->dtype);
}

/* C(m×n) = alpha·op(A)·op(B) + beta·C for `batch` problems, A and B sa and sb elements apart
 * (0: one matrix for all), C dense. */
static cublasStatus_t gemm_strided_at(cublasHandle_t h, const cr_gemm_dev *g, cr_dtype dt, int batch, long long sa,
                                      long long sb)
{
    cublasOperation_t op_b = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_a = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    int ldb = (int)ld_of(g->trans_b ? g->k : g->n), lda = (int)ld_of(g->trans_a ? g->m : g->k);
    int ldc = (int)ld_of(g->n), m = (int)g->m, n = (int)g->n, k = (int)g->k;
    long long sc = g->m * g->n;
    if (dt == CR_DT_F64) {
        const double *a = (const double *)g->a, *b = (const double *)g->b;
        if (batch == 1)
            return cublasDgemm(h, op_b, op_a, n, m, k, &g->alpha, b, ldb, a, lda, &g->beta, (double *)g->c, ldc);
        return cublasDgemmStridedBatched(h, op_b, op_a, n, m, k, &g->alpha, b, ldb, sb, a, lda, sa, &g->beta,
                                         (double *)g->c, ldc, sc, batch);
    }
    float alpha = (float)g->alpha, beta = (float)g->beta;
    if (dt == CR_DT_F16 || dt == CR_DT_BF16) { /* 16-bit in and out, FP32 accumulation and scalars */
        cudaDataType_t t = dt == CR_DT_F16 ? CUDA_R_16F : CUDA_R_16BF;
        if (batch == 1)
            return cublasGemmEx(h, op_b, op_a, n, m, k, &alpha, g->b, t, ldb, g->a, t, lda, &beta, g->c, t, ldc,
                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        return cublasGemmStridedBatchedEx(h, op_b, op_a, n, m, k, &alpha, g->b, t, ldb, sb, g->a, t, lda, sa, &beta,
                                          g->c, t, ldc, sc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }
    const float *a = (const float *)g->a, *b = (const float *)g->b;
    if (batch == 1)
        return cublasSgemm(h, op_b, op_a, n, m, k, &alpha, b, ldb, a, lda, &beta, (float *)g->c, ldc);
    return cublasSgemmStridedBatched(h, op_b, op_a, n, m, k, &alpha, b, ldb, sb, a, lda, sa, &beta, (float *)g->c,
                                     ldc, sc, batch);
}

/* `batch` problems at strides of one matrix each (the batcher's layout). */
static cublasStatus_t gemm_strided(cublasHandle_t h, const cr_gemm_dev *g, cr_dtype dt, int batch)
{
    return gemm_strided_at(h, g, dt, batch, g->m * g->k, g->k * g->n);
}

/* `batch` problems whose matrices the device arrays pa, pb, pc point at. */
static cublasStatus_t gemm_pointers(cublasHandle_t h, const cr_gemm_dev *g, cr_dtype dt, int batch, const void **pa,
                                    const void **pb, void **pc)
{
    cublasOperation_t op_b = g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_a = g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    int ldb = (int)ld_of(g->trans_b ? g->k : g->n), lda = (int)ld_of(g->trans_a ? g->m : g->k);
    int ldc = (int)ld_of(g->n), m = (int)g->m, n = (int)g->n, k = (int)g->k;
    if (dt == CR_DT_F64)
        return cublasDgemmBatched(h, op_b, op_a, n, m, k, &g->alpha, (const double *const *)pb, ldb,
                                  (const double *const *)pa, lda, &g->beta, (double *const *)pc, ldc, batch);
    float alpha = (float)g->alpha, beta = (float)g->beta;
    if (dt == CR_DT_F16 || dt == CR_DT_BF16) {
        cudaDataType_t t = dt == CR_DT_F16 ? CUDA_R_16F : CUDA_R_16BF;
        return cublasGemmBatchedEx(h, op_b, op_a, n, m, k, &alpha, pb, t, ldb, pa, t, lda, &beta, (void *const *)pc, t,
                                   ldc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }
    return cublasSgemmBatched(h, op_b, op_a, n, m, k, &alpha, (const float *const *)pb, ldb, (const float *const *)pa,
                              lda, &beta, (float *const *)pc, ldc, batch);
}

/* Whether a stack's operands A and B each have a common stride (then strided-batched). */
static bool stack_strided(const cr_stack *s, int64_t *step_a, int64_t *step_b)
{
    bool a = cr_stack_uniform(s, CR_STACK_A, step_a), b = cr_stack_uniform(s, CR_STACK_B, step_b);
    return a && b;
}

/* A stack through cuBLAS, STACK_CHUNK products a call: strided-batched when A and B each have a
 * common stride (0 for a broadcast operand: nothing is copied to expand it), else pointer-array
 * batched with the arrays written on the device from the stack's dims and strides into the
 * row's scratch. C is dense and already holds c (expanded) when beta applies. */
static cudaError_t cublas_stack(const cr_cuda_launch *l, const cr_gemm_dev *g0)
{
    const cr_task *t = l->t;
    const cr_stack *s = &t->stack;
    size_t es = cr_dtype_size(t->dtype);
    size_t a_bytes = (size_t)(g0->m * g0->k) * es, b_bytes = (size_t)(g0->k * g0->n) * es;
    size_t c_bytes = (size_t)(g0->m * g0->n) * es;
    int64_t step_a, step_b;
    bool strided = stack_strided(s, &step_a, &step_b);
    const void **pa = NULL, **pb = NULL;
    void **pc = NULL;
    if (!strided)
        cr_cuda_stack_pointer_arrays(l->scratch, s->count < STACK_CHUNK ? s->count : STACK_CHUNK, &pa, &pb, &pc);
    for (int64_t first = 0; first < s->count; first += STACK_CHUNK) {
        int n = (int)(s->count - first < STACK_CHUNK ? s->count - first : STACK_CHUNK);
        cr_gemm_dev g = *g0;
        if (strided) {
            g.a = (const char *)g0->a + (size_t)(first * step_a) * a_bytes;
            g.b = (const char *)g0->b + (size_t)(first * step_b) * b_bytes;
            g.c = (char *)g0->c + (size_t)first * c_bytes;
            CR_CHECK(l->e, gemm_strided_at(l->x->blas, &g, t->dtype, n, step_a * g.m * g.k, step_b * g.k * g.n));
            continue;
        }
        CR_CHECK(l->e, cr_cuda_stack_pointers(s, first, n, g0->a, a_bytes, g0->b, b_bytes, g0->c, c_bytes, pa, pb, pc,
                                              l->x->stream));
        CR_CHECK(l->e, gemm_pointers(l->x->blas, &g, t->dtype, n, pa, pb, pc));
    }
cleanup:
    return l->e->code;
}

extern "C" uint64_t cr_cuda_scratch_gemm_cublas(const cr_task *t)
{
    int64_t step_a, step_b;
    if (t->stack.rank == 0 || stack_strided(&t->stack, &step_a, &step_b))
        return 0;
    return cr_cuda_stack_pointer_bytes(t->stack.count < STACK_CHUNK ? t->stack.count : STACK_CHUNK);
}

static cublasStatus_t cublas_gemm(const cr_exec *x, cr_dtype dt, const cr_gemm_dev *g)
{
    return gemm_strided(x->blas, g, dt, 1);
}

/* One matrix or a stack. */
static cudaError_t cublas_task(const cr_cuda_launch *l, const cr_gemm_dev *g)
{
    if (l->t->stack.rank > 0)
        return cublas_stack(l, g);
    CR_CHECK(l->e, cublas_gemm(l->x, l->t->dtype, g));
cleanup:
    return l->e->code;
}

cublasStatus_t cr_cublas_gemm_batched(cublasHandle_t h, const cr_gemm_task *t, cr_dtype dt, bool tf32,
                                      const void *a, const void *b, void *c, int batch)
{
    cr_gemm_dev g = {t->m, t->n, t->k, t->trans_a, t->trans_b, t->alpha, t->c_in ? t->beta : 0.0, a, b, c};
    if (!tf32)
        return gemm_strided(h, &g, dt, batch);
    cublasStatus_t st = cublasSetMathMode(h, CR_CUBLAS_MATH_TF32);
    if (st != CUBLAS_STATUS_SUCCESS)
        return st;
    st = gemm_strided(h, &g, dt, batch);
    cublasStatus_t back = cublasSetMathMode(h, CR_CUBLAS_MATH);
    return st != CUBLAS_STATUS_SUCCESS ? st : back;
}

extern "C" int cr_cuda_launch_gemm_cublas(cr_cuda_launch *l)
{
    cr_gemm_dev g = gemm_dev(l);
    return cublas_task(l, &g);
}

/* TF32 tensor-op math for this one call, then back to exact FP32 for the handle's next task. */
extern "C" int cr_cuda_launch_gemm_cublas_tf32(cr_cuda_launch *l)
{
    bool set = false;
    cr_gemm_dev g = gemm_dev(l);
    CR_CHECK(l->e, cublasSetMathMode(l->x->blas, CR_CUBLAS_MATH_TF32));
    set = true;
    CR_CHECK(l->e, cublas_task(l, &g));
cleanup:
    if (set)
        cr_check_record(l->e, cublasSetMathMode(l->x->blas, CR_CUBLAS_MATH), "restore math mode", __FILE__,
                        __LINE__);
    return l->e->code;
}

/* The own batched kernel: a stack (or one matrix) in one launch (gemm_batched.cu). */
extern "C" int cr_cuda_launch_gemm_batched(cr_cuda_launch *l)
{
    cr_gemm_dev g = gemm_dev(l);
    return cr_cuda_gemm_batched(&g, &l->t->stack, l->t->dtype, l->x->stream);
}

/* ---- AᵀA ---- */

static cr_ata_dev ata_dev(const cr_cuda_launch *l)
{
    const cr_ata_task *a = &l->t->u.ata;
    return (cr_ata_dev){a->m, a->n, a->trans_a, l->in[0], l->out, l->scratch};
}

/* AᵀA through our fastest own GEMM: C(n×n) = op(A)·op(B) with both operands the one stored A. */
extern "C" int cr_cuda_launch_ata_gemm(cr_cuda_launch *l)
{
    const cr_ata_task *at = &l->t->u.ata;
    cr_gemm_dev g = {at->n, at->n, at->m, !at->trans_a, at->trans_a, 1.0, 0.0, l->in[0], l->in[0], l->out};
    return cr_cuda_gemm_dbuf(&g, l->t->dtype, l->x->stream);
}

extern "C" int cr_cuda_launch_ata_basic(cr_cuda_launch *l)
{
    cr_ata_dev d = ata_dev(l);
    return cr_cuda_ata_basic(&d, l->t->dtype, l->x->stream);
}

extern "C" int cr_cuda_launch_ata_symtile(cr_cuda_launch *l)
{
    cr_ata_dev d = ata_dev(l);
    return cr_cuda_ata_symtile(&d, l->t->dtype, l->x->stream);
}

extern "C" int cr_cuda_launch_ata_dmma(cr_cuda_launch *l)
{
    cr_ata_dev d = ata_dev(l);
    return cr_cuda_ata_dmma(&d, l->t->dtype, l->x->stream);
}

extern "C" uint64_t cr_cuda_scratch_ata_symtile(const cr_task *t)
{
    const cr_ata_task *a = &t->u.ata;
    cr_ata_dev d = {a->m, a->n, a->trans_a, NULL, NULL, NULL};
    return cr_cuda_ata_work_bytes(&d, t->dtype, cr_cuda_ata_symtile);
}

/* AᵀA as one GEMM (both triangles computed, nothing mirrored): the row-major A (m×n) is the
 * column-major X = Aᵀ (n×m) and AᵀA = X·Xᵀ; a stored Aᵀ is the column-major A, AᵀA = AᵀA. */
static cublasStatus_t ata_strided_at(cublasHandle_t h, const cr_ata_task *t, cr_dtype dt, const void *a, void *c,
                                     int batch, long long sa)
{
    cublasOperation_t op1 = t->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, op2 = t->trans_a ? CUBLAS_OP_N : CUBLAS_OP_T;
    int n = (int)t->n, k = (int)t->m, lda = (int)ld_of(t->trans_a ? t->m : t->n), ldc = (int)ld_of(t->n);
    long long sc = t->n * t->n;
    if (dt == CR_DT_F64) {
        const double one = 1.0, zero = 0.0;
        return cublasDgemmStridedBatched(h, op1, op2, n, n, k, &one, (const double *)a, lda, sa, (const double *)a,
                                         lda, sa, &zero, (double *)c, ldc, sc, batch);
    }
    const float one = 1.0f, zero = 0.0f;
    return cublasSgemmStridedBatched(h, op1, op2, n, n, k, &one, (const float *)a, lda, sa, (const float *)a, lda,
                                     sa, &zero, (float *)c, ldc, sc, batch);
}

cublasStatus_t cr_cublas_ata_batched(cublasHandle_t h, const cr_ata_task *t, cr_dtype dt, const void *a, void *c,
                                     int batch)
{
    return ata_strided_at(h, t, dt, a, c, batch, t->m * t->n);
}

/* An AᵀA stack never broadcasts (kernels/backend.h): A has a common stride, one matrix each
 * product for any stack the server builds; one without is refused, not guessed at. */
static cudaError_t ata_stack(const cr_cuda_launch *l)
{
    const cr_ata_task *at = &l->t->u.ata;
    const cr_stack *s = &l->t->stack;
    size_t es = cr_dtype_size(l->t->dtype), a_bytes = (size_t)(at->m * at->n) * es, c_bytes = (size_t)(at->n * at->n) * es;
    int64_t step;
    if (!cr_stack_uniform(s, CR_STACK_A, &step))
        CR_CHECK(l->e, cudaErrorNotSupported);
    for (int64_t first = 0; first < s->count; first += STACK_CHUNK) {
        int n = (int)(s->count - first < STACK_CHUNK ? s->count - first : STACK_CHUNK);
        const char *a = (const char *)l->in[0] + (size_t)(first * step) * a_bytes;
        char *c = (char *)l->out + (size_t)first * c_bytes;
        CR_CHECK(l->e, ata_strided_at(l->x->blas, at, l->t->dtype, a, c, n, step * at->m * at->n));
    }
cleanup:
    return l->e->code;
}

extern "C" int cr_cuda_launch_ata_cublas_gemm(cr_cuda_launch *l)
{
    if (l->t->stack.rank > 0)
        return ata_stack(l);
    CR_CHECK(l->e, cr_cublas_ata_batched(l->x->blas, &l->t->u.ata, l->t->dtype, l->in[0], l->out, 1));
cleanup:
    return l->e->code;
}

/* AᵀA through the own batched kernel: C(n×n) = Aᵀ·A, both operands the stored A (B's batch
 * strides are A's). */
extern "C" int cr_cuda_launch_ata_batched(cr_cuda_launch *l)
{
    const cr_ata_task *at = &l->t->u.ata;
    cr_gemm_dev g = {at->n, at->n, at->m, !at->trans_a, at->trans_a, 1.0, 0.0, l->in[0], l->in[0], l->out};
    cr_stack s = l->t->stack;
    for (int d = 0; d < CR_STACK_DIMS; d++)
        s.stride[CR_STACK_B][d] = s.stride[CR_STACK_A][d];
    s.mats[CR_STACK_B] = s.mats[CR_STACK_A];
    return cr_cuda_gemm_batched(&g, &s, l->t->dtype, l->x->stream);
}

/* The row-major A (m×n) is the column-major X = Aᵀ (n×m), AᵀA = X·Xᵀ; a stored Aᵀ is the
 * column-major A, AᵀA with trans. Column-major lower = row-major upper, mirrored down after. */
extern "C" int cr_cuda_launch_ata_cublas_syrk(cr_cuda_launch *l)
{
    const cr_ata_task *at = &l->t->u.ata;
    cublasOperation_t op = at->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    int n = (int)at->n, k = (int)at->m, lda = (int)ld_of(at->trans_a ? at->m : at->n);
    if (l->t->dtype == CR_DT_F64) {
        const double one = 1.0, zero = 0.0;
        CR_CHECK(l->e, cublasDsyrk(l->x->blas, CUBLAS_FILL_MODE_LOWER, op, n, k, &one, (const double *)l->in[0],
                                   lda, &zero, (double *)l->out, (int)ld_of(n)));
    } else {
        const float one = 1.0f, zero = 0.0f;
        CR_CHECK(l->e, cublasSsyrk(l->x->blas, CUBLAS_FILL_MODE_LOWER, op, n, k, &one, (const float *)l->in[0],
                                   lda, &zero, (float *)l->out, (int)ld_of(n)));
    }
    CR_CHECK(l->e, cr_cuda_mirror_upper(l->out, at->n, l->t->dtype, l->x->stream));
cleanup:
    return l->e->code;
}

/* ---- histograms ---- */

static cr_hist_dev hist_dev(const cr_cuda_launch *l)
{
    const cr_hist_task *h = &l->t->u.hist;
    return (cr_hist_dev){h->count, l->in[0], h->bins, h->lo, h->hi, (unsigned long long *)l->out};
}

#define OWN_HIST(NAME)                                                                            \
    extern "C" int cr_cuda_launch_hist_##NAME(cr_cuda_launch *l)                                  \
    {                                                                                             \
        cr_hist_dev d = hist_dev(l);                                                              \
        return cr_cuda_hist_##NAME(&d, l->t->dtype, l->x->stream);                                \
    }

OWN_HIST(global)
OWN_HIST(smem)
OWN_HIST(smem_vec)

extern "C" int cr_cuda_launch_hist_cub(cr_cuda_launch *l)
{
    cr_hist_dev d = hist_dev(l);
    size_t temp_bytes = l->scratch_bytes;
    return cr_cuda_hist_cub(&d, l->t->dtype, l->scratch, &temp_bytes, l->x->stream);
}

extern "C" uint64_t cr_cuda_scratch_hist_cub(const cr_task *t)
{
    const cr_hist_task *h = &t->u.hist;
    cr_hist_dev d = {h->count, NULL, h->bins, h->lo, h->hi, NULL};
    size_t bytes = 0;
    return cr_cuda_hist_cub(&d, t->dtype, NULL, &bytes, 0) == cudaSuccess ? bytes : 0;
}

/* One histogram through the batched kernel: its job description travels in the scratch. */
extern "C" int cr_cuda_launch_hist_batched(cr_cuda_launch *l)
{
    cr_hist_dev d = hist_dev(l);
    cr_hist_job job;
    const cr_hist_task *h = &l->t->u.hist;
    CR_CHECK(l->e, cr_hist_job_make(&d, l->t->dtype, &job));
    CR_CHECK(l->e, cudaMemsetAsync(l->out, 0, (size_t)h->bins * sizeof(unsigned long long), l->x->stream));
    if (h->count == 0)
        return cudaSuccess;
    /* from pageable memory: the call returns once `job` is staged, so the stack frame may go */
    CR_CHECK(l->e, cudaMemcpyAsync(l->scratch, &job, sizeof job, cudaMemcpyHostToDevice, l->x->stream));
    CR_CHECK(l->e, cr_cuda_hist_batched((const cr_hist_job *)l->scratch, 1, h->bins, h->count, l->t->dtype,
                                        l->x->stream));
cleanup:
    return l->e->code;
}

extern "C" uint64_t cr_cuda_scratch_hist_batched(const cr_task *) { return sizeof(cr_hist_job); }

#ifdef CRUNCHD_FAULT_INJECTION
__global__ void fault_illegal_address_kernel(int *p) { *p = 42; }

extern "C" int cr_cuda_launch_fault_illegal_address(cr_cuda_launch *l)
{
    fault_illegal_address_kernel<<<1, 1, 0, l->x->stream>>>((int *)(uintptr_t)0x10);
    cudaError_t e = cudaGetLastError();
    return e != cudaSuccess ? e : cudaStreamSynchronize(l->x->stream);
}
#endif
