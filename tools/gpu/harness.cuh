/* The GPU test and benchmark programs' shared harness (bench/, tests/gpu/): a check that ends
 * the program on a failed CUDA or cuBLAS call, one way to time a kernel, so every number in
 * bench/results/ was measured the same way, and a record of the device, its peaks and the SM
 * clock a run got. Header-only: each program is one translation unit.
 * (The daemon's library must not exit: it unwinds instead, kernels/cuda/cuda_check.h.) */
#ifndef CRUNCHD_GPU_HARNESS_CUH
#define CRUNCHD_GPU_HARNESS_CUH

#include <algorithm>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "kernels/device_peaks.h"

static inline void gpu_die_on(cudaError_t e, const char *call, const char *file, int line)
{
    if (e == cudaSuccess)
        return;
    fprintf(stderr, "%s:%d: %s: %s\n", file, line, call, cudaGetErrorString(e));
    exit(2);
}

static inline void gpu_die_on(cublasStatus_t s, const char *call, const char *file, int line)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return;
    fprintf(stderr, "%s:%d: %s: %s\n", file, line, call, cublasGetStatusString(s));
    exit(2);
}

#define CK(call) gpu_die_on((call), #call, __FILE__, __LINE__)

struct gpu_timer {
    cudaEvent_t start, stop;
    int4 *flush; /* NULL: repeats run with whatever the previous one left in L2 */
    size_t flush_bytes;
    int flush_blocks;
};

/* The flush reads rather than writes (cudaMemsetAsync): a write leaves L2 full of dirty lines
 * whose write-back the timed kernel then pays. Measured on an H100 (50 MB L2), a memset flush
 * made a streaming read 30% slower at 32 MiB and 5% at 512 MiB than this read flush did. */
static __global__ void gpu_flush_l2_kernel(int4 *p, size_t n)
{
    int acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int4 v = p[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x5eed) /* never (the buffer is zeros); keeps the loads from being optimised away */
        p[0].x = acc;
}

/* flush_l2 false is for callers that want warm-cache numbers on purpose, or whose data never
 * passes through L2 in a way that matters (host<->device copies). Without a flush the GPU is
 * idle when the start event is recorded, so a few microseconds of launch latency land in the
 * timed span: negligible for milliseconds-long copies, not for microsecond kernels. */
static inline void gpu_timer_create(gpu_timer *t, bool flush_l2 = true)
{
    CK(cudaEventCreate(&t->start));
    CK(cudaEventCreate(&t->stop));
    t->flush = NULL;
    t->flush_bytes = 0;
    t->flush_blocks = 0;
    int dev = 0, l2 = 0, sms = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    if (flush_l2 && l2 > 0) {
        /* twice the L2: reading it leaves none of the timed kernel's lines behind, whatever
         * the replacement policy */
        t->flush_bytes = 2 * (size_t)l2;
        t->flush_blocks = 8 * sms;
        CK(cudaMalloc((void **)&t->flush, t->flush_bytes));
        CK(cudaMemset(t->flush, 0, t->flush_bytes));
    }
}

static inline void gpu_timer_destroy(gpu_timer *t)
{
    CK(cudaEventDestroy(t->start));
    CK(cudaEventDestroy(t->stop));
    CK(cudaFree(t->flush));
    t->flush = NULL;
}

/* Median milliseconds of launch() over at most `reps` timed repeats, after one warm-up (module
 * load, cuBLAS heuristics, clocks leaving idle). launch() must enqueue its work on s (cuBLAS:
 * the handle's stream). With budget_ms > 0, repeats stop once their times add up to more
 * than budget_ms, but never before 3: fast kernels get many repeats, slow ones a few.
 * Before each repeat L2 is flushed outside the timed span, so each repeat reads its inputs
 * from device memory as the daemon's first touch of fresh uploads does, and a repeat is not
 * flattered by the previous one having left its data (small inputs entirely) in L2. */
template <typename Launch>
static float gpu_time_median_ms(gpu_timer *t, const Launch &launch, int reps, cudaStream_t s = 0,
                                double budget_ms = 0)
{
    launch();
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(s));
    std::vector<float> ms;
    double spent = 0;
    for (int r = 0; r < std::max(reps, 1); r++) {
        if (t->flush) {
            gpu_flush_l2_kernel<<<t->flush_blocks, 256, 0, s>>>(t->flush, t->flush_bytes / sizeof(int4));
            CK(cudaGetLastError());
        }
        CK(cudaEventRecord(t->start, s));
        launch();
        CK(cudaGetLastError());
        CK(cudaEventRecord(t->stop, s));
        CK(cudaEventSynchronize(t->stop));
        float x;
        CK(cudaEventElapsedTime(&x, t->start, t->stop));
        ms.push_back(x);
        spent += x;
        if (budget_ms > 0 && r >= 2 && spent > budget_ms)
            break;
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

struct gpu_clocks {
    int sm_mhz, mem_mhz;
};

/* One line naming the device and its clocks, so a benchmark's output says what it ran on.
 * These are the rated (peak) clocks the runtime reports; gpu_measure_sm_mhz() below measures
 * the SM clock of the moment. */
static inline gpu_clocks gpu_print_clocks(FILE *out)
{
    int dev = 0, sm_khz = 0, mem_khz = 0, sms = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, dev));
    CK(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, dev));
    gpu_clocks c = {sm_khz / 1000, mem_khz / 1000};
    fprintf(out, "device: %s, %d SMs, SM clock %d MHz, memory clock %d MHz (rated)\n", prop.name, sms,
            c.sm_mhz, c.mem_mhz);
    return c;
}

/* One thread counts `cycles` of its SM's clock and stores how many it counted. */
static __global__ void gpu_spin_kernel(long long cycles, long long *counted)
{
    long long t0 = clock64(), t;
    do
        t = clock64();
    while (t - t0 < cycles);
    *counted = t - t0;
}

/* The SM clock of the moment in MHz: the SM cycles clock64() counts in one thread for ~40 ms
 * (at the rated clock) over the microseconds between cudaEvents recorded around that kernel.
 * The clock a run actually got is otherwise NVML's to tell, and nothing here links NVML: this
 * needs no new dependency and still shows a card locked low, slowed by heat, or not yet out of
 * idle. What it cannot see: differences between SMs (it counts on one and takes that for all),
 * and the clock during other kernels: a power cap can pull the clock down while a heavy kernel
 * runs and let it back up within milliseconds after, so this light kernel, run just after a
 * sweep, can read higher than the sweep got. The launch latency inside the timed span
 * (microseconds) is under 0.1% of it. */
static inline double gpu_measure_sm_mhz(int rated_mhz)
{
    long long *counted, cycles = (long long)std::max(rated_mhz, 100) * 40000, n = 0;
    cudaEvent_t a, b;
    float ms = 0;
    CK(cudaMalloc((void **)&counted, sizeof *counted));
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaEventRecord(a, 0));
    gpu_spin_kernel<<<1, 1>>>(cycles, counted);
    CK(cudaGetLastError());
    CK(cudaEventRecord(b, 0));
    CK(cudaEventSynchronize(b));
    CK(cudaEventElapsedTime(&ms, a, b));
    CK(cudaMemcpy(&n, counted, sizeof n, cudaMemcpyDeviceToHost));
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    CK(cudaFree(counted));
    return n / (ms * 1e3);
}

/* What a benchmark ran on, for its output and for the plots' peak lines (scripts/bench_plot.py
 * reads it from the sidecar file gpu_run_begin writes next to the CSV). Peaks are GFLOP/s at
 * the RATED SM clock, 0 where unknown; the measured clocks are reported beside them. */
struct gpu_device {
    char name[256];
    int cc_major, cc_minor, sms, sm_mhz, mem_mhz, bus_bits;
    double mhz_start, mhz_end; /* measured, 0 until measured */
    double fp32, fp64, fp64_tensor, tf32_tensor, fp16_tensor, bf16_tensor;
    double hbm_gbs;
    char sidecar[1024];
};

/* The peaks at the rated clocks (kernels/device_peaks.c, which /v1/info uses too). The rated
 * SM clock is the maximum boost: NVIDIA quotes H100 SXM's TF32/FP16 peaks at 1830 MHz, so at its
 * rated 1980 MHz these come out 8% above the datasheet, at a clock the tensor cores do not hold
 * under full load. */
static inline void gpu_set_peaks(gpu_device *d)
{
    cr_device_peaks p = cr_device_peaks_of(d->cc_major, d->cc_minor, d->sms, d->sm_mhz, d->mem_mhz, d->bus_bits);
    d->fp32 = p.fp32;
    d->fp64 = p.fp64;
    d->fp64_tensor = p.fp64_tensor;
    d->tf32_tensor = p.tf32_tensor;
    d->fp16_tensor = p.fp16_tensor;
    d->bf16_tensor = p.bf16_tensor;
    d->hbm_gbs = p.memory_gbs;
}

static inline gpu_device gpu_device_query(void)
{
    gpu_device d = {};
    int dev = 0, sm_khz = 0, mem_khz = 0;
    CK(cudaGetDevice(&dev));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, dev));
    snprintf(d.name, sizeof d.name, "%s", prop.name);
    d.cc_major = prop.major;
    d.cc_minor = prop.minor;
    CK(cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev));
    CK(cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, dev));
    CK(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, dev));
    CK(cudaDeviceGetAttribute(&d.bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev));
    d.sm_mhz = sm_khz / 1000;
    d.mem_mhz = mem_khz / 1000;
    gpu_set_peaks(&d);
    return d;
}

/* "peaks at the rated 1980 MHz (compute capability 9.0), TFLOP/s dense: FP32 66.9, ..." and
 * the HBM bandwidth with its derivation */
static inline void gpu_print_peaks(const gpu_device *d, FILE *out)
{
    const struct {
        const char *name;
        double gflops;
    } p[] = {{"FP32", d->fp32},
             {"FP64", d->fp64},
             {"FP64 tensor", d->fp64_tensor},
             {"TF32 tensor", d->tf32_tensor},
             {"FP16 tensor", d->fp16_tensor},
             {"BF16 tensor", d->bf16_tensor}};
    fprintf(out, "peaks at the rated %d MHz (compute capability %d.%d), TFLOP/s dense:", d->sm_mhz, d->cc_major,
            d->cc_minor);
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        if (p[i].gflops > 0)
            fprintf(out, "%s %s %.1f", i ? "," : "", p[i].name, p[i].gflops / 1e3);
        else
            fprintf(out, "%s %s unknown", i ? "," : "", p[i].name);
    fprintf(out, "\nHBM bandwidth: %d MHz x 2 (DDR) x %d bits / 8 = %.0f GB/s\n", d->mem_mhz, d->bus_bits,
            d->hbm_gbs);
}

/* JSON number, or null for unknown (0) */
static inline void gpu_json_num(FILE *f, const char *key, double v, const char *sep = ",")
{
    if (v > 0)
        fprintf(f, "  \"%s\": %.1f%s\n", key, v, sep);
    else
        fprintf(f, "  \"%s\": null%s\n", key, sep);
}

/* a JSON string: quotes and backslashes escaped, control bytes (none in device names) dropped */
static inline void gpu_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++)
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s >= 0x20)
            fputc(*s, f);
    fputc('"', f);
}

/* the device, clocks and peaks as gpu_run_begin's comment says, rewritten whole each time */
static inline void gpu_write_sidecar(const gpu_device *d)
{
    FILE *f = fopen(d->sidecar, "w");
    if (!f) {
        perror(d->sidecar);
        exit(2);
    }
    fprintf(f, "{\n  \"device\": ");
    gpu_json_str(f, d->name);
    fprintf(f, ",\n  \"compute_capability\": \"%d.%d\",\n  \"sms\": %d,\n", d->cc_major, d->cc_minor, d->sms);
    fprintf(f, "  \"sm_mhz_rated\": %d,\n", d->sm_mhz);
    gpu_json_num(f, "sm_mhz_measured_start", d->mhz_start);
    gpu_json_num(f, "sm_mhz_measured_end", d->mhz_end);
    fprintf(f, "  \"mem_mhz\": %d,\n  \"mem_bus_bits\": %d,\n", d->mem_mhz, d->bus_bits);
    fprintf(f, "  \"peaks_at\": \"rated SM clock\",\n");
    gpu_json_num(f, "fp32_gflops", d->fp32);
    gpu_json_num(f, "fp64_gflops", d->fp64);
    gpu_json_num(f, "fp64_tensor_gflops", d->fp64_tensor);
    gpu_json_num(f, "tf32_tensor_gflops", d->tf32_tensor);
    gpu_json_num(f, "fp16_tensor_gflops", d->fp16_tensor);
    gpu_json_num(f, "bf16_tensor_gflops", d->bf16_tensor);
    gpu_json_num(f, "hbm_gbs", d->hbm_gbs, "");
    fprintf(f, "}\n");
    if (fclose(f) != 0) {
        perror(d->sidecar);
        exit(2);
    }
}

/* Before a benchmark's first sweep: prints the device, its peaks and the SM clock measured now,
 * and writes them to the sidecar next to the CSV (results.csv -> results.device.json), so a
 * run cut short still leaves the plots their peaks. The first spin is a warm-up: it loads the
 * kernel (lazy module loading would land inside the timed span) and lifts the clock from idle. */
static inline gpu_device gpu_run_begin(FILE *out, const char *csv_path)
{
    gpu_print_clocks(out);
    gpu_device d = gpu_device_query();
    size_t n = strlen(csv_path);
    if (n >= 4 && !strcmp(csv_path + n - 4, ".csv"))
        n -= 4;
    snprintf(d.sidecar, sizeof d.sidecar, "%.*s.device.json", (int)n, csv_path);
    gpu_print_peaks(&d, out);
    gpu_measure_sm_mhz(d.sm_mhz);
    d.mhz_start = gpu_measure_sm_mhz(d.sm_mhz);
    fprintf(out, "SM clock measured: %.0f MHz at start (rated %d MHz)\n", d.mhz_start, d.sm_mhz);
    gpu_write_sidecar(&d);
    fprintf(out, "device and peaks: %s\n", d.sidecar);
    return d;
}

/* Right after the last sweep: the clock again, so the output shows whether it held (but see
 * gpu_measure_sm_mhz on what it cannot see), into the output and the sidecar. */
static inline void gpu_run_end(gpu_device *d, FILE *out)
{
    d->mhz_end = gpu_measure_sm_mhz(d->sm_mhz);
    fprintf(out, "SM clock measured: %.0f MHz at start, %.0f MHz at end (rated %d MHz)\n", d->mhz_start,
            d->mhz_end, d->sm_mhz);
    gpu_write_sidecar(d);
}

#endif
