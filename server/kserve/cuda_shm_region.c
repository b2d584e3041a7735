/* The CUDA shared-memory region table; see cuda_shm_region.h. */
#include "server/kserve/cuda_shm_region.h"

#include "server/clock.h"
#include "server/obs/log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_EXACT 9007199254740992ull /* 2^53: JSON numbers are exact up to here */

struct cr_cuda_shm_region {
    cr_cuda_shm_info info;
    char *base;         /* the client's allocation, opened in this process (a device pointer) */
    int holds;          /* requests holding part of it; guarded by mu, as is last_used */
    double last_used;   /* cr_now() of its registration or its last hold's end */
    cr_cuda_shm_region *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static cr_cuda_shm_region *regions; /* guarded by mu, as are the two counts */
static uint64_t n_regions, registered_bytes;
static const cr_backend *backend;   /* set once at start, before any request */
static int devices;
static double idle_s;

void cr_cuda_shm_init(const cr_backend *b, int n_devices, double idle)
{
    backend = b;
    devices = n_devices;
    idle_s = idle;
}

static cr_cuda_shm_region *find_locked(const char *name)
{
    for (cr_cuda_shm_region *r = regions; r; r = r->next)
        if (strcmp(r->info.name, name) == 0)
            return r;
    return NULL;
}

bool cr_cuda_shm_registered(const char *name)
{
    pthread_mutex_lock(&mu);
    bool found = find_locked(name) != NULL;
    pthread_mutex_unlock(&mu);
    return found;
}

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
    if (find_locked(name) || in_system_table)
        return cr_fail(err, 409, "already_exists", "name",
                       "shared memory region '%s' is already registered (unregister it first)", name);
    if (n_regions >= CR_SHM_MAX_REGIONS)
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
    pthread_mutex_lock(&mu);
    int rc = admit_locked(name, in_system_table, err);
    pthread_mutex_unlock(&mu);
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
    r->last_used = cr_now();
    in_system_table = cr_shm_registered(name);
    pthread_mutex_lock(&mu);
    if ((rc = admit_locked(name, in_system_table, err)) == 0) {
        cr_cuda_shm_region **tail = &regions; /* status lists them in the order they came */
        while (*tail)
            tail = &(*tail)->next;
        *tail = r;
        n_regions++;
        registered_bytes += byte_size;
    }
    pthread_mutex_unlock(&mu);
    if (rc) {
        backend->ipc_close(p);
        free(r);
    }
    return rc;
}

/* ---- unregistration ------------------------------------------------------------------------- */

static void region_free(cr_cuda_shm_region *r)
{
    if (!r)
        return;
    backend->ipc_close(r->base);
    free(r);
}

static void unlink_locked(cr_cuda_shm_region *r)
{
    for (cr_cuda_shm_region **pp = &regions; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            n_regions--;
            registered_bytes -= r->info.byte_size;
            return;
        }
}

int cr_cuda_shm_unregister(const char *name, cr_error *err)
{
    pthread_mutex_lock(&mu);
    cr_cuda_shm_region *r = find_locked(name);
    int holds = r ? r->holds : 0;
    if (r && !holds)
        unlink_locked(r);
    pthread_mutex_unlock(&mu);
    if (holds)
        return cr_fail(err, 409, "in_use", "name",
                       "CUDA shared memory region '%s' is in use by %d request%s; unregister it once they "
                       "finish", name, holds, holds == 1 ? "" : "s");
    region_free(r);
    return 0;
}

int cr_cuda_shm_unregister_all(cr_error *err)
{
    cr_cuda_shm_region *gone = NULL, *next;
    int n_kept = 0;
    pthread_mutex_lock(&mu);
    for (cr_cuda_shm_region *r = regions; r; r = next) {
        next = r->next;
        if (r->holds) {
            n_kept++;
            continue;
        }
        unlink_locked(r);
        r->next = gone;
        gone = r;
    }
    pthread_mutex_unlock(&mu);
    for (cr_cuda_shm_region *r = gone; r; r = next) {
        next = r->next;
        region_free(r);
    }
    return n_kept ? cr_fail(err, 409, "in_use", "name",
                            "%d CUDA shared memory region%s in use by running requests stayed registered", n_kept,
                            n_kept == 1 ? "" : "s")
                  : 0;
}

void cr_cuda_shm_shutdown(void)
{
    pthread_mutex_lock(&mu);
    cr_cuda_shm_region *all = regions;
    regions = NULL;
    n_regions = registered_bytes = 0;
    pthread_mutex_unlock(&mu);
    for (cr_cuda_shm_region *r = all, *next; r; r = next) {
        next = r->next;
        region_free(r);
    }
}

int cr_cuda_shm_status(const char *name, cr_cuda_shm_info **out, size_t *n, cr_error *err)
{
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&mu);
    cr_cuda_shm_region *one = name ? find_locked(name) : NULL;
    size_t count = name ? (one != NULL) : (size_t)n_regions;
    cr_cuda_shm_info *list = count ? malloc(count * sizeof *list) : NULL;
    if (list) {
        size_t i = 0;
        for (cr_cuda_shm_region *r = one ? one : regions; r && i < count; r = r->next)
            list[i++] = r->info;
    }
    pthread_mutex_unlock(&mu);
    if (name && !one)
        return cr_fail(err, 404, "not_found", "name", "no CUDA shared memory region '%s' is registered", name);
    if (count && !list)
        return cr_fail(err, 503, "host_memory", "", "out of memory");
    *out = list;
    *n = count;
    return 0;
}

/* ---- holds ---------------------------------------------------------------------------------- */

cr_cuda_shm_region *cr_cuda_shm_acquire(const char *name, uint64_t offset, uint64_t bytes, size_t align,
                                        const char *what, void **p, int *device, cr_error *err)
{
    int rc;
    pthread_mutex_lock(&mu);
    cr_cuda_shm_region *r = find_locked(name);
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
        r->holds++;
        *p = r->base + offset;
        *device = r->info.device_id;
    }
    pthread_mutex_unlock(&mu);
    return rc ? NULL : r;
}

void cr_cuda_shm_release(void *region)
{
    cr_cuda_shm_region *r = region;
    if (!r)
        return;
    pthread_mutex_lock(&mu);
    r->holds--;
    r->last_used = cr_now();
    pthread_mutex_unlock(&mu);
}

/* A client that dies leaves its handle opened here, keeping its allocation alive: what nobody
 * used for --shm-idle-s goes (the system table also watches objects and processes; a CUDA
 * handle offers neither). */
int cr_cuda_shm_sweep(double now)
{
    cr_cuda_shm_region *gone = NULL, *next;
    int count = 0;
    pthread_mutex_lock(&mu);
    for (cr_cuda_shm_region *r = regions; r; r = next) {
        next = r->next;
        if (r->holds || idle_s <= 0 || now - r->last_used <= idle_s)
            continue;
        cr_log("info", "CUDA shared memory region '%s' unregistered: unused for %.0f s (--shm-idle-s)",
               r->info.name, now - r->last_used);
        unlink_locked(r);
        r->next = gone;
        gone = r;
        count++;
    }
    pthread_mutex_unlock(&mu);
    for (cr_cuda_shm_region *r = gone; r; r = next) {
        next = r->next;
        region_free(r);
    }
    return count;
}

int cr_cuda_shm_write(void *dst, const void *src, size_t bytes)
{
    return backend && backend->device_write && backend->device_write(dst, src, bytes) == CR_OK ? 0 : -1;
}

void cr_cuda_shm_usage(uint64_t *n, uint64_t *bytes)
{
    pthread_mutex_lock(&mu);
    *n = n_regions;
    *bytes = registered_bytes;
    pthread_mutex_unlock(&mu);
}
