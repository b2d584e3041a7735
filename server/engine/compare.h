/* "kernel": "all": every kernel of the op on the same input, against the backend's reference. */
#ifndef CRUNCHD_COMPARE_H
#define CRUNCHD_COMPARE_H

#include "kernels/backend.h"
#include "server/engine/job.h"

/* Runs the reference into the task's output (its timings in *tm), then every other candidate of
 * the registry into scratch, filling j->compare. Returns the reference run's status. */
cr_status cr_run_compare(const cr_backend *b, cr_worker *w, cr_job *j, cr_timings *tm,
                         char *err, size_t errlen);

#endif
