/* A bounded FIFO of jobs shared by the HTTP threads (producers) and the workers (consumers).
 * Bounded by count: admission control answers 503 instead of growing memory. */
#ifndef CRUNCHD_QUEUE_H
#define CRUNCHD_QUEUE_H

#include <pthread.h>
#include <stdbool.h>

#include "server/engine/job.h"

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t nonempty;
    pthread_cond_t idle;      /* signalled when the queue empties and no job is running */
    cr_job *head, *tail;
    int length, capacity;
    int running;              /* popped but not yet marked finished */
    bool closed;              /* no more pushes; pops drain what is left, then return NULL */
} cr_queue;

int cr_queue_init(cr_queue *q, int capacity);
void cr_queue_destroy(cr_queue *q);
/* 0 on success; -1 when full, -2 when closed. The queue does not take a reference. */
int cr_queue_push(cr_queue *q, cr_job *j);
/* How a worker takes work, after Triton's dynamic batcher: the oldest job it may run and, when
 * that job can share a launch (j->batchable), the queued jobs with its batch key, oldest first,
 * up to `max`. A batch is ready at `max` jobs, at the largest preferred size there are enough
 * jobs for, or once its oldest job has waited `delay_s`; until then it waits for partners. */
typedef struct {
    int max;                /* >= 1 */
    double delay_s;
    const int *preferred;   /* ascending; may be empty */
    int n_preferred;
    int device;             /* skips jobs that already failed for want of memory on it */
} cr_take_policy;

/* Takes a job or a batch into out[] (room for p->max), counted as running: returns how many,
 * 0 when nothing is ready and !block, -1 when the queue is closed and empty. */
int cr_queue_take(cr_queue *q, const cr_take_policy *p, bool block, cr_job **out);
/* Puts a taken job back at the head (another device may have room for it). */
void cr_queue_requeue(cr_queue *q, cr_job *j);
/* The worker finished n of the jobs it took. */
void cr_queue_done(cr_queue *q, int n);
/* Removes a job still waiting (cancel); true when it was there. */
bool cr_queue_remove(cr_queue *q, cr_job *j);
void cr_queue_close(cr_queue *q);
/* Closes the queue and unlinks every waiting job; returns them linked through ->next, for the
 * caller to fail (the queue's reference to each goes with it). */
cr_job *cr_queue_close_and_take(cr_queue *q);
/* Unlinks every waiting job whose deadline (nonzero) is before `now`; returns them as a list
 * linked through ->next, for the caller to fail. */
cr_job *cr_queue_take_expired(cr_queue *q, double now);
/* Waits until nothing is queued or running, or until the absolute CLOCK_MONOTONIC deadline;
 * true when idle. */
bool cr_queue_wait_idle(cr_queue *q, double deadline_s);
void cr_queue_counts(cr_queue *q, int *queued, int *running);

#endif
