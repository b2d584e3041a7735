/* Pinned host<->device copy rates, the floor the end-to-end benchmark compares against.
 *   build/bench/copy [MiB]   prints "h2d_gbps=… d2h_gbps=…" (medians of 20 copies) */
#include "../tests/gpu/gpu_die.h"
#include <stdio.h>
#include <stdlib.h>

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Median milliseconds of `reps` copies of `bytes` in direction `kind`. */
static int time_copies(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, float *median)
{
    enum { reps = 20 };
    float ms[reps];
    cudaEvent_t t0, t1;
    CK(cudaEventCreate(&t0));
    CK(cudaEventCreate(&t1));
    CK(cudaMemcpy(dst, src, bytes, kind)); /* warm-up */
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(t0));
        CK(cudaMemcpyAsync(dst, src, bytes, kind));
        CK(cudaEventRecord(t1));
        CK(cudaEventSynchronize(t1));
        CK(cudaEventElapsedTime(&ms[r], t0, t1));
    }
    qsort(ms, reps, sizeof ms[0], cmp_float);
    *median = ms[reps / 2];
    CK(cudaEventDestroy(t0));
    CK(cudaEventDestroy(t1));
    return 0;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 256;
    size_t bytes = mib << 20;
    void *host = NULL, *dev = NULL;
    float h2d, d2h;
    CK(cudaHostAlloc(&host, bytes, cudaHostAllocDefault));
    CK(cudaMalloc(&dev, bytes));
    for (size_t i = 0; i < bytes; i += 4096)
        ((char *)host)[i] = (char)i; /* touch every page: no first-touch cost in the timing */
    if (time_copies(dev, host, bytes, cudaMemcpyHostToDevice, &h2d) ||
        time_copies(host, dev, bytes, cudaMemcpyDeviceToHost, &d2h))
        return 1;
    printf("h2d_gbps=%.2f d2h_gbps=%.2f bytes=%zu\n", bytes / (h2d * 1e6), bytes / (d2h * 1e6), bytes);
    CK(cudaFreeHost(host));
    CK(cudaFree(dev));
    return 0;
}
