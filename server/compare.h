/* "kernel": "all": every kernel of the op on the same input, against the backend's reference. */
#ifndef CRUNCHD_COMPARE_H
#define CRUNCHD_COMPARE_H

#include "../kernels/backend.h"
#include "job.h"

/* The reference kernel of the backend for this task's op and dtype; NULL if none. */
const cr_kernel_info *cr_reference_kernel(const cr_backend *b, const cr_task *t);
/* Kernels that can run this task (dtype supported; tf32 kernels only for float32). */
bool cr_kernel_accepts(const cr_kernel_info *k, const cr_task *t);

/* Runs the reference into the task's output (its timings in *tm), then every other kernel into
 * scratch, filling j->compare. Returns the reference run's status. */
cr_status cr_run_compare(const cr_backend *b, cr_worker *w, cr_job *j, cr_timings *tm,
                         char *err, size_t errlen);

#endif
