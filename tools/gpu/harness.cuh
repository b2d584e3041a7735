/* The GPU test and benchmark programs' shared harness (bench/, tests/gpu/): a check that ends
 * the program on a failed CUDA or cuBLAS call, and one way to time a kernel, so every number in
 * bench/results/ was measured the same way. Header-only: each program is one translation unit.
 * (The daemon's library must not exit: it unwinds instead, kernels/cuda/cuda_check.h.) */
#ifndef CRUNCHD_GPU_HARNESS_CUH
#define CRUNCHD_GPU_HARNESS_CUH

#include <algorithm>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

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
 * These are the rated (peak) clocks the runtime reports, not the clocks of the moment: those
 * (and whether the GPU throttled or was locked lower) need NVML, which nothing here links;
 * this is the best available without a new dependency. */
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

#endif
