/* The shared-memory region table; see shm_region.h. */
#include "server/kserve/shm_region.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "server/clock.h"
#include "server/engine/owned.h"
#include "server/memory.h"
#include "server/obs/log.h"

#define MAX_EXACT 9007199254740992ull /* 2^53: JSON numbers are exact up to here */

struct cr_shm_region {
    cr_owned node; /* first: the list's node is the region */
    cr_shm_info info;
    int fd;             /* kept open: each hold checks the object still covers the region */
    dev_t dev;          /* the object's identity, for aliasing between regions */
    ino_t ino;
    void *map;          /* the mapping, from offset rounded down to a page */
    size_t map_len;
    char *base;         /* the region's first byte inside map */
    bool pinned;        /* the backend's host_register took it */
    bool charged;       /* byte_size is charged to the memory budget */
    cr_shm_owner owner;
    int pidfd;          /* the owner's process, readable once it exited; -1: none watched */
};

static void region_free_node(cr_owned *n);
static cr_owned_list regions = CR_OWNED_LIST(region_free_node);
static cr_shm_limits limits;        /* set once at start, before any request */

void cr_shm_init(const cr_shm_limits *lim) { limits = *lim; }

/* ---- validation ----------------------------------------------------------------------------- */

static bool portable_char(char ch, const char *extra)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           strchr(extra, ch) != NULL;
}

int cr_shm_check_name(const char *name, cr_error *err)
{
    size_t n = strlen(name);
    bool ok = n >= 1 && n <= CR_SHM_NAME_MAX;
    for (size_t i = 0; ok && i < n; i++)
        ok = portable_char(name[i], "_-.:");
    return ok ? 0
              : cr_fail(err, 400, "invalid_field", "name",
                        "a region name is 1 to %d letters, digits, '_', '-', '.' or ':'", CR_SHM_NAME_MAX);
}

/* Only names of objects in /dev/shm: "/" and one portable file name, never a path. */
static int check_key(const char *key, cr_error *err)
{
    size_t n = strlen(key);
    bool ok = n >= 2 && n <= CR_SHM_KEY_MAX && key[0] == '/' && !strstr(key, "..") &&
              strcmp(key, "/.") != 0;
    for (size_t i = 1; ok && i < n; i++)
        ok = portable_char(key[i], "_-.");
    return ok ? 0
              : cr_fail(err, 400, "invalid_field", "key",
                        "key must be a POSIX shared-memory name: '/' then up to %d letters, digits, "
                        "'_', '-' or '.' (no other '/', no \"..\")",
                        CR_SHM_KEY_MAX - 1);
}

static int check_sizes(uint64_t offset, uint64_t byte_size, cr_error *err)
{
    if (byte_size == 0)
        return cr_fail(err, 400, "invalid_field", "byte_size", "byte_size must be at least 1");
    if (offset > MAX_EXACT || byte_size > MAX_EXACT)
        return cr_fail(err, 400, "invalid_field", offset > MAX_EXACT ? "offset" : "byte_size",
                       "offset and byte_size must be at most 2^53");
    if (limits.max_bytes && byte_size > limits.max_bytes)
        return cr_fail(err, 413, "too_large", "byte_size",
                       "byte_size %llu is over --shm-max-mb (%llu MiB)", (unsigned long long)byte_size,
                       (unsigned long long)(limits.max_bytes >> 20));
    if (limits.client_max_bytes && byte_size > limits.client_max_bytes)
        return cr_fail(err, 413, "too_large", "byte_size",
                       "byte_size %llu is over --shm-client-max-mb (%llu MiB)", (unsigned long long)byte_size,
                       (unsigned long long)(limits.client_max_bytes >> 20));
    return 0;
}

/* ---- the table (mu held) -------------------------------------------------------------------- */

static cr_shm_region *find_locked(const char *name) { return (cr_shm_region *)cr_owned_find_locked(&regions, name); }


/* Whether one more region of byte_size may join: the name free, room in the table, the cap, and
 * the client's cap. */
static int admit_locked(const char *name, uint64_t byte_size, const char *client, cr_error *err)
{
    if (find_locked(name))
        return cr_fail(err, 409, "already_exists", "name",
                       "shared memory region '%s' is already registered (unregister it first)", name);
    if (regions.n >= CR_SHM_MAX_REGIONS)
        return cr_fail(err, 507, "shm_limit", "name", "%d shared memory regions are registered, the most "
                       "there may be", CR_SHM_MAX_REGIONS);
    if (!limits.max_bytes || byte_size > limits.max_bytes - regions.bytes)
        return cr_fail(err, 507, "shm_limit", "byte_size",
                       "registering %llu more bytes would pass --shm-max-mb (%llu MiB, %llu bytes "
                       "registered now)", (unsigned long long)byte_size,
                       (unsigned long long)(limits.max_bytes >> 20), (unsigned long long)regions.bytes);
    uint64_t mine = cr_owned_owner_bytes_locked(&regions, client);
    if (limits.client_max_bytes && byte_size > limits.client_max_bytes - mine)
        return cr_fail(err, 507, "shm_limit", "byte_size",
                       "registering %llu more bytes would pass --shm-client-max-mb (%llu MiB) for client "
                       "%s, which has %llu bytes registered now", (unsigned long long)byte_size,
                       (unsigned long long)(limits.client_max_bytes >> 20), client[0] ? client : "(anonymous)",
                       (unsigned long long)mine);
    return 0;
}

/* ---- mapping -------------------------------------------------------------------------------- */

static void region_free(cr_shm_region *r)
{
    if (r->pinned && limits.backend && limits.backend->host_unregister)
        limits.backend->host_unregister(r->map);
    if (r->map)
        munmap(r->map, r->map_len);
    if (r->fd >= 0)
        close(r->fd);
    if (r->pidfd >= 0)
        close(r->pidfd);
    if (r->charged)
        cr_mem_release(CR_MEM_SHM, r->info.byte_size);
    free(r);
}

static void region_free_node(cr_owned *n) { region_free((cr_shm_region *)n); }

/* The object must be a regular file at least offset + byte_size long. */
static int check_object(cr_shm_region *r, cr_error *err)
{
    struct stat st;
    if (fstat(r->fd, &st) != 0 || !S_ISREG(st.st_mode))
        return cr_fail(err, 400, "invalid_field", "key", "'%s' is not a shared memory object", r->info.key);
    uint64_t end = r->info.offset + r->info.byte_size; /* both <= 2^53: no overflow */
    if (st.st_size < 0 || (uint64_t)st.st_size < end)
        return cr_fail(err, 400, "invalid_field", "byte_size",
                       "offset %llu + byte_size %llu is past the end of '%s' (%lld bytes)",
                       (unsigned long long)r->info.offset, (unsigned long long)r->info.byte_size,
                       r->info.key, (long long)st.st_size);
    r->dev = st.st_dev;
    r->ino = st.st_ino;
    return 0;
}

/* Opens the object (glibc's shm_open: /dev/shm only, O_NOFOLLOW, O_CLOEXEC) and maps the region
 * read-write, from its offset rounded down to a page (mmap's rule). */
static int map_region(cr_shm_region *r, cr_error *err)
{
    r->fd = shm_open(r->info.key, O_RDWR, 0);
    if (r->fd < 0)
        return cr_fail(err, 400, "invalid_field", "key", "cannot open shared memory object '%s': %s",
                       r->info.key, strerror(errno));
    if (check_object(r, err))
        return -1;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t start = r->info.offset - r->info.offset % page;
    r->map_len = (size_t)(r->info.offset - start + r->info.byte_size);
    void *m = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, (off_t)start);
    if (m == MAP_FAILED) {
        int e = errno;
        return cr_fail(err, e == ENOMEM ? 503 : 400, e == ENOMEM ? "host_memory" : "invalid_field", "key",
                       "cannot map shared memory object '%s': %s", r->info.key, strerror(e));
    }
    r->map = m;
    r->base = (char *)m + (r->info.offset - start);
    return 0;
}

/* A process handle that becomes readable when the process exits, whoever reaps it and whatever
 * pid is handed out next; -1 when the kernel has none (before 5.3) or the process is gone. */
static int watch_pid(int pid)
{
#ifdef SYS_pidfd_open
    return pid > 0 ? (int)syscall(SYS_pidfd_open, (pid_t)pid, 0) : -1;
#else
    (void)pid;
    return -1;
#endif
}

static cr_shm_region *region_new(const char *name, const char *key, uint64_t offset, uint64_t byte_size,
                                 const cr_shm_owner *owner, cr_error *err)
{
    cr_shm_region *r = calloc(1, sizeof *r);
    if (!r) {
        cr_fail(err, 503, "host_memory", "", "out of memory");
        return NULL;
    }
    r->fd = r->pidfd = -1;
    snprintf(r->info.name, sizeof r->info.name, "%s", name);
    snprintf(r->info.key, sizeof r->info.key, "%s", key);
    r->info.offset = offset;
    r->info.byte_size = byte_size;
    r->node.name = r->info.name;
    r->node.byte_size = byte_size;
    if (owner)
        r->owner = *owner;
    snprintf(r->node.owner, sizeof r->node.owner, "%s", r->owner.client);
    if (r->owner.pid > 0 && (r->pidfd = watch_pid(r->owner.pid)) < 0 && errno == ESRCH) {
        cr_fail(err, 400, "invalid_field", "name", "the process that registers region '%s' has exited", name);
        region_free(r);
        return NULL;
    }
    /* Charged before the mapping: over the budget, nothing is mapped or pinned. */
    if (cr_mem_charge(CR_MEM_SHM, byte_size, "registering a shared memory region", err) < 0) {
        region_free(r);
        return NULL;
    }
    r->charged = true;
    if (map_region(r, err)) {
        region_free(r);
        return NULL;
    }
    /* once, here: page-locking costs about as much as copying the region, each use after is free */
    if (limits.backend && limits.backend->host_register) {
        r->pinned = limits.backend->host_register(r->map, r->map_len);
        if (!r->pinned)
            cr_log("warn", "shared memory region '%s' (%zu bytes) could not be page-locked: its copies "
                   "to the device are staged", name, r->map_len);
    }
    return r;
}

/* ---- registration --------------------------------------------------------------------------- */

int cr_shm_register(const char *name, const char *key, uint64_t offset, uint64_t byte_size,
                    const cr_shm_owner *owner, cr_error *err)
{
    static const cr_shm_owner anonymous;
    if (!owner)
        owner = &anonymous;
    if (cr_shm_check_name(name, err) || check_key(key, err) || check_sizes(offset, byte_size, err))
        return -1;
    cr_shm_sweep(cr_now()); /* a dead client's regions make room first */
    /* Checked before mapping (no work for a refusal) and again after, unlocked in between: a
     * mapping and its pinning take long enough to stall every other use of the table. */
    pthread_mutex_lock(&regions.mu);
    int rc = admit_locked(name, byte_size, owner->client, err);
    pthread_mutex_unlock(&regions.mu);
    if (rc)
        return -1;
    cr_shm_region *r = region_new(name, key, offset, byte_size, owner, err);
    if (!r)
        return -1;
    pthread_mutex_lock(&regions.mu);
    if ((rc = admit_locked(name, byte_size, owner->client, err)) == 0) {
        r->node.last_used = cr_now();
        cr_owned_append_locked(&regions, &r->node);
    }
    pthread_mutex_unlock(&regions.mu);
    if (rc)
        region_free(r);
    return rc;
}

/* Unpinning and unmapping happen outside the table's lock (server/engine/owned.c). */
int cr_shm_unregister(const char *name, cr_error *err)
{
    int holds = cr_owned_unregister(&regions, name);
    if (holds)
        return cr_fail(err, 409, "in_use", "name",
                       "shared memory region '%s' is in use by %d request%s; unregister it once they "
                       "finish", name, holds, holds == 1 ? "" : "s");
    return 0;
}

int cr_shm_unregister_all(cr_error *err)
{
    char kept[160];
    int n_kept = cr_owned_unregister_all(&regions, kept, sizeof kept);
    if (n_kept)
        return cr_fail(err, 409, "in_use", "name",
                       "%d shared memory region%s in use by running requests stayed registered: %s",
                       n_kept, n_kept == 1 ? "" : "s", kept);
    return 0;
}

void cr_shm_shutdown(void) { cr_owned_clear(&regions); }

static void copy_info(const cr_owned *n, void *dst) { *(cr_shm_info *)dst = ((const cr_shm_region *)n)->info; }

int cr_shm_status(const char *name, cr_shm_info **out, size_t *n, cr_error *err)
{
    cr_shm_sweep(cr_now());
    int rc = cr_owned_snapshot(&regions, name, sizeof **out, copy_info, (void **)out, n);
    if (rc == -1)
        return cr_fail(err, 404, "not_found", "name", "no system shared memory region '%s' is registered",
                       name);
    if (rc == -2)
        return cr_fail(err, 503, "host_memory", "", "out of memory");
    return 0;
}

bool cr_shm_registered(const char *name) { return cr_owned_exists(&regions, name); }

/* ---- holds ---------------------------------------------------------------------------------- */

/* The bytes asked for lie inside the region, at an address fit for their element type, and the
 * object still covers the region (a client that shrinks it would turn our reads into SIGBUS; the
 * check narrows that to a shrink racing a running job). */
static int check_hold_locked(cr_shm_region *r, uint64_t offset, uint64_t bytes, size_t align,
                             const char *what, cr_error *err)
{
    const cr_shm_info *in = &r->info;
    if (offset > in->byte_size || bytes > in->byte_size - offset)
        return cr_fail(err, 400, "invalid_field", what,
                       "%s: offset %llu + %llu bytes is past the end of region '%s' (%llu bytes)", what, (unsigned long long)offset, (unsigned long long)bytes,
                       in->name, (unsigned long long)in->byte_size);
    if (align > 1 && (in->offset + offset) % align)
        return cr_fail(err, 400, "invalid_field", what,
                       "%s: its data must start at a multiple of %zu bytes into the object; the region's "
                       "offset %llu + the tensor's offset %llu is not",
                       what, align, (unsigned long long)in->offset, (unsigned long long)offset);
    struct stat st;
    if (fstat(r->fd, &st) != 0 || st.st_size < 0 || (uint64_t)st.st_size < in->offset + in->byte_size)
        return cr_fail(err, 400, "invalid_field", what,
                       "%s: the object '%s' of region '%s' no longer covers the region; register it "
                       "again", what, in->key, in->name);
    return 0;
}

cr_shm_region *cr_shm_acquire(const char *name, uint64_t offset, uint64_t bytes, size_t align,
                              const char *what, void **p, cr_error *err)
{
    pthread_mutex_lock(&regions.mu);
    cr_shm_region *r = find_locked(name);
    int rc = r ? check_hold_locked(r, offset, bytes, align, what, err)
               : cr_fail(err, 400, "invalid_field", what,
                         "%s: no system shared memory region '%s' is registered", what, name);
    if (rc == 0) {
        cr_owned_hold_locked(&r->node);
        *p = r->base + offset;
    }
    pthread_mutex_unlock(&regions.mu);
    return rc ? NULL : r;
}

void cr_shm_release(void *region)
{
    if (region)
        cr_owned_release(&regions, &((cr_shm_region *)region)->node, cr_now());
}

bool cr_shm_overlap(const cr_shm_region *a, const void *p, size_t n, const cr_shm_region *b,
                    const void *q, size_t m)
{
    if (!n || !m || a->dev != b->dev || a->ino != b->ino)
        return false;
    uint64_t x = a->info.offset + (uint64_t)((const char *)p - a->base); /* offsets in the object */
    uint64_t y = b->info.offset + (uint64_t)((const char *)q - b->base);
    return x < y + m && y < x + n;
}

/* ---- sweeping ------------------------------------------------------------------------------- */

static bool owner_exited(const cr_shm_region *r)
{
    struct pollfd p = {.fd = r->pidfd, .events = POLLIN};
    return r->pidfd >= 0 && poll(&p, 1, 0) == 1;
}

/* Why a region nobody holds should go, or NULL: its object unlinked (the client cleaned up, or
 * its resource tracker did as it died), its registering process gone, or unused too long. */
static const char *stale_why(const cr_shm_region *r, double now, char *why, size_t n)
{
    struct stat st;
    if (fstat(r->fd, &st) == 0 && st.st_nlink == 0)
        return snprintf(why, n, "its object %s was unlinked", r->info.key), why;
    if (owner_exited(r))
        return snprintf(why, n, "process %d that registered it exited", r->owner.pid), why;
    if (limits.idle_s > 0 && now - r->node.last_used > limits.idle_s)
        return snprintf(why, n, "unused for %.0f s (--shm-idle-s)", now - r->node.last_used), why;
    return NULL;
}

static bool stale(cr_owned *n, double now)
{
    const cr_shm_region *r = (const cr_shm_region *)n;
    char why[CR_SHM_KEY_MAX + 64];
    if (!stale_why(r, now, why, sizeof why))
        return false;
    cr_log("info", "shared memory region '%s' of %s unregistered: %s", r->info.name,
           r->owner.client[0] ? r->owner.client : "an anonymous client", why);
    return true;
}

int cr_shm_sweep(double now) { return cr_owned_sweep(&regions, stale, now); }

void cr_shm_usage(uint64_t *n, uint64_t *bytes) { cr_owned_usage(&regions, n, bytes); }
