/* Defensive task checks for the CPU backend, and the one way it reports an error. The server
 * validates requests before they get here; these checks exist so that a caller bug becomes a
 * CR_E_INVALID with a message rather than an out-of-bounds read. */
#include "kernels/cpu/cpu_internal.h"
#include "kernels/hist_range.h"
#include "kernels/stack.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

cr_status cpu_fail(cr_status s, char *err, size_t errlen, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return s;
}

/* True when a·b·c elements of `es` bytes can be addressed without int64 overflow. */
static int fits_bytes(int64_t a, int64_t b, int64_t c, size_t es)
{
    int64_t ab, abc, bytes;
    return !__builtin_mul_overflow(a, b, &ab) && !__builtin_mul_overflow(ab, c, &abc) &&
           !__builtin_mul_overflow(abc, (int64_t)es, &bytes);
}

/* An empty stack (a batch dimension of 0) computes nothing: its buffers may be NULL. */
static bool empty_stack(const cr_task *t) { return t->stack.rank > 0 && t->stack.count == 0; }

static cr_status validate_gemm(const cr_gemm_task *g, size_t es, bool empty, char *err, size_t errlen)
{
    if (g->m < 1 || g->n < 1 || g->k < 1)
        return cpu_fail(CR_E_INVALID, err, errlen,
                        "gemm: m, n, k must be >= 1 (got %lld, %lld, %lld)",
                        (long long)g->m, (long long)g->n, (long long)g->k);
    if (!fits_bytes(g->m, g->k, 1, es) || !fits_bytes(g->k, g->n, 1, es) ||
        !fits_bytes(g->m, g->n, 1, es))
        return cpu_fail(CR_E_INVALID, err, errlen, "gemm: matrix sizes overflow 64-bit offsets");
    if (!empty && (g->a == NULL || g->b == NULL || g->c_out == NULL))
        return cpu_fail(CR_E_INVALID, err, errlen, "gemm: a, b and c_out must be provided");
    return CR_OK;
}

static cr_status validate_ata(const cr_ata_task *a, size_t es, bool empty, char *err, size_t errlen)
{
    if (a->m < 1 || a->n < 1)
        return cpu_fail(CR_E_INVALID, err, errlen, "ata: m, n must be >= 1 (got %lld, %lld)",
                        (long long)a->m, (long long)a->n);
    if (!fits_bytes(a->m, a->n, 1, es) || !fits_bytes(a->n, a->n, 1, es))
        return cpu_fail(CR_E_INVALID, err, errlen, "ata: matrix sizes overflow 64-bit offsets");
    if (!empty && (a->a == NULL || a->c_out == NULL))
        return cpu_fail(CR_E_INVALID, err, errlen, "ata: a and c_out must be provided");
    return CR_OK;
}

static cr_status validate_hist(const cr_hist_task *h, cr_dtype dt, size_t es, char *err, size_t errlen)
{
    if (h->count < 0)
        return cpu_fail(CR_E_INVALID, err, errlen, "histogram: count must be >= 0 (got %lld)",
                        (long long)h->count);
    if (h->bins < 1)
        return cpu_fail(CR_E_INVALID, err, errlen, "histogram: bins must be >= 1 (got %d)",
                        (int)h->bins);
    double lo = h->lo, hi = h->hi;
    cr_range_status st = cr_hist_range_fix(&lo, &hi, dt);
    if (st != CR_RANGE_OK) {
        char why[160];
        cr_hist_range_explain(st, h->lo, h->hi, why, sizeof why);
        return cpu_fail(CR_E_INVALID, err, errlen, "histogram: %s", why);
    }
    if (!fits_bytes(h->count, 1, 1, es))
        return cpu_fail(CR_E_INVALID, err, errlen, "histogram: count overflows 64-bit offsets");
    if ((h->count > 0 && h->data == NULL) || h->counts == NULL)
        return cpu_fail(CR_E_INVALID, err, errlen, "histogram: data and counts must be provided");
    return CR_OK;
}

cr_status cpu_validate_task(const cr_task *t, char *err, size_t errlen)
{
    size_t es = cr_dtype_size(t->dtype);
    if (es == 0)
        return cpu_fail(CR_E_UNSUPPORTED, err, errlen, "unknown dtype %d", (int)t->dtype);
    cr_status st = cr_stack_check(t, err, errlen);
    if (st != CR_OK)
        return st;
    switch (t->op) {
    case CR_OP_GEMM:
        return validate_gemm(&t->u.gemm, es, empty_stack(t), err, errlen);
    case CR_OP_ATA:
        return validate_ata(&t->u.ata, es, empty_stack(t), err, errlen);
    case CR_OP_HISTOGRAM:
        return validate_hist(&t->u.hist, t->dtype, es, err, errlen);
    default:
        return cpu_fail(CR_E_INVALID, err, errlen, "unknown op %d", (int)t->op);
    }
}
