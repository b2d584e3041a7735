/* Bounded job FIFO; see queue.h. */
#include "server/engine/queue.h"

#include <errno.h>
#include <math.h>
#include <time.h>

#include "server/clock.h"

int cr_queue_init(cr_queue *q, int capacity)
{
    pthread_condattr_t ca;
    *q = (cr_queue){.capacity = capacity};
    if (pthread_mutex_init(&q->mu, NULL))
        return -1;
    /* Deadlines are monotonic so a wall-clock step cannot stretch a drain. */
    if (pthread_condattr_init(&ca) || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) ||
        pthread_cond_init(&q->nonempty, &ca) || pthread_cond_init(&q->idle, &ca)) {
        pthread_mutex_destroy(&q->mu);
        return -1;
    }
    pthread_condattr_destroy(&ca);
    return 0;
}

void cr_queue_destroy(cr_queue *q)
{
    pthread_cond_destroy(&q->nonempty);
    pthread_cond_destroy(&q->idle);
    pthread_mutex_destroy(&q->mu);
}

int cr_queue_push(cr_queue *q, cr_job *j)
{
    int rc = 0;
    pthread_mutex_lock(&q->mu);
    if (q->closed)
        rc = -2;
    else if (q->length >= q->capacity)
        rc = -1;
    else {
        j->next = NULL;
        if (q->tail)
            q->tail->next = j;
        else
            q->head = j;
        q->tail = j;
        q->length++;
        /* One waiter for a job any device may run: each wake-up costs a futex round trip (a
         * broadcast woke every idle worker per job, all but one to sleep again). A job bound to
         * some devices (its tensors already in one's memory) wakes every waiter: the one a
         * signal picks may be another device's, which cannot take it and sleeps again, and the
         * job would wait for the next push (or its deadline) with its own device idle. */
        if (j->devices_tried)
            pthread_cond_broadcast(&q->nonempty);
        else
            pthread_cond_signal(&q->nonempty);
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

static void signal_if_idle(cr_queue *q)
{
    if (q->length == 0 && q->running == 0)
        pthread_cond_broadcast(&q->idle);
}

void cr_queue_done(cr_queue *q, int n)
{
    pthread_mutex_lock(&q->mu);
    q->running -= n;
    signal_if_idle(q);
    pthread_mutex_unlock(&q->mu);
}

static void unlink_after(cr_queue *q, cr_job *prev, cr_job *j)
{
    if (prev)
        prev->next = j->next;
    else
        q->head = j->next;
    if (q->tail == j)
        q->tail = prev;
    j->next = NULL;
    q->length--;
    q->running++;
}

static bool may_take(const cr_take_policy *p, const cr_job *j)
{
    return !(j->devices_tried & (1u << (p->device & 31)));
}

/* How many of `have` compatible jobs make a ready batch now; 0: wait for more. */
static int ready_size(const cr_take_policy *p, int have, const cr_job *oldest, double now)
{
    if (have >= p->max)
        return p->max;
    for (int i = p->n_preferred - 1; i >= 0; i--)
        if (p->preferred[i] <= have)
            return p->preferred[i];
    return now >= oldest->enqueued_at + p->delay_s ? have : 0;
}

static bool same_batch(const cr_take_policy *p, const cr_job *leader, const cr_job *j)
{
    return may_take(p, j) && j->batchable && cr_batch_key_equal(&j->batch_key, &leader->batch_key);
}

/* Unlinks up to `want` jobs of leader's batch, oldest first, into out[]. */
static int unlink_batch(cr_queue *q, const cr_take_policy *p, cr_job *leader, int want, cr_job **out)
{
    int n = 0;
    for (cr_job *j = q->head, *before = NULL; j && n < want;) {
        cr_job *next = j->next;
        if (j == leader || (n > 0 && same_batch(p, leader, j))) {
            unlink_after(q, before, j);
            out[n++] = j;
        } else {
            before = j;
        }
        j = next;
    }
    return n;
}

/* Under the lock: the oldest ready work this worker may take (a job that runs alone, or a batch
 * that is ready), unlinked into out[]. A batch still waiting for partners does not hold up the
 * jobs behind it: the next leaders (oldest jobs of other keys) are looked at too, a few of them.
 * *wake: when the earliest waiting batch becomes ready (0: none waits). */
#define MAX_LEADERS 8
static int take_locked(cr_queue *q, const cr_take_policy *p, cr_job **out, double *wake)
{
    const cr_job *seen[MAX_LEADERS];
    int n_seen = 0;
    double now = cr_now();
    for (cr_job *j = q->head; j && n_seen < MAX_LEADERS; j = j->next) {
        if (!may_take(p, j))
            continue;
        if (!j->batchable || p->max <= 1)
            return unlink_batch(q, p, j, 1, out);
        bool follower = false;
        for (int i = 0; i < n_seen && !follower; i++)
            follower = same_batch(p, seen[i], j);
        if (follower)
            continue;
        seen[n_seen++] = j;
        int have = 0;
        for (const cr_job *k = j; k && have < p->max; k = k->next)
            have += k == j || same_batch(p, j, k);
        int want = ready_size(p, have, j, now);
        if (want)
            return unlink_batch(q, p, j, want, out);
        double at = j->enqueued_at + p->delay_s;
        *wake = *wake == 0.0 || at < *wake ? at : *wake;
    }
    return 0;
}

int cr_queue_take(cr_queue *q, const cr_take_policy *p, bool block, cr_job **out)
{
    int n = 0;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        double wake = 0.0;
        if ((n = take_locked(q, p, out, &wake)) > 0) {
            /* Work is left (a batch still filling, jobs behind this one): pass the wake-up on,
             * so that a sleeping worker looks at it, and arms its timer, instead of this one's
             * signal having been the only one for both. */
            if (q->length > 0)
                pthread_cond_signal(&q->nonempty);
            break;
        }
        /* closed: once nothing this worker may take is left, it is done */
        if (q->closed && (q->length == 0 || wake == 0.0)) {
            n = -1;
            break;
        }
        if (!block)
            break;
        if (wake > 0.0) {
            struct timespec ts = {.tv_sec = (time_t)wake, .tv_nsec = (long)((wake - floor(wake)) * 1e9)};
            pthread_cond_timedwait(&q->nonempty, &q->mu, &ts);
        } else {
            pthread_cond_wait(&q->nonempty, &q->mu);
        }
    }
    pthread_mutex_unlock(&q->mu);
    return n;
}

void cr_queue_requeue(cr_queue *q, cr_job *j)
{
    pthread_mutex_lock(&q->mu);
    j->next = q->head;
    q->head = j;
    if (!q->tail)
        q->tail = j;
    q->length++;
    q->running--;
    pthread_cond_broadcast(&q->nonempty);
    pthread_mutex_unlock(&q->mu);
}

bool cr_queue_remove(cr_queue *q, cr_job *j)
{
    bool found = false;
    pthread_mutex_lock(&q->mu);
    for (cr_job **p = &q->head, *prev = NULL; *p; prev = *p, p = &(*p)->next) {
        if (*p != j)
            continue;
        *p = j->next;
        if (q->tail == j)
            q->tail = prev;
        j->next = NULL;
        q->length--;
        found = true;
        break;
    }
    signal_if_idle(q);
    pthread_mutex_unlock(&q->mu);
    return found;
}

cr_job *cr_queue_take_expired(cr_queue *q, double now)
{
    cr_job *out = NULL, **tail = &out;
    pthread_mutex_lock(&q->mu);
    cr_job **p = &q->head, *prev = NULL;
    while (*p) {
        cr_job *j = *p;
        if (!(j->deadline > 0 && j->deadline < now)) {
            prev = j;
            p = &j->next;
            continue;
        }
        *p = j->next;
        if (q->tail == j)
            q->tail = prev;
        q->length--;
        j->next = NULL;
        *tail = j;
        tail = &j->next;
    }
    signal_if_idle(q);
    pthread_mutex_unlock(&q->mu);
    return out;
}

void cr_queue_close(cr_queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = true;
    pthread_cond_broadcast(&q->nonempty);
    pthread_mutex_unlock(&q->mu);
}

cr_job *cr_queue_close_and_take(cr_queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->closed = true;
    cr_job *all = q->head;
    q->head = q->tail = NULL;
    q->length = 0;
    signal_if_idle(q);
    pthread_cond_broadcast(&q->nonempty); /* idle workers see a closed, empty queue and exit */
    pthread_mutex_unlock(&q->mu);
    return all;
}

bool cr_queue_wait_idle(cr_queue *q, double deadline_s)
{
    struct timespec ts = {.tv_sec = (time_t)deadline_s,
                          .tv_nsec = (long)((deadline_s - floor(deadline_s)) * 1e9)};
    int rc = 0;
    pthread_mutex_lock(&q->mu);
    while ((q->length || q->running) && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&q->idle, &q->mu, &ts);
    bool idle = !q->length && !q->running;
    pthread_mutex_unlock(&q->mu);
    return idle;
}

void cr_queue_counts(cr_queue *q, int *queued, int *running)
{
    pthread_mutex_lock(&q->mu);
    *queued = q->length;
    *running = q->running;
    pthread_mutex_unlock(&q->mu);
}
