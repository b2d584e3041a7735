/* float16 and bfloat16 on the host: the 16 bits a request carries, to and from float/double.
 *
 * Conversions into a half type round to nearest, ties to even, from the double given (numpy
 * converts a Python float the same way), overflow to infinity, NaN to a quiet NaN of the same
 * sign. Hand-written because neither compiler we build with offers both types (clang 14 has no
 * x86 _Float16, gcc 12 no __bf16), and a cast through float would round twice. */
#ifndef CRUNCHD_HALF_H
#define CRUNCHD_HALF_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

uint16_t cr_f16_from_double(double v);
uint16_t cr_bf16_from_double(double v);
float cr_f16_to_float(uint16_t h);
float cr_bf16_to_float(uint16_t h);

/* dt is CR_DT_F16 or CR_DT_BF16. */
uint16_t cr_half_from_double(cr_dtype dt, double v);
float cr_half_to_float(cr_dtype dt, uint16_t h);

/* n elements at once: the CPU backend widens its operands and narrows its result. */
void cr_half_widen(cr_dtype dt, const uint16_t *src, float *dst, size_t n);
void cr_half_narrow(cr_dtype dt, const float *src, uint16_t *dst, size_t n);

/* The largest finite value: what a JSON number must not pass. */
double cr_half_max(cr_dtype dt);

#ifdef __cplusplus
}
#endif

#endif
