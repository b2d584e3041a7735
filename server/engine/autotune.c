/* Auto kernel table; see autotune.h. */
#include "server/engine/autotune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/half.h"

typedef struct {
    cr_op op;
    cr_dtype dtype;
    cr_precision prec;
    cr_size_class cls;
} probe_key;

/* A probe's shape: count matrices (0: one, rank 0) of m×k and k×n (AᵀA: m×n), or a histogram
 * of m elements. */
typedef struct {
    int64_t count, m, n, k;
} probe_shape;

/* xorshift64*: the probes' inputs are tens of millions of values, and rand_r's ~10 ns each was
 * seconds of a cuda start. */
static uint64_t next_random(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

static void fill_random(void *p, size_t n, cr_dtype dt, uint64_t *seed)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = next_random(seed);
        double v = (double)(r >> 11) * 0x1p-52 - 1.0; /* [-1, 1) */
        if (dt == CR_DT_F32)
            ((float *)p)[i] = (float)v;
        else if (dt == CR_DT_F64)
            ((double *)p)[i] = v;
        else if (dt == CR_DT_F16 || dt == CR_DT_BF16)
            ((uint16_t *)p)[i] = cr_half_from_double(dt, v);
        else
            ((uint8_t *)p)[i] = (uint8_t)(r >> 56);
    }
}

/* A probe's buffers: the backend's host_alloc where it has one (cuda: pinned, as binary uploads
 * arrive, so each run copies them to the device directly instead of through its staging: half a
 * gigabyte of memcpy for the big histogram probe, every run), else malloc. */
typedef struct {
    const cr_backend *b;
    void *p[3];
    bool host[3]; /* from host_alloc */
} probe_bufs;

static void *probe_alloc(probe_bufs *pb, int i, size_t bytes)
{
    bytes = bytes ? bytes : 1;
    pb->host[i] = false;
    if (pb->b->host_alloc && (pb->p[i] = pb->b->host_alloc(bytes)))
        return pb->host[i] = true, pb->p[i];
    return pb->p[i] = malloc(bytes);
}

static void probe_free(probe_bufs *pb)
{
    for (int i = 0; i < 3; i++) {
        if (pb->host[i])
            pb->b->host_free(pb->p[i]);
        else
            free(pb->p[i]);
        pb->p[i] = NULL;
    }
}

/* Probes are small and quick, each of its class (cr_task_size_class says which a task is in):
 * one matrix of 64³ or 2048³ (cpu: 256³), a tall AᵀA of 262144 x 64 (cpu: 20000 x 30), stacks of
 * 16384 16³, 2048 32³ or 64 256³ matrices (cpu: 64 8³, 64 16³ or 2 128³; the cpu's references run
 * these too, and every test daemon starts with them). */
static probe_shape probe_of(const probe_key *k, bool gpu)
{
    if (k->op == CR_OP_HISTOGRAM)
        return (probe_shape){0, k->cls == CR_CLASS_LARGE ? (gpu ? (int64_t)64 << 20 : (int64_t)4 << 20) : 65536, 0, 0};
    switch (k->cls) {
    case CR_CLASS_LARGE: {
        int64_t side = gpu ? 2048 : 256;
        return (probe_shape){0, side, side, side};
    }
    case CR_CLASS_TALL: return gpu ? (probe_shape){0, 262144, 64, 64} : (probe_shape){0, 20000, 30, 30};
    case CR_CLASS_STACK_TINY: return gpu ? (probe_shape){16384, 16, 16, 16} : (probe_shape){64, 8, 8, 8};
    case CR_CLASS_STACK_SMALL: return gpu ? (probe_shape){2048, 32, 32, 32} : (probe_shape){64, 16, 16, 16};
    case CR_CLASS_STACK_LARGE: return gpu ? (probe_shape){64, 256, 256, 256} : (probe_shape){2, 128, 128, 128};
    default: return (probe_shape){0, 64, 64, 64};
    }
}

/* A stack of `count` full matrices per operand, one batch dimension. */
static void plan_stack(cr_task *t, int64_t count)
{
    int nrank[CR_STACK_OPERANDS] = {1, t->op == CR_OP_GEMM ? 1 : -1, -1};
    int64_t ndims[CR_STACK_OPERANDS][CR_STACK_DIMS] = {{count}, {count}, {0}};
    cr_stack_plan(&t->stack, 1, &count, nrank, ndims);
}

static void *random_buffer(probe_bufs *pb, int i, size_t n, cr_dtype dt, uint64_t *seed)
{
    void *p = probe_alloc(pb, i, n * cr_dtype_size(dt));
    if (p)
        fill_random(p, n, dt, seed);
    return p;
}

/* Builds a probe task with random inputs; its buffers are in bufs. */
static int make_probe(const probe_key *k, bool gpu, cr_task *t, probe_bufs *bufs, char *shape, size_t sl)
{
    probe_shape p = probe_of(k, gpu);
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    memset(t, 0, sizeof *t);
    t->op = k->op;
    t->dtype = k->dtype;
    t->precision = k->prec;
    if (k->op == CR_OP_HISTOGRAM) {
        void *data = random_buffer(bufs, 0, (size_t)p.m, k->dtype, &seed);
        void *counts = probe_alloc(bufs, 1, 256 * sizeof(uint64_t));
        if (!data || !counts)
            return -1;
        bool u8 = k->dtype == CR_DT_U8;
        t->u.hist = (cr_hist_task){.count = p.m, .data = data, .bins = u8 ? 256 : 100,
                                   .lo = u8 ? 0 : -1, .hi = u8 ? 256 : 1, .counts = counts};
        snprintf(shape, sl, "%lld", (long long)p.m);
        return 0;
    }
    size_t mats = (size_t)(p.count ? p.count : 1);
    bool gemm = k->op == CR_OP_GEMM;
    size_t na = mats * (size_t)(p.m * (gemm ? p.k : p.n)), nb = gemm ? mats * (size_t)(p.k * p.n) : 0;
    size_t nc = mats * (size_t)(gemm ? p.m * p.n : p.n * p.n);
    void *a = random_buffer(bufs, 0, na, k->dtype, &seed), *b = random_buffer(bufs, 1, nb, k->dtype, &seed);
    void *c = probe_alloc(bufs, 2, nc * cr_dtype_size(k->dtype));
    if (!a || !b || !c)
        return -1;
    if (gemm)
        t->u.gemm = (cr_gemm_task){.m = p.m, .n = p.n, .k = p.k, .alpha = 1.0, .beta = 0.0, .a = a, .b = b, .c_out = c};
    else
        t->u.ata = (cr_ata_task){.m = p.m, .n = p.n, .a = a, .c_out = c};
    if (p.count)
        plan_stack(t, p.count);
    int at = p.count ? snprintf(shape, sl, "%lldx", (long long)p.count) : 0;
    snprintf(shape + at, sl - (size_t)at, gemm ? "%lldx%lldx%lld" : "%lldx%lld", (long long)p.m, (long long)p.n,
             (long long)p.k);
    return 0;
}

static double tolerance(const probe_key *k, const cr_kernel *ki)
{
    if (k->op == CR_OP_HISTOGRAM)
        return 0.0;
    if (ki->precision == CR_PREC_TF32 || k->dtype == CR_DT_BF16) /* 8-bit significands */
        return 1e-2;
    if (k->dtype == CR_DT_F16) /* the answer's own rounding is 2^-11 of each element */
        return 2e-3;
    return k->dtype == CR_DT_F64 ? 1e-10 : 1e-4;
}

/* Median-free but fair: one warm-up run, then the best of three kernel times. */
static cr_status time_kernel(const cr_backend *b, cr_worker *w, cr_task *t, double *ms, char *err,
                             size_t errlen)
{
    *ms = INFINITY;
    for (int r = 0; r < 4; r++) {
        cr_timings tm = {0};
        cr_status st = b->run(w, t, &tm, err, errlen);
        if (st != CR_OK)
            return st;
        if (r > 0)
            *ms = fmin(*ms, tm.kernel_ms);
    }
    return CR_OK;
}

static cr_status measure_row(const cr_backend *b, cr_worker *w, bool gpu, const probe_key *k,
                             cr_auto_row *row, char *err, size_t errlen)
{
    probe_bufs bufs = {.b = b};
    void *ref_out = NULL;
    cr_task t;
    cr_status st = CR_OK;
    size_t n = 0;
    const cr_kernel *ks = cr_kernels(b, &n);
    bool large = k->cls == CR_CLASS_LARGE || k->cls == CR_CLASS_TALL || k->cls == CR_CLASS_STACK_LARGE;
    *row = (cr_auto_row){.op = k->op, .dtype = k->dtype, .large = large, .cls = k->cls, .precision = k->prec,
                         .ms = INFINITY};
    if (make_probe(k, gpu, &t, &bufs, row->probe, sizeof row->probe) < 0 ||
        !(ref_out = malloc(cr_task_output_bytes(&t)))) {
        st = CR_E_NOMEM_HOST;
        goto cleanup;
    }
    const cr_kernel *ref = cr_kernel_reference(b, &t);
    if (!ref)
        goto cleanup; /* this backend does not do this dtype: no row to pick from */
    t.kernel = ref;
    if ((st = b->run(w, &t, &(cr_timings){0}, err, errlen)) != CR_OK)
        goto cleanup;
    memcpy(ref_out, cr_task_output(&t), cr_task_output_bytes(&t));
    for (size_t i = 0; i < n; i++) {
        if (!cr_kernel_candidate(&ks[i], &t, false))
            continue;
        double ms;
        t.kernel = &ks[i];
        memset(cr_task_output(&t), 0xff, cr_task_output_bytes(&t)); /* NaN: an output left unwritten fails */
        cr_status ks_st = time_kernel(b, w, &t, &ms, err, errlen);
        if (ks_st == CR_E_FATAL) {
            st = ks_st;
            goto cleanup;
        }
        if (ks_st != CR_OK || cr_max_rel_error(&t, cr_task_output(&t), ref_out) > tolerance(k, &ks[i]))
            continue; /* a kernel that fails or is wrong here is never picked */
        if (ms < row->ms) {
            row->ms = ms;
            row->kernel = &ks[i];
        }
    }
    if (!row->kernel)
        row->kernel = ref;
cleanup:
    if (!row->kernel)
        row->ms = 0.0;
    probe_free(&bufs);
    free(ref_out);
    return st;
}

cr_status cr_autotune(const cr_backend *b, cr_worker *w, bool gpu, cr_auto_table *table, char *err,
                      size_t errlen)
{
#define S CR_CLASS_SMALL
#define L CR_CLASS_LARGE
#define ST CR_CLASS_STACK_TINY
#define SS CR_CLASS_STACK_SMALL
#define SL CR_CLASS_STACK_LARGE
#define F32 CR_DT_F32
#define DEF CR_PREC_DEFAULT
#define TF32 CR_PREC_TF32
    static const probe_key keys[] = {
        {CR_OP_GEMM, F32, DEF, S}, {CR_OP_GEMM, F32, DEF, L}, {CR_OP_GEMM, F32, TF32, S}, {CR_OP_GEMM, F32, TF32, L},
        {CR_OP_GEMM, CR_DT_F64, DEF, S}, {CR_OP_GEMM, CR_DT_F64, DEF, L},
        {CR_OP_GEMM, CR_DT_F16, DEF, S}, {CR_OP_GEMM, CR_DT_F16, DEF, L},
        {CR_OP_GEMM, CR_DT_BF16, DEF, S}, {CR_OP_GEMM, CR_DT_BF16, DEF, L},
        {CR_OP_ATA, F32, DEF, S}, {CR_OP_ATA, F32, DEF, L}, {CR_OP_ATA, CR_DT_F64, DEF, S}, {CR_OP_ATA, CR_DT_F64, DEF, L},
        {CR_OP_HISTOGRAM, CR_DT_U8, DEF, S}, {CR_OP_HISTOGRAM, CR_DT_U8, DEF, L},
        {CR_OP_HISTOGRAM, F32, DEF, S}, {CR_OP_HISTOGRAM, F32, DEF, L},
        {CR_OP_HISTOGRAM, CR_DT_F64, DEF, S}, {CR_OP_HISTOGRAM, CR_DT_F64, DEF, L},
        {CR_OP_ATA, F32, DEF, CR_CLASS_TALL}, {CR_OP_ATA, CR_DT_F64, DEF, CR_CLASS_TALL},
        {CR_OP_GEMM, F32, DEF, ST}, {CR_OP_GEMM, F32, DEF, SS}, {CR_OP_GEMM, F32, DEF, SL},
        {CR_OP_GEMM, F32, TF32, ST}, {CR_OP_GEMM, F32, TF32, SS}, {CR_OP_GEMM, F32, TF32, SL},
        {CR_OP_GEMM, CR_DT_F64, DEF, ST}, {CR_OP_GEMM, CR_DT_F64, DEF, SS}, {CR_OP_GEMM, CR_DT_F64, DEF, SL},
        {CR_OP_GEMM, CR_DT_F16, DEF, ST}, {CR_OP_GEMM, CR_DT_F16, DEF, SS}, {CR_OP_GEMM, CR_DT_F16, DEF, SL},
        {CR_OP_GEMM, CR_DT_BF16, DEF, ST}, {CR_OP_GEMM, CR_DT_BF16, DEF, SS}, {CR_OP_GEMM, CR_DT_BF16, DEF, SL},
        {CR_OP_ATA, F32, DEF, ST}, {CR_OP_ATA, F32, DEF, SS}, {CR_OP_ATA, F32, DEF, SL},
        {CR_OP_ATA, CR_DT_F64, DEF, ST}, {CR_OP_ATA, CR_DT_F64, DEF, SS}, {CR_OP_ATA, CR_DT_F64, DEF, SL},
    };
#undef S
#undef L
#undef ST
#undef SS
#undef SL
#undef F32
#undef DEF
#undef TF32
    size_t n = sizeof keys / sizeof keys[0];
    cr_auto_row *out = calloc(n, sizeof *out);
    if (!out)
        return CR_E_NOMEM_HOST;
    for (size_t i = 0; i < n; i++) {
        cr_status st = measure_row(b, w, gpu, &keys[i], &out[i], err, errlen);
        if (st != CR_OK) {
            free(out);
            return st;
        }
    }
    table->rows = out;
    table->n = n;
    return CR_OK;
}
