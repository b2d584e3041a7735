/* Finished jobs back to their event loop; see grpc_done.h. */
#include "server/grpc/grpc_done.h"

#include <errno.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

int cr_grpc_done_init(cr_grpc_done *q)
{
    q->head = q->tail = NULL;
    q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (q->efd < 0)
        return -1;
    pthread_mutex_init(&q->mu, NULL);
    return 0;
}

void cr_grpc_done_destroy(cr_grpc_done *q)
{
    if (q->efd < 0)
        return;
    cr_grpc_done_run(q); /* nothing is left unreleased */
    close(q->efd);
    q->efd = -1;
    pthread_mutex_destroy(&q->mu);
}

void cr_grpc_done_wake(cr_grpc_done *q)
{
    uint64_t one = 1;
    /* a counter that cannot overflow in practice; EAGAIN would mean it is already non-zero */
    while (write(q->efd, &one, sizeof one) < 0 && errno == EINTR)
        ;
}

void cr_grpc_done_on_job(cr_job *j)
{
    cr_grpc_pending *p = j->on_done_arg;
    cr_grpc_done *q = p->q;
    pthread_mutex_lock(&q->mu);
    p->next = NULL;
    if (q->tail)
        q->tail->next = p;
    else
        q->head = p;
    q->tail = p;
    pthread_mutex_unlock(&q->mu);
    cr_grpc_done_wake(q);
}

void cr_grpc_done_run(cr_grpc_done *q)
{
    uint64_t n;
    while (read(q->efd, &n, sizeof n) < 0 && errno == EINTR)
        ;
    pthread_mutex_lock(&q->mu);
    cr_grpc_pending *p = q->head;
    q->head = q->tail = NULL;
    pthread_mutex_unlock(&q->mu);
    while (p) {
        cr_grpc_pending *next = p->next;
        p->fn(p); /* frees p */
        p = next;
    }
}
