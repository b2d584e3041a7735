/* AᵀA on the CPU: OpenBLAS SYRK (computes one triangle, half the flops of a GEMM) and a plain C
 * reference. Both write the full symmetric matrix by mirroring the upper triangle, so the two
 * halves are bitwise equal. */
#include "kernels/cpu/cpu_internal.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

static void mirror_upper(void *c, int64_t n, int f64)
{
    for (int64_t i = 1; i < n; i++)
        for (int64_t j = 0; j < i; j++) {
            if (f64)
                ((double *)c)[i * n + j] = ((double *)c)[j * n + i];
            else
                ((float *)c)[i * n + j] = ((float *)c)[j * n + i];
        }
}

static int fits_blasint(int64_t v) { return (int64_t)(blasint)v == v; }

static cr_status ata_openblas_one(const cr_task *t, char *err, size_t errlen)
{
    const cr_ata_task *a = &t->u.ata;
    if (!fits_blasint(a->m) || !fits_blasint(a->n))
        return cpu_fail(CR_E_UNSUPPORTED, err, errlen,
                        "ata: openblas takes %zu-byte dimensions; use the reference kernel",
                        sizeof(blasint));
    blasint m = (blasint)a->m, n = (blasint)a->n;
    /* SYRK's Trans computes XᵀX of a K×N X: A as stored (m×n). Stored transposed (n×m) it is
     * S with A = Sᵀ, so AᵀA = S·Sᵀ: NoTrans. */
    enum CBLAS_TRANSPOSE tr = a->trans_a ? CblasNoTrans : CblasTrans;
    blasint lda = a->trans_a ? m : n;
    if (t->dtype == CR_DT_F64)
        cblas_dsyrk(CblasRowMajor, CblasUpper, tr, n, m, 1.0, a->a, lda, 0.0, a->c_out, n);
    else
        cblas_ssyrk(CblasRowMajor, CblasUpper, tr, n, m, 1.0f, a->a, lda, 0.0f, a->c_out, n);
    mirror_upper(a->c_out, a->n, t->dtype == CR_DT_F64);
    return CR_OK;
}

cr_status cpu_ata_openblas(const cr_task *t, char *err, size_t errlen)
{
    if (t->stack.rank > 0)
        return cpu_stack_run(t, ata_openblas_one, CPU_STACK_BLAS, err, errlen);
    return ata_openblas_one(t, err, errlen);
}

/* acc[j] = Σ_r A(r,i)·A(r,j) for j >= i, with A as stored m×n: a sum of A's row tails. */
static void upper_row_plain(const cr_ata_task *a, int f64, int64_t i, double *acc)
{
    int64_t len = a->n - i;
    memset(acc + i, 0, (size_t)len * sizeof *acc);
    for (int64_t r = 0; r < a->m; r++) {
        int64_t at = r * a->n + i;
        double x = cpu_load(a->a, at, f64);
        if (f64)
            cpu_axpy_f64(x, (const double *)a->a + at, acc + i, len);
        else
            cpu_axpy_f32(x, (const float *)a->a + at, acc + i, len);
    }
}

/* Same, with A stored as S = Aᵀ (n×m): C(i,j) is the dot of S's rows i and j, both contiguous;
 * row i is widened once into srow. */
static void upper_row_trans(const cr_ata_task *a, int f64, int64_t i, double *srow, double *acc)
{
    for (int64_t r = 0; r < a->m; r++)
        srow[r] = cpu_load(a->a, i * a->m + r, f64);
    for (int64_t j = i; j < a->n; j++)
        acc[j] = f64 ? cpu_dot_f64(srow, (const double *)a->a + j * a->m, a->m)
                     : cpu_dot_f32(srow, (const float *)a->a + j * a->m, a->m);
}

static cr_status ata_reference_one(const cr_task *t, char *err, size_t errlen)
{
    const cr_ata_task *a = &t->u.ata;
    int f64 = t->dtype == CR_DT_F64;
    cr_status s = CR_OK;
    double *acc = malloc((size_t)a->n * sizeof *acc);
    double *srow = a->trans_a ? malloc((size_t)a->m * sizeof *srow) : NULL;
    if (acc == NULL || (a->trans_a && srow == NULL)) {
        s = cpu_fail(CR_E_NOMEM_HOST, err, errlen, "ata reference: out of host memory");
        goto cleanup;
    }
    for (int64_t i = 0; i < a->n; i++) {
        if (cpu_cancelled(t)) {
            s = cpu_fail(CR_E_CANCELLED, err, errlen, "ata reference: cancelled at row %lld",
                         (long long)i);
            goto cleanup;
        }
        if (a->trans_a)
            upper_row_trans(a, f64, i, srow, acc);
        else
            upper_row_plain(a, f64, i, acc);
        for (int64_t j = i; j < a->n; j++)
            cpu_store(a->c_out, i * a->n + j, acc[j], f64);
    }
    mirror_upper(a->c_out, a->n, f64);
cleanup:
    free(acc);
    free(srow);
    return s;
}

cr_status cpu_ata_reference(const cr_task *t, char *err, size_t errlen)
{
    if (t->stack.rank > 0)
        return cpu_stack_run(t, ata_reference_one, CPU_STACK_PLAIN, err, errlen);
    return ata_reference_one(t, err, errlen);
}
