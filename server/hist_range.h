/* numpy.histogram's default range: [min, max] of the data, widened by half a unit each side
 * when they are equal (in the data's precision for float32, as numpy computes it), [0, 1] for
 * no data. Shared by the JSON and the binary decoders. */
#ifndef CRUNCHD_HIST_RANGE_H
#define CRUNCHD_HIST_RANGE_H

#include "../kernels/backend.h"

/* -1 when the data holds NaN or infinity (numpy refuses that range too). */
int cr_hist_default_range(const cr_hist_task *h, cr_dtype dt, double *lo, double *hi);

#endif
