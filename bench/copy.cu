/* Pinned host<->device copy rates, the floor the end-to-end benchmark compares against.
 *   build/bench/copy [MiB]   prints "h2d_gbps=… d2h_gbps=…" (medians of 20 copies)
 * scripts/bench_e2e.py reads stdout as key=value words, so the device line goes to stderr. */
#include "tools/gpu/harness.cuh"
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 256;
    size_t bytes = mib << 20;
    void *host = NULL, *dev = NULL;
    gpu_print_clocks(stderr);
    CK(cudaHostAlloc(&host, bytes, cudaHostAllocDefault));
    CK(cudaMalloc(&dev, bytes));
    for (size_t i = 0; i < bytes; i += 4096)
        ((char *)host)[i] = (char)i; /* touch every page: no first-touch cost in the timing */
    gpu_timer timer;
    gpu_timer_create(&timer, false); /* the PCIe link is the bottleneck, not L2 */
    float h2d = gpu_time_median_ms(&timer, [&] { CK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice)); }, 20);
    float d2h = gpu_time_median_ms(&timer, [&] { CK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost)); }, 20);
    gpu_timer_destroy(&timer);
    printf("h2d_gbps=%.2f d2h_gbps=%.2f bytes=%zu\n", bytes / (h2d * 1e6), bytes / (d2h * 1e6), bytes);
    CK(cudaFreeHost(host));
    CK(cudaFree(dev));
    return 0;
}
