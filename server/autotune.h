/* The table behind "kernel": "auto": at start-up every kernel runs on probe inputs of each size
 * class; the fastest one whose result matches the reference wins. Measured, not guessed. */
#ifndef CRUNCHD_AUTOTUNE_H
#define CRUNCHD_AUTOTUNE_H

#include "engine.h"

/* Measures on worker w. *rows is malloc'd. large_scale picks the probe sizes (GPU: big). */
cr_status cr_autotune(const cr_backend *b, cr_worker *w, bool gpu, cr_auto_row **rows,
                      size_t *n_rows, char *err, size_t errlen);
/* The kernel for a task from the table; the reference kernel when no row matches. */
const char *cr_autotune_pick(const cr_backend *b, const cr_auto_row *rows, size_t n_rows,
                             const cr_task *t);

#endif
