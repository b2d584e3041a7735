/* The opt-in a kernel needs to use more than 48 KB of dynamic shared memory. cudaFuncSetAttribute
 * holds for the current device only, and costs ~0.1 ms of host time per call: so once per kernel
 * and device. (Once per process left every other GPU of a machine refusing the launch with
 * "invalid argument", from whichever device ran the kernel second.) */
#ifndef CRUNCHD_SMEM_OPT_IN_CUH
#define CRUNCHD_SMEM_OPT_IN_CUH

#include <atomic>

#include <cuda_runtime.h>

/* The devices a kernel has been opted in on, a bit each (devices 0-63): one per kernel, static. */
struct cr_smem_opt_in {
    std::atomic<unsigned long long> devices{0};
};

template <typename K> static inline cudaError_t cr_opt_in_smem(cr_smem_opt_in &o, K kernel, size_t bytes)
{
    int d = 0;
    cudaError_t e = cudaGetDevice(&d);
    if (e != cudaSuccess)
        return e;
    unsigned long long bit = 1ull << (d & 63);
    if (o.devices.load(std::memory_order_acquire) & bit)
        return cudaSuccess;
    e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    if (e == cudaSuccess) /* two threads racing set the same value twice: harmless */
        o.devices.fetch_or(bit, std::memory_order_release);
    return e;
}

#endif
