/* A list of named shared-memory regions; see region_list.h. */
#include "server/kserve/region_list.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cr_region_node *cr_region_find_locked(cr_region_list *l, const char *name)
{
    for (cr_region_node *r = l->head; r; r = r->next)
        if (strcmp(r->name, name) == 0)
            return r;
    return NULL;
}

void cr_region_append_locked(cr_region_list *l, cr_region_node *r)
{
    cr_region_node **tail = &l->head; /* status lists them in the order they came */
    while (*tail)
        tail = &(*tail)->next;
    r->next = NULL;
    *tail = r;
    l->n++;
    l->bytes += r->byte_size;
}

static void unlink_locked(cr_region_list *l, cr_region_node *r)
{
    for (cr_region_node **pp = &l->head; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            l->n--;
            l->bytes -= r->byte_size;
            return;
        }
}

static void free_all(cr_region_list *l, cr_region_node *gone)
{
    for (cr_region_node *r = gone, *next; r; r = next) {
        next = r->next;
        l->free_region(r);
    }
}

bool cr_region_registered(cr_region_list *l, const char *name)
{
    pthread_mutex_lock(&l->mu);
    bool found = cr_region_find_locked(l, name) != NULL;
    pthread_mutex_unlock(&l->mu);
    return found;
}

int cr_region_unregister(cr_region_list *l, const char *name)
{
    pthread_mutex_lock(&l->mu);
    cr_region_node *r = cr_region_find_locked(l, name);
    int holds = r ? r->holds : 0;
    if (r && !holds)
        unlink_locked(l, r);
    pthread_mutex_unlock(&l->mu);
    if (r && !holds)
        l->free_region(r);
    return holds;
}

/* Moves the regions nobody holds that pick() takes (NULL: all of them) to a list of their own. */
static cr_region_node *take_locked(cr_region_list *l, bool (*pick)(cr_region_node *r, double now), double now)
{
    cr_region_node *gone = NULL, *next;
    for (cr_region_node *r = l->head; r; r = next) {
        next = r->next;
        if (r->holds || (pick && !pick(r, now)))
            continue;
        unlink_locked(l, r);
        r->next = gone;
        gone = r;
    }
    return gone;
}

int cr_region_unregister_all(cr_region_list *l, char *kept, size_t kept_len)
{
    int n_kept = 0;
    kept[0] = '\0';
    pthread_mutex_lock(&l->mu);
    cr_region_node *gone = take_locked(l, NULL, 0);
    for (cr_region_node *r = l->head; r; r = r->next) {
        size_t at = strlen(kept);
        snprintf(kept + at, kept_len - at, "%s'%s'", n_kept++ ? ", " : "", r->name);
    }
    pthread_mutex_unlock(&l->mu);
    free_all(l, gone);
    return n_kept;
}

int cr_region_sweep(cr_region_list *l, bool (*stale)(cr_region_node *r, double now), double now)
{
    pthread_mutex_lock(&l->mu);
    cr_region_node *gone = take_locked(l, stale, now);
    pthread_mutex_unlock(&l->mu);
    int count = 0;
    for (cr_region_node *r = gone; r; r = r->next)
        count++;
    free_all(l, gone);
    return count;
}

void cr_region_clear(cr_region_list *l)
{
    pthread_mutex_lock(&l->mu);
    cr_region_node *all = l->head;
    l->head = NULL;
    l->n = l->bytes = 0;
    pthread_mutex_unlock(&l->mu);
    free_all(l, all);
}

int cr_region_snapshot(cr_region_list *l, const char *name, size_t elem, void (*copy)(const cr_region_node *r, void *dst),
                       void **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&l->mu);
    cr_region_node *one = name ? cr_region_find_locked(l, name) : NULL;
    size_t count = name ? (one != NULL) : (size_t)l->n;
    char *list = count ? malloc(count * elem) : NULL;
    if (list) {
        size_t i = 0;
        for (cr_region_node *r = one ? one : l->head; r && i < count; r = r->next)
            copy(r, list + elem * i++);
    }
    pthread_mutex_unlock(&l->mu);
    if (name && !one)
        return -1;
    if (count && !list)
        return -2;
    *out = list;
    *n = count;
    return 0;
}

void cr_region_release(cr_region_list *l, cr_region_node *r, double now)
{
    pthread_mutex_lock(&l->mu);
    r->holds--;
    r->last_used = now; /* idle from the end of its last use, however long that use ran */
    pthread_mutex_unlock(&l->mu);
}

void cr_region_usage(cr_region_list *l, uint64_t *n, uint64_t *bytes)
{
    pthread_mutex_lock(&l->mu);
    *n = l->n;
    *bytes = l->bytes;
    pthread_mutex_unlock(&l->mu);
}
