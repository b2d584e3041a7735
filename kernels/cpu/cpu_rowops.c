/* Double-accumulating row primitives shared by the reference GEMM and AᵀA. Kept apart from the
 * loops that call them so each loop is typed once here instead of once per kernel. */
#include "kernels/cpu/cpu_internal.h"

void cpu_axpy_f32(double a, const float *x, double *acc, int64_t len)
{
    for (int64_t j = 0; j < len; j++)
        acc[j] += a * (double)x[j];
}

void cpu_axpy_f64(double a, const double *x, double *acc, int64_t len)
{
    for (int64_t j = 0; j < len; j++)
        acc[j] += a * x[j];
}

double cpu_dot_f32(const double *row, const float *x, int64_t len)
{
    double s = 0.0;
    for (int64_t p = 0; p < len; p++)
        s += row[p] * (double)x[p];
    return s;
}

double cpu_dot_f64(const double *row, const double *x, int64_t len)
{
    double s = 0.0;
    for (int64_t p = 0; p < len; p++)
        s += row[p] * x[p];
    return s;
}
