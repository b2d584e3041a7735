/* numpy.histogram's range rules, the one implementation: every decoder applies them to what a
 * client sends, and both backends check a task's range with them before counting.
 *   - an explicit range must be finite with lo <= hi; lo == hi is widened to [lo-0.5, hi+0.5]
 *     (in double, as numpy widens Python floats);
 *   - the default range is [min, max] of the data, widened the same way when they are equal
 *     (in the data's precision, as numpy does for a float32 array), [0, 1] for no data, and
 *     undefined when the data holds NaN or infinity (numpy refuses that range);
 *   - hi - lo must be a finite double, or there are no edges to bin by;
 *   - float32 data meets the range as float32 (numpy compares in the data's type), so its ends
 *     must be float32 numbers. */
#ifndef CRUNCHD_HIST_RANGE_H
#define CRUNCHD_HIST_RANGE_H

#include <stdint.h>

#include "kernels/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    CR_RANGE_OK,
    CR_RANGE_NOT_FINITE, /* lo or hi is NaN or infinite */
    CR_RANGE_ORDER,      /* lo > hi */
    CR_RANGE_SPAN,       /* hi - lo overflows a double */
    CR_RANGE_F32,        /* float32 data and an end beyond float32 */
    CR_RANGE_DATA,       /* default range: the data holds NaN or infinity */
} cr_range_status;

/* Checks an explicit range for data of dtype dt, widening an empty one in place. */
cr_range_status cr_hist_range_fix(double *lo, double *hi, cr_dtype dt);

/* numpy's default range of count elements of dtype dt, checked as an explicit one would be. */
cr_range_status cr_hist_range_of_data(const void *data, int64_t count, cr_dtype dt, double *lo, double *hi);

/* A sentence for a failed check, naming the range ("range [1, 0] has lo > hi"). */
void cr_hist_range_explain(cr_range_status s, double lo, double hi, char *out, size_t n);
/* The first NaN of float data, or -1 (none, or not a float dtype). NaN has no bin: numpy drops it
 * from a histogram with a range and the client would never know, so every decoder refuses it. */
int64_t cr_hist_first_nan(const void *data, int64_t count, cr_dtype dt);
/* The dtype of numpy's bin edges for data of dtype dt: float32 data has float32 edges, every
 * other dtype float64 ones (np.histogram of uint8 data gives float64 edges 0..256). */
cr_dtype cr_hist_edge_dtype(cr_dtype dt);

#ifdef __cplusplus
}
#endif

#endif
