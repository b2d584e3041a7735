/* The table behind "kernel": "auto": at start-up every kernel runs on probe inputs of each size
 * class; the fastest one whose result matches the reference wins. Measured, not guessed. The
 * registry (kernels/registry.h) owns the table's type and picks from it. */
#ifndef CRUNCHD_AUTOTUNE_H
#define CRUNCHD_AUTOTUNE_H

#include <stdbool.h>

#include "kernels/registry.h"

/* Measures on worker w into *table (rows malloc'd). gpu picks the probe sizes (GPU: big). */
cr_status cr_autotune(const cr_backend *b, cr_worker *w, bool gpu, cr_auto_table *table, char *err,
                      size_t errlen);

#endif
