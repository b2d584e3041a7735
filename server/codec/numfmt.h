/* Number formatting for JSON responses: shortest text that reads back to the same value.
 *
 * Each function writes into out (at least CR_NUMFMT_MAX bytes), NUL-terminates, and returns the
 * length. Non-finite values have no JSON spelling: they are written as null. Floats round-trip
 * exactly both through a correctly rounding strtof and through numpy's way (parse as double,
 * then round to float32). */
#ifndef CRUNCHD_NUMFMT_H
#define CRUNCHD_NUMFMT_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

#define CR_NUMFMT_MAX 32

size_t cr_fmt_u64(char *out, uint64_t v);
size_t cr_fmt_i64(char *out, int64_t v);
size_t cr_fmt_f32(char *out, float v);
size_t cr_fmt_f64(char *out, double v);
/* A float16 or bfloat16 (dt) given as its bits: shortest for its own precision. */
size_t cr_fmt_half(char *out, uint16_t h, cr_dtype dt);

/* v with three decimals, as printf's "%.3f" but without printf (durations in milliseconds, on
 * every request's Server-Timing and log line): llround(v * 1000), which may differ from printf's
 * last digit for a v within an ulp of a half thousandth. */
size_t cr_fmt_fixed3(char *out, double v);

#endif
