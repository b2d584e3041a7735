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
/* Blocks until a job is there (returns it, counted as running) or the queue is closed and
 * empty (returns NULL). */
cr_job *cr_queue_pop(cr_queue *q);
/* The worker finished the job it popped. */
void cr_queue_done(cr_queue *q);
/* Removes a job still waiting (cancel); true when it was there. */
bool cr_queue_remove(cr_queue *q, cr_job *j);
void cr_queue_close(cr_queue *q);
/* Unlinks every waiting job whose deadline (nonzero) is before `now`; returns them as a list
 * linked through ->next, for the caller to fail. */
cr_job *cr_queue_take_expired(cr_queue *q, double now);
/* Waits until nothing is queued or running, or until the absolute CLOCK_MONOTONIC deadline;
 * true when idle. */
bool cr_queue_wait_idle(cr_queue *q, double deadline_s);
void cr_queue_counts(cr_queue *q, int *queued, int *running);

#endif
