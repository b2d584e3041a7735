/* Peak rates by compute capability; see device_peaks.h. */
#include "kernels/device_peaks.h"

#include <stddef.h>

/* Per SM and clock: FP32 and FP64 FMA lanes (the CUDA programming guide's arithmetic throughput
 * table), and dense tensor-core flops, derived from NVIDIA's datasheet peaks as peak / (SMs x
 * clock): A100 SXM (108 SMs, 1410 MHz): FP64 19.5, TF32 156, FP16/BF16 312 TFLOP/s -> 128, 1024,
 * 2048. H100 SXM (132 SMs): TF32 494.7 and FP16/BF16 989.4 TFLOP/s, quoted at 1830 MHz -> 2048 and
 * 4096; FP64 66.9 TFLOP/s, quoted at 1980 MHz -> 256 (the FP64 tensor rate is needed beside the
 * FP64 lanes' because cuBLAS DGEMM uses it and runs above the lanes' peak). 0: unknown (tensor
 * rates whose datasheets were not checked, capabilities not in the table). Keyed by compute
 * capability, so a cut-down part of a chip (H800's FP64, H20's tensor cores) is overstated. */
static const int rates[][8] = {
    /* major, minor, FP32 lanes, FP64 lanes, FP64 tensor, TF32, FP16, BF16 tensor flops */
    {7, 0, 64, 32, 0, 0, 0, 0},           {7, 5, 64, 2, 0, 0, 0, 0},
    {8, 0, 64, 32, 128, 1024, 2048, 2048}, {8, 6, 128, 2, 0, 0, 0, 0},
    {8, 9, 128, 2, 0, 0, 0, 0},           {9, 0, 128, 64, 256, 2048, 4096, 4096},
};

cr_device_peaks cr_device_peaks_of(int cc_major, int cc_minor, int sms, int sm_mhz, int mem_mhz, int bus_bits)
{
    cr_device_peaks p = {0};
    const int *r = NULL;
    for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++)
        if (rates[i][0] == cc_major && rates[i][1] == cc_minor)
            r = rates[i] + 2;
    double per_flop = sms * (double)sm_mhz / 1e3; /* GFLOP/s of one flop per SM and clock */
    if (r) {
        p.fp32 = 2 * r[0] * per_flop;
        p.fp64 = 2 * r[1] * per_flop;
        p.fp64_tensor = r[2] * per_flop;
        p.tf32_tensor = r[3] * per_flop;
        p.fp16_tensor = r[4] * per_flop;
        p.bf16_tensor = r[5] * per_flop;
    }
    p.memory_gbs = mem_mhz * 2.0 * bus_bits / 8 / 1e3;
    return p;
}
