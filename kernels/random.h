/* Generated operands ({"random": {"shape", "dist", "seed"}}, docs/api.md "Generated operands"):
 * one counter-based generator, written once for the host (C) and the device (CUDA, where nvcc
 * compiles this header), so a seed gives the same bits on every backend and at every element
 * index, whatever thread computes it.
 *
 * The stream: element i of seed s uses the 64-bit words w(j) = mix(mix(s) + (j + 1) * GAMMA),
 * splitmix64's outputs (mix is its finalizer, GAMMA its increment), j = i for uniform values and
 * j = 2i, 2i + 1 for normal ones.
 *  - uniform on [-1, 1): the top p bits of w(i) as k, k * 2^(1 - p) - 1, with p the dtype's
 *    significand (53 float64, 24 float32, 11 float16, 8 bfloat16): exact in the dtype, so no
 *    rounding at all; uint8 (histogram data): the top byte of w(i), every value 0..255.
 *  - normal (mean 0, variance 1): Box-Muller, sqrt(-2 ln u1) * cos(2 pi u2) with
 *    u1 = 1 - (w(2i) >> 11) * 2^-53 in (0, 1] and u2 = (w(2i+1) >> 11) * 2^-53 in [0, 1), in
 *    float64, then rounded to float32 and from there to the dtype (round to nearest even).
 *
 * Bit for bit on both sides: ln and cos are our own polynomials below, made of IEEE +, *, / and
 * sqrt only, each rounded once (the device spells them __dadd_rn etc., which nvcc never fuses
 * into an FMA; the host C is -std=c11, where GCC does not contract either). Their coefficients
 * are hex literals, the same bits a Python reference reads with float.fromhex
 * (tests/http/random_ref.py, which docs/api.md prints). */
#ifndef CRUNCHD_RANDOM_H
#define CRUNCHD_RANDOM_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/backend.h"

#ifdef __CUDACC__
#define CR_RANDOM_FN __host__ __device__ static inline
#else
#define CR_RANDOM_FN static inline
#endif

#ifdef __CUDA_ARCH__
#define CR_RADD(a, b) __dadd_rn((a), (b))
#define CR_RMUL(a, b) __dmul_rn((a), (b))
#define CR_RDIV(a, b) __ddiv_rn((a), (b))
#define CR_RSQRT(a) __dsqrt_rn(a)
#else
#define CR_RADD(a, b) ((a) + (b))
#define CR_RMUL(a, b) ((a) * (b))
#define CR_RDIV(a, b) ((a) / (b))
#define CR_RSQRT(a) sqrt(a)
#endif

/* One step of Horner's rule, p * x + c: two roundings, never an FMA. */
#define CR_RHORNER(p, x, c) CR_RADD(CR_RMUL((p), (x)), (c))

#define CR_RANDOM_GAMMA 0x9E3779B97F4A7C15ull

/* splitmix64's finalizer: a bijection of 64-bit words whose outputs pass BigCrush. */
CR_RANDOM_FN uint64_t cr_random_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The stream's key: the seed mixed once, so that seeds 0, 1, 2 start nowhere near each other. */
CR_RANDOM_FN uint64_t cr_random_key(uint64_t seed) { return cr_random_mix(seed); }

/* The j-th word of the stream (splitmix64's j-th output from state key). */
CR_RANDOM_FN uint64_t cr_random_word(uint64_t key, uint64_t j) { return cr_random_mix(key + (j + 1) * CR_RANDOM_GAMMA); }

/* Bit casts: memcpy, which nvcc and gcc both turn into a register move. */
CR_RANDOM_FN uint64_t cr_random_double_bits(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

CR_RANDOM_FN double cr_random_bits_double(uint64_t u)
{
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

CR_RANDOM_FN uint32_t cr_random_float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Horner's rule over c[0..n), c[0] the constant term: each step rounded twice, as numpy's
 * p * x + c is (the reference's horner()). */
CR_RANDOM_FN double cr_random_horner(const double *c, int n, double x)
{
    double p = c[n - 1];
    for (int k = n - 2; k >= 0; k--)
        p = CR_RHORNER(p, x, c[k]);
    return p;
}

/* ln x for x in (0, 1] (never 0: u1 >= 2^-53): x = m * 2^e with m in [sqrt(1/2), sqrt(2)), and
 * ln m = 2 atanh(s) = 2 s (1 + s^2/3 + s^4/5 + ...), s = (m - 1)/(m + 1), |s| <= 0.172: twelve
 * terms reach 1e-18. Function-scope static const tables are fine in device code too. */
CR_RANDOM_FN double cr_random_log(double x)
{
    uint64_t u = cr_random_double_bits(x);
    int e = (int)((u >> 52) & 0x7ff) - 1023;
    double m = cr_random_bits_double((u & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull); /* [1, 2) */
    if (m > 0x1.6a09e667f3bcdp+0) { /* sqrt(2) */
        m = CR_RMUL(m, 0.5);
        e += 1;
    }
    double s = CR_RDIV(CR_RADD(m, -1.0), CR_RADD(m, 1.0)), s2 = CR_RMUL(s, s);
    static const double c[12] = {0x1.0000000000000p+0, 0x1.5555555555555p-2, 0x1.999999999999ap-3,
                                 0x1.2492492492492p-3, 0x1.c71c71c71c71cp-4, 0x1.745d1745d1746p-4,
                                 0x1.3b13b13b13b14p-4, 0x1.1111111111111p-4, 0x1.e1e1e1e1e1e1ep-5,
                                 0x1.af286bca1af28p-5, 0x1.8618618618618p-5, 0x1.642c8590b2164p-5}; /* 1/(2k+1) */
    double p = cr_random_horner(c, 12, s2);
    return CR_RADD(CR_RMUL((double)e, 0x1.62e42fefa39efp-1), CR_RMUL(CR_RMUL(2.0, s), p)); /* e ln 2 + ln m */
}

/* cos x = sum (-1)^k x^2k / (2k)!, k = 0..11, over x^2. */
CR_RANDOM_FN double cr_random_cos_poly(double x2)
{
    static const double c[12] = {0x1.0000000000000p+0,  -0x1.0000000000000p-1, 0x1.5555555555555p-5,
                                 -0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-16, -0x1.27e4fb7789f5cp-22,
                                 0x1.1eed8eff8d898p-29,  -0x1.93974a8c07c9dp-37, 0x1.ae7f3e733b81fp-45,
                                 -0x1.6827863b97d97p-53, 0x1.e542ba4020225p-62, -0x1.0ce396db7f853p-70};
    return cr_random_horner(c, 12, x2);
}

/* sin x = x sum (-1)^k x^2k / (2k+1)!, k = 0..11. */
CR_RANDOM_FN double cr_random_sin_poly(double x, double x2)
{
    static const double c[12] = {0x1.0000000000000p+0,  -0x1.5555555555555p-3, 0x1.1111111111111p-7,
                                 -0x1.a01a01a01a01ap-13, 0x1.71de3a556c734p-19, -0x1.ae64567f544e4p-26,
                                 0x1.6124613a86d09p-33,  -0x1.ae7f3e733b81fp-41, 0x1.952c77030ad4ap-49,
                                 -0x1.2f49b46814157p-57, 0x1.71b8ef6dcf572p-66, -0x1.761b41316381ap-75};
    return CR_RMUL(cr_random_horner(c, 12, x2), x);
}

/* cos(2 pi t) for t in [0, 1): 4t = n + r exactly (n = 0..3, r in [0, 1)), x = r pi/2, and by the
 * quadrant cos x, -sin x, -cos x or sin x, each a Taylor polynomial to x^22 or x^23 (1e-17 at
 * x = pi/2). */
CR_RANDOM_FN double cr_random_cos_turns(double t)
{
    double t4 = CR_RMUL(t, 4.0);
    int n = (int)t4;
    double x = CR_RMUL(CR_RADD(t4, -(double)n), 0x1.921fb54442d18p+0), x2 = CR_RMUL(x, x);
    double p = (n & 1) ? cr_random_sin_poly(x, x2) : cr_random_cos_poly(x2);
    return (n == 1 || n == 2) ? -p : p;
}

/* Element i of the normal stream, in float64. */
CR_RANDOM_FN double cr_random_normal(uint64_t key, uint64_t i)
{
    double u1 = CR_RADD(1.0, -CR_RMUL((double)(cr_random_word(key, 2 * i) >> 11), 0x1p-53));
    double u2 = CR_RMUL((double)(cr_random_word(key, 2 * i + 1) >> 11), 0x1p-53);
    return CR_RMUL(CR_RSQRT(CR_RMUL(-2.0, cr_random_log(u1))), cr_random_cos_turns(u2));
}

/* Element i of the uniform stream with p significand bits: exact in any dtype of p bits. */
CR_RANDOM_FN double cr_random_uniform(uint64_t key, uint64_t i, int p)
{
    double k = (double)(cr_random_word(key, i) >> (64 - p));
    return CR_RADD(CR_RMUL(k, cr_random_bits_double((uint64_t)(1023 + 1 - p) << 52)), -1.0); /* k 2^(1-p) - 1 */
}

/* float32 -> float16 bits, round to nearest even (as numpy's astype(float16)). The values here
 * are finite and below 10 in magnitude; overflow still rounds to infinity. */
CR_RANDOM_FN uint16_t cr_random_to_f16(float f)
{
    uint32_t x = cr_random_float_bits(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu, e = ax >> 23;
    if (ax < 0x33000000u) /* below 2^-25: zero (2^-25 itself ties to the even 0) */
        return (uint16_t)sign;
    uint32_t h, rem, half;
    if (e < 113) { /* a subnormal float16: units of 2^-24 */
        uint32_t m = (ax & 0x7fffffu) | 0x800000u, shift = 126 - e;
        h = m >> shift;
        rem = m & ((1u << shift) - 1);
        half = 1u << (shift - 1);
    } else {
        if (ax >= 0x477ff000u) /* 65520 and up round to infinity */
            return (uint16_t)(sign | 0x7c00u);
        h = ((e - 112) << 10) | ((ax >> 13) & 0x3ffu);
        rem = ax & 0x1fffu;
        half = 0x1000u;
    }
    if (rem > half || (rem == half && (h & 1)))
        h++; /* a carry out of the significand steps the exponent, as it should */
    return (uint16_t)(sign | h);
}

/* float32 -> bfloat16 bits, round to nearest even (finite values). */
CR_RANDOM_FN uint16_t cr_random_to_bf16(float f)
{
    uint32_t x = cr_random_float_bits(f);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

CR_RANDOM_FN float cr_random_to_f32(double v)
{
#ifdef __CUDA_ARCH__
    return __double2float_rn(v);
#else
    return (float)v;
#endif
}

/* Significand bits of a float dtype (uniform values are exact in it). */
CR_RANDOM_FN int cr_random_precision(cr_dtype dt)
{
    return dt == CR_DT_F64 ? 53 : dt == CR_DT_F32 ? 24 : dt == CR_DT_F16 ? 11 : 8;
}

/* Writes element i of stream (key, dist) into out[i] as dt: F64, F32, F16, BF16 (any dist) or
 * U8 (uniform bytes). */
CR_RANDOM_FN void cr_random_store(void *out, uint64_t i, cr_dtype dt, bool normal, uint64_t key)
{
    if (dt == CR_DT_U8) {
        ((uint8_t *)out)[i] = (uint8_t)(cr_random_word(key, i) >> 56);
        return;
    }
    double v = normal ? cr_random_normal(key, i) : cr_random_uniform(key, i, cr_random_precision(dt));
    if (dt == CR_DT_F64) {
        ((double *)out)[i] = v;
        return;
    }
    float f = cr_random_to_f32(v);
    if (dt == CR_DT_F32)
        ((float *)out)[i] = f;
    else
        ((uint16_t *)out)[i] = dt == CR_DT_F16 ? cr_random_to_f16(f) : cr_random_to_bf16(f);
}

/* Whether the generator makes dt in this distribution (normal bytes: no). */
CR_RANDOM_FN bool cr_random_supports(cr_dtype dt, bool normal)
{
    return dt == CR_DT_F64 || dt == CR_DT_F32 || dt == CR_DT_F16 || dt == CR_DT_BF16 || (dt == CR_DT_U8 && !normal);
}

#ifdef __cplusplus
extern "C" {
#endif
/* count elements of the stream into host memory p (the cpu backend's fill_random, and every
 * backend's host fallback), on a few threads when it is big. */
void cr_random_fill_host(void *p, uint64_t count, cr_dtype dt, bool normal, uint64_t seed);
#ifdef __cplusplus
}
#endif

#endif
