/* GEMM of float16/bfloat16 matrices on the CPU: no BLAS multiplies 16-bit floats, so the
 * operands are widened (exactly: every half value is a float), the wide kernel runs, and the
 * result is rounded once back to the input dtype. OpenBLAS widens to float32, which is what the
 * GPU's tensor cores accumulate in; the reference widens to float64, so it stays the more exact
 * of the two. The wide copies are this call's own memory, freed before it returns. */
#include "kernels/cpu/cpu_internal.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/half.h"

/* n half elements widened into a new array of wide_dt (F32 or F64); NULL when out of memory. */
static void *widen(cr_dtype dt, const uint16_t *src, size_t n, cr_dtype wide_dt)
{
    void *dst = malloc((n ? n : 1) * cr_dtype_size(wide_dt));
    if (!dst)
        return NULL;
    if (wide_dt == CR_DT_F32) {
        cr_half_widen(dt, src, dst, n);
        return dst;
    }
    double *d = dst;
    for (size_t i = 0; i < n; i++)
        d[i] = cr_half_to_float(dt, src[i]);
    return dst;
}

static void narrow(cr_dtype dt, const void *src, cr_dtype wide_dt, uint16_t *dst, size_t n)
{
    if (wide_dt == CR_DT_F32) {
        cr_half_narrow(dt, src, dst, n);
        return;
    }
    const double *s = src;
    for (size_t i = 0; i < n; i++)
        dst[i] = cr_half_from_double(dt, s[i]);
}

cr_status cpu_gemm_half(const cr_task *t, cr_status (*wide_kernel)(const cr_task *, char *, size_t),
                        cr_dtype wide_dt, char *err, size_t errlen)
{
    const cr_gemm_task *g = &t->u.gemm;
    if (t->stack.rank > 0) /* a stack comes here matrix by matrix (cpu_stack.c) */
        return cpu_fail(CR_E_INTERNAL, err, errlen, "gemm: a %s stack widened whole", cr_dtype_name(t->dtype));
    size_t na = (size_t)(g->m * g->k), nb = (size_t)(g->k * g->n), nc = (size_t)(g->m * g->n);
    bool read_c = g->c_in != NULL && g->beta != 0.0;
    cr_task w = *t;
    cr_gemm_task *wg = &w.u.gemm;
    w.dtype = wide_dt;
    void *a = widen(t->dtype, g->a, na, wide_dt), *b = widen(t->dtype, g->b, nb, wide_dt);
    void *c = read_c ? widen(t->dtype, g->c_in, nc, wide_dt) : malloc((nc ? nc : 1) * cr_dtype_size(wide_dt));
    cr_status s = CR_E_NOMEM_HOST;
    if (!a || !b || !c) {
        cpu_fail(s, err, errlen, "gemm: out of host memory widening %s operands", cr_dtype_name(t->dtype));
        goto cleanup;
    }
    wg->a = a, wg->b = b, wg->c_out = c;
    wg->c_in = read_c ? c : NULL;
    s = wide_kernel(&w, err, errlen);
    if (s == CR_OK)
        narrow(t->dtype, c, wide_dt, g->c_out, nc);
cleanup:
    free(a);
    free(b);
    free(c);
    return s;
}
