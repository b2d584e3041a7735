/* cr_fmt_f32 against the implementation it replaced (kept below verbatim, its names prefixed
 * old_), byte for byte over all 2^32 float bit patterns: a few minutes on 2 threads, so not a
 * unit test (the test_*.c glob leaves it out). `make numfmt-exhaustive` builds and runs it; it
 * prints the first 20 mismatches and their count and exits 1 on any.
 *
 * `numfmt_exhaustive --bench` times both instead, in ns per float (the best of 41 passes over
 * 2^16 floats) for each kind the daemon writes: uniform in [-1, 1) rounded to 4 decimals (the
 * load benchmark's inputs), standard normal, and random finite bit patterns. */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/codec/numfmt.h"

/* ---- the previous cr_fmt_f32, verbatim ------------------------------------------------------ */

static const char old_digit_pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* Exact in a double up to 1e22. */
static const double old_pow10_exact[23] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

/* Writes v's decimal digits right-aligned ending at end; returns the start. */
static char *old_digits_backwards(char *end, uint64_t v)
{
    while (v >= 100) {
        const char *d = old_digit_pairs + 2 * (v % 100);
        v /= 100;
        *--end = d[1];
        *--end = d[0];
    }
    if (v >= 10) {
        const char *d = old_digit_pairs + 2 * v;
        *--end = d[1];
        *--end = d[0];
    } else {
        *--end = (char)('0' + v);
    }
    return end;
}

static size_t old_write_null(char *out)
{
    memcpy(out, "null", 5);
    return 4;
}

/* value = digits * 10^exp10, digits with n_digits digits, no trailing zeros. Fixed notation for
 * a leading-digit exponent in [-5, 16), scientific otherwise (like Python's repr). */
static size_t old_write_decimal(char *out, int negative, uint64_t digits, int n_digits, int exp10)
{
    char buf[24];
    char *d = old_digits_backwards(buf + sizeof buf, digits);
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
        o = old_digits_backwards(o + (lead >= 100 ? 3 : lead >= 10 ? 2 : 1), (uint64_t)lead) +
            (lead >= 100 ? 3 : lead >= 10 ? 2 : 1);
    }
    *o = '\0';
    return (size_t)(o - out);
}

/* ---- float32 fast path ------------------------------------------------------------------- */

static const uint64_t old_pow10_u64[17] = {
    1,             10,             100,             1000,
    10000,         100000,         1000000,         10000000,
    100000000,     1000000000,     10000000000,     100000000000,
    1000000000000, 10000000000000, 100000000000000, 1000000000000000,
    10000000000000000,
};

/* 10^-37 .. 10^39, the nearest doubles: where 10^(k + 1) falls for a float's k. */
static const double old_pow10_k[77] = {
    1e-37, 1e-36, 1e-35, 1e-34, 1e-33, 1e-32, 1e-31, 1e-30, 1e-29, 1e-28, 1e-27, 1e-26, 1e-25,
    1e-24, 1e-23, 1e-22, 1e-21, 1e-20, 1e-19, 1e-18, 1e-17, 1e-16, 1e-15, 1e-14, 1e-13, 1e-12,
    1e-11, 1e-10, 1e-9,  1e-8,  1e-7,  1e-6,  1e-5,  1e-4,  1e-3,  1e-2,  1e-1,  1e0,   1e1,
    1e2,   1e3,   1e4,   1e5,   1e6,   1e7,   1e8,   1e9,   1e10,  1e11,  1e12,  1e13,  1e14,
    1e15,  1e16,  1e17,  1e18,  1e19,  1e20,  1e21,  1e22,  1e23,  1e24,  1e25,  1e26,  1e27,
    1e28,  1e29,  1e30,  1e31,  1e32,  1e33,  1e34,  1e35,  1e36,  1e37,  1e38,  1e39,
};

/* 2^e for a normal double's exponent range. */
static double old_pow2(int e)
{
    uint64_t bits = (uint64_t)(e + 1023) << 52;
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* x * 10^j by exact powers of ten: one rounding per factor, at most 3 for a float's range. */
static double old_scale10(double x, int j)
{
    for (; j > 22; j -= 22)
        x *= 1e22;
    for (; j < -22; j += 22)
        x /= 1e22;
    return j >= 0 ? x * old_pow10_exact[j] : x / old_pow10_exact[-j];
}

/* x rounded to the nearest integer (ties to even) for |x| < 2^51, in *n and as the result:
 * adding 1.5 * 2^52 leaves no bits below the units, and the integer is read from the bits.
 * Cheaper than converting to an integer and back, which is on this path's critical chain.
 * Needs each operation rounded to double (FLT_EVAL_METHOD 0, no -ffast-math). */
static double old_round_small(double x, int64_t *n)
{
    const double magic = 6755399441055744.0;
    double y = x + magic;
    uint64_t by, bm;
    memcpy(&by, &y, sizeof by);
    memcpy(&bm, &magic, sizeof bm);
    *n = (int64_t)(by - bm);
    return y - magic;
}

/* A positive normal float as s = |v| * 10^j in [1e8, 1e9) (in units of 10^u_exp where j is 0:
 * large integers), reduced to integers: i = s rounded to the nearest (ties to even), whether
 * f = s - i is positive or zero, and the integers lo..hi that read back to v. */
typedef struct {
    int64_t i, lo, hi;
    unsigned f_pos, f_zero;
    int lead9; /* power of ten of i's first digit, when i < 10^9 */
} old_f32_scaled;

/* The integer on the inside of an interval end b: the largest <= b for the upper end (the
 * smallest >= -b for the lower end, which callers pass negated). An end exactly on an integer
 * (only known when tol is 0: all exact) is included when the mantissa is even: strtof rounds
 * that tie to even, and so does (float) of the exact midpoint strtod returns for it. Sets
 * *unsure for an end within tol of an integer, or an integer inside but nearer the end than a
 * double's half ulp (< 1.2e-7 at s < 1e9): strtod may read it as the midpoint, which (float) may
 * round away from v. */
static int64_t old_inside_end(double b, double tol, double excluded, unsigned *unsure)
{
    int64_t t;
    double d = b - old_round_small(b, &t); /* b - t, exact: 0, or at least 2^-26 in size */
    *unsure |= fabs(d - 1e-6) < tol + 1e-6; /* -tol < d < tol + 2e-6 */
    return t - (d < excluded); /* t is past b, or on it and excluded (excluded: 2^-60) */
}

/* A float in [2^29, 2^52) is an integer V and so are its interval ends (half an ulp >= 32): all
 * in exact integer arithmetic, in units of 10^u_exp to give i 9 digits. Scaling by 10^-j in
 * doubles instead would often leave an end too near an integer to decide. */
static void old_f32_scale_integer(int e2, uint32_t mant, int lower_closer, old_f32_scaled *sc)
{
    uint64_t v = (uint64_t)(mant | 0x800000u) << (e2 - 23), h = 1ull << (e2 - 24);
    uint64_t odd = mant & 1, hi = v + h - odd, lo = v - (lower_closer ? h / 2 : h) + odd;
    int u_exp = 0;
    while (v >= old_pow10_u64[u_exp + 9])
        u_exp++;
    uint64_t u = old_pow10_u64[u_exp], a = v / u, b = v - a * u;
    sc->i = (int64_t)(a + ((2 * b > u) | ((2 * b == u) & (a & 1))));
    sc->f_pos = v > (uint64_t)sc->i * u;
    sc->f_zero = v == (uint64_t)sc->i * u;
    sc->hi = (int64_t)(hi / u);
    sc->lo = (int64_t)((lo + u - 1) / u);
    sc->lead9 = 8 + u_exp;
}

/* Fills sc for the float of these fields; 0 when undecided. j = 8 - k puts s in [1e8, 1e9).
 * For j in [0, 11] every step is exact: with |v| = m * 2^(e2 - 23), s = m * 5^j * 2^(e2 - 23 + j)
 * and its ends (2m +- 1) * 5^j * 2^(e2 - 24 + j) (the lower one (4m - 1) * 5^j * 2^(e2 - 25 + j)
 * below a power of two) have under 53 significant bits (5^11 < 2^27), so tol is 0 and ties and
 * ends met exactly, common for floats of few significant bits, are decided. Otherwise correctly rounded operations by
 * exact powers of ten (up to 3, beyond 10^+-22) give s and its ends within 3e-7: tol = 1e-5
 * covers that, and f within tol of 0 or 1/2 (a tie at some digit count) is undecided. */
static int old_f32_scale(float v, uint32_t exp_field, uint32_t mant, old_f32_scaled *sc)
{
    int e2 = (int)exp_field - 127;
    int lower_closer = mant == 0; /* the float below a power of two is half as far */
    if (e2 >= 29 && e2 < 52) {
        old_f32_scale_integer(e2, mant, lower_closer, sc);
        return 1;
    }
    double d = fabs((double)v), h = old_pow2(e2 - 24), s, w_hi, tol = 0;
    int k = (e2 * 78913) >> 18; /* floor(e2 * log10(2)): 10^k <= 2^e2 <= v < 10^(k + 2) */
    k += d >= old_pow10_k[k + 38];  /* now floor(log10(v)), or s's range check below fails */
    int j = 8 - k;
    if (j >= 0 && j <= 11) {
        s = d * old_pow10_exact[j];
        w_hi = h * old_pow10_exact[j];
    } else {
        s = old_scale10(d, j);
        w_hi = old_scale10(h, j);
        tol = 1e-5;
    }
    if (!(s >= 1e8 && s < 1e9))
        return 0;
    double f = s - old_round_small(s, &sc->i), w_lo = lower_closer ? w_hi / 2 : w_hi;
    double excluded = old_pow2(-60) * (mant & 1); /* not ?:, which becomes an unpredictable branch */
    unsigned unsure = tol > 0 && fabs(fabs(f) - 0.25) > 0.25 - tol; /* |f| near 0 or 1/2 */
    sc->f_pos = f > 0;
    sc->f_zero = f == 0;
    sc->hi = old_inside_end(s + w_hi, tol, excluded, &unsure);
    sc->lo = -old_inside_end(w_lo - s, tol, excluded, &unsure);
    sc->lead9 = k;
    return !unsure;
}

/* s rounded to a multiple of unit (10..1000) as printf rounds, nearest with ties to even, in
 * units, into *nd; returns whether it reads back to v. From i alone: s = i + f, |f| < 1/2, is
 * past a midpoint between multiples when i is, or i is on it and f > 0 (bias 1); an exact tie
 * needs f = 0, and then the bias is 1 when rounding down would give an odd multiple. */
static inline unsigned old_f32_round(const old_f32_scaled *sc, uint64_t unit, uint64_t *nd, uint64_t *c)
{
    uint64_t i = (uint64_t)sc->i, bias = sc->f_zero ? i / unit & 1 : sc->f_pos;
    *nd = (i + bias + unit / 2 - 1) / unit;
    *c = *nd * unit;
    return (uint64_t)((int64_t)*c - sc->lo) <= (uint64_t)(sc->hi - sc->lo);
}

/* Stores the 8 bytes of y at p, byte k from bits 8k: one unaligned store. */
static void old_store8(char *p, uint64_t y)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    y = __builtin_bswap64(y);
#endif
    memcpy(p, &y, sizeof y);
}

/* The 8 digits of hi4 * 10^4 + lo4 (each < 10^4) as ASCII, first digit in byte 0: split into
 * 2- and 1-digit lanes with multiplications by reciprocals (exact for these lane ranges) instead
 * of a digit loop. */
static uint64_t old_ascii8(uint32_t hi4, uint32_t lo4)
{
    uint64_t y = hi4 | (uint64_t)lo4 << 32;
    uint64_t z = (y * 10486 >> 20) & 0x0000007F0000007Full; /* lane / 100, lanes < 10^4 */
    y = z | (y - z * 100) << 16;
    z = (y * 103 >> 10) & 0x000F000F000F000Full; /* lane / 10, lanes < 100 */
    y = z | (y - z * 10) << 8;
    return y | 0x3030303030303030ull;
}

/* old_write_decimal's spelling for digits9 (in [1e8, 1e9): the n significant digits, zero-padded to
 * 9) with the first digit at 10^lead. With at most 9 digits every layout is a few fixed-size
 * stores of the first digit and the 8-byte rest (zeros that follow the digits come with them),
 * without per-digit loops or variable-length copies. Writes at most 18 bytes. */
static size_t old_write_f32(char *out, int negative, uint32_t digits9, int n, int lead)
{
    uint32_t q = digits9 / 10000, top = q / 10000;
    uint64_t rest = old_ascii8(q - top * 10000, digits9 - q * 10000);
    char first = (char)('0' + top);
    char *o = out + negative;
    size_t len;
    out[0] = '-';
    if (lead >= -5 && lead < 16) {
        if (lead < 0) { /* 0.000ddd */
            old_store8(o, 0x3030303030302E30ull); /* "0.000000" */
            o[1 - lead] = first;
            old_store8(o + 2 - lead, rest);
            len = (size_t)(n + 1 - lead);
        } else if (lead + 1 >= n) { /* integer: digits then zeros */
            o[0] = first;
            old_store8(o + 1, rest);
            old_store8(o + 9, 0x3030303030303030ull);
            len = (size_t)lead + 1;
        } else { /* point after the digit at lead (< 8) */
            o[0] = first;
            old_store8(o + 1, rest);
            old_store8(o + lead + 2, rest >> 8 * lead);
            o[lead + 1] = '.';
            len = (size_t)n + 1;
        }
    } else {
        o[0] = first;
        o[1] = '.';
        old_store8(o + 2, rest);
        len = n > 1 ? (size_t)n + 1 : 1;
        o[len++] = 'e';
        if (lead < 0) {
            o[len++] = '-';
            lead = -lead;
        }
        if (lead >= 10)
            o[len++] = (char)('0' + lead / 10);
        o[len++] = (char)('0' + lead % 10);
    }
    o[len] = '\0';
    return len + (size_t)negative;
}

/* The fast path for normal floats; returns 0 when it cannot decide (the caller falls back). It
 * gives what the printf loop of old_fmt_f32_slow gives: for p = 6..9, s rounded to p digits, the
 * first that reads back. All four are computed, without branches: which one is first is
 * unpredictable, and a mispredicted branch costs more than the arithmetic. Starting at 6 digits
 * loses nothing: a shorter decimal that reads back is within half a float ulp (< 6e-8 relative)
 * of v, closer than half a 6-digit unit, so it is the nearest 6-digit decimal with zeros
 * appended. (Not so for subnormals, whose ulp is larger: they take the slow path.) */
static size_t old_fmt_f32_fast(char *out, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    uint32_t exp_field = bits >> 23 & 0xFF;
    old_f32_scaled sc;
#if FLT_EVAL_METHOD != 0
    return 0; /* old_round_small needs every double operation rounded to double (not x87) */
#endif
    /* Not 0 (zero, subnormals), 0xFF (inf, nan), nor 1: the smallest normal binade, whose lower
     * neighbour is as far as its upper one even below a power of two. */
    if (exp_field - 2 >= 0xFD || !old_f32_scale(v, exp_field, bits & 0x7FFFFF, &sc))
        return 0;
    uint64_t nd[4], c[4]; /* [p - 6]: s rounded to p digits, in units of 10^(9 - p) and of 1 */
    unsigned fits = old_f32_round(&sc, 1000, &nd[0], &c[0]) | old_f32_round(&sc, 100, &nd[1], &c[1]) << 1 |
                    old_f32_round(&sc, 10, &nd[2], &c[2]) << 2;
    nd[3] = c[3] = (uint64_t)sc.i; /* 9 digits: i itself, a tie settled by old_round_small as printf */
    fits |= ((uint64_t)(sc.i - sc.lo) <= (uint64_t)(sc.hi - sc.lo)) << 3;
    if (!fits)
        return 0;
    /* The first that fits, by an indexed load: a branch on it would often be mispredicted. */
    int t = __builtin_ctz(fits), lead = sc.lead9, n = t + 6;
    uint32_t digits9 = (uint32_t)c[t];
    if (digits9 == 1000000000u) { /* 9.9999996 rounds to 10.00000, a digit more */
        digits9 = 100000000u;
        lead++;
        n = 1;
    } else {
        for (uint64_t x = nd[t]; x % 10 == 0; x /= 10)
            n--;
    }
    return old_write_f32(out, (int)(bits >> 31), digits9, n, lead);
}

/* The first of 1..9 digits (else 9) whose printf rounding reads back both ways, spelled by
 * old_write_decimal as the fast path spells it: a float's text must not depend on which path
 * wrote it (printf would write 2.3409644e-05 for 0.000023409644). Kept out of line so that
 * the fast path's caller needs no registers saved for these calls. */
__attribute__((noinline)) static size_t old_fmt_f32_slow(char *out, float v)
{
    char text[CR_NUMFMT_MAX]; /* [-]d.ddde[+-]xx */
    for (int p = 1; p <= 9; p++) {
        snprintf(text, sizeof text, "%.*e", p - 1, (double)v);
        if (strtof(text, NULL) == v && (float)strtod(text, NULL) == v)
            break;
    }
    uint64_t digits = 0;
    int n = 0;
    const char *c = text + (text[0] == '-');
    for (; *c != 'e'; c++)
        if (*c != '.') {
            digits = digits * 10 + (uint64_t)(*c - '0');
            n++;
        }
    int exp10 = atoi(c + 1) - (n - 1);
    for (; n > 1 && digits % 10 == 0; n--, exp10++)
        digits /= 10;
    return old_write_decimal(out, signbit(v) != 0, digits, n, exp10);
}

static size_t old_cr_fmt_f32(char *out, float v)
{
    size_t n = old_fmt_f32_fast(out, v); /* first: it declines zero, subnormals and non-finite */
    if (n)
        return n;
    if (!isfinite(v))
        return old_write_null(out);
    if (v == 0.0f) {
        strcpy(out, signbit(v) ? "-0" : "0");
        return signbit(v) ? 2 : 1;
    }
    return old_fmt_f32_slow(out, v);
}

/* ---- the exhaustive check ----------------------------------------------------------------- */

#define THREADS 2
#define SHOW 20

static pthread_mutex_t show_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned shown;

typedef struct {
    uint64_t from, to; /* bit patterns [from, to) */
    uint64_t mismatches;
} slice;

static void show_mismatch(uint32_t bits, const char *old, const char *new)
{
    pthread_mutex_lock(&show_lock);
    if (shown++ < SHOW)
        printf("0x%08X: old %s, new %s\n", bits, old, new);
    pthread_mutex_unlock(&show_lock);
}

static void *check_slice(void *arg)
{
    slice *sl = arg;
    char old[CR_NUMFMT_MAX], new[CR_NUMFMT_MAX];
    for (uint64_t u = sl->from; u < sl->to; u++) {
        uint32_t bits = (uint32_t)u;
        float v;
        memcpy(&v, &bits, sizeof v);
        size_t n_old = old_cr_fmt_f32(old, v), n_new = cr_fmt_f32(new, v);
        if (n_old != n_new || memcmp(old, new, n_old + 1) != 0) {
            sl->mismatches++;
            show_mismatch(bits, old, new);
        }
    }
    return NULL;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int exhaustive(void)
{
    pthread_t tid[THREADS];
    slice sl[THREADS];
    double t0 = now();
    for (int i = 0; i < THREADS; i++) {
        sl[i] = (slice){(1ull << 32) * i / THREADS, (1ull << 32) * (i + 1) / THREADS, 0};
        if (pthread_create(&tid[i], NULL, check_slice, &sl[i]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            return 2;
        }
    }
    uint64_t mismatches = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(tid[i], NULL);
        mismatches += sl[i].mismatches;
    }
    printf("%llu mismatches in 2^32 floats (%.0f s, %d threads)\n", (unsigned long long)mismatches,
           now() - t0, THREADS);
    return mismatches != 0;
}

/* ---- --bench -------------------------------------------------------------------------------- */

#define BENCH_N (1 << 16) /* 16 answers of a 64x64 GEMM: the output stays in L2 */
#define BENCH_REPS 41

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static double uniform01(void)
{
    return (double)(rng() >> 11) * 0x1p-53;
}

static float four_decimals(void) /* numpy: round(uniform(-1, 1), 4).astype(float32) */
{
    return (float)(rint((uniform01() * 2 - 1) * 1e4) / 1e4);
}

static float standard_normal(void) /* Box-Muller */
{
    double u = 1 - uniform01(), w = uniform01();
    return (float)(sqrt(-2 * log(u)) * cos(2 * M_PI * w));
}

static float finite_bits(void)
{
    float v;
    do {
        uint32_t u = (uint32_t)rng();
        memcpy(&v, &u, sizeof v);
    } while (!isfinite(v));
    return v;
}

/* One pass writing all of x one after another, as an answer does; seconds. */
static double pass(size_t (*fmt)(char *, float), const float *x, char *buf)
{
    char *p = buf;
    double t0 = now();
    for (size_t i = 0; i < BENCH_N; i++) {
        p += fmt(p, x[i]);
        *p++ = ',';
    }
    return now() - t0;
}

/* The best of BENCH_REPS passes each, old and new taking turns so that both see the same
 * machine (a busy moment costs both, and the best pass leaves it out). */
static int bench(void)
{
    static const struct {
        const char *name;
        float (*draw)(void);
    } kinds[] = {
        {"uniform [-1, 1), 4 decimals", four_decimals},
        {"standard normal", standard_normal},
        {"random finite bit patterns", finite_bits},
    };
    float *x = malloc(BENCH_N * sizeof *x);
    char *buf = malloc((size_t)BENCH_N * (CR_NUMFMT_MAX + 1));
    if (!x || !buf)
        return 2;
    printf("%-28s %10s %10s %8s\n", "ns per float", "old", "new", "speedup");
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        for (size_t i = 0; i < BENCH_N; i++)
            x[i] = kinds[k].draw();
        double t_old = INFINITY, t_new = INFINITY;
        for (int r = 0; r < BENCH_REPS; r++) {
            t_old = fmin(t_old, pass(old_cr_fmt_f32, x, buf));
            t_new = fmin(t_new, pass(cr_fmt_f32, x, buf));
        }
        printf("%-28s %10.2f %10.2f %7.2fx\n", kinds[k].name, t_old / BENCH_N * 1e9,
               t_new / BENCH_N * 1e9, t_old / t_new);
    }
    free(x);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--bench") == 0)
        return bench();
    if (argc > 1) {
        fprintf(stderr, "usage: %s [--bench]\n", argv[0]);
        return 2;
    }
    return exhaustive();
}
