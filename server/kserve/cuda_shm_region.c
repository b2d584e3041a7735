/* The CUDA shared-memory region table; see cuda_shm_region.h. */
#include "server/kserve/cuda_shm_region.h"

#include "server/clock.h"
#include "server/engine/owned.h"
#include "server/obs/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_EXACT 9007199254740992ull /* 2^53: JSON numbers are exact up to here */

struct cr_cuda_shm_region {
    cr_owned node; /* first: the list's node is the region */
    cr_cuda_shm_info info;
    char *base;          /* the client's allocation, opened in this process (a device pointer) */
};

static void region_free(cr_owned *n);
static cr_owned_list regions = CR_OWNED_LIST(region_free);
static const cr_backend *backend;   /* set once at start, before any request */
static int devices;
static double idle_s;

void cr_cuda_shm_init(const cr_backend *b, int n_devices, double idle)
{
    backend = b;
    devices = n_devices;
    idle_s = idle;
}

bool cr_cuda_shm_registered(const char *name) { return cr_owned_exists(&regions, name); }

/* ---- registration --------------------------------------------------------------------------- */

static int check_request(const char *name, int device_id, uint64_t byte_size, cr_error *err)
{
    if (!backend || !backend->ipc_open)
        return cr_fail(err, 400, "unsupported", "name",
                       "CUDA shared memory needs the cuda backend; this daemon runs on %s",
                       backend ? backend->name : "no backend");
    if (cr_shm_check_name(name, err))
        return -1;
    if (device_id < 0 || device_id >= devices)
        return cr_fail(err, 400, "invalid_field", "device_id", "device_id must be from 0 to %d", devices - 1);
    if (byte_size == 0 || byte_size > MAX_EXACT)
        return cr_fail(err, 400, "invalid_field", "byte_size", "byte_size must be from 1 to 2^53");
    return 0;
}

/* in_system_table: asked before this lock is taken, so no thread holds both tables' locks. */
static int admit_locked(const char *name, bool in_system_table, cr_error *err)
{
    if (cr_owned_find_locked(&regions, name) || in_system_table)
        return cr_fail(err, 409, "already_exists", "name",
                       "shared memory region '%s' is already registered (unregister it first)", name);
    if (regions.n >= CR_SHM_MAX_REGIONS)
        return cr_fail(err, 507, "shm_limit", "name",
                       "%d CUDA shared memory regions are registered, the most there may be", CR_SHM_MAX_REGIONS);
    return 0;
}

/* Opening a handle maps the client's allocation into this process: done outside the lock, and
 * the name checked again after, as the system table does. */
int cr_cuda_shm_register(const char *name, const void *handle, size_t handle_len, int device_id,
                         uint64_t byte_size, cr_error *err)
{
    if (check_request(name, device_id, byte_size, err))
        return -1;
    bool in_system_table = cr_shm_registered(name);
    pthread_mutex_lock(&regions.mu);
    int rc = admit_locked(name, in_system_table, err);
    pthread_mutex_unlock(&regions.mu);
    if (rc)
        return -1;
    cr_cuda_shm_region *r = calloc(1, sizeof *r);
    if (!r)
        return cr_fail(err, 503, "host_memory", "", "out of memory");
    char why[256] = "";
    void *p = NULL;
    cr_status st = backend->ipc_open(handle, handle_len, device_id, (size_t)byte_size, &p, why, sizeof why);
    if (st != CR_OK) {
        free(r);
        return st == CR_E_FATAL ? cr_fail(err, 503, "device_fault", "", "%s", why)
                                : cr_fail(err, 400, "invalid_field", "raw_handle", "%s", why);
    }
    snprintf(r->info.name, sizeof r->info.name, "%s", name);
    r->info.device_id = device_id;
    r->info.byte_size = byte_size;
    r->base = p;
    r->node.name = r->info.name;
    r->node.byte_size = byte_size;
    r->node.last_used = cr_now();
    in_system_table = cr_shm_registered(name);
    pthread_mutex_lock(&regions.mu);
    if ((rc = admit_locked(name, in_system_table, err)) == 0)
        cr_owned_append_locked(&regions, &r->node);
    pthread_mutex_unlock(&regions.mu);
    if (rc) {
        backend->ipc_close(p);
        free(r);
    }
    return rc;
}

/* ---- unregistration ------------------------------------------------------------------------- */

static void region_free(cr_owned *n)
{
    cr_cuda_shm_region *r = (cr_cuda_shm_region *)n;
    backend->ipc_close(r->base);
    free(r);
}

int cr_cuda_shm_unregister(const char *name, cr_error *err)
{
    int holds = cr_owned_unregister(&regions, name);
    if (holds)
        return cr_fail(err, 409, "in_use", "name",
                       "CUDA shared memory region '%s' is in use by %d request%s; unregister it once they "
                       "finish", name, holds, holds == 1 ? "" : "s");
    return 0;
}

int cr_cuda_shm_unregister_all(cr_error *err)
{
    char kept[160];
    int n_kept = cr_owned_unregister_all(&regions, kept, sizeof kept);
    if (n_kept)
        return cr_fail(err, 409, "in_use", "name",
                       "%d CUDA shared memory region%s in use by running requests stayed registered: %s", n_kept,
                       n_kept == 1 ? "" : "s", kept);
    return 0;
}

void cr_cuda_shm_shutdown(void) { cr_owned_clear(&regions); }

static void copy_info(const cr_owned *n, void *dst)
{
    *(cr_cuda_shm_info *)dst = ((const cr_cuda_shm_region *)n)->info;
}

int cr_cuda_shm_status(const char *name, cr_cuda_shm_info **out, size_t *n, cr_error *err)
{
    int rc = cr_owned_snapshot(&regions, name, sizeof **out, copy_info, (void **)out, n);
    if (rc == -1)
        return cr_fail(err, 404, "not_found", "name", "no CUDA shared memory region '%s' is registered", name);
    if (rc == -2)
        return cr_fail(err, 503, "host_memory", "", "out of memory");
    return 0;
}

/* ---- holds ---------------------------------------------------------------------------------- */

cr_cuda_shm_region *cr_cuda_shm_acquire(const char *name, uint64_t offset, uint64_t bytes, size_t align,
                                        const char *what, void **p, int *device, cr_error *err)
{
    int rc;
    pthread_mutex_lock(&regions.mu);
    cr_cuda_shm_region *r = (cr_cuda_shm_region *)cr_owned_find_locked(&regions, name);
    if (!r)
        rc = cr_fail(err, 400, "invalid_field", what, "%s: no shared memory region '%s' is registered", what, name);
    else if (offset > r->info.byte_size || bytes > r->info.byte_size - offset)
        rc = cr_fail(err, 400, "invalid_field", what,
                     "%s: shared_memory_offset %llu + %llu bytes is past the end of region '%s' (%llu bytes)",
                     what, (unsigned long long)offset, (unsigned long long)bytes, name,
                     (unsigned long long)r->info.byte_size);
    else if (align > 1 && offset % align) /* cudaMalloc's allocations start 256-byte aligned */
        rc = cr_fail(err, 400, "invalid_field", what,
                     "%s: shared_memory_offset %llu is not a multiple of the element size %zu", what,
                     (unsigned long long)offset, align);
    else {
        rc = 0;
        cr_owned_hold_locked(&r->node);
        *p = r->base + offset;
        *device = r->info.device_id;
    }
    pthread_mutex_unlock(&regions.mu);
    return rc ? NULL : r;
}

void cr_cuda_shm_release(void *region)
{
    if (region)
        cr_owned_release(&regions, &((cr_cuda_shm_region *)region)->node, cr_now());
}

/* A client that dies leaves its handle opened here, keeping its allocation alive: what nobody
 * used for --shm-idle-s goes (the system table also watches objects and processes; a CUDA
 * handle offers neither). */
static bool idle_too_long(cr_owned *r, double now)
{
    if (idle_s <= 0 || now - r->last_used <= idle_s)
        return false;
    cr_log("info", "CUDA shared memory region '%s' unregistered: unused for %.0f s (--shm-idle-s)", r->name,
           now - r->last_used);
    return true;
}

int cr_cuda_shm_sweep(double now) { return cr_owned_sweep(&regions, idle_too_long, now); }

int cr_cuda_shm_write(void *dst, const void *src, size_t bytes)
{
    return backend && backend->device_write && backend->device_write(dst, src, bytes) == CR_OK ? 0 : -1;
}

void cr_cuda_shm_usage(uint64_t *n, uint64_t *bytes) { cr_owned_usage(&regions, n, bytes); }
