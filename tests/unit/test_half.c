/* Unit tests of the float16/bfloat16 conversions (kernels/half.c): every finite bit pattern
 * round-trips, every midpoint between neighbours rounds to the even one (and a hair off it, to
 * the nearer), overflow and NaN, and gcc's own _Float16 agrees on random doubles where gcc has it. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/half.h"
#include "server/codec/numfmt.h"
#include "tests/unit/check.h"

static uint16_t inf_of(cr_dtype dt) { return dt == CR_DT_BF16 ? 0x7f80u : 0x7c00u; }

/* Round trip, and the rounding at the midpoint to the next larger magnitude. */
static void test_every_pattern(cr_dtype dt, const char *name)
{
    int trips = 0, ties = 0, near = 0;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        uint16_t b = (uint16_t)h, up = (uint16_t)(h + 1);
        if ((b & 0x7fffu) >= inf_of(dt))
            continue;
        double v = cr_half_to_float(dt, b);
        trips += cr_half_from_double(dt, v) != b;
        if ((up & 0x7fffu) >= inf_of(dt) || (up & 0x8000u) != (b & 0x8000u))
            continue;
        double w = cr_half_to_float(dt, up), mid = (v + w) / 2; /* exact in double */
        uint16_t even = (b & 1u) ? up : b;
        ties += cr_half_from_double(dt, mid) != even;
        near += cr_half_from_double(dt, nextafter(mid, v)) != b;
        near += cr_half_from_double(dt, nextafter(mid, w)) != up;
    }
    CHECK_MSG(trips == 0, "%s: %d patterns do not round-trip", name, trips);
    CHECK_MSG(ties == 0, "%s: %d midpoints not rounded to even", name, ties);
    CHECK_MSG(near == 0, "%s: %d values beside a midpoint rounded the wrong way", name, near);
}

static void test_known(void)
{
    CHECK(cr_f16_from_double(0.1) == 0x2e66);
    CHECK(cr_f16_from_double(-2.0) == 0xc000);
    CHECK(cr_f16_from_double(65504.0) == 0x7bff);
    CHECK(cr_f16_from_double(65519.99) == 0x7bff);
    CHECK(cr_f16_from_double(65520.0) == 0x7c00); /* the tie goes up, to infinity */
    CHECK(cr_f16_from_double(1e300) == 0x7c00 && cr_f16_from_double(-INFINITY) == 0xfc00);
    CHECK(cr_f16_from_double(0x1p-24) == 0x0001 && cr_f16_from_double(0x1p-25) == 0x0000);
    CHECK(cr_f16_from_double(0x1.0001p-25) == 0x0001 && cr_f16_from_double(1e-300) == 0);
    CHECK(cr_f16_from_double(-0.0) == 0x8000);
    CHECK(cr_f16_from_double(0x1.ffcp-15) == 0x0400); /* the largest subnormal's carry: 2^-14 */
    uint16_t n = cr_f16_from_double(NAN);
    CHECK((n & 0x7c00u) == 0x7c00u && (n & 0x3ffu) != 0);
    CHECK(isnan(cr_f16_to_float(n)) && cr_f16_to_float(0x7c00) == INFINITY);
    CHECK(cr_f16_to_float(0x0001) == 0x1p-24f && cr_f16_to_float(0x3c00) == 1.0f);
    CHECK(cr_bf16_from_double(1.0) == 0x3f80 && cr_bf16_from_double(0.1) == 0x3dcd);
    CHECK(cr_bf16_from_double(0x1.fep127) == 0x7f7f && cr_bf16_from_double(0x1.ffp127) == 0x7f80);
    CHECK(cr_bf16_from_double(1e39) == 0x7f80 && cr_bf16_from_double(0x1p-133) == 0x0001);
    CHECK(cr_bf16_to_float(0x4049) == 3.140625f && isnan(cr_bf16_to_float(cr_bf16_from_double(-NAN))));
    CHECK(cr_half_max(CR_DT_F16) == 65504.0 && cr_half_to_float(CR_DT_BF16, 0x7f7f) == cr_half_max(CR_DT_BF16));
}

/* The bulk forms equal the scalar ones. */
static void test_bulk(void)
{
    float src[7] = {0.1f, -3.5f, 1e-8f, 70000.0f, 0x1.0001p-25f, 1.0f / 3, 0.0f}, back[7];
    uint16_t out[7];
    int bad = 0;
    for (int d = 0; d < 2; d++) {
        cr_dtype dt = d ? CR_DT_BF16 : CR_DT_F16;
        cr_half_narrow(dt, src, out, 7);
        cr_half_widen(dt, out, back, 7);
        for (int i = 0; i < 7; i++)
            bad += out[i] != cr_half_from_double(dt, src[i]) || back[i] != cr_half_to_float(dt, out[i]);
    }
    CHECK_MSG(bad == 0, "bulk conversions: %d differ from the scalar ones", bad);
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__FLT16_MAX__)
/* gcc's _Float16 as a second opinion on random doubles of every magnitude a float16 has. */
static void test_against_gcc(void)
{
    uint64_t x = 88172645463325252ull;
    int bad = 0;
    for (int i = 0; i < 2000000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        double v = ldexp((double)(x >> 11) / 9007199254740992.0, (int)(x % 48) - 30);
        _Float16 g = (_Float16)v;
        uint16_t gb;
        memcpy(&gb, &g, sizeof gb);
        bad += cr_f16_from_double((x & 1) ? -v : v) != (uint16_t)((x & 1) ? gb ^ 0x8000u : gb);
    }
    CHECK_MSG(bad == 0, "%d random doubles round differently from gcc's _Float16", bad);
}
#else
static void test_against_gcc(void) {}
#endif

/* cr_fmt_half keeps each value's shortest digits once found: the first and the cached answer of
 * every bit pattern match the search done here from scratch (printf at 1..5 digits until strtod
 * rounds back), and each parses back to its pattern. */
static void test_format_every_pattern(cr_dtype dt, const char *name)
{
    int differ = 0, trips = 0;
    for (uint32_t h = 0; h < (1u << 16); h++) {
        double v = cr_half_to_float(dt, (uint16_t)h);
        char want[64], first[64], again[64], digits[64];
        double d = v;
        for (int p = 1; isfinite(v) && p <= 5; p++) {
            snprintf(digits, sizeof digits, "%.*e", p - 1, v);
            d = strtod(digits, NULL);
            if (cr_half_from_double(dt, d) == h)
                break;
        }
        want[cr_fmt_f64(want, d)] = '\0';
        first[cr_fmt_half(first, (uint16_t)h, dt)] = '\0';
        again[cr_fmt_half(again, (uint16_t)h, dt)] = '\0';
        differ += strcmp(want, first) != 0 || strcmp(first, again) != 0;
        trips += isfinite(v) && cr_half_from_double(dt, strtod(first, NULL)) != h;
    }
    CHECK_MSG(differ == 0, "%s: %d patterns written otherwise than the search, or than the first time", name, differ);
    CHECK_MSG(trips == 0, "%s: %d written values do not read back as their pattern", name, trips);
}

int main(void)
{
    test_format_every_pattern(CR_DT_F16, "float16");
    test_format_every_pattern(CR_DT_BF16, "bfloat16");
    test_every_pattern(CR_DT_F16, "float16");
    test_every_pattern(CR_DT_BF16, "bfloat16");
    test_known();
    test_bulk();
    test_against_gcc();
    return check_summary("test_half");
}
