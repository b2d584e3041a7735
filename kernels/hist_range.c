/* numpy.histogram's range rules; see hist_range.h. One min/max loop per dtype so each compiles
 * to a plain vectorizable scan. */
#include "kernels/hist_range.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

cr_range_status cr_hist_range_fix(double *lo, double *hi, cr_dtype dt)
{
    if (!isfinite(*lo) || !isfinite(*hi))
        return CR_RANGE_NOT_FINITE;
    if (*lo > *hi)
        return CR_RANGE_ORDER;
    if (*lo == *hi) {
        *lo -= 0.5;
        *hi += 0.5;
    }
    if (!isfinite(*hi - *lo))
        return CR_RANGE_SPAN;
    if (dt == CR_DT_F32 && (fabs(*lo) > FLT_MAX || fabs(*hi) > FLT_MAX))
        return CR_RANGE_F32;
    return CR_RANGE_OK;
}

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

/* Floats: a NaN anywhere makes the range undefined, so look for one on the way. Equal ends are
 * widened here, in T, as numpy widens a float32 array's min and max. */
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

cr_range_status cr_hist_range_of_data(const void *d, int64_t n, cr_dtype dt, double *lo, double *hi)
{
    if (n == 0) {
        *lo = 0.0;
        *hi = 1.0;
        return CR_RANGE_OK;
    }
    switch (dt) {
    case CR_DT_F32:
        if (minmax_f32(d, n, lo, hi) != 0)
            return CR_RANGE_DATA;
        break;
    case CR_DT_F64:
        if (minmax_f64(d, n, lo, hi) != 0)
            return CR_RANGE_DATA;
        break;
    case CR_DT_U8: minmax_u8(d, n, lo, hi); break;
    case CR_DT_I8: minmax_i8(d, n, lo, hi); break;
    case CR_DT_U16: minmax_u16(d, n, lo, hi); break;
    case CR_DT_I16: minmax_i16(d, n, lo, hi); break;
    case CR_DT_U32: minmax_u32(d, n, lo, hi); break;
    case CR_DT_I32: minmax_i32(d, n, lo, hi); break;
    case CR_DT_U64: minmax_u64(d, n, lo, hi); break;
    case CR_DT_I64: minmax_i64(d, n, lo, hi); break;
    default: return CR_RANGE_DATA;
    }
    return cr_hist_range_fix(lo, hi, dt); /* integer data widens in float64, as numpy does */
}

void cr_hist_range_explain(cr_range_status s, double lo, double hi, char *out, size_t n)
{
    switch (s) {
    case CR_RANGE_OK: snprintf(out, n, "range [%g, %g] is valid", lo, hi); break;
    case CR_RANGE_NOT_FINITE: snprintf(out, n, "range [%g, %g] is not finite", lo, hi); break;
    case CR_RANGE_ORDER: snprintf(out, n, "range [%g, %g] must have lo <= hi", lo, hi); break;
    case CR_RANGE_SPAN:
        snprintf(out, n, "range [%g, %g] spans more than a double holds: there are no bin edges", lo, hi);
        break;
    case CR_RANGE_F32:
        snprintf(out, n, "range [%g, %g] is not representable in float32, the data's type", lo, hi);
        break;
    case CR_RANGE_DATA:
        snprintf(out, n, "the data holds NaN or infinity, so it has no default range; give one");
        break;
    }
}

/* Blocks of 1024 are scanned 16 bytes at a time with a branch-free OR of NaN masks (GCC's
 * vector extensions: -O2 left the plain loop scalar for doubles), and only a block that holds
 * a NaN is searched for its first one. Integers hold none. */
#define NAN_SCAN_BLOCK 1024

typedef float f32x4 __attribute__((vector_size(16)));
typedef int32_t i32x4 __attribute__((vector_size(16)));
typedef double f64x2 __attribute__((vector_size(16)));
typedef int64_t i64x2 __attribute__((vector_size(16)));

#define DEFINE_FIRST_NAN(name, T, VT, MT)                                                       \
    static bool block_has_nan_##name(const T *p)                                                \
    {                                                                                           \
        MT bad = {0};                                                                           \
        for (size_t i = 0; i < NAN_SCAN_BLOCK; i += sizeof(VT) / sizeof(T)) {                   \
            VT v;                                                                               \
            memcpy(&v, p + i, sizeof v); /* any alignment */                                    \
            bad |= v != v;                                                                      \
        }                                                                                       \
        for (size_t k = 1; k < sizeof(VT) / sizeof(T); k++)                                     \
            bad[0] |= bad[k];                                                                   \
        return bad[0] != 0;                                                                     \
    }                                                                                           \
    static int64_t first_nan_##name(const T *p, int64_t count)                                  \
    {                                                                                           \
        int64_t at = 0;                                                                         \
        while (count - at >= NAN_SCAN_BLOCK && !block_has_nan_##name(p + at))                   \
            at += NAN_SCAN_BLOCK;                                                               \
        for (; at < count; at++)                                                                \
            if (isnan(p[at]))                                                                   \
                return at;                                                                      \
        return -1;                                                                              \
    }
DEFINE_FIRST_NAN(f32, float, f32x4, i32x4)
DEFINE_FIRST_NAN(f64, double, f64x2, i64x2)

int64_t cr_hist_first_nan(const void *data, int64_t count, cr_dtype dt)
{
    return dt == CR_DT_F32 ? first_nan_f32(data, count) : dt == CR_DT_F64 ? first_nan_f64(data, count) : -1;
}

cr_dtype cr_hist_edge_dtype(cr_dtype dt)
{
    return dt == CR_DT_F32 ? CR_DT_F32 : CR_DT_F64;
}
