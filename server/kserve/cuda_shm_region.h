/* CUDA shared-memory regions (Triton's cuda_shared_memory extension): a local client allocates
 * device memory, exports it with cudaIpcGetMemHandle and registers the handle under a name with
 * its device and byte_size; inference tensors naming the region are then read and written by the
 * kernels where they are, in the client's device memory: no copy either way.
 *
 * One table for the daemon, behind a mutex, alike in its rules to the system table
 * (shm_region.h), with which it shares one namespace: a name is registered in one of the two.
 * The backend opens each handle once (its ipc_open, which checks byte_size against the real
 * allocation) and closes it when the region is unregistered; a region a request holds cannot be
 * unregistered (409 in_use). The memory is the client's: nothing is charged to the budget. */
#ifndef CRUNCHD_CUDA_SHM_REGION_H
#define CRUNCHD_CUDA_SHM_REGION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"
#include "server/error.h"
#include "server/kserve/shm_region.h"

typedef struct cr_cuda_shm_region cr_cuda_shm_region;

/* What GET /v2/cudasharedmemory/status reports of a region. */
typedef struct {
    char name[CR_SHM_NAME_MAX + 1];
    int device_id;
    uint64_t byte_size;
} cr_cuda_shm_info;

/* b's ipc_open opens handles; a backend without one (cpu) refuses every registration. Regions
 * no request used for idle_s seconds (0: never) are unregistered by cr_cuda_shm_sweep. */
void cr_cuda_shm_init(const cr_backend *b, int n_devices, double idle_s);
/* Unregisters the idle regions no request holds; how many. */
int cr_cuda_shm_sweep(double now);
/* Closes every handle (at exit, once no job is left to hold one). */
void cr_cuda_shm_shutdown(void);

/* Opens the cudaIpcMemHandle (handle_len bytes) on device_id as region name. -1 with err: no
 * cuda backend (400 unsupported), a bad name, device or handle, byte_size past the allocation
 * (400), the name taken in either table (409 already_exists), the table full (507 shm_limit). */
int cr_cuda_shm_register(const char *name, const void *handle, size_t handle_len, int device_id,
                         uint64_t byte_size, cr_error *err);
/* As cr_shm_unregister and cr_shm_unregister_all, for this table. */
int cr_cuda_shm_unregister(const char *name, cr_error *err);
int cr_cuda_shm_unregister_all(cr_error *err);
/* The named region (NULL: every one) into *out (malloc'd); -1 with 404 for an unknown name. */
int cr_cuda_shm_status(const char *name, cr_cuda_shm_info **out, size_t *n, cr_error *err);

/* Whether name is a region of this table (else it may be the system table's). */
bool cr_cuda_shm_registered(const char *name);
/* A hold on bytes [offset, offset + bytes) of region name: *p is a device pointer on *device.
 * NULL with err 400 as cr_shm_acquire. */
cr_cuda_shm_region *cr_cuda_shm_acquire(const char *name, uint64_t offset, uint64_t bytes, size_t align,
                                        const char *what, void **p, int *device, cr_error *err);
void cr_cuda_shm_release(void *region);

/* Copies small host results (histogram edges) into a held window's device memory; -1 on failure. */
int cr_cuda_shm_write(void *dst, const void *src, size_t bytes);

/* Registered regions and their bytes, for the metrics. */
void cr_cuda_shm_usage(uint64_t *regions, uint64_t *bytes);

#endif
