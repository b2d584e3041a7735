/* A socket's acceptor; see acceptor.h. */
#include "server/http/acceptor.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "server/clock.h"
#include "server/http/conn_limits.h"
#include "server/http/direct.h"
#include "server/http/http_head.h"
#include "server/obs/log.h"

#define EVENTS 64
#define TICK_MS 100
#define PARTIAL_HEAD_S 1.0  /* a head begun and not whole by then goes to libmicrohttpd */
#define KEEP_WAIT_MS 5      /* how long a direct worker waits for its connection's next request */
#define DIRECT_MAX 256      /* direct workers at most; a request that finds none free goes to
                               libmicrohttpd (and its kept-alive connection stays there: with 64,
                               256 connections of 256x256 .npy GEMMs served 9% fewer jobs on the
                               H100 machine). They live as long as the acceptor: each thread keeps
                               buffers of its own (the log's), a thread per request leaked them */

/* A connection we hold: its socket and its peer (for the hand-over and the counts). */
typedef struct {
    int fd;
    struct sockaddr_storage peer;
    socklen_t peer_len;
} held_conn;

/* A direct request waiting for a worker. */
typedef struct direct_job {
    held_conn conn;
    cr_head head;
    struct direct_job *next;
} direct_job;

/* A connection being looked at: in the epoll set (edge-triggered) and in the list. */
typedef struct sniff {
    held_conn conn;
    double since;
    bool begun;             /* some bytes of a head arrived */
    struct sniff *prev, *next;
} sniff;

struct cr_acceptor {
    cr_http *h;
    cr_acceptor_cfg cfg;
    cr_conn_limits limits;
    int ep, room_fd;        /* room_fd: an eventfd, written when a close makes room while full */
    _Atomic bool full;      /* the listening socket is out of the epoll set */
    pthread_t thread;
    _Atomic bool stop;
    pthread_mutex_t mu;     /* the list, the jobs, the workers' counts */
    pthread_cond_t work;    /* a job queued, or stop */
    sniff *head;
    direct_job *jobs, *jobs_tail;
    int queued, workers, idle_workers;
    pthread_t worker[DIRECT_MAX];
    cr_head scratch;        /* the acceptor thread's */
    char peek[CR_HEAD_MAX];
};

static const struct sockaddr *peer_of(const held_conn *c) { return (const struct sockaddr *)&c->peer; }

/* Closes a connection we hold. */
static void drop(cr_acceptor *a, const held_conn *c)
{
    close(c->fd);
    cr_acceptor_closed(a, peer_of(c));
}

static void list_remove(cr_acceptor *a, sniff *s)
{
    pthread_mutex_lock(&a->mu);
    if (s->prev)
        s->prev->next = s->next;
    else
        a->head = s->next;
    if (s->next)
        s->next->prev = s->prev;
    pthread_mutex_unlock(&a->mu);
}

/* Starts looking at a connection (new, or back from a direct request); closes it when that
 * cannot be. */
static void watch(cr_acceptor *a, const held_conn *c)
{
    sniff *s = calloc(1, sizeof *s);
    if (!s) {
        drop(a, c);
        return;
    }
    s->conn = *c;
    s->since = cr_now();
    pthread_mutex_lock(&a->mu);
    s->next = a->head;
    if (a->head)
        a->head->prev = s;
    a->head = s;
    pthread_mutex_unlock(&a->mu);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = s};
    if (epoll_ctl(a->ep, EPOLL_CTL_ADD, c->fd, &ev) < 0) {
        list_remove(a, s);
        drop(a, c);
        free(s);
    }
}

static void forget(cr_acceptor *a, sniff *s)
{
    epoll_ctl(a->ep, EPOLL_CTL_DEL, s->conn.fd, NULL);
    list_remove(a, s);
    free(s);
}

/* libmicrohttpd counts the connection from here on (its close reaches cr_acceptor_closed). On
 * failure it has closed the socket itself. */
static void to_mhd(cr_acceptor *a, const held_conn *c)
{
    if (MHD_add_connection(a->cfg.mhd, c->fd, peer_of(c), c->peer_len) != MHD_YES) {
        cr_log("warn", "%s socket: libmicrohttpd refused a connection (%s)", a->cfg.transport, strerror(errno));
        cr_acceptor_closed(a, peer_of(c));
    }
}

/* A kept-alive client's next request mostly follows its answer within a round trip: the worker
 * that answered waits for it a moment and serves it itself, rather than hand the connection back
 * to the epoll set and have the acceptor wake a worker for it (two wake-ups, two epoll_ctl and a
 * copy of the head per request). Only while another worker is idle, so that no connection waits
 * for this one. true: hd is the next request's head, whole, and the direct path takes it. */
static bool next_request_here(cr_acceptor *a, int fd, cr_head *hd)
{
    pthread_mutex_lock(&a->mu);
    bool spare = a->idle_workers > a->queued;
    pthread_mutex_unlock(&a->mu);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (!spare || atomic_load(&a->stop) || poll(&p, 1, KEEP_WAIT_MS) != 1 || !(p.revents & POLLIN))
        return false;
    char peek[CR_HEAD_MAX];
    ssize_t n = recv(fd, peek, sizeof peek, MSG_PEEK | MSG_DONTWAIT);
    return n > 0 && cr_head_parse(peek, (size_t)n, hd) == 1 && cr_direct_takes(a->h, hd, a->cfg.direct_min_kb);
}

static void *direct_worker(void *arg)
{
    cr_acceptor *a = arg;
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
        bool keep;
        while ((keep = cr_direct_serve(a->h, job->conn.fd, peer_of(&job->conn), &job->head, &a->stop)) &&
               next_request_here(a, job->conn.fd, &job->head))
            ;
        /* free before the connection is watched again: its next request, which may arrive at
         * once, must find this worker, or with every other one busy it would go to
         * libmicrohttpd, and a kept-alive connection stays there (at 64 connections, 11% of the
         * 256x256 .npy requests went that way, through the post processor's extra copy) */
        pthread_mutex_lock(&a->mu);
        a->idle_workers++;
        pthread_mutex_unlock(&a->mu);
        if (keep && !atomic_load(&a->stop))
            watch(a, &job->conn);
        else
            drop(a, &job->conn);
        free(job);
        pthread_mutex_lock(&a->mu);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

/* Queues a direct request for a free worker (started when none is); false when every worker is
 * busy (libmicrohttpd serves it). */
static bool start_direct(cr_acceptor *a, const held_conn *c, const cr_head *hd)
{
    direct_job *job = malloc(sizeof *job);
    if (!job)
        return false;
    job->conn = *c;
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
static void look(cr_acceptor *a, sniff *s)
{
    ssize_t n = recv(s->conn.fd, a->peek, sizeof a->peek, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    held_conn c = s->conn;
    if (n <= 0) { /* closed, or broken, before a request */
        forget(a, s);
        drop(a, &c);
        return;
    }
    int rc = cr_head_parse(a->peek, (size_t)n, &a->scratch);
    if (rc == 0) {
        s->begun = true;
        return;
    }
    forget(a, s);
    if (rc == 1 && cr_direct_takes(a->h, &a->scratch, a->cfg.direct_min_kb) && start_direct(a, &c, &a->scratch))
        return;
    to_mhd(a, &c);
}

/* Takes the listening socket out of the epoll set (full) or puts it back (room again). */
static void arm_listen(cr_acceptor *a, bool on)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &a->cfg};
    if (epoll_ctl(a->ep, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, a->cfg.listen_fd, on ? &ev : NULL) == 0)
        atomic_store(&a->full, !on);
}

static void accept_all(cr_acceptor *a)
{
    for (;;) {
        if (!cr_conn_limits_room(&a->limits)) {
            arm_listen(a, false); /* new clients wait in the backlog, as libmicrohttpd's did */
            return;
        }
        held_conn c = {.peer_len = sizeof c.peer};
        c.fd = accept4(a->cfg.listen_fd, (struct sockaddr *)&c.peer, &c.peer_len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c.fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                cr_log("warn", "%s socket: accept: %s", a->cfg.transport, strerror(errno));
            return;
        }
        if (cr_conn_limits_take(&a->limits, peer_of(&c)) != CR_ADMIT) {
            close(c.fd); /* over --max-connections-per-ip: closed at once, as libmicrohttpd does */
            continue;
        }
        if (c.peer.ss_family != AF_UNIX) { /* direct answers are one write: never held back */
            int one = 1;
            setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        }
        watch(a, &c);
    }
}

/* Heads begun and not whole go to libmicrohttpd; silent connections are closed. */
static void sweep(cr_acceptor *a, double now)
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
    held_conn c = due->conn;
    bool begun = due->begun;
    forget(a, due);
    if (begun)
        to_mhd(a, &c);
    else
        drop(a, &c);
    sweep(a, now); /* the next one, if any */
}

static void *acceptor(void *arg)
{
    cr_acceptor *a = arg;
    struct epoll_event ev[EVENTS];
    while (!atomic_load(&a->stop)) {
        int n = epoll_wait(a->ep, ev, EVENTS, TICK_MS);
        for (int i = 0; i < n; i++) {
            if (ev[i].data.ptr == &a->cfg) {
                accept_all(a);
            } else if (ev[i].data.ptr == a) {
                uint64_t count;
                if (read(a->room_fd, &count, sizeof count) < 0 && errno != EAGAIN)
                    cr_log("warn", "%s socket: eventfd: %s", a->cfg.transport, strerror(errno));
            } else {
                look(a, ev[i].data.ptr);
            }
        }
        if (atomic_load(&a->full) && cr_conn_limits_room(&a->limits))
            arm_listen(a, true);
        sweep(a, cr_now());
    }
    return NULL;
}

void cr_acceptor_closed(cr_acceptor *a, const struct sockaddr *peer)
{
    cr_conn_limits_release(&a->limits, peer);
    uint64_t one = 1;
    if (atomic_load(&a->full) && write(a->room_fd, &one, sizeof one) < 0 && errno != EAGAIN)
        cr_log("warn", "%s socket: eventfd: %s", a->cfg.transport, strerror(errno));
}

int cr_acceptor_start(cr_http *h, const cr_acceptor_cfg *cfg, cr_acceptor **out, char *err, size_t errlen)
{
    cr_acceptor *a = calloc(1, sizeof *a);
    if (!a) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    a->h = h;
    a->cfg = *cfg;
    cr_conn_limits_init(&a->limits, cfg->max_connections, cfg->max_per_ip);
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->work, NULL);
    a->ep = epoll_create1(EPOLL_CLOEXEC);
    a->room_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event room = {.events = EPOLLIN, .data.ptr = a};
    struct epoll_event listen = {.events = EPOLLIN, .data.ptr = &a->cfg};
    bool ok = a->ep >= 0 && a->room_fd >= 0 && epoll_ctl(a->ep, EPOLL_CTL_ADD, a->room_fd, &room) == 0 &&
              epoll_ctl(a->ep, EPOLL_CTL_ADD, cfg->listen_fd, &listen) == 0;
    *out = a;
    if (!ok || pthread_create(&a->thread, NULL, acceptor, a) != 0) {
        *out = NULL;
        snprintf(err, errlen, "cannot serve on the %s socket: %s", cfg->transport, strerror(errno));
        if (a->ep >= 0)
            close(a->ep);
        if (a->room_fd >= 0)
            close(a->room_fd);
        cr_conn_limits_destroy(&a->limits);
        pthread_mutex_destroy(&a->mu);
        pthread_cond_destroy(&a->work);
        free(a);
        return -1;
    }
    return 0;
}

void cr_acceptor_stop(cr_acceptor *a)
{
    if (!a)
        return;
    atomic_store(&a->stop, true);
    pthread_join(a->thread, NULL);
    close(a->cfg.listen_fd);
    pthread_mutex_lock(&a->mu);
    pthread_cond_broadcast(&a->work);
    pthread_mutex_unlock(&a->mu);
    for (int i = 0; i < a->workers; i++) /* each sees stop within a slice (body_stream.h) */
        pthread_join(a->worker[i], NULL);
    a->workers = 0;
    for (direct_job *j = a->jobs, *next; j; j = next) {
        next = j->next;
        drop(a, &j->conn);
        free(j);
    }
    a->jobs = NULL;
    while (a->head) {
        held_conn c = a->head->conn;
        forget(a, a->head);
        drop(a, &c);
    }
}

void cr_acceptor_free(cr_acceptor *a)
{
    if (!a)
        return;
    close(a->ep);
    close(a->room_fd);
    cr_conn_limits_destroy(&a->limits);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->work);
    free(a);
}
