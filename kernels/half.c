/* float16/bfloat16 conversions; see half.h. */
#include "kernels/half.h"

#include <math.h>
#include <string.h>

/* A binary format of 1 sign bit, ebits exponent bits and mbits stored mantissa bits. */
typedef struct {
    int mbits, bias;
} half_format;

static const half_format F16 = {10, 15}, BF16 = {7, 127};

static uint16_t inf_bits(half_format f) { return (uint16_t)(((2 * f.bias + 1) << f.mbits)); }

/* Round |v| onto the format's grid: the quantum is 2^(exponent - mbits), never below the
 * subnormals' 2^(1 - bias - mbits). ldexp by a power of two is exact, so rint() (ties to even in
 * the default rounding mode, which nothing here changes) rounds exactly once. The encoding then
 * falls out: a subnormal's bits are its count of quanta, and a carry out of the mantissa lands
 * on the next exponent, or on infinity. */
static uint16_t from_double(half_format f, double v)
{
    uint16_t sign = signbit(v) ? 0x8000u : 0;
    double a = fabs(v);
    if (isnan(v))
        return (uint16_t)(sign | inf_bits(f) | (1u << (f.mbits - 1)));
    if (a == 0)
        return sign;
    if (isinf(a))
        return (uint16_t)(sign | inf_bits(f));
    int ex;
    (void)frexp(a, &ex); /* a = frac * 2^ex, frac in [0.5, 1): the exponent is ex - 1 */
    int e = ex - 1, emin = 1 - f.bias;
    if (e > f.bias) /* far past the largest finite value, and out of int range below */
        return (uint16_t)(sign | inf_bits(f));
    int q = (e < emin ? emin : e) - f.mbits;
    double r = rint(ldexp(a, -q));
    uint32_t bits = e < emin ? (uint32_t)r : ((uint32_t)(e + f.bias) << f.mbits) + (uint32_t)r - (1u << f.mbits);
    if (bits > inf_bits(f))
        bits = inf_bits(f);
    return (uint16_t)(sign | bits);
}

uint16_t cr_f16_from_double(double v) { return from_double(F16, v); }
uint16_t cr_bf16_from_double(double v) { return from_double(BF16, v); }

float cr_bf16_to_float(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float cr_f16_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
    if (e == 0) { /* zero or subnormal: m quanta of 2^-24, exact in float */
        float f = ldexpf((float)m, -24);
        return sign ? -f : f;
    }
    if (e == 31)
        u = sign | 0x7f800000u | (m << 13);
    else
        u = sign | ((e - 15 + 127) << 23) | (m << 13);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t cr_half_from_double(cr_dtype dt, double v)
{
    return dt == CR_DT_BF16 ? cr_bf16_from_double(v) : cr_f16_from_double(v);
}

float cr_half_to_float(cr_dtype dt, uint16_t h) { return dt == CR_DT_BF16 ? cr_bf16_to_float(h) : cr_f16_to_float(h); }

void cr_half_widen(cr_dtype dt, const uint16_t *src, float *dst, size_t n)
{
    if (dt == CR_DT_BF16) {
        for (size_t i = 0; i < n; i++)
            dst[i] = cr_bf16_to_float(src[i]);
        return;
    }
    for (size_t i = 0; i < n; i++)
        dst[i] = cr_f16_to_float(src[i]);
}

void cr_half_narrow(cr_dtype dt, const float *src, uint16_t *dst, size_t n)
{
    half_format f = dt == CR_DT_BF16 ? BF16 : F16;
    for (size_t i = 0; i < n; i++)
        dst[i] = from_double(f, src[i]);
}

double cr_half_max(cr_dtype dt) { return dt == CR_DT_BF16 ? 0x1.fep127 : 65504.0; }
