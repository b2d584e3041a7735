/* The Unix socket's acceptor; see unix_accept.h. */
#include "server/http/unix_accept.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "server/clock.h"
#include "server/http/direct.h"
#include "server/http/http_head.h"
#include "server/obs/log.h"

#define EVENTS 64
#define TICK_MS 100
#define PARTIAL_HEAD_S 1.0  /* a head begun and not whole by then goes to libmicrohttpd */
#define DIRECT_MAX 64       /* direct workers at most; a request that finds none free goes to
                               libmicrohttpd. They live as long as the acceptor: each thread keeps
                               buffers of its own (the log's), a thread per request leaked them */

/* A direct request waiting for a worker. */
typedef struct direct_job {
    int fd;
    cr_head head;
    struct direct_job *next;
} direct_job;

/* A connection being looked at: in the epoll set (edge-triggered) and in the list. */
typedef struct sniff {
    int fd;
    double since;
    bool begun;             /* some bytes of a head arrived */
    struct sniff *prev, *next;
} sniff;

struct cr_unix_accept {
    cr_http *h;
    struct MHD_Daemon *mhd;
    int listen_fd, ep;
    pthread_t thread;
    _Atomic bool stop;
    pthread_mutex_t mu;     /* the list, the jobs, the workers' counts */
    pthread_cond_t work;    /* a job queued, or stop */
    sniff *head;
    int sniffing;
    direct_job *jobs, *jobs_tail;
    int queued, workers, idle_workers;
    pthread_t worker[DIRECT_MAX];
    cr_head scratch;        /* the acceptor thread's */
    char peek[CR_HEAD_MAX];
};


static void list_remove(cr_unix_accept *a, sniff *s)
{
    pthread_mutex_lock(&a->mu);
    if (s->prev)
        s->prev->next = s->next;
    else
        a->head = s->next;
    if (s->next)
        s->next->prev = s->prev;
    a->sniffing--;
    pthread_mutex_unlock(&a->mu);
}

/* Starts looking at fd (new, or back from a direct request); closes it when that cannot be. */
static void watch(cr_unix_accept *a, int fd)
{
    sniff *s = calloc(1, sizeof *s);
    if (!s) {
        close(fd);
        return;
    }
    s->fd = fd;
    s->since = cr_now();
    pthread_mutex_lock(&a->mu);
    s->next = a->head;
    if (a->head)
        a->head->prev = s;
    a->head = s;
    a->sniffing++;
    pthread_mutex_unlock(&a->mu);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = s};
    if (epoll_ctl(a->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
        list_remove(a, s);
        close(fd);
        free(s);
    }
}

static void forget(cr_unix_accept *a, sniff *s)
{
    epoll_ctl(a->ep, EPOLL_CTL_DEL, s->fd, NULL);
    list_remove(a, s);
    free(s);
}

static void to_mhd(cr_unix_accept *a, int fd)
{
    struct sockaddr_un peer = {.sun_family = AF_UNIX};
    if (MHD_add_connection(a->mhd, fd, (const struct sockaddr *)&peer, sizeof(sa_family_t)) != MHD_YES)
        cr_log("warn", "unix socket: libmicrohttpd refused a connection (%s)", strerror(errno));
}

static void *direct_worker(void *arg)
{
    cr_unix_accept *a = arg;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (!a->jobs && !atomic_load(&a->stop))
            pthread_cond_wait(&a->work, &a->mu);
        direct_job *job = a->jobs;
        if (!job)
            break;
        a->jobs = job->next;
        a->jobs_tail = a->jobs ? a->jobs_tail : NULL;
        a->queued--;
        a->idle_workers--;
        pthread_mutex_unlock(&a->mu);
        bool keep = cr_direct_serve(a->h, job->fd, &job->head, &a->stop);
        if (keep && !atomic_load(&a->stop))
            watch(a, job->fd);
        else
            close(job->fd);
        free(job);
        pthread_mutex_lock(&a->mu);
        a->idle_workers++;
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

/* Queues a direct request for a free worker (started when none is); false when every worker is
 * busy (libmicrohttpd serves it). */
static bool start_direct(cr_unix_accept *a, int fd, const cr_head *hd)
{
    direct_job *job = malloc(sizeof *job);
    if (!job)
        return false;
    job->fd = fd;
    cr_head_copy(&job->head, hd); /* hd is the acceptor's scratch, parsed again for the next */
    job->next = NULL;
    pthread_mutex_lock(&a->mu);
    bool free_worker = a->idle_workers > a->queued;
    if (!free_worker && a->workers < DIRECT_MAX &&
        pthread_create(&a->worker[a->workers], NULL, direct_worker, a) == 0) {
        a->workers++;
        a->idle_workers++;
        free_worker = true;
    }
    if (free_worker) {
        if (a->jobs_tail)
            a->jobs_tail->next = job;
        else
            a->jobs = job;
        a->jobs_tail = job;
        a->queued++;
        pthread_cond_signal(&a->work);
    }
    pthread_mutex_unlock(&a->mu);
    if (!free_worker)
        free(job);
    return free_worker;
}

/* New bytes (or a hang-up) on a connection being looked at. */
static void look(cr_unix_accept *a, sniff *s)
{
    ssize_t n = recv(s->fd, a->peek, sizeof a->peek, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    int fd = s->fd;
    if (n <= 0) { /* closed, or broken, before a request */
        forget(a, s);
        close(fd);
        return;
    }
    int rc = cr_head_parse(a->peek, (size_t)n, &a->scratch);
    if (rc == 0) {
        s->begun = true;
        return;
    }
    forget(a, s);
    if (rc == 1 && cr_direct_takes(a->h, &a->scratch) && start_direct(a, fd, &a->scratch))
        return;
    to_mhd(a, fd);
}

static void accept_all(cr_unix_accept *a)
{
    for (;;) {
        int fd = accept4(a->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                cr_log("warn", "unix socket: accept: %s", strerror(errno));
            return;
        }
        pthread_mutex_lock(&a->mu);
        bool room = a->sniffing < a->h->deps.cfg->max_connections;
        pthread_mutex_unlock(&a->mu);
        if (room)
            watch(a, fd);
        else
            to_mhd(a, fd); /* whose --max-connections refuses it */
    }
}

/* Heads begun and not whole go to libmicrohttpd; silent connections are closed. */
static void sweep(cr_unix_accept *a, double now)
{
    const cr_config *cfg = a->h->deps.cfg;
    double idle_s = cfg->read_timeout_s > 0 ? cfg->read_timeout_s : cfg->conn_timeout_s;
    pthread_mutex_lock(&a->mu);
    sniff *due = NULL;
    for (sniff *s = a->head; s && !due; s = s->next)
        if (now - s->since > (s->begun ? PARTIAL_HEAD_S : idle_s))
            due = s;
    pthread_mutex_unlock(&a->mu);
    if (!due)
        return;
    int fd = due->fd;
    bool begun = due->begun;
    forget(a, due);
    if (begun)
        to_mhd(a, fd);
    else
        close(fd);
    sweep(a, now); /* the next one, if any */
}

static void *acceptor(void *arg)
{
    cr_unix_accept *a = arg;
    struct epoll_event ev[EVENTS];
    while (!atomic_load(&a->stop)) {
        int n = epoll_wait(a->ep, ev, EVENTS, TICK_MS);
        for (int i = 0; i < n; i++) {
            if (ev[i].data.ptr == a)
                accept_all(a);
            else
                look(a, ev[i].data.ptr);
        }
        sweep(a, cr_now());
    }
    return NULL;
}

cr_unix_accept *cr_unix_accept_start(cr_http *h, int listen_fd, struct MHD_Daemon *mhd, char *err, size_t errlen)
{
    cr_unix_accept *a = calloc(1, sizeof *a);
    if (!a) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    a->h = h;
    a->mhd = mhd;
    a->listen_fd = listen_fd;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->work, NULL);
    a->ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = a};
    int flags_ok = a->ep >= 0 && epoll_ctl(a->ep, EPOLL_CTL_ADD, listen_fd, &ev) == 0;
    if (!flags_ok || pthread_create(&a->thread, NULL, acceptor, a) != 0) {
        snprintf(err, errlen, "cannot serve on the unix socket: %s", strerror(errno));
        if (a->ep >= 0)
            close(a->ep);
        pthread_mutex_destroy(&a->mu);
        pthread_cond_destroy(&a->work);
        free(a);
        return NULL;
    }
    return a;
}

void cr_unix_accept_stop(cr_unix_accept *a)
{
    if (!a)
        return;
    atomic_store(&a->stop, true);
    pthread_join(a->thread, NULL);
    close(a->listen_fd);
    pthread_mutex_lock(&a->mu);
    pthread_cond_broadcast(&a->work);
    pthread_mutex_unlock(&a->mu);
    for (int i = 0; i < a->workers; i++) /* each sees stop within a slice (body_stream.h) */
        pthread_join(a->worker[i], NULL);
    for (direct_job *j = a->jobs, *next; j; j = next) {
        next = j->next;
        close(j->fd);
        free(j);
    }
    while (a->head) {
        int fd = a->head->fd;
        forget(a, a->head);
        close(fd);
    }
    close(a->ep);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->work);
    free(a);
}
