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
    bool large;
} probe_key;

static void fill_random(void *p, size_t n, cr_dtype dt, unsigned *seed)
{
    for (size_t i = 0; i < n; i++) {
        double v = (double)rand_r(seed) / RAND_MAX * 2.0 - 1.0;
        if (dt == CR_DT_F32)
            ((float *)p)[i] = (float)v;
        else if (dt == CR_DT_F64)
            ((double *)p)[i] = v;
        else if (dt == CR_DT_F16 || dt == CR_DT_BF16)
            ((uint16_t *)p)[i] = cr_half_from_double(dt, v);
        else
            ((uint8_t *)p)[i] = (uint8_t)rand_r(seed);
    }
}

/* Builds a probe task with random inputs; its buffers are in bufs[0..2]. */
static int make_probe(const probe_key *k, bool gpu, cr_task *t, void *bufs[3], char *shape, size_t sl)
{
    int64_t side = k->large ? (gpu ? 2048 : 256) : 64;
    int64_t count = k->large ? (gpu ? (int64_t)64 << 20 : (int64_t)4 << 20) : 65536;
    unsigned seed = 12345;
    size_t es = cr_dtype_size(k->dtype);
    memset(t, 0, sizeof *t);
    t->op = k->op;
    t->dtype = k->dtype;
    t->precision = k->prec;
    if (k->op == CR_OP_HISTOGRAM) {
        bufs[0] = malloc((size_t)count * es);
        bufs[1] = malloc(256 * sizeof(uint64_t));
        if (!bufs[0] || !bufs[1])
            return -1;
        fill_random(bufs[0], (size_t)count, k->dtype, &seed);
        bool u8 = k->dtype == CR_DT_U8;
        t->u.hist = (cr_hist_task){.count = count, .data = bufs[0], .bins = u8 ? 256 : 100,
                                   .lo = u8 ? 0 : -1, .hi = u8 ? 256 : 1, .counts = bufs[1]};
        snprintf(shape, sl, "%lld", (long long)count);
        return 0;
    }
    size_t nn = (size_t)side * (size_t)side;
    for (int i = 0; i < 3; i++)
        if (!(bufs[i] = malloc(nn * es)))
            return -1;
    fill_random(bufs[0], nn, k->dtype, &seed);
    fill_random(bufs[1], nn, k->dtype, &seed);
    if (k->op == CR_OP_GEMM)
        t->u.gemm = (cr_gemm_task){.m = side, .n = side, .k = side, .alpha = 1.0, .beta = 0.0,
                                   .a = bufs[0], .b = bufs[1], .c_out = bufs[2]};
    else
        t->u.ata = (cr_ata_task){.m = side, .n = side, .a = bufs[0], .c_out = bufs[2]};
    snprintf(shape, sl, k->op == CR_OP_GEMM ? "%lldx%lldx%lld" : "%lldx%lld", (long long)side,
             (long long)side, (long long)side);
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
    void *bufs[3] = {0}, *ref_out = NULL;
    cr_task t;
    cr_status st = CR_OK;
    size_t n = 0;
    const cr_kernel *ks = cr_kernels(b, &n);
    *row = (cr_auto_row){.op = k->op, .dtype = k->dtype, .large = k->large, .precision = k->prec,
                         .ms = INFINITY};
    if (make_probe(k, gpu, &t, bufs, row->probe, sizeof row->probe) < 0 ||
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
    for (int i = 0; i < 3; i++)
        free(bufs[i]);
    free(ref_out);
    return st;
}

cr_status cr_autotune(const cr_backend *b, cr_worker *w, bool gpu, cr_auto_table *table, char *err,
                      size_t errlen)
{
    static const probe_key keys[] = {
        {CR_OP_GEMM, CR_DT_F32, CR_PREC_DEFAULT, false}, {CR_OP_GEMM, CR_DT_F32, CR_PREC_DEFAULT, true},
        {CR_OP_GEMM, CR_DT_F32, CR_PREC_TF32, false},    {CR_OP_GEMM, CR_DT_F32, CR_PREC_TF32, true},
        {CR_OP_GEMM, CR_DT_F64, CR_PREC_DEFAULT, false}, {CR_OP_GEMM, CR_DT_F64, CR_PREC_DEFAULT, true},
        {CR_OP_GEMM, CR_DT_F16, CR_PREC_DEFAULT, false}, {CR_OP_GEMM, CR_DT_F16, CR_PREC_DEFAULT, true},
        {CR_OP_GEMM, CR_DT_BF16, CR_PREC_DEFAULT, false}, {CR_OP_GEMM, CR_DT_BF16, CR_PREC_DEFAULT, true},
        {CR_OP_ATA, CR_DT_F32, CR_PREC_DEFAULT, false},  {CR_OP_ATA, CR_DT_F32, CR_PREC_DEFAULT, true},
        {CR_OP_ATA, CR_DT_F64, CR_PREC_DEFAULT, false},  {CR_OP_ATA, CR_DT_F64, CR_PREC_DEFAULT, true},
        {CR_OP_HISTOGRAM, CR_DT_U8, CR_PREC_DEFAULT, false},
        {CR_OP_HISTOGRAM, CR_DT_U8, CR_PREC_DEFAULT, true},
        {CR_OP_HISTOGRAM, CR_DT_F32, CR_PREC_DEFAULT, false},
        {CR_OP_HISTOGRAM, CR_DT_F32, CR_PREC_DEFAULT, true},
        {CR_OP_HISTOGRAM, CR_DT_F64, CR_PREC_DEFAULT, false},
        {CR_OP_HISTOGRAM, CR_DT_F64, CR_PREC_DEFAULT, true},
    };
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
