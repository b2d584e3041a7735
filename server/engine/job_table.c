/* Async job table; see job_table.h. Chained hashing on the id's first 64 random bits. */
#include "server/engine/job_table.h"

#include "server/clock.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static size_t bucket_of(const char *id)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *p = id; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return (size_t)(h % CR_TABLE_BUCKETS);
}

int cr_job_table_init(cr_job_table *t, double ttl_s, size_t cap_bytes)
{
    memset(t, 0, sizeof *t);
    t->ttl_s = ttl_s;
    t->cap_bytes = cap_bytes;
    return pthread_mutex_init(&t->mu, NULL) ? -1 : 0;
}

void cr_job_table_destroy(cr_job_table *t)
{
    for (size_t b = 0; b < CR_TABLE_BUCKETS; b++) {
        for (cr_job *j = t->buckets[b], *next; j; j = next) {
            next = j->table_next;
            cr_job_release(j);
        }
    }
    pthread_mutex_destroy(&t->mu);
}

void cr_job_table_put(cr_job_table *t, cr_job *j)
{
    size_t b = bucket_of(j->id);
    cr_job_ref(j);
    pthread_mutex_lock(&t->mu);
    j->table_next = t->buckets[b];
    t->buckets[b] = j;
    t->count++;
    j->table_bytes = 0; /* counted once finished: only then are its result's bytes known */
    pthread_mutex_unlock(&t->mu);
}

static cr_job **find_link(cr_job_table *t, const char *id)
{
    cr_job **p = &t->buckets[bucket_of(id)];
    while (*p && strcmp((*p)->id, id) != 0)
        p = &(*p)->table_next;
    return p;
}

static bool expired(const cr_job_table *t, const cr_job *j, double now)
{
    return cr_job_finished(j) && j->finished_at > 0 && now - j->finished_at > t->ttl_s;
}

cr_job *cr_job_table_get(cr_job_table *t, const char *id)
{
    pthread_mutex_lock(&t->mu);
    cr_job *j = *find_link(t, id);
    if (j && expired(t, j, cr_now()))
        j = NULL; /* the sweep frees it; to the client it is gone now */
    if (j)
        cr_job_ref(j);
    pthread_mutex_unlock(&t->mu);
    return j;
}

static void unlink_locked(cr_job_table *t, cr_job **link)
{
    cr_job *j = *link;
    *link = j->table_next;
    j->table_next = NULL;
    t->count--;
    t->bytes -= j->table_bytes;
}

cr_job *cr_job_table_take(cr_job_table *t, const char *id)
{
    pthread_mutex_lock(&t->mu);
    cr_job **link = find_link(t, id);
    cr_job *j = *link;
    if (j)
        unlink_locked(t, link);
    pthread_mutex_unlock(&t->mu);
    return j;
}

/* The oldest finished job, for eviction under the byte cap. */
static cr_job **oldest_finished_locked(cr_job_table *t)
{
    cr_job **best = NULL;
    for (size_t b = 0; b < CR_TABLE_BUCKETS; b++)
        for (cr_job **p = &t->buckets[b]; *p; p = &(*p)->table_next)
            if (cr_job_finished(*p) && (!best || (*p)->finished_at < (*best)->finished_at))
                best = p;
    return best;
}

void cr_job_table_sweep(cr_job_table *t, double now)
{
    cr_job *dead = NULL;
    pthread_mutex_lock(&t->mu);
    for (size_t b = 0; b < CR_TABLE_BUCKETS; b++) {
        cr_job **p = &t->buckets[b];
        while (*p) {
            if (cr_job_finished(*p) && !(*p)->table_bytes) {
                (*p)->table_bytes = cr_job_bytes(*p);
                t->bytes += (*p)->table_bytes;
            }
            if (!expired(t, *p, now)) {
                p = &(*p)->table_next;
                continue;
            }
            cr_job *j = *p;
            unlink_locked(t, p);
            j->table_next = dead;
            dead = j;
        }
    }
    cr_job **old;
    while (t->bytes > t->cap_bytes && (old = oldest_finished_locked(t))) {
        cr_job *j = *old;
        unlink_locked(t, old);
        j->table_next = dead;
        dead = j;
    }
    pthread_mutex_unlock(&t->mu);
    while (dead) { /* released outside the lock: freeing big buffers takes time */
        cr_job *next = dead->table_next;
        cr_job_release(dead);
        dead = next;
    }
}

size_t cr_job_table_unfetched(cr_job_table *t)
{
    size_t n = 0;
    pthread_mutex_lock(&t->mu);
    for (size_t b = 0; b < CR_TABLE_BUCKETS; b++)
        for (cr_job *j = t->buckets[b]; j; j = j->table_next)
            if (!cr_job_finished(j) || !atomic_load(&j->fetched))
                n++;
    pthread_mutex_unlock(&t->mu);
    return n;
}

size_t cr_job_table_bytes(cr_job_table *t)
{
    pthread_mutex_lock(&t->mu);
    size_t n = t->bytes;
    pthread_mutex_unlock(&t->mu);
    return n;
}
