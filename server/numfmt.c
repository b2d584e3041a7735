/* Shortest round-trip number formatting, fast for the common range.
 *
 * float32: the value is exact in a double. For |v| in [1e-13, 1e23) it is scaled by an exact
 * power of ten to a 9-digit integer with one correctly rounded operation; then the shortest
 * prefix (1..9 digits, rounded) that reads back to v is chosen, reading back with the exact
 * Clinger fast path (digits < 2^53, power of ten exact in a double). A candidate whose double is
 * exactly halfway between two floats is skipped, since a direct strtof and numpy's
 * double-then-float could read it differently. Outside that range, or if no candidate fits,
 * printf/strtod decide (slow but exact). float64 uses printf("%.15g".."%.17g") with a strtod
 * check only where the extended-precision fast path (same plan, 15..17 digits) cannot decide. */
#include "numfmt.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char digit_pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* Exact in a double up to 1e22. */
static const double pow10_exact[23] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

/* Writes v's decimal digits right-aligned ending at end; returns the start. */
static char *digits_backwards(char *end, uint64_t v)
{
    while (v >= 100) {
        const char *d = digit_pairs + 2 * (v % 100);
        v /= 100;
        *--end = d[1];
        *--end = d[0];
    }
    if (v >= 10) {
        const char *d = digit_pairs + 2 * v;
        *--end = d[1];
        *--end = d[0];
    } else {
        *--end = (char)('0' + v);
    }
    return end;
}

size_t cr_fmt_u64(char *out, uint64_t v)
{
    char tmp[24];
    char *start = digits_backwards(tmp + sizeof tmp, v);
    size_t n = (size_t)(tmp + sizeof tmp - start);
    memcpy(out, start, n);
    out[n] = '\0';
    return n;
}

size_t cr_fmt_i64(char *out, int64_t v)
{
    if (v >= 0)
        return cr_fmt_u64(out, (uint64_t)v);
    out[0] = '-';
    return 1 + cr_fmt_u64(out + 1, (uint64_t)0 - (uint64_t)v);
}

static size_t write_null(char *out)
{
    memcpy(out, "null", 5);
    return 4;
}

/* value = digits * 10^exp10, digits with n_digits digits, no trailing zeros. Fixed notation for
 * a leading-digit exponent in [-5, 16), scientific otherwise (like Python's repr). */
static size_t write_decimal(char *out, int negative, uint64_t digits, int n_digits, int exp10)
{
    char buf[24];
    char *d = digits_backwards(buf + sizeof buf, digits);
    char *o = out;
    int lead = exp10 + n_digits - 1;
    if (negative)
        *o++ = '-';
    if (lead >= -5 && lead < 16) {
        if (exp10 >= 0) { /* integer: digits then zeros */
            memcpy(o, d, (size_t)n_digits);
            o += n_digits;
            memset(o, '0', (size_t)exp10);
            o += exp10;
        } else if (lead >= 0) { /* point inside the digits */
            memcpy(o, d, (size_t)lead + 1);
            o += lead + 1;
            *o++ = '.';
            memcpy(o, d + lead + 1, (size_t)(n_digits - lead - 1));
            o += n_digits - lead - 1;
        } else { /* 0.000ddd */
            *o++ = '0';
            *o++ = '.';
            memset(o, '0', (size_t)(-lead - 1));
            o += -lead - 1;
            memcpy(o, d, (size_t)n_digits);
            o += n_digits;
        }
    } else {
        *o++ = d[0];
        if (n_digits > 1) {
            *o++ = '.';
            memcpy(o, d + 1, (size_t)n_digits - 1);
            o += n_digits - 1;
        }
        *o++ = 'e';
        if (lead < 0) {
            *o++ = '-';
            lead = -lead;
        }
        o = digits_backwards(o + (lead >= 100 ? 3 : lead >= 10 ? 2 : 1), (uint64_t)lead) +
            (lead >= 100 ? 3 : lead >= 10 ? 2 : 1);
    }
    *o = '\0';
    return (size_t)(o - out);
}

/* Exact reading of digits * 10^exp10 as a double (|exp10| <= 22, digits < 2^53). */
static double read_back(uint64_t digits, int exp10)
{
    return exp10 >= 0 ? (double)digits * pow10_exact[exp10] : (double)digits / pow10_exact[-exp10];
}

/* True when d lies exactly halfway between two adjacent normal floats. */
static int is_float_midpoint(double d)
{
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    return (bits & 0x1FFFFFFFull) == 0x10000000ull;
}

/* floor(log10(d)) for d > 0, possibly off by one (callers correct it). */
static int decimal_exponent_estimate(double d)
{
    int e2;
    frexp(d, &e2);
    return (int)floor((e2 - 1) * 0.30102999566398120);
}

/* The fast path; returns 0 when it cannot decide (the caller falls back). Starting at 6 digits
 * loses nothing: a shorter decimal that reads back is within half a float ulp (< 6e-8
 * relative) of v, closer than half a 6-digit unit, so it is the nearest 6-digit decimal with
 * zeros appended, which the trailing-zero trim turns back into it. */
static size_t fmt_f32_fast(char *out, float v)
{
    double d = fabs((double)v);
    if (!(d >= 1e-13 && d < 1e23))
        return 0;
    int k = decimal_exponent_estimate(d);
    for (int p = 6, fixes = 0; p <= 9; p++) {
        int j = p - 1 - k; /* d * 10^j has p digits before the point */
        if (j < -22 || j > 22)
            return 0;
        uint64_t np = (uint64_t)llrint(j >= 0 ? d * pow10_exact[j] : d / pow10_exact[-j]);
        int exp10 = -j, nd = p;
        uint64_t top = (uint64_t)pow10_exact[p];
        if (np > top || np < top / 10) { /* k was off by one: fix it and redo this p */
            if (fixes++ > 2)
                return 0;
            k += np > top ? 1 : -1;
            p--;
            continue;
        }
        if (np == top) { /* rounding carried into a new digit: 9.9999996 -> 10.00000 */
            np /= 10;
            exp10++;
        }
        if (exp10 < -22 || exp10 > 22)
            return 0;
        double back = read_back(np, exp10);
        if ((float)back != (float)d || is_float_midpoint(back))
            continue;
        while (np % 10 == 0 && nd > 1) {
            np /= 10;
            nd--;
            exp10++;
        }
        return write_decimal(out, signbit(v) != 0, np, nd, exp10);
    }
    return 0;
}

/* printf writes "1e+38" and "1e-07"; the fast path writes "1e38" and "1e-7". Same values, but
 * one spelling keeps responses uniform. */
static size_t tidy_exponent(char *out, size_t n)
{
    char *e = strchr(out, 'e');
    if (!e)
        return n;
    char *src = e + 1, *dst = e + 1;
    if (*src == '+')
        src++;
    else if (*src == '-')
        *dst++ = *src++;
    while (*src == '0' && src[1] != '\0')
        src++;
    memmove(dst, src, strlen(src) + 1);
    return strlen(out);
}

static size_t fmt_f32_slow(char *out, float v)
{
    for (int p = 1; p <= 9; p++) {
        int n = snprintf(out, CR_NUMFMT_MAX, "%.*g", p, (double)v);
        if (strtof(out, NULL) == v && (float)strtod(out, NULL) == v)
            return tidy_exponent(out, (size_t)n);
    }
    return tidy_exponent(out, (size_t)snprintf(out, CR_NUMFMT_MAX, "%.9g", (double)v));
}

size_t cr_fmt_f32(char *out, float v)
{
    if (!isfinite(v))
        return write_null(out);
    if (v == 0.0f) {
        strcpy(out, signbit(v) ? "-0" : "0");
        return signbit(v) ? 2 : 1;
    }
    size_t n = fmt_f32_fast(out, v);
    return n ? n : fmt_f32_slow(out, v);
}

#if LDBL_MANT_DIG == 64
/* x87 extended precision: 64-bit significand, so powers of ten are exact up to 1e27 and one
 * operation on them is correctly rounded to 64 bits, 11 more than a double has. */
static const long double pow10_ld[28] = {
    1e0L,  1e1L,  1e2L,  1e3L,  1e4L,  1e5L,  1e6L,  1e7L,  1e8L,  1e9L,
    1e10L, 1e11L, 1e12L, 1e13L, 1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L,
    1e20L, 1e21L, 1e22L, 1e23L, 1e24L, 1e25L, 1e26L, 1e27L,
};

/* True when x lies exactly halfway between two adjacent normal doubles. */
static int is_double_midpoint(long double x)
{
    uint64_t mant;
    memcpy(&mant, &x, sizeof mant); /* the significand is the first 8 bytes */
    return (mant & 0x7FFull) == 0x400ull;
}

/* digits * 10^exp10 read as a double exactly as strtod would; 0 (and *ok = 0) when undecided:
 * a 64-bit result exactly at a double midpoint might round differently from the true value. */
static double read_back_f64(uint64_t digits, int exp10, int *ok)
{
    *ok = 1;
    if (digits <= (1ull << 53) && exp10 >= -22 && exp10 <= 22)
        return read_back(digits, exp10);
    long double x = exp10 >= 0 ? (long double)digits * pow10_ld[exp10]
                               : (long double)digits / pow10_ld[-exp10];
    if (is_double_midpoint(x))
        *ok = 0;
    return (double)x;
}

/* Same plan as fmt_f32_fast in extended precision; 15 digits is the safe start for doubles
 * (half a 15-digit unit >= 5e-16 relative > half a double ulp). */
static size_t fmt_f64_fast(char *out, double v)
{
    double d = fabs(v);
    if (!(d >= 1e-11 && d < 1e40))
        return 0;
    int k = decimal_exponent_estimate(d);
    for (int p = 15, fixes = 0; p <= 17; p++) {
        int j = p - 1 - k;
        if (j < -27 || j > 27)
            return 0;
        long double s = j >= 0 ? (long double)d * pow10_ld[j] : (long double)d / pow10_ld[-j];
        uint64_t np = (uint64_t)llrintl(s);
        int exp10 = -j, nd = p, ok;
        uint64_t top = (uint64_t)pow10_ld[p];
        if (np > top || np < top / 10) {
            if (fixes++ > 2)
                return 0;
            k += np > top ? 1 : -1;
            p--;
            continue;
        }
        if (np == top) {
            np /= 10;
            exp10++;
        }
        if (exp10 < -27 || exp10 > 27)
            return 0;
        double back = read_back_f64(np, exp10, &ok);
        if (!ok || back != d)
            continue;
        while (np % 10 == 0 && nd > 1) {
            np /= 10;
            nd--;
            exp10++;
        }
        return write_decimal(out, signbit(v) != 0, np, nd, exp10);
    }
    return 0;
}
#else
static size_t fmt_f64_fast(char *out, double v)
{
    (void)out;
    (void)v;
    return 0;
}
#endif

static size_t fmt_f64_slow(char *out, double v)
{
    int n = 0;
    for (int p = 15; p <= 17; p++) {
        n = snprintf(out, CR_NUMFMT_MAX, "%.*g", p, v);
        if (strtod(out, NULL) == v)
            break;
    }
    return tidy_exponent(out, (size_t)n);
}

size_t cr_fmt_f64(char *out, double v)
{
    if (!isfinite(v))
        return write_null(out);
    if (v == 0.0) {
        strcpy(out, signbit(v) ? "-0" : "0");
        return signbit(v) ? 2 : 1;
    }
    if (v == nearbyint(v) && fabs(v) < 9007199254740992.0)
        return cr_fmt_i64(out, (int64_t)v);
    size_t n = fmt_f64_fast(out, v);
    return n ? n : fmt_f64_slow(out, v);
}
