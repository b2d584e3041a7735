/* Jobs that gRPC calls wait for, finished: a worker's on_done (any thread) queues the job's
 * record here and wakes the event loop that owns the call through an eventfd, which never
 * blocks; the loop then runs each record's continuation on its own thread, where the call lives.
 * A job cancelled from the loop itself (its client went away) comes back the same way. */
#ifndef CRUNCHD_GRPC_DONE_H
#define CRUNCHD_GRPC_DONE_H

#include <pthread.h>

#include "server/engine/job.h"

struct cr_grpc_done;

/* One job a call waits for; the continuation takes it on the loop's thread. */
typedef struct cr_grpc_pending {
    struct cr_grpc_done *q;
    cr_job *job;                 /* a reference, dropped after the continuation */
    void (*fn)(struct cr_grpc_pending *p);
    void *call, *arg;
    struct cr_grpc_pending *next;                 /* in the queue, once finished */
    struct cr_grpc_pending *call_prev, *call_next; /* in its call's list, while it waits */
} cr_grpc_pending;

typedef struct cr_grpc_done {
    pthread_mutex_t mu;
    cr_grpc_pending *head, *tail;
    int efd; /* an eventfd in the loop's epoll set */
} cr_grpc_done;

/* -1 with errno when no eventfd can be made. */
int cr_grpc_done_init(cr_grpc_done *q);
void cr_grpc_done_destroy(cr_grpc_done *q);

/* A job's on_done (its on_done_arg is a cr_grpc_pending): queues it and wakes the loop. */
void cr_grpc_done_on_job(cr_job *j);
/* Wakes the loop without a job (a drain or a stop to look at). */
void cr_grpc_done_wake(cr_grpc_done *q);
/* On the loop's thread, when its eventfd is readable: runs the continuation of every job
 * finished so far, in the order they finished. */
void cr_grpc_done_run(cr_grpc_done *q);

#endif
