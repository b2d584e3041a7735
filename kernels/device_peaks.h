/* A GPU's peak rates from what its runtime reports (SM count and clock, memory clock and bus
 * width, compute capability): the roofline of /v1/info and of the page at GET /, and the peak lines
 * of the benchmarks' plots (tools/gpu/harness.cuh). Plain C: no device is asked here. */
#ifndef CRUNCHD_DEVICE_PEAKS_H
#define CRUNCHD_DEVICE_PEAKS_H

#ifdef __cplusplus
extern "C" {
#endif

/* GFLOP/s at the rated SM clock (dense), and GB/s of device memory; 0 where unknown. */
typedef struct {
    double fp32, fp64, fp64_tensor, tf32_tensor, fp16_tensor, bf16_tensor;
    double memory_gbs;
} cr_device_peaks;

/* Lanes x 2 flops (an FMA) or tensor flops per SM and clock, by compute capability, x SMs x MHz;
 * memory: its clock x 2 (DDR) x bus width / 8. */
cr_device_peaks cr_device_peaks_of(int cc_major, int cc_minor, int sms, int sm_mhz, int mem_mhz, int bus_bits);

#ifdef __cplusplus
}
#endif

#endif
