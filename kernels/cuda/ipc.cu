/* A client's device memory opened in the daemon (Triton's CUDA shared memory extension): the
 * client exports an allocation with cudaIpcGetMemHandle, the daemon maps it with
 * cudaIpcOpenMemHandle, and kernels read operands and write results there. No copy at all.
 *
 * A client states the region's byte_size; the daemon checks it against the allocation's real
 * extent (the driver's cuMemGetAddressRange, reached through the runtime's entry-point query so
 * the daemon still starts on machines without a driver): a kernel that wrote past the end of
 * someone's allocation would be a sticky device fault, i.e. a restart of the whole daemon. */
#include <cuda.h>
#include <string.h>

#include "kernels/cuda/cuda_worker.h"

typedef CUresult (*address_range_fn)(CUdeviceptr *base, size_t *size, CUdeviceptr p);

static address_range_fn address_range(void)
{
    static address_range_fn fn; /* set once; a race writes the same value */
    if (!fn) {
        void *p = NULL;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &p, 12000, cudaEnableDefault, &q) ==
                cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            fn = (address_range_fn)p;
        else
            cudaGetLastError();
    }
    return fn;
}

/* The bytes from p to the end of its allocation; 0 when the driver cannot say. */
static size_t bytes_to_end(void *p)
{
    address_range_fn fn = address_range();
    CUdeviceptr base = 0;
    size_t size = 0;
    if (!fn || fn(&base, &size, (CUdeviceptr)p) != CUDA_SUCCESS)
        return 0;
    return (size_t)(base + size - (CUdeviceptr)p);
}

extern "C" cr_status cr_cuda_ipc_open(const void *handle, size_t handle_len, int device, size_t bytes,
                                      void **out, char *err, size_t errlen)
{
    cudaIpcMemHandle_t h;
    void *p = NULL;
    cudaError_t rc;
    *out = NULL;
    if (handle_len != sizeof h) {
        snprintf(err, errlen, "a CUDA IPC handle is %zu bytes; this one is %zu", sizeof h, handle_len);
        return CR_E_INVALID;
    }
    memcpy(&h, handle, sizeof h);
    if ((rc = cudaSetDevice(device)) != cudaSuccess ||
        (rc = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess)) != cudaSuccess) {
        cr_status st = cr_cuda_status(rc); /* clears it: a bad handle is the client's error */
        snprintf(err, errlen, "cannot open the CUDA IPC handle on device %d: %s", device, cudaGetErrorString(rc));
        return st == CR_E_FATAL ? CR_E_FATAL : CR_E_INVALID;
    }
    size_t room = bytes_to_end(p);
    if (room < bytes) {
        cudaIpcCloseMemHandle(p);
        if (room)
            snprintf(err, errlen, "byte_size %zu is past the end of the allocation (%zu bytes)", bytes, room);
        else
            snprintf(err, errlen, "the driver cannot tell the allocation's size, so byte_size cannot be checked");
        return CR_E_INVALID;
    }
    *out = p;
    return CR_OK;
}

extern "C" void cr_cuda_ipc_close(void *p)
{
    if (p && cudaIpcCloseMemHandle(p) != cudaSuccess)
        cudaGetLastError();
}

/* Small host results (histogram edges) into a client's device region. */
extern "C" cr_status cr_cuda_device_write(void *dst, const void *src, size_t bytes)
{
    cudaError_t rc = cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
    return cr_cuda_status(rc);
}
