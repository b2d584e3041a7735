/* Shortest round-trip number formatting, fast for the common range.
 *
 * float32: Schubfach (R. Giulietti, "The Schubfach way to render doubles") in integer arithmetic.
 * One 64x64-bit multiplication by a 63-bit 10^-k scales |v| = c * 2^q to s and both ends of its
 * rounding interval; comparisons then pick the shortest decimal inside, the nearest of its
 * length. That is what the printf loop below chooses (the first correctly rounded decimal that
 * reads back), without its printf and strtod calls, except where numpy's double-then-float read
 * differs from strtof or, below a power of two, the interval is lopsided: there, and for zero and
 * the smallest subnormals, printf/strtod decide (slow but exact; about 200 of the 2^32 floats).
 * float64 uses printf("%.15g".."%.17g") with a strtod check only where the extended-precision
 * fast path (scale, round to 15..17 digits, read back exactly) cannot decide. */
#include "server/codec/numfmt.h"

#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/half.h"

static const char digit_pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

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

size_t cr_fmt_fixed3(char *out, double v)
{
    if (!(v >= 0.0 && v < 1e15)) /* negative, NaN, inf, huge: printf's spelling */
        return (size_t)snprintf(out, CR_NUMFMT_MAX, "%.3f", v);
    uint64_t thousandths = (uint64_t)llround(v * 1000.0);
    size_t n = cr_fmt_u64(out, thousandths / 1000);
    unsigned frac = (unsigned)(thousandths % 1000);
    out[n] = '.';
    out[n + 1] = (char)('0' + frac / 100);
    out[n + 2] = (char)('0' + frac / 10 % 10);
    out[n + 3] = (char)('0' + frac % 10);
    out[n + 4] = '\0';
    return n + 4;
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

/* ---- float32 fast path ------------------------------------------------------------------- */

static const uint32_t pow10_u32[10] = {
    1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000,
};

/* For k = -45..31 (every k a float needs): g(k) = floor(10^-k * 2^(62 - floor(log2 10^-k))) + 1,
 * 10^-k with 63 significant bits, rounded up as Schubfach's proof of exact comparisons needs. */
static const uint64_t pow10_neg_g[77] = {
    0x59AEDFC10D7279C6, 0x47BF19673DF52E38, 0x72CB5BD86321E38D, 0x5BD5E313828182D7,
    0x4977E8DC68679BE0, 0x758CA7C70D7292FF, 0x5E0A1FD271287599, 0x4B3B4CA85A86C47B,
    0x785EE10D5DA46D91, 0x604BE73DE4838ADA, 0x4D0985CB1D3608AF, 0x7B426FAB61F00DE4,
    0x629B8C891B267183, 0x4EE2D6D415B85ACF, 0x7E37BE2022C0914C, 0x64F964E68233A770,
    0x50C783EB9B5C85F3, 0x409F9CBC7C4A04C3, 0x6765C793FA10079E, 0x52B7D2DCC80CD2E5,
    0x422CA8B0A00A4251, 0x69E10DE76676D081, 0x54B40B1F852BDA01, 0x43C33C1937564801,
    0x6C6B935B8BBD4001, 0x56BC75E2D6310001, 0x4563918244F40001, 0x6F05B59D3B200001,
    0x58D15E1762800001, 0x470DE4DF82000001, 0x71AFD498D0000001, 0x5AF3107A40000001,
    0x48C2739500000001, 0x746A528800000001, 0x5D21DBA000000001, 0x4A817C8000000001,
    0x7735940000000001, 0x5F5E100000000001, 0x4C4B400000000001, 0x7A12000000000001,
    0x61A8000000000001, 0x4E20000000000001, 0x7D00000000000001, 0x6400000000000001,
    0x5000000000000001, 0x4000000000000001, 0x6666666666666667, 0x51EB851EB851EB86,
    0x4189374BC6A7EF9E, 0x68DB8BAC710CB296, 0x53E2D6238DA3C212, 0x431BDE82D7B634DB,
    0x6B5FCA6AF2BD215F, 0x55E63B88C230E77F, 0x44B82FA09B5A52CC, 0x6DF37F675EF6EAE0,
    0x57F5FF85E5925580, 0x465E6604B7A84466, 0x709709A125DA070A, 0x5A126E1A84AE6C08,
    0x480EBE7B9D58566D, 0x734ACA5F6226F0AE, 0x5C3BD5191B525A25, 0x49C97747490EAE84,
    0x760F253EDB4AB0D3, 0x5E72843249088D76, 0x4B8ED0283A6D3DF8, 0x78E480405D7B9659,
    0x60B6CD004AC94514, 0x4D5F0A66A23A9DAA, 0x7BCB43D769F762A9, 0x63090312BB2C4EEE,
    0x4F3A68DBC8F03F25, 0x7EC3DAF941806507, 0x65697BFA9ACD1DA0, 0x51212FFBAF0A7E19,
    0x40E7599625A1FE7B,
};

/* floor(q log10 2) (minus log10 4/3 below a power of two) and floor(e log2 10) by
 * multiplication: exact over every exponent a float has (Schubfach's constants). Macros, so
 * that f32_exps below is filled at compile time. */
#define FLOOR_LOG10_POW2(q, three_quarters)                                                   \
    ((int)(((int64_t)(q) * 661971961083 - ((three_quarters) ? 274743187321 : 0)) >> 41))
#define FLOOR_LOG2_POW10(e) ((int)((int64_t)(e) * 913124641741 >> 38))

/* The scaling of a float's c * 2^q: by 10^-k, k = floor(q log10 2), in a product shifted by h
 * (33..36, so (4c + 2) << h < 2^63). */
#define F32_K(q) FLOOR_LOG10_POW2(q, 0)
#define F32_H(q, k) ((q) + FLOOR_LOG2_POW10(-(k)) + 33)

/* k and h for every biased exponent e: one load, where computing them is a chain of two
 * multiplications before the product can start. */
typedef struct {
    int8_t k;
    uint8_t h;
} f32_exp;

#define F32_Q(e) ((e) ? (e) - 150 : -149)
#define F32_EXP(e) {F32_K(F32_Q(e)), F32_H(F32_Q(e), F32_K(F32_Q(e)))}
#define F32_EXP4(e) F32_EXP(e), F32_EXP((e) + 1), F32_EXP((e) + 2), F32_EXP((e) + 3)
#define F32_EXP16(e) F32_EXP4(e), F32_EXP4((e) + 4), F32_EXP4((e) + 8), F32_EXP4((e) + 12)
#define F32_EXP64(e) F32_EXP16(e), F32_EXP16((e) + 16), F32_EXP16((e) + 32), F32_EXP16((e) + 48)
static const f32_exp f32_exps[256] = {F32_EXP64(0), F32_EXP64(64), F32_EXP64(128), F32_EXP64(192)};

/* g * 2^n for 0 < n < 64. */
static unsigned __int128 shifted(uint64_t g, int n)
{
    return (unsigned __int128)(g >> (64 - n)) << 64 | g << n;
}

/* |v| = c * 2^q scaled by 10^-k to s, and the ends of its rounding interval, as fixed-point
 * numbers with 33 bits after the point; k is chosen so that the interval is 1 to 10 units wide:
 * it holds an integer, and at most one multiple of 10. */
typedef struct {
    uint64_t xs, xl, xr;
} f32_scaled;

/* The high 64 bits of g * (4c << h) are s, never below it, above by under 2^-35 (g is rounded
 * up, and a product exact at these bits stays exact). The ends' products differ from it by
 * g * (2 << h), half an ulp, or (below a power of two, lower_half 1: the float below is half as
 * near) g * (1 << h): shifts of g, so one multiplication serves all three. */
static f32_scaled f32_scale(uint32_t c, int k, int h, int lower_half)
{
    uint64_t g = pow10_neg_g[k + 45];
    unsigned __int128 p = (unsigned __int128)g * ((uint64_t)c << (h + 2));
    f32_scaled sc = {(uint64_t)(p >> 64), (uint64_t)((p - shifted(g, h + 1 - lower_half)) >> 64),
                     (uint64_t)((p + shifted(g, h + 1)) >> 64)};
    return sc;
}

/* Schubfach's choice (in units of 10^k): the one multiple of 10 inside the interval if there is
 * one (*use10), else s rounded to an integer, ties to even as printf rounds. The interval's ends
 * are inside for an even c (strtof rounds a tie to even). Comparisons with the fixed-point
 * values decide exactly as Schubfach's round-to-odd ones do (with the same proof). Selected
 * with a mask, not ?: (which compilers may make a branch): the choice is unpredictable, and a
 * mispredicted branch costs more than the arithmetic.
 *
 * *near_end: numpy reads through a double, and a decimal within half a double ulp of an odd
 * float's interval end becomes the end itself, which (float) rounds to the even neighbour; the
 * printf loop then goes on to a longer decimal. That half ulp is at most 80 units of 2^-33 here
 * and the products err by under 1, so a choice within 128 of an end is left to the slow path.
 * Only a multiple of 10 can be that near: s rounded is within 1/2 of s, and the ends are half
 * an ulp from s, 0.5048 or more, or exactly 1/2 where s is an integer (floats in [2^23, 2^24)). */
static uint32_t f32_choose(const f32_scaled *sc, uint32_t odd, uint32_t *use10, uint32_t *near_end)
{
    uint32_t s = (uint32_t)(sc->xs >> 33), sp10 = s / 10 * 10, tp10 = sp10 + 10;
    /* how far inside the interval sp10 and tp10 are, in units of 2^-33 (negative: outside) */
    uint64_t in_low = ((uint64_t)sp10 << 33) - sc->xl, in_high = sc->xr - ((uint64_t)tp10 << 33);
    uint32_t upin = (int64_t)in_low >= (int64_t)odd, wpin = (int64_t)in_high >= (int64_t)odd;
    /* the smaller less 1, unsigned: one outside (or on its end) counts as far */
    uint64_t gap = in_low - 1 < in_high - 1 ? in_low - 1 : in_high - 1;
    *near_end = odd & (gap < 127);
    /* + 1/2, less an ulp unless s is odd: a tie (exactly s + 1/2) goes to the even neighbour */
    uint32_t nearest = (uint32_t)((sc->xs + 0xFFFFFFFF + (s & 1)) >> 33);
    uint32_t d10 = tp10 - 10 * upin, mask = 0 - (upin ^ wpin);
    *use10 = upin ^ wpin;
    return nearest ^ ((nearest ^ d10) & mask);
}

/* Below a power of two the interval is lopsided, and Schubfach's choice d may not be what the
 * printf loop takes: s rounded may lie beyond the narrow lower end, or the one multiple of 10
 * inside may be on the wide side while the nearest is on the narrow side, outside. The loop
 * then goes on to a longer decimal. Whether d is inside and the nearest of its length: */
static int f32_is_nearest(uint32_t d, uint32_t use10, const f32_scaled *sc)
{
    if (!use10)
        return sc->xl <= (uint64_t)d << 33; /* an even c: the end is inside */
    uint32_t below = (uint32_t)(sc->xs >> 33) / 10 * 10;
    uint64_t half = (uint64_t)(2 * below + 10) << 32; /* below + 5 */
    int up = sc->xs > half || (sc->xs == half && (below / 10 & 1));
    return d == below + 10 * (uint32_t)up;
}

/* Stores the 8 bytes of y at p, byte k from bits 8k: one unaligned store. */
static void store8(char *p, uint64_t y)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    y = __builtin_bswap64(y);
#endif
    memcpy(p, &y, sizeof y);
}

/* The two ASCII digits of p < 100 as a 16-bit value, the first in the low byte. */
static uint64_t ascii2(uint32_t p)
{
    uint16_t a;
    memcpy(&a, digit_pairs + 2 * (size_t)p, sizeof a); /* size_t: an address mode scales it */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    a = __builtin_bswap16(a);
#endif
    return a;
}

/* The last 8 of the 9 digits of d9 as ASCII, the first in byte 0. Each pair of digits is a
 * difference of two quotients of d9 (by 10^8, 10^6, 10^4, 10^2), all computed at once, and
 * looked up in digit_pairs: a short dependency chain, where dividing step by step is a long
 * one. */
static uint64_t ascii8(uint32_t d9)
{
    uint32_t q8 = d9 / 100000000, q6 = d9 / 1000000, q4 = d9 / 10000, q2 = d9 / 100;
    return ascii2(q6 - 100 * q8) | ascii2(q4 - 100 * q6) << 16 | ascii2(q2 - 100 * q4) << 32 |
           ascii2(d9 - 100 * q2) << 48;
}

/* The number of decimal digits of d >= 1: from its bit length, which leaves two candidates. */
static int decimal_length(uint32_t d)
{
    int t = (32 - __builtin_clz(d)) * 1233 >> 12; /* 1233 / 4096 ~ log10 2 */
    return t + (d >= pow10_u32[t]);
}

/* write_decimal's spelling for digits9 (in [1e8, 1e9): the significant digits, zero-padded to 9)
 * with the first digit at 10^lead. The digits that count end at the last nonzero byte (trailing
 * zeros, counted at once instead of dividing by 10 until a remainder). With at most 9 digits
 * every layout is a few fixed-size stores of the first digit and the 8-byte rest (zeros that
 * follow the digits come with them), without per-digit loops or variable-length copies. Writes
 * at most 18 bytes. Inlined: a call would cost a good part of what it does. */
__attribute__((always_inline)) static inline size_t write_f32(char *out, int negative,
                                                              uint32_t digits9, int lead)
{
    uint64_t rest = ascii8(digits9), lanes = rest ^ 0x3030303030303030ull; /* digits 0..9 */
    int n = 9 - (__builtin_clzll(lanes | 1) >> 3) - (lanes == 0); /* 1 when lanes is 0 */
    char first = (char)('0' + digits9 / 100000000);
    char *o = out + negative;
    size_t size;
    out[0] = '-';
    if (lead >= -5 && lead <= 0) { /* 0.000ddd, or d.ddd: one layout, no branch between them */
        int z = -lead;
        store8(o, 0x3030303030302E30ull); /* "0.000000" */
        o[z + (z != 0)] = first;
        store8(o + 2 + z, rest);
        size = (size_t)(n + 1 + z - ((z == 0) & (lanes == 0))); /* a lone digit: no point */
    } else if (lead > 0 && lead < 16) {
        if (lead + 1 >= n) { /* integer: digits then zeros */
            o[0] = first;
            store8(o + 1, rest);
            store8(o + 9, 0x3030303030303030ull);
            size = (size_t)lead + 1;
        } else { /* point after the digit at lead (< 8) */
            o[0] = first;
            store8(o + 1, rest);
            store8(o + lead + 2, rest >> 8 * lead);
            o[lead + 1] = '.';
            size = (size_t)n + 1;
        }
    } else {
        o[0] = first;
        o[1] = '.';
        store8(o + 2, rest);
        size = n > 1 ? (size_t)n + 1 : 1;
        o[size++] = 'e';
        if (lead < 0) {
            o[size++] = '-';
            lead = -lead;
        }
        if (lead >= 10)
            o[size++] = (char)('0' + lead / 10);
        o[size++] = (char)('0' + lead % 10);
    }
    o[size] = '\0';
    return size + (size_t)negative;
}

/* Every finite float but zero and the smallest subnormals (< 100 units: s must have a digit
 * besides the one Schubfach's multiple of 10 drops); 0 when it cannot tell (the slow path
 * decides). fmt_f32_fast's plan, for the floats it leaves: subnormals, powers of two, and those
 * whose decimal may have a digit more than s (9.9999996 rounds to 10.00000). */
__attribute__((noinline)) static size_t fmt_f32_general(char *out, uint32_t bits)
{
    uint32_t magnitude = bits & 0x7FFFFFFF, exp_field = magnitude >> 23, mant = bits & 0x7FFFFF;
    if (magnitude - 100 >= 0x7F800000u - 100) /* zero, the smallest subnormals, inf, nan */
        return 0;
    uint32_t c = exp_field ? mant | 0x800000 : mant, odd = c & 1, use10;
    int q = exp_field ? (int)exp_field - 150 : -149, irregular = mant == 0 && exp_field > 1;
    int k = FLOOR_LOG10_POW2(q, irregular);
    f32_scaled sc = f32_scale(c, k, F32_H(q, k), irregular);
    uint32_t near_end, d = f32_choose(&sc, odd, &use10, &near_end);
    if (irregular ? !f32_is_nearest(d, use10, &sc) : near_end)
        return 0;
    int len = decimal_length(d);
    return write_f32(out, (int)(bits >> 31), d * pow10_u32[9 - len], k + len - 1);
}

/* The fast path, for normal floats but powers of two; 0 when it cannot tell. The printf loop's
 * first correctly rounded decimal that reads back is Schubfach's choice: if a decimal of some
 * length lies inside an interval centred on v, so does the nearest of that length. Flattened:
 * the helpers it shares with fmt_f32_general would otherwise be called, not inlined, and the
 * calls (with f32_scaled passed through memory) cost a good part of the work. */
__attribute__((flatten)) static size_t fmt_f32_fast(char *out, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    uint32_t exp_field = bits >> 23 & 0xFF, mant = bits & 0x7FFFFF, odd = bits & 1, use10;
    if (exp_field - 1 >= 0xFE || mant == 0)
        return fmt_f32_general(out, bits);
    f32_exp e = f32_exps[exp_field];
    f32_scaled sc = f32_scale(mant | 0x800000, e.k, e.h, 0);
    uint32_t near_end, d = f32_choose(&sc, odd, &use10, &near_end), s = (uint32_t)(sc.xs >> 33);
    if (near_end)
        return 0;
    /* s is in [2^23, 10 * 2^24): 7 to 9 digits, counted by two comparisons, and the layout (where
     * the point goes) follows from s, long before d is known: a mispredicted branch on it then
     * costs little, where one that waits for d discards all the work done since. d has as many
     * digits unless it rounds up to the next power of ten, which only an s within 10 of it can. */
    int len = 7 + (s >= 10000000) + (s >= 100000000);
    if (s + 10 >= pow10_u32[len])
        return fmt_f32_general(out, bits);
    return write_f32(out, (int)(bits >> 31), d * pow10_u32[9 - len], e.k + len - 1);
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

/* The first of 1..9 digits (else 9) whose printf rounding reads back both ways, spelled by
 * write_decimal as the fast path spells it: a float's text must not depend on which path
 * wrote it (printf would write 2.3409644e-05 for 0.000023409644). Kept out of line so that
 * the fast path's caller needs no registers saved for these calls. */
__attribute__((noinline)) static size_t fmt_f32_slow(char *out, float v)
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
    return write_decimal(out, signbit(v) != 0, digits, n, exp10);
}

size_t cr_fmt_f32(char *out, float v)
{
    size_t n = fmt_f32_fast(out, v); /* first: it declines zero and non-finite values */
    if (n)
        return n;
    if (!isfinite(v))
        return write_null(out);
    if (v == 0.0f) {
        strcpy(out, signbit(v) ? "-0" : "0");
        return signbit(v) ? 2 : 1;
    }
    return fmt_f32_slow(out, v);
}

#if LDBL_MANT_DIG == 64
/* Exact in a double up to 1e22. */
static const double pow10_exact[23] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

/* x87 extended precision: 64-bit significand, so powers of ten are exact up to 1e27 and one
 * operation on them is correctly rounded to 64 bits, 11 more than a double has. */
static const long double pow10_ld[28] = {
    1e0L,  1e1L,  1e2L,  1e3L,  1e4L,  1e5L,  1e6L,  1e7L,  1e8L,  1e9L,
    1e10L, 1e11L, 1e12L, 1e13L, 1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L,
    1e20L, 1e21L, 1e22L, 1e23L, 1e24L, 1e25L, 1e26L, 1e27L,
};

/* Exact reading of digits * 10^exp10 as a double (|exp10| <= 22, digits < 2^53). */
static double read_back(uint64_t digits, int exp10)
{
    return exp10 >= 0 ? (double)digits * pow10_exact[exp10] : (double)digits / pow10_exact[-exp10];
}

/* floor(log10(d)) for d > 0, possibly off by one (callers correct it). */
static int decimal_exponent_estimate(double d)
{
    int e2;
    frexp(d, &e2);
    return (int)floor((e2 - 1) * 0.30102999566398120);
}

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

/* A float16/bfloat16 value is written with the fewest significant digits (at most 5, which every
 * float16 needs at worst) whose decimal rounds back to the same 16 bits, as cr_fmt_f64 writes that
 * decimal. So 0.1 sent as float16 comes back as 0.1, as numpy prints it, not as the float32
 * spelling of its exact value (0.099975586). half_shortest finds that decimal with printf and
 * strtod at 1..5 digits (exact, ~1 us a number); cr_fmt_half keeps what it found per pattern. */
static double half_shortest(double v, uint16_t h, cr_dtype dt)
{
    char digits[CR_NUMFMT_MAX];
    double d = v;
    for (int p = 1; p <= 5; p++) {
        snprintf(digits, sizeof digits, "%.*e", p - 1, v);
        d = strtod(digits, NULL);
        if (cr_half_from_double(dt, d) == h)
            break;
    }
    return d;
}

/* half_shortest of each of the 2 x 65536 bit patterns, found the first time it is written
 * (a 256x256 answer is 65,536 numbers: the search would cost tens of ms each time); 0: not yet
 * (a finite nonzero value never has all-zero bits). Racing writers store the same bits. */
static _Atomic uint64_t half_digits[2][1 << 16];

size_t cr_fmt_half(char *out, uint16_t h, cr_dtype dt)
{
    double v = cr_half_to_float(dt, h);
    if (!isfinite(v) || v == 0)
        return cr_fmt_f64(out, v);
    _Atomic uint64_t *slot = &half_digits[dt == CR_DT_BF16][h];
    uint64_t bits = atomic_load_explicit(slot, memory_order_relaxed);
    double d;
    if (bits) {
        memcpy(&d, &bits, sizeof d);
    } else {
        d = half_shortest(v, h, dt);
        memcpy(&bits, &d, sizeof bits);
        atomic_store_explicit(slot, bits, memory_order_relaxed);
    }
    return cr_fmt_f64(out, d);
}
