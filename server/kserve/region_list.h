/* What the system and the CUDA shared-memory tables (shm_region.c, cuda_shm_region.c) share: a
 * list of named regions in the order they were registered, with their count, their bytes, the
 * requests holding each and when each was last used, behind one mutex. A table puts a
 * cr_region_node first in its region struct (so a node is its region) and gives the function
 * that releases a region; the list calls it outside its lock, since unpinning, unmapping or
 * closing a handle takes a while. What differs stays in the tables: how a region is made and
 * admitted, what a hold checks, what makes a region stale. */
#ifndef CRUNCHD_REGION_LIST_H
#define CRUNCHD_REGION_LIST_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cr_region_node {
    const char *name;    /* the region's own copy of its name */
    uint64_t byte_size;
    int holds;           /* requests holding part of it; guarded by the list's mu, as is last_used */
    double last_used;    /* cr_now() of its registration or its last hold's end */
    struct cr_region_node *next;
} cr_region_node;

typedef struct {
    pthread_mutex_t mu;
    cr_region_node *head; /* guarded by mu, as are the counts */
    uint64_t n, bytes;
    void (*free_region)(cr_region_node *r);
} cr_region_list;

#define CR_REGION_LIST(free_fn) {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, free_fn}

/* With mu held. */
cr_region_node *cr_region_find_locked(cr_region_list *l, const char *name);
void cr_region_append_locked(cr_region_list *l, cr_region_node *r);

bool cr_region_registered(cr_region_list *l, const char *name);
/* Unregisters name unless a request holds it: 0 (also when no such region), else its holds. */
int cr_region_unregister(cr_region_list *l, const char *name);
/* Unregisters every region nobody holds; how many stayed, their names ('a', 'b') in kept. */
int cr_region_unregister_all(cr_region_list *l, char *kept, size_t kept_len);
/* Unregisters the regions nobody holds that stale() picks (called with mu held: it may log why);
 * how many went. */
int cr_region_sweep(cr_region_list *l, bool (*stale)(cr_region_node *r, double now), double now);
/* Every region goes, held or not (at exit). */
void cr_region_clear(cr_region_list *l);

/* The named region (NULL: every one) copied out by copy() into *out (malloc'd, elem bytes
 * each): 0; -1 for an unknown name, -2 out of memory. */
int cr_region_snapshot(cr_region_list *l, const char *name, size_t elem, void (*copy)(const cr_region_node *r, void *dst),
                       void **out, size_t *n);

/* The end of one hold: the region is idle from now. */
void cr_region_release(cr_region_list *l, cr_region_node *r, double now);
void cr_region_usage(cr_region_list *l, uint64_t *n, uint64_t *bytes);

#endif
