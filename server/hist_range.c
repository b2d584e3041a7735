/* The default histogram range; see hist_range.h. One loop per dtype so each compiles to a
 * plain vectorizable min/max scan. */
#include "hist_range.h"

#include <math.h>

#define MINMAX(T, NAME)                                                                         \
    static void NAME(const T *d, int64_t n, double *lo, double *hi)                             \
    {                                                                                           \
        T mn = d[0], mx = d[0];                                                                 \
        for (int64_t i = 1; i < n; i++) {                                                       \
            mn = d[i] < mn ? d[i] : mn;                                                         \
            mx = d[i] > mx ? d[i] : mx;                                                         \
        }                                                                                       \
        *lo = (double)mn;                                                                       \
        *hi = (double)mx;                                                                       \
    }

MINMAX(uint8_t, minmax_u8)
MINMAX(int8_t, minmax_i8)
MINMAX(uint16_t, minmax_u16)
MINMAX(int16_t, minmax_i16)
MINMAX(uint32_t, minmax_u32)
MINMAX(int32_t, minmax_i32)
MINMAX(uint64_t, minmax_u64)
MINMAX(int64_t, minmax_i64)

/* Floats: a NaN anywhere makes the range undefined, so look for one on the way. */
#define MINMAX_FLOAT(T, NAME)                                                                   \
    static int NAME(const T *d, int64_t n, double *lo, double *hi)                              \
    {                                                                                           \
        T mn = d[0], mx = d[0];                                                                 \
        int nan = 0;                                                                            \
        for (int64_t i = 0; i < n; i++) {                                                       \
            nan |= d[i] != d[i];                                                                \
            mn = d[i] < mn ? d[i] : mn;                                                         \
            mx = d[i] > mx ? d[i] : mx;                                                         \
        }                                                                                       \
        if (nan || !isfinite(mn) || !isfinite(mx))                                              \
            return -1;                                                                          \
        if (mn == mx) {                                                                         \
            mn -= (T)0.5;                                                                       \
            mx += (T)0.5;                                                                       \
        }                                                                                       \
        *lo = (double)mn;                                                                       \
        *hi = (double)mx;                                                                       \
        return 0;                                                                               \
    }

MINMAX_FLOAT(float, minmax_f32)
MINMAX_FLOAT(double, minmax_f64)

int cr_hist_default_range(const cr_hist_task *h, cr_dtype dt, double *lo, double *hi)
{
    if (h->count == 0) {
        *lo = 0.0;
        *hi = 1.0;
        return 0;
    }
    const void *d = h->data;
    int64_t n = h->count;
    switch (dt) {
    case CR_DT_F32: return minmax_f32(d, n, lo, hi);
    case CR_DT_F64: return minmax_f64(d, n, lo, hi);
    case CR_DT_U8: minmax_u8(d, n, lo, hi); break;
    case CR_DT_I8: minmax_i8(d, n, lo, hi); break;
    case CR_DT_U16: minmax_u16(d, n, lo, hi); break;
    case CR_DT_I16: minmax_i16(d, n, lo, hi); break;
    case CR_DT_U32: minmax_u32(d, n, lo, hi); break;
    case CR_DT_I32: minmax_i32(d, n, lo, hi); break;
    case CR_DT_U64: minmax_u64(d, n, lo, hi); break;
    case CR_DT_I64: minmax_i64(d, n, lo, hi); break;
    default: return -1;
    }
    if (*lo == *hi) { /* numpy widens in float64 for integer data */
        *lo -= 0.5;
        *hi += 0.5;
    }
    return 0;
}
