/* GEMM on the CPU: OpenBLAS (the fast one) and a plain C reference that "all" mode compares
 * every other kernel against. Both follow BLAS's rule that beta == 0 (or no c_in) never reads C,
 * so NaNs there do not leak into the result; the reference also reads neither A nor B when
 * alpha == 0, which OpenBLAS 0.3.21 does not promise (its SGEMM and DGEMM gave NaN for NaN A and
 * B times alpha 0 on the build machine). A stack runs matrix by matrix (cpu_stack.c). */
#include "kernels/cpu/cpu_internal.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

static int fits_blasint(int64_t v) { return (int64_t)(blasint)v == v; }

static cr_status gemm_openblas_one(const cr_task *t, char *err, size_t errlen)
{
    const cr_gemm_task *g = &t->u.gemm;
    if (cpu_is_half(t->dtype))
        return cpu_gemm_half(t, gemm_openblas_one, CR_DT_F32, err, errlen);
    if (!fits_blasint(g->m) || !fits_blasint(g->n) || !fits_blasint(g->k))
        return cpu_fail(CR_E_UNSUPPORTED, err, errlen,
                        "gemm: openblas takes %zu-byte dimensions; use the reference kernel",
                        sizeof(blasint));
    blasint m = (blasint)g->m, n = (blasint)g->n, k = (blasint)g->k;
    blasint lda = g->trans_a ? m : k, ldb = g->trans_b ? k : n;
    enum CBLAS_TRANSPOSE ta = g->trans_a ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE tb = g->trans_b ? CblasTrans : CblasNoTrans;
    /* No c_in means C is zero, which is what beta = 0 tells BLAS without reading c_out. */
    double beta = g->c_in != NULL ? g->beta : 0.0;
    if (beta != 0.0 && g->c_in != g->c_out)
        memmove(g->c_out, g->c_in, (size_t)(g->m * g->n) * cr_dtype_size(t->dtype));
    if (t->dtype == CR_DT_F64)
        cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, g->alpha, g->a, lda, g->b, ldb, beta,
                    g->c_out, n);
    else
        cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, (float)g->alpha, g->a, lda, g->b, ldb,
                    (float)beta, g->c_out, n);
    return CR_OK;
}

cr_status cpu_gemm_openblas(const cr_task *t, char *err, size_t errlen)
{
    if (t->stack.rank > 0)
        return cpu_stack_run(t, gemm_openblas_one, CPU_STACK_BLAS, err, errlen);
    return gemm_openblas_one(t, err, errlen);
}

/* Row i of op(A), widened to double. */
static void load_a_row(const cr_gemm_task *g, int f64, int64_t i, double *arow)
{
    for (int64_t p = 0; p < g->k; p++)
        arow[p] = cpu_load(g->a, g->trans_a ? p * g->m + i : i * g->k + p, f64);
}

/* acc = arow · op(B): a dot per column when B is stored transposed (its rows are op(B)'s
 * columns, contiguous), otherwise a sum of B's rows, which is also contiguous. */
static void row_times_b(const cr_gemm_task *g, int f64, const double *arow, double *acc)
{
    if (g->trans_b) {
        for (int64_t j = 0; j < g->n; j++)
            acc[j] = f64 ? cpu_dot_f64(arow, (const double *)g->b + j * g->k, g->k)
                         : cpu_dot_f32(arow, (const float *)g->b + j * g->k, g->k);
        return;
    }
    memset(acc, 0, (size_t)g->n * sizeof *acc);
    for (int64_t p = 0; p < g->k; p++) {
        if (f64)
            cpu_axpy_f64(arow[p], (const double *)g->b + p * g->n, acc, g->n);
        else
            cpu_axpy_f32(arow[p], (const float *)g->b + p * g->n, acc, g->n);
    }
}

static void store_c_row(const cr_gemm_task *g, int f64, int64_t i, const double *acc)
{
    int read_c = g->beta != 0.0 && g->c_in != NULL;
    for (int64_t j = 0; j < g->n; j++) {
        double c = g->alpha != 0.0 ? g->alpha * acc[j] : 0.0;
        if (read_c)
            c += g->beta * cpu_load(g->c_in, i * g->n + j, f64);
        cpu_store(g->c_out, i * g->n + j, c, f64);
    }
}

static cr_status gemm_reference_one(const cr_task *t, char *err, size_t errlen)
{
    const cr_gemm_task *g = &t->u.gemm;
    if (cpu_is_half(t->dtype))
        return cpu_gemm_half(t, gemm_reference_one, CR_DT_F64, err, errlen);
    int f64 = t->dtype == CR_DT_F64;
    cr_status s = CR_OK;
    double *arow = malloc((size_t)g->k * sizeof *arow);
    double *acc = malloc((size_t)g->n * sizeof *acc);
    if (arow == NULL || acc == NULL) {
        s = cpu_fail(CR_E_NOMEM_HOST, err, errlen, "gemm reference: out of host memory");
        goto cleanup;
    }
    for (int64_t i = 0; i < g->m; i++) {
        if (cpu_cancelled(t)) {
            s = cpu_fail(CR_E_CANCELLED, err, errlen, "gemm reference: cancelled at row %lld",
                         (long long)i);
            goto cleanup;
        }
        if (g->alpha != 0.0) {
            load_a_row(g, f64, i, arow);
            row_times_b(g, f64, arow, acc);
        }
        store_c_row(g, f64, i, acc);
    }
cleanup:
    free(arow);
    free(acc);
    return s;
}

cr_status cpu_gemm_reference(const cr_task *t, char *err, size_t errlen)
{
    if (t->stack.rank > 0)
        return cpu_stack_run(t, gemm_reference_one, CPU_STACK_PLAIN, err, errlen);
    return gemm_reference_one(t, err, errlen);
}
