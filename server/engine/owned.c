/* Lists of owned objects; see owned.h. */
#include "server/engine/owned.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cr_owned_set_caps(cr_owned_list *l, const cr_owned_caps *caps) { l->caps = *caps; }

cr_owned *cr_owned_find_locked(cr_owned_list *l, const char *name)
{
    for (cr_owned *o = l->head; o; o = o->next)
        if (strcmp(o->name, name) == 0)
            return o;
    return NULL;
}

uint64_t cr_owned_owner_bytes_locked(const cr_owned_list *l, const char *owner)
{
    uint64_t sum = 0;
    for (const cr_owned *o = l->head; o; o = o->next)
        if (strcmp(o->owner, owner) == 0)
            sum += o->byte_size;
    return sum;
}

static const char *mib(uint64_t bytes, char *buf, size_t n)
{
    snprintf(buf, n, "%llu MiB", (unsigned long long)(bytes >> 20));
    return buf;
}

int cr_owned_admit_locked(cr_owned_list *l, const char *owner, uint64_t bytes, const char *field, cr_error *err)
{
    const cr_owned_caps *c = &l->caps;
    char a[32], b[32];
    if ((c->max_bytes && bytes > c->max_bytes) || (c->owner_max_bytes && bytes > c->owner_max_bytes)) {
        bool all = c->max_bytes && bytes > c->max_bytes;
        return cr_fail(err, 413, "too_large", field, "a %s of %llu bytes is over %s (%s)", c->what,
                       (unsigned long long)bytes, all ? c->max_flag : c->owner_flag,
                       mib(all ? c->max_bytes : c->owner_max_bytes, a, sizeof a));
    }
    if (c->max_count && l->n >= c->max_count)
        return cr_fail(err, 507, c->code, field, "%llu %ss exist, the most there may be",
                       (unsigned long long)l->n, c->what);
    if (c->max_bytes && bytes > c->max_bytes - l->bytes)
        return cr_fail(err, 507, c->code, field, "%llu more bytes of %ss would pass %s (%s, %llu bytes in use)",
                       (unsigned long long)bytes, c->what, c->max_flag, mib(c->max_bytes, a, sizeof a),
                       (unsigned long long)l->bytes);
    uint64_t mine = cr_owned_owner_bytes_locked(l, owner);
    if (c->owner_max_bytes && bytes > c->owner_max_bytes - mine)
        return cr_fail(err, 507, c->code, field, "%llu more bytes of %ss would pass %s (%s) for client %s, which "
                       "holds %llu bytes now", (unsigned long long)bytes, c->what, c->owner_flag,
                       mib(c->owner_max_bytes, b, sizeof b), owner[0] ? owner : "(anonymous)",
                       (unsigned long long)mine);
    return 0;
}

void cr_owned_append_locked(cr_owned_list *l, cr_owned *o)
{
    cr_owned **tail = &l->head; /* listed in the order they came */
    while (*tail)
        tail = &(*tail)->next;
    o->next = NULL;
    *tail = o;
    l->n++;
    l->bytes += o->byte_size;
    l->created++;
}

static void unlink_locked(cr_owned_list *l, cr_owned *o)
{
    for (cr_owned **pp = &l->head; *pp; pp = &(*pp)->next)
        if (*pp == o) {
            *pp = o->next;
            o->next = NULL;
            l->n--;
            l->bytes -= o->byte_size;
            return;
        }
}

static void free_all(cr_owned_list *l, cr_owned *gone)
{
    for (cr_owned *o = gone, *next; o; o = next) {
        next = o->next;
        l->free_object(o);
    }
}

bool cr_owned_exists(cr_owned_list *l, const char *name)
{
    pthread_mutex_lock(&l->mu);
    bool found = cr_owned_find_locked(l, name) != NULL;
    pthread_mutex_unlock(&l->mu);
    return found;
}

int cr_owned_unregister(cr_owned_list *l, const char *name)
{
    pthread_mutex_lock(&l->mu);
    cr_owned *o = cr_owned_find_locked(l, name);
    int holds = o ? o->holds : 0;
    if (o && !holds)
        unlink_locked(l, o);
    pthread_mutex_unlock(&l->mu);
    if (o && !holds)
        l->free_object(o);
    return holds;
}

void cr_owned_remove_locked(cr_owned_list *l, cr_owned *o, cr_owned **free_now)
{
    unlink_locked(l, o);
    o->gone = true;
    *free_now = o->holds ? NULL : o;
}

/* Moves the objects nobody holds that pick() takes (NULL: all of them) to a list of their own. */
static cr_owned *take_locked(cr_owned_list *l, bool (*pick)(cr_owned *o, double now), double now)
{
    cr_owned *gone = NULL, *next;
    for (cr_owned *o = l->head; o; o = next) {
        next = o->next;
        if (o->holds || (pick && !pick(o, now)))
            continue;
        unlink_locked(l, o);
        o->next = gone;
        gone = o;
    }
    return gone;
}

int cr_owned_unregister_all(cr_owned_list *l, char *kept, size_t kept_len)
{
    int n_kept = 0;
    kept[0] = '\0';
    pthread_mutex_lock(&l->mu);
    cr_owned *gone = take_locked(l, NULL, 0);
    for (cr_owned *o = l->head; o; o = o->next) {
        size_t at = strlen(kept);
        snprintf(kept + at, kept_len - at, "%s'%s'", n_kept++ ? ", " : "", o->name);
    }
    pthread_mutex_unlock(&l->mu);
    free_all(l, gone);
    return n_kept;
}

/* The list whose caps the default idle rule reads (set for the duration of a sweep, under mu). */
static __thread const cr_owned_list *sweeping;

static bool idle_too_long(cr_owned *o, double now)
{
    return sweeping->caps.idle_s > 0 && now - o->last_used >= sweeping->caps.idle_s;
}

int cr_owned_sweep(cr_owned_list *l, bool (*stale)(cr_owned *o, double now), double now)
{
    pthread_mutex_lock(&l->mu);
    sweeping = l;
    cr_owned *gone = take_locked(l, stale ? stale : idle_too_long, now);
    int count = 0;
    for (cr_owned *o = gone; o; o = o->next)
        count++;
    l->expired += (uint64_t)count;
    pthread_mutex_unlock(&l->mu);
    free_all(l, gone);
    return count;
}

void cr_owned_clear(cr_owned_list *l)
{
    pthread_mutex_lock(&l->mu);
    cr_owned *all = l->head;
    l->head = NULL;
    l->n = l->bytes = 0;
    pthread_mutex_unlock(&l->mu);
    free_all(l, all);
}

int cr_owned_snapshot(cr_owned_list *l, const char *name, size_t elem, void (*copy)(const cr_owned *o, void *dst),
                      void **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&l->mu);
    cr_owned *one = name ? cr_owned_find_locked(l, name) : NULL;
    size_t count = name ? (one != NULL) : (size_t)l->n;
    char *list = count ? malloc(count * elem) : NULL;
    if (list) {
        size_t i = 0;
        for (cr_owned *o = one ? one : l->head; o && i < count; o = o->next)
            copy(o, list + elem * i++);
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

void cr_owned_hold_locked(cr_owned *o) { o->holds++; }

void cr_owned_release(cr_owned_list *l, cr_owned *o, double now)
{
    pthread_mutex_lock(&l->mu);
    o->holds--;
    o->last_used = now; /* idle from the end of its last use, however long that use ran */
    bool free_now = o->gone && o->holds == 0;
    pthread_mutex_unlock(&l->mu);
    if (free_now)
        l->free_object(o);
}

void cr_owned_usage(cr_owned_list *l, uint64_t *n, uint64_t *bytes)
{
    pthread_mutex_lock(&l->mu);
    *n = l->n;
    *bytes = l->bytes;
    pthread_mutex_unlock(&l->mu);
}

void cr_owned_counters(cr_owned_list *l, uint64_t *created, uint64_t *expired)
{
    pthread_mutex_lock(&l->mu);
    *created = l->created;
    *expired = l->expired;
    pthread_mutex_unlock(&l->mu);
}
