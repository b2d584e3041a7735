/* Objects a client owns on the daemon, one mechanism for every kind: registered system and CUDA
 * shared-memory regions (server/kserve/), resident tensors (server/engine/tensors.h) and open
 * streams (server/engine/streams.h). Each object has a name (a region's name, or an object's id),
 * an owner (the client: the token holder with --auth-token-file, else the IP address, or the uid
 * on the Unix socket; server/http/peer.h), its bytes (charged to the memory budget or a device by
 * its table), the jobs holding it, and when it was last used. A list of one kind enforces its caps
 * (bytes in all, bytes per owner, how many), expires the objects nothing used for idle_s, and
 * frees an object removed while jobs hold it when the last of them lets go.
 *
 * A table puts a cr_owned first in its object struct (a node is its object) and gives the function
 * that frees one; the list calls it outside its lock, since unpinning, unmapping, freeing device
 * memory or closing a handle takes a while. What differs stays in the tables: how an object is made,
 * what a hold checks, what else makes one stale. */
#ifndef CRUNCHD_ENGINE_OWNED_H
#define CRUNCHD_ENGINE_OWNED_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/error.h"

#define CR_OWNER_MAX 64 /* "token", "ip:ADDR", "uid:N" */

typedef struct cr_owned {
    const char *name;      /* the object's own copy of its name (or id) */
    char owner[CR_OWNER_MAX];
    uint64_t byte_size;
    int holds;             /* jobs holding it; guarded by the list's mu, as are last_used and gone */
    double last_used;      /* cr_now() of its creation or its last hold's end */
    bool gone;             /* removed while held: freed when the last hold ends */
    struct cr_owned *next;
} cr_owned;

/* The caps of one kind (0: none), and the words its refusals use. */
typedef struct {
    uint64_t max_bytes;       /* every object of the kind together */
    uint64_t owner_max_bytes; /* one owner's */
    size_t max_count;
    double idle_s;            /* expired after this long unused; 0: never */
    const char *what;         /* "shared memory region", "tensor", "stream" */
    const char *code;         /* the 507's error code: "shm_limit", "tensor_limit", "stream_limit" */
    const char *max_flag, *owner_flag; /* "--shm-max-mb", "--shm-client-max-mb" */
} cr_owned_caps;

typedef struct {
    pthread_mutex_t mu;
    cr_owned *head;          /* guarded by mu, as are the counts */
    uint64_t n, bytes;
    uint64_t created, expired; /* since start: the metrics' counters */
    void (*free_object)(cr_owned *o);
    cr_owned_caps caps;      /* set once at start (cr_owned_set_caps), before any request */
} cr_owned_list;

#define CR_OWNED_LIST(free_fn) {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0, 0, free_fn, {0}}

void cr_owned_set_caps(cr_owned_list *l, const cr_owned_caps *caps);

/* With mu held. */
cr_owned *cr_owned_find_locked(cr_owned_list *l, const char *name);
/* Whether one more object of bytes may join for owner: room in the list, its caps and the owner's.
 * -1 with a 507 (the caps' code; 413 too_large when bytes alone pass a cap), naming `field`. */
int cr_owned_admit_locked(cr_owned_list *l, const char *owner, uint64_t bytes, const char *field, cr_error *err);
uint64_t cr_owned_owner_bytes_locked(const cr_owned_list *l, const char *owner);
void cr_owned_append_locked(cr_owned_list *l, cr_owned *o);

bool cr_owned_exists(cr_owned_list *l, const char *name);
/* Unregisters name unless a job holds it: 0 (also when no such object), else its holds. */
int cr_owned_unregister(cr_owned_list *l, const char *name);
/* Removes o (found and held by the caller under mu... see tensors.c): it leaves the list at once,
 * and is freed now when nothing holds it, else when its last hold ends. */
void cr_owned_remove_locked(cr_owned_list *l, cr_owned *o, cr_owned **free_now);
/* Unregisters every object nobody holds; how many stayed, their names ('a', 'b') in kept. */
int cr_owned_unregister_all(cr_owned_list *l, char *kept, size_t kept_len);
/* Unregisters the objects nobody holds that stale() picks (called with mu held: it may log why)
 * or, stale NULL, that nothing used for the caps' idle_s; how many went (counted as expired). */
int cr_owned_sweep(cr_owned_list *l, bool (*stale)(cr_owned *o, double now), double now);
/* Every object goes, held or not (at exit). */
void cr_owned_clear(cr_owned_list *l);

/* The named object (NULL: every one) copied out by copy() into *out (malloc'd, elem bytes each):
 * 0; -1 for an unknown name, -2 out of memory. */
int cr_owned_snapshot(cr_owned_list *l, const char *name, size_t elem, void (*copy)(const cr_owned *o, void *dst),
                      void **out, size_t *n);

/* The start and end of one hold; the object is idle from the end. */
void cr_owned_hold_locked(cr_owned *o);
void cr_owned_release(cr_owned_list *l, cr_owned *o, double now);
void cr_owned_usage(cr_owned_list *l, uint64_t *n, uint64_t *bytes);
void cr_owned_counters(cr_owned_list *l, uint64_t *created, uint64_t *expired);

#endif
