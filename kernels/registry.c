/* The kernel registry; see registry.h. The two tables below are every kernel crunchd ships. */
#include "kernels/registry.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "kernels/cpu/cpu_internal.h"
#ifdef CRUNCHD_HAVE_CUDA
#include "kernels/cuda/launchers.h"
#endif

#define F32 CR_DT_BIT(CR_DT_F32)
#define F64 CR_DT_BIT(CR_DT_F64)
#define F16 CR_DT_BIT(CR_DT_F16)
#define BF16 CR_DT_BIT(CR_DT_BF16)
/* Histograms take every dtype but the half-precision ones (numpy bins those in their own
 * 16-bit arithmetic, which crunchd does not reproduce). */
#define ALL_DT (((1u << CR_DT_COUNT) - 1u) & ~(F16 | BF16))
#define BLAS_DIM INT_MAX /* cuBLAS and OpenBLAS take int dimensions */

/* The CPU backend: OpenBLAS and plain C references (kernels/cpu/). */
static const cr_kernel cpu_rows[] = {
    {.name = "openblas", .backend = CR_BACKEND_CPU, .op = CR_OP_GEMM, .dtypes = F32 | F64 | F16 | BF16,
     .batchable = true, .stacks = true, .max_dim = BLAS_DIM,
     .summary = "OpenBLAS SGEMM/DGEMM; float16/bfloat16 widened to float32 and rounded back", .cpu = cpu_gemm_openblas},
    {.name = "reference", .backend = CR_BACKEND_CPU, .op = CR_OP_GEMM, .dtypes = F32 | F64 | F16 | BF16,
     .reference = true, .stacks = true, .summary = "plain C, accumulates in double",
     .cpu = cpu_gemm_reference},
    {.name = "openblas", .backend = CR_BACKEND_CPU, .op = CR_OP_ATA, .dtypes = F32 | F64, .batchable = true,
     .stacks = true, .max_dim = BLAS_DIM, .summary = "OpenBLAS SSYRK/DSYRK, upper triangle mirrored",
     .cpu = cpu_ata_openblas},
    {.name = "reference", .backend = CR_BACKEND_CPU, .op = CR_OP_ATA, .dtypes = F32 | F64,
     .reference = true, .stacks = true, .summary = "plain C, accumulates in double",
     .cpu = cpu_ata_reference},
    {.name = "reference", .backend = CR_BACKEND_CPU, .op = CR_OP_HISTOGRAM, .dtypes = ALL_DT,
     .reference = true, .batchable = true,
     .summary = "plain C, numpy.histogram bin edges; uint8 256-bin counting fast path",
     .cpu = cpu_hist_reference},
};

#ifdef CRUNCHD_HAVE_CUDA
/* Every dtype, integers binned as float64 as numpy does (hist_bin.cuh's cr_hist_by_dtype,
 * checked at each width's extremes by tests/gpu/ata_hist.cu). */
#define HIST_DT ALL_DT
#define CUDA_ROW(n, o, dt, fn, sum, ...)                                                          \
    {.name = n, .backend = CR_BACKEND_CUDA, .op = o, .dtypes = dt, .summary = sum, .cuda = fn, __VA_ARGS__}

/* The cuda backend (kernels/cuda/). dtypes are what each launcher truly runs: vec and dbuf (and
 * so ata `gemm`) are FP32 only. Own kernels check their grid limits themselves (max_dim 0). */
static const cr_kernel cuda_rows[] = {
    CUDA_ROW("naive", CR_OP_GEMM, F32 | F64, cr_cuda_launch_gemm_naive, "one output per thread, global memory"),
    CUDA_ROW("regtile", CR_OP_GEMM, F32 | F64, cr_cuda_launch_gemm_regtile, "T×T outputs per thread in registers"),
    CUDA_ROW("smem", CR_OP_GEMM, F32 | F64, cr_cuda_launch_gemm_smem, "shared-memory tiles"),
    CUDA_ROW("blocktile", CR_OP_GEMM, F32 | F64, cr_cuda_launch_gemm_blocktile,
             "128×128×8 block tile, 8×8 thread tile"),
    CUDA_ROW("vec", CR_OP_GEMM, F32, cr_cuda_launch_gemm_vec, "bank-conflict-free, Aᵀ in shared memory, float4 loads"),
    CUDA_ROW("dbuf", CR_OP_GEMM, F32, cr_cuda_launch_gemm_dbuf,
             "double-buffered block tile; split-K into scratch for small C with long K",
             .scratch = cr_cuda_scratch_gemm_dbuf),
    CUDA_ROW("cublas", CR_OP_GEMM, F32 | F64 | F16 | BF16, cr_cuda_launch_gemm_cublas,
             "cuBLAS SGEMM/DGEMM; GemmEx with FP32 accumulation for float16/bfloat16; stacks strided-batched, "
             "or batched through pointer arrays where broadcasting leaves no common stride",
             .reference = true, .batchable = true, .stacks = true, .max_dim = BLAS_DIM,
             .scratch = cr_cuda_scratch_gemm_cublas),
    CUDA_ROW("cublas-tf32", CR_OP_GEMM, F32, cr_cuda_launch_gemm_cublas_tf32, "cuBLAS with TF32 tensor cores",
             .precision = CR_PREC_TF32, .batchable = true, .stacks = true, .max_dim = BLAS_DIM,
             .scratch = cr_cuda_scratch_gemm_cublas),
    CUDA_ROW("batched", CR_OP_GEMM, F32 | F64, cr_cuda_launch_gemm_batched,
             "own batched GEMM for stacks of small matrices: whole matrices of up to 64 on a side, several "
             "to a block; bigger ones in 128x128 (FP64 64x64) tiles; one launch for the whole stack",
             .stacks = true),
    CUDA_ROW("tc-tf32", CR_OP_GEMM, F32, cr_cuda_launch_gemm_tc_tf32,
             "own tensor-core GEMM: TF32, FP32 accumulation; wgmma + TMA on Hopper (MN-major operands "
             "transposed into scratch), else mma.sync with a cp.async pipeline",
             .precision = CR_PREC_TF32, .scratch = cr_cuda_scratch_gemm_tc_tf32),
    CUDA_ROW("tc-3xtf32", CR_OP_GEMM, F32, cr_cuda_launch_gemm_tc_3xtf32,
             "own tensor-core GEMM in FP32's error class: each operand split into two TF32 parts, "
             "three TF32 products (3xTF32) through tc-tf32; scratch of 3k floats per row and column; "
             "named only: auto does not pick it",
             .named_only = true, .scratch = cr_cuda_scratch_gemm_tc_3xtf32),
    CUDA_ROW("tc", CR_OP_GEMM, F16 | BF16, cr_cuda_launch_gemm_tc,
             "own tensor-core GEMM: FP16/BF16, FP32 accumulation; wgmma + TMA on Hopper from 512^3, else "
             "mma.sync with a cp.async pipeline"),
    CUDA_ROW("gemm", CR_OP_ATA, F32, cr_cuda_launch_ata_gemm, "AᵀA as a GEMM through the dbuf kernel"),
    CUDA_ROW("basic", CR_OP_ATA, F32 | F64, cr_cuda_launch_ata_basic, "one output per thread, full matrix"),
    CUDA_ROW("symtile", CR_OP_ATA, F32 | F64, cr_cuda_launch_ata_symtile,
             "upper-triangle tiles, register-blocked, mirrored", .scratch = cr_cuda_scratch_ata_symtile),
    CUDA_ROW("dmma", CR_OP_ATA, F64, cr_cuda_launch_ata_dmma,
             "own FP64 tensor-core AᵀA: mma.sync m16n8k4/m16n8k8 (sm_90 DMMA), upper-triangle tiles, mirrored"),
    CUDA_ROW("cublas-syrk", CR_OP_ATA, F32 | F64, cr_cuda_launch_ata_cublas_syrk, "cuBLAS SYRK, triangle mirrored",
             .reference = true, .max_dim = BLAS_DIM),
    CUDA_ROW("cublas-batched", CR_OP_ATA, F32 | F64, cr_cuda_launch_ata_cublas_gemm,
             "cuBLAS GEMM of Aᵀ and A, strided-batched over the small AᵀA of a batch or a stack", .batchable = true,
             .stacks = true, .max_dim = BLAS_DIM),
    CUDA_ROW("batched", CR_OP_ATA, F32 | F64, cr_cuda_launch_ata_batched,
             "AᵀA as the own batched GEMM of Aᵀ and A (both triangles computed): a stack in one launch",
             .stacks = true),
    CUDA_ROW("global", CR_OP_HISTOGRAM, HIST_DT, cr_cuda_launch_hist_global, "global-memory atomics"),
    CUDA_ROW("smem", CR_OP_HISTOGRAM, HIST_DT, cr_cuda_launch_hist_smem, "shared-memory privatized bins"),
    CUDA_ROW("smem-vec", CR_OP_HISTOGRAM, HIST_DT, cr_cuda_launch_hist_smem_vec,
             "privatized bins, 16-byte loads, persistent grid"),
    CUDA_ROW("cub", CR_OP_HISTOGRAM, HIST_DT, cr_cuda_launch_hist_cub, "CUB DeviceHistogram::HistogramEven",
             .reference = true, .scratch = cr_cuda_scratch_hist_cub),
    CUDA_ROW("smem-batched", CR_OP_HISTOGRAM, HIST_DT, cr_cuda_launch_hist_batched,
             "privatized bins; the small histograms of a batch in one launch, one grid row each",
             .batchable = true, .scratch = cr_cuda_scratch_hist_batched),
#ifdef CRUNCHD_FAULT_INJECTION
    CUDA_ROW("fault-illegal-address", CR_OP_GEMM, F32 | F64, cr_cuda_launch_fault_illegal_address,
             "test builds: a store to an unmapped address (a sticky device fault)", .hidden = true),
#endif
};
#endif

#define COUNT(a) (sizeof a / sizeof a[0])

static const cr_kernel *rows_of(cr_backend_id id, size_t *count)
{
#ifdef CRUNCHD_HAVE_CUDA
    if (id == CR_BACKEND_CUDA)
        return *count = COUNT(cuda_rows), cuda_rows;
#endif
    if (id == CR_BACKEND_CPU)
        return *count = COUNT(cpu_rows), cpu_rows;
    return *count = 0, NULL;
}

const cr_kernel *cr_kernels(const cr_backend *b, size_t *count) { return rows_of(b->id, count); }

const cr_kernel *cr_kernel_find(const cr_backend *b, cr_op op, const char *name)
{
    size_t n = 0;
    const cr_kernel *k = cr_kernels(b, &n);
    for (size_t i = 0; i < n; i++)
        if (k[i].op == op && strcmp(k[i].name, name) == 0)
            return &k[i];
    return NULL;
}

static bool is_stack(const cr_task *t) { return t->stack.rank > 0; }

/* A row that may stand in for the reference on a stack: takes it, and computes it exactly as
 * asked (no tf32, not named_only, not a test build's fault). */
static bool stack_stand_in(const cr_kernel *k, const cr_task *t)
{
    return k->stacks && k->op == t->op && (k->dtypes & CR_DT_BIT(t->dtype)) && !k->hidden && !k->named_only &&
           k->precision == CR_PREC_DEFAULT;
}

static const cr_kernel *stack_reference(const cr_kernel *k, size_t n, const cr_task *t)
{
    const cr_kernel *any = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!stack_stand_in(&k[i], t))
            continue;
        if (k[i].batchable)
            return &k[i]; /* the op's batch row: the library's batched form of the reference */
        any = any ? any : &k[i];
    }
    return any;
}

const cr_kernel *cr_kernel_reference(const cr_backend *b, const cr_task *t)
{
    size_t n = 0;
    const cr_kernel *k = cr_kernels(b, &n);
    for (size_t i = 0; i < n; i++)
        if (k[i].op == t->op && k[i].reference && (k[i].dtypes & CR_DT_BIT(t->dtype)))
            return is_stack(t) && !k[i].stacks ? stack_reference(k, n, t) : &k[i];
    return NULL;
}

/* The largest dimension of a task, as a kernel's max_dim counts it. */
static int64_t largest_dim(const cr_task *t)
{
    switch (t->op) {
    case CR_OP_GEMM: {
        const cr_gemm_task *g = &t->u.gemm;
        int64_t d = g->m > g->n ? g->m : g->n;
        return d > g->k ? d : g->k;
    }
    case CR_OP_ATA: return t->u.ata.m > t->u.ata.n ? t->u.ata.m : t->u.ata.n;
    case CR_OP_HISTOGRAM: return t->u.hist.count;
    default: return 0;
    }
}

/* "kernel 'smem' runs one matrix at a time; a stack needs one of: cublas, ..." with the rows of
 * k's backend and op that take stacks (of the task's dtype, when any does). */
static void stack_refusal(const cr_kernel *k, const cr_task *t, char *msg, size_t msglen)
{
    size_t n = 0, at;
    const cr_kernel *rows = rows_of(k->backend, &n);
    bool dtype_has = false, any = false;
    for (size_t i = 0; i < n; i++) {
        bool takes = rows[i].op == t->op && rows[i].stacks && !rows[i].hidden;
        any |= takes;
        dtype_has |= takes && (rows[i].dtypes & CR_DT_BIT(t->dtype));
    }
    if (!any) {
        snprintf(msg, msglen, "kernel '%s' runs one matrix at a time, and no %s kernel takes a stack", k->name,
                 cr_op_name(t->op));
        return;
    }
    int w = snprintf(msg, msglen, "kernel '%s' runs one matrix at a time; a stack needs one of:", k->name);
    at = w > 0 && (size_t)w < msglen ? (size_t)w : msglen;
    const char *sep = " ";
    for (size_t i = 0; i < n && at < msglen; i++) {
        const cr_kernel *r = &rows[i];
        if (r->op != t->op || !r->stacks || r->hidden || (dtype_has && !(r->dtypes & CR_DT_BIT(t->dtype))))
            continue;
        w = snprintf(msg + at, msglen - at, "%s%s", sep, r->name);
        at = w > 0 && (size_t)w < msglen - at ? at + (size_t)w : msglen;
        sep = ", ";
    }
}

cr_kcheck cr_kernel_check(const cr_kernel *k, const cr_task *t, char *msg, size_t msglen)
{
    char scratch[8];
    if (!msg)
        msg = scratch, msglen = sizeof scratch;
    if (k->op != t->op)
        return snprintf(msg, msglen, "kernel '%s' is a %s kernel, not %s", k->name, cr_op_name(k->op),
                        cr_op_name(t->op)), CR_KCHECK_OP;
    if ((unsigned)t->dtype >= CR_DT_COUNT || !(k->dtypes & CR_DT_BIT(t->dtype)))
        return snprintf(msg, msglen, "kernel '%s' does not support %s", k->name,
                        cr_dtype_name(t->dtype)), CR_KCHECK_DTYPE;
    if (k->precision == CR_PREC_TF32 && t->precision != CR_PREC_TF32)
        return snprintf(msg, msglen, "kernel '%s' computes in tf32; send \"precision\": \"tf32\" to accept that",
                        k->name), CR_KCHECK_PRECISION;
    if (is_stack(t) && !k->stacks)
        return stack_refusal(k, t, msg, msglen), CR_KCHECK_STACK;
    if (k->max_dim && largest_dim(t) > k->max_dim)
        return snprintf(msg, msglen, "kernel '%s' takes dimensions up to %lld, this task has %lld", k->name,
                        (long long)k->max_dim, (long long)largest_dim(t)), CR_KCHECK_SHAPE;
    return CR_KCHECK_OK;
}

bool cr_kernel_candidate(const cr_kernel *k, const cr_task *t, bool compare)
{
    if (k->hidden || k->op != t->op || !(k->dtypes & CR_DT_BIT(t->dtype)) ||
        (k->max_dim && largest_dim(t) > k->max_dim) || (is_stack(t) && !k->stacks))
        return false;
    if (k->named_only && !compare)
        return false;
    if (k->precision != CR_PREC_TF32)
        return true;
    return compare ? t->dtype == CR_DT_F32 : t->precision == CR_PREC_TF32;
}

/* ---- batching ---------------------------------------------------------------------------- */

const cr_kernel *cr_kernel_batch_row(const cr_backend *b, const cr_task *t)
{
    if (is_stack(t) || cr_task_is_large(t) || (t->op == CR_OP_HISTOGRAM && t->u.hist.bins > CR_BATCH_MAX_BINS))
        return NULL;
    size_t n = 0;
    const cr_kernel *k = cr_kernels(b, &n), *any = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!k[i].batchable || !cr_kernel_candidate(&k[i], t, false))
            continue;
        if (k[i].precision == t->precision)
            return &k[i];
        any = any ? any : &k[i];
    }
    return any;
}

void cr_batch_key_of(const cr_task *t, const cr_kernel *row, cr_batch_key *key)
{
    memset(key, 0, sizeof *key);
    key->row = row;
    key->op = t->op;
    key->dtype = t->dtype;
    key->precision = t->precision;
    switch (t->op) {
    case CR_OP_GEMM:
        key->m = t->u.gemm.m;
        key->n = t->u.gemm.n;
        key->k = t->u.gemm.k;
        key->trans_a = t->u.gemm.trans_a;
        key->trans_b = t->u.gemm.trans_b;
        key->has_c = t->u.gemm.c_in != NULL;
        key->alpha = t->u.gemm.alpha;
        key->beta = key->has_c ? t->u.gemm.beta : 0.0;
        break;
    case CR_OP_ATA:
        key->m = t->u.ata.m;
        key->n = t->u.ata.n;
        key->trans_a = t->u.ata.trans_a;
        break;
    default:
        key->bins = t->u.hist.bins;
        break;
    }
}

bool cr_batch_key_equal(const cr_batch_key *a, const cr_batch_key *b) { return memcmp(a, b, sizeof *a) == 0; }

/* ---- the client's choice ---------------------------------------------------------------- */

cr_kernel_choice cr_kernel_choice_auto(void)
{
    cr_kernel_choice c = {.mode = CR_KERNEL_AUTO};
    memcpy(c.name, "auto", sizeof "auto");
    return c;
}

int cr_kernel_choice_parse(const char *s, cr_kernel_choice *out)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n >= CR_KERNEL_NAME_MAX)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return -1;
    memcpy(out->name, s, n + 1);
    out->mode = strcmp(s, "auto") == 0 ? CR_KERNEL_AUTO : strcmp(s, "all") == 0 ? CR_KERNEL_ALL : CR_KERNEL_NAMED;
    return 0;
}

/* ---- auto and resolution ---------------------------------------------------------------- */

#define LARGE_FLOPS (2.0 * 256 * 256 * 256)
#define LARGE_ELEMENTS (1 << 20)
#define STACK_LARGE_FLOPS (2.0 * 128 * 128 * 128) /* per matrix */
#define STACK_TINY_FLOPS (2.0 * 24 * 24 * 24)     /* per matrix */
#define TALL_MAX_N 256
#define TALL_RATIO 64

bool cr_task_is_large(const cr_task *t)
{
    if (t->op == CR_OP_HISTOGRAM)
        return t->u.hist.count >= LARGE_ELEMENTS;
    return cr_task_flops(t) >= LARGE_FLOPS;
}

/* Flops of one matrix of the task (all of them when it is one). */
static double matrix_flops(const cr_task *t)
{
    int64_t n = cr_task_matrices(t);
    return n > 0 ? cr_task_flops(t) / (double)n : 0.0;
}

cr_size_class cr_task_size_class(const cr_task *t)
{
    if (t->op != CR_OP_HISTOGRAM && is_stack(t)) {
        double f = matrix_flops(t);
        return f >= STACK_LARGE_FLOPS ? CR_CLASS_STACK_LARGE : f >= STACK_TINY_FLOPS ? CR_CLASS_STACK_SMALL
                                                                                      : CR_CLASS_STACK_TINY;
    }
    if (!cr_task_is_large(t))
        return CR_CLASS_SMALL;
    if (t->op == CR_OP_ATA && t->u.ata.n <= TALL_MAX_N && t->u.ata.m >= TALL_RATIO * t->u.ata.n)
        return CR_CLASS_TALL;
    return CR_CLASS_LARGE;
}

const char *cr_size_class_name(cr_size_class c)
{
    static const char *const names[CR_CLASS_COUNT] = {"small", "large", "tall", "stack-tiny", "stack-small",
                                                      "stack-large"};
    return (unsigned)c < CR_CLASS_COUNT ? names[c] : "?";
}

static const cr_auto_row *auto_row(const cr_auto_table *tab, const cr_task *t, cr_size_class cls)
{
    cr_precision prec = t->dtype == CR_DT_F32 ? t->precision : CR_PREC_DEFAULT;
    for (size_t i = 0; tab && i < tab->n; i++) {
        const cr_auto_row *r = &tab->rows[i];
        if (r->kernel && r->op == t->op && r->dtype == t->dtype && r->precision == prec && r->cls == cls)
            return r;
    }
    return NULL;
}

/* The table's pick for t's (op, dtype, size class, precision); NULL when it has none, or when
 * the pick cannot take this task's shape. A table without the tall class answers from its
 * large one; a stack without its class's row gets the (stack-taking) reference. */
static const cr_kernel *auto_pick(const cr_auto_table *tab, const cr_task *t)
{
    cr_size_class cls = cr_task_size_class(t);
    const cr_auto_row *r = auto_row(tab, t, cls);
    if (!r && cls == CR_CLASS_TALL)
        r = auto_row(tab, t, CR_CLASS_LARGE);
    return r && cr_kernel_check(r->kernel, t, NULL, 0) == CR_KCHECK_OK ? r->kernel : NULL;
}

cr_resolve cr_kernel_resolve(const cr_backend *b, const cr_auto_table *tab, const cr_kernel_choice *c,
                             const cr_task *t, const cr_kernel **out, char *msg, size_t msglen)
{
    *out = NULL;
    if (c->mode != CR_KERNEL_NAMED) {
        const cr_kernel *ref = cr_kernel_reference(b, t);
        if (!ref)
            return snprintf(msg, msglen, "the %s backend has no %s kernel for %s%s", b->name, cr_op_name(t->op),
                            cr_dtype_name(t->dtype), is_stack(t) ? " stacks" : ""), CR_RESOLVE_NO_KERNEL;
        const cr_kernel *pick = c->mode == CR_KERNEL_AUTO ? auto_pick(tab, t) : NULL;
        *out = pick ? pick : ref;
        return CR_RESOLVE_OK;
    }
    const cr_kernel *k = cr_kernel_find(b, t->op, c->name);
    if (!k)
        return snprintf(msg, msglen, "no %s kernel named '%s' on the %s backend (GET /v1/kernels lists them)",
                        cr_op_name(t->op), c->name, b->name), CR_RESOLVE_UNKNOWN;
    switch (cr_kernel_check(k, t, msg, msglen)) {
    case CR_KCHECK_OK: *out = k; return CR_RESOLVE_OK;
    case CR_KCHECK_PRECISION: return CR_RESOLVE_PRECISION;
    case CR_KCHECK_SHAPE:
    case CR_KCHECK_STACK: return CR_RESOLVE_SHAPE;
    default: return CR_RESOLVE_DTYPE;
    }
}
