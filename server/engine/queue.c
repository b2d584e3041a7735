/* Bounded job FIFO; see queue.h. */
#include "server/engine/queue.h"

#include <errno.h>
#include <math.h>
#include <time.h>

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
        pthread_cond_signal(&q->nonempty);
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

cr_job *cr_queue_pop(cr_queue *q)
{
    pthread_mutex_lock(&q->mu);
    while (!q->head && !q->closed)
        pthread_cond_wait(&q->nonempty, &q->mu);
    cr_job *j = q->head;
    if (j) {
        q->head = j->next;
        if (!q->head)
            q->tail = NULL;
        j->next = NULL;
        q->length--;
        q->running++;
    }
    pthread_mutex_unlock(&q->mu);
    return j;
}

static void signal_if_idle(cr_queue *q)
{
    if (q->length == 0 && q->running == 0)
        pthread_cond_broadcast(&q->idle);
}

void cr_queue_done(cr_queue *q)
{
    pthread_mutex_lock(&q->mu);
    q->running--;
    signal_if_idle(q);
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
