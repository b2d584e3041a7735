/* System shared-memory regions (Triton's system_shared_memory extension): a local client creates
 * a POSIX shared-memory object (/dev/shm), registers [offset, offset + byte_size) of it under a
 * name, and its tensors are then read from and written to that mapping instead of travelling in
 * the request and response bodies: /v2 inference (kserve_shm.c) and /v1's JSON operands
 * (codec/json_shm.c), both through shm_tensor.h.
 *
 * One table for the daemon, behind a mutex. A region counts the requests that hold a part of it
 * (cr_shm_acquire .. cr_shm_release); a held region cannot be unregistered (409 in_use), so its
 * mapping outlives every job reading or writing it. Registered bytes are charged to the memory
 * budget (kind "shm") for as long as they are registered, capped by --shm-max-mb in all and
 * --shm-client-max-mb per client, and shown as metrics. On cuda every region is page-locked
 * once, at registration (the backend's host_register).
 *
 * A client that dies leaves nothing pinned or mapped: cr_shm_sweep unregisters every region no
 * request holds whose object was unlinked from /dev/shm, that nothing used for --shm-idle-s,
 * or whose registering process (known on the Unix socket) exited. */
#ifndef CRUNCHD_SHM_REGION_H
#define CRUNCHD_SHM_REGION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"
#include "server/error.h"

#define CR_SHM_NAME_MAX 128   /* a region's name: letters, digits, '_', '-', '.', ':' */
#define CR_SHM_KEY_MAX 128    /* "/" and a name of letters, digits, '_', '-', '.', no ".." */
#define CR_SHM_MAX_REGIONS 256 /* each keeps its object open (one file descriptor, two with a pid) */
#define CR_SHM_CLIENT_MAX 64   /* "token", "ip:ADDR", "uid:N" (server/http/peer.h) */

typedef struct cr_shm_region cr_shm_region;

/* What a client registered, as GET /v2/systemsharedmemory/status reports it. */
typedef struct {
    char name[CR_SHM_NAME_MAX + 1];
    char key[CR_SHM_KEY_MAX + 1];
    uint64_t offset, byte_size;
} cr_shm_info;

/* Region names are 1 to CR_SHM_NAME_MAX portable characters; -1 with a 400 naming "name". */
int cr_shm_check_name(const char *name, cr_error *err);
/* Whether name is a region of this table (a name is registered in one table of the two:
 * this one or the CUDA one, cuda_shm_region.h). */
bool cr_shm_registered(const char *name);

typedef struct {
    uint64_t max_bytes;        /* --shm-max-mb: all regions together */
    uint64_t client_max_bytes; /* --shm-client-max-mb: the regions of one client */
    double idle_s;             /* --shm-idle-s: unregistered after this long unused; 0: never */
    const cr_backend *backend; /* its host_register, when it has one, pins each region */
} cr_shm_limits;

/* Who registers a region: its bytes count against client's cap; a pid (> 0) is watched, and
 * the region unregistered once that process exits. */
typedef struct {
    char client[CR_SHM_CLIENT_MAX];
    int pid;
} cr_shm_owner;

void cr_shm_init(const cr_shm_limits *lim);
/* Unpins, unmaps and forgets every region (at exit, once no job is left to hold one). */
void cr_shm_shutdown(void);

/* Maps [offset, offset + byte_size) of the object key as region name, for owner (NULL: an
 * anonymous client, no pid). Sweeps first. -1 with err: a bad name, key or size (400), no such
 * object or one too small (400), the name taken (409 already_exists), over --shm-max-mb,
 * --shm-client-max-mb or the table full (507 shm_limit; 413 when byte_size alone is over), over
 * the memory budget (503 memory_budget). */
int cr_shm_register(const char *name, const char *key, uint64_t offset, uint64_t byte_size,
                    const cr_shm_owner *owner, cr_error *err);
/* Forgets the region. Unknown names are no error (Triton's answer, so unregistering twice is
 * harmless); a region a job holds stays, and -1 with err 409 in_use. */
int cr_shm_unregister(const char *name, cr_error *err);
/* Every region no job holds; -1 with err 409 in_use naming those kept. */
int cr_shm_unregister_all(cr_error *err);

/* The named region (NULL: every one) into *out (malloc'd, *n entries, possibly none), after a
 * sweep. -1 with err: 404 not_found for an unknown name, 503 when memory ran out. */
int cr_shm_status(const char *name, cr_shm_info **out, size_t *n, cr_error *err);

/* A hold on bytes [offset, offset + bytes) of region name, whose address is *p: the region
 * stays registered and mapped until cr_shm_release. `align` is the element size the bytes are
 * read as (their address must be a multiple of it); `what` names the tensor for messages and
 * is err's field. NULL with err 400: no such region, out of its bounds, misaligned, or its
 * object shrank below the region since it was registered. */
cr_shm_region *cr_shm_acquire(const char *name, uint64_t offset, uint64_t bytes, size_t align,
                              const char *what, void **p, cr_error *err);
/* Drops a hold (a cr_shm_region *; void * to serve as a request's hold_release). */
void cr_shm_release(void *region);

/* Whether two held byte ranges (p, n inside region a; q, m inside region b) share bytes of one
 * object: two regions of one object, or of one object under two keys, alias each other. */
bool cr_shm_overlap(const cr_shm_region *a, const void *p, size_t n, const cr_shm_region *b,
                    const void *q, size_t m);

/* Unregisters (unpins, unmaps, uncharges) every region no request holds whose object has been
 * unlinked, which no request used for idle_s before now (cr_now() seconds), or whose owner's
 * process exited; each is logged with its reason. How many went. Called by register and status,
 * and about once a second by the daemon's main loop. */
int cr_shm_sweep(double now);

/* Regions registered now and their bytes, for the metrics. */
void cr_shm_usage(uint64_t *regions, uint64_t *bytes);

#endif
