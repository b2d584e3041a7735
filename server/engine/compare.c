/* Compare mode; see compare.h. */
#include "server/engine/compare.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/registry.h"
#include "server/memory.h"

static void fill_row(cr_compare_row *row, const cr_task *t, const cr_kernel *k, cr_status st,
                     const cr_timings *tm, double err)
{
    row->kernel = k;
    row->status = st;
    row->ms = tm->kernel_ms;
    double work = t->op == CR_OP_HISTOGRAM ? cr_task_bytes(t) : cr_task_flops(t);
    row->rate = tm->kernel_ms > 0 ? work / (tm->kernel_ms * 1e-3) / 1e9 : 0.0;
    row->max_rel_error = err;
}

cr_status cr_run_compare(const cr_backend *b, cr_worker *w, cr_job *j, cr_timings *tm,
                         char *err, size_t errlen)
{
    cr_task *t = &j->req.task;
    const cr_kernel *ref = cr_kernel_reference(b, t);
    size_t n = 0;
    const cr_kernel *ks = cr_kernels(b, &n);
    void *ref_out = cr_task_output(t), *scratch = NULL;
    if (!ref) {
        snprintf(err, errlen, "no reference kernel for %s %s", cr_op_name(t->op), cr_dtype_name(t->dtype));
        return CR_E_UNSUPPORTED;
    }
    size_t scratch_bytes = cr_task_output_bytes(t) ? cr_task_output_bytes(t) : 1;
    cr_error budget;
    if (cr_mem_charge(CR_MEM_SCRATCH, scratch_bytes, "compare mode's second output", &budget) < 0) {
        snprintf(err, errlen, "%s", budget.message);
        return CR_E_NOMEM_HOST;
    }
    j->compare = calloc(n, sizeof *j->compare);
    scratch = malloc(scratch_bytes);
    if (!j->compare || !scratch) {
        free(scratch);
        cr_mem_release(CR_MEM_SCRATCH, scratch_bytes);
        snprintf(err, errlen, "out of host memory for compare mode");
        return CR_E_NOMEM_HOST;
    }
    t->kernel = ref;
    cr_status st = b->run(w, t, tm, err, errlen);
    if (st != CR_OK)
        goto cleanup;
    fill_row(&j->compare[j->n_compare++], t, ref, CR_OK, tm, 0.0);
    for (size_t i = 0; i < n; i++) {
        if (&ks[i] == ref || !cr_kernel_candidate(&ks[i], t, true))
            continue;
        cr_timings ktm = {0};
        char kerr[256] = "";
        cr_task kt = *t;
        kt.kernel = &ks[i];
        kt.precision = ks[i].precision == CR_PREC_TF32 ? CR_PREC_TF32 : t->precision;
        cr_task_set_output(&kt, scratch);
        memset(scratch, 0xff, cr_task_output_bytes(t)); /* NaN: unwritten output shows up */
        cr_status ks_st = b->run(w, &kt, &ktm, kerr, sizeof kerr);
        if (ks_st == CR_E_FATAL || ks_st == CR_E_CANCELLED) {
            st = ks_st;
            snprintf(err, errlen, "%s", kerr);
            goto cleanup;
        }
        double e = ks_st == CR_OK ? cr_max_rel_error(t, scratch, ref_out) : 0.0;
        fill_row(&j->compare[j->n_compare++], t, &ks[i], ks_st, &ktm, e);
    }
cleanup:
    free(scratch);
    cr_mem_release(CR_MEM_SCRATCH, scratch_bytes);
    return st;
}
