/* A gRPC event loop; see grpc_loop.h. Level-triggered epoll: a connection is watched for reads
 * always and for writes while its output queue is not empty; a connection that stopped reading
 * at its budget (grpc_conn.c) is read again on the next turn without waiting. */
#include "server/grpc/grpc_loop.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/clock.h"
#include "server/grpc/grpc_conn.h"
#include "server/grpc/grpc_done.h"
#include "server/grpc/grpc_tls.h"
#include "server/obs/log.h"

#define TICK_S 0.05 /* deadlines are looked at this often */

/* A connection as the loop watches it. */
typedef struct entry {
    cr_grpc_conn *conn;
    uint32_t events;
    bool ready; /* more to read without waiting */
    struct entry *prev, *next;
} entry;

/* A socket accepted by another loop, waiting to be adopted by this one. */
typedef struct inbox_fd {
    int fd;
    struct sockaddr_storage addr;
    struct inbox_fd *next;
} inbox_fd;

struct cr_grpc_loop {
    cr_grpc_server *srv;
    pthread_t thread;
    bool started;
    _Atomic bool stop;
    int epfd;
    cr_grpc_done done;
    int listen_fd[CR_GRPC_LISTEN_MAX];
    cr_grpc_loop **all;
    int n_all;
    unsigned next_loop;
    pthread_mutex_t inbox_mu;
    inbox_fd *inbox;
    entry *conns;
    cr_grpc_conn *dirty;
    uint8_t *rbuf; /* its connections' read buffer (grpc_conn.h) */
    bool goaway_sent, cut_off_done;
    double last_tick;
};

/* epoll's data for the descriptors that are not connections */
static char listen_tag[CR_GRPC_LISTEN_MAX], done_tag;

cr_grpc_loop *cr_grpc_loop_new(cr_grpc_server *srv, char *err, size_t errlen)
{
    cr_grpc_loop *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    l->srv = srv;
    for (int i = 0; i < CR_GRPC_LISTEN_MAX; i++)
        l->listen_fd[i] = -1;
    l->done.efd = -1;
    pthread_mutex_init(&l->inbox_mu, NULL);
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    l->rbuf = malloc(CR_GRPC_READ_BUF);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &done_tag};
    if (!l->rbuf || l->epfd < 0 || cr_grpc_done_init(&l->done) < 0 ||
        epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->done.efd, &ev) < 0) {
        snprintf(err, errlen, "gRPC event loop: %s", strerror(errno));
        cr_grpc_loop_free(l);
        return NULL;
    }
    return l;
}

/* ---- connections ------------------------------------------------------------------------------ */

static void watch(cr_grpc_loop *l, entry *e)
{
    uint32_t want = EPOLLIN | (cr_grpc_conn_wants_write(e->conn) ? EPOLLOUT : 0);
    if (want == e->events)
        return;
    struct epoll_event ev = {.events = want, .data.ptr = e};
    epoll_ctl(l->epfd, e->events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, cr_grpc_conn_fd(e->conn), &ev);
    e->events = want;
}

static void close_entry(cr_grpc_loop *l, entry *e)
{
    epoll_ctl(l->epfd, EPOLL_CTL_DEL, cr_grpc_conn_fd(e->conn), NULL);
    atomic_fetch_sub(&l->srv->conns, 1);
    if (e->prev)
        e->prev->next = e->next;
    else
        l->conns = e->next;
    if (e->next)
        e->next->prev = e->prev;
    cr_grpc_conn_free(e->conn);
    free(e);
}

/* Writes what every connection with news has; closes those that are over (one that put itself
 * on the list again is closed when it comes round). */
static void flush_dirty(cr_grpc_loop *l)
{
    while (l->dirty) {
        cr_grpc_conn *c = l->dirty;
        l->dirty = cr_grpc_conn_next_dirty(c);
        cr_grpc_conn_flush(c);
        entry *e = cr_grpc_conn_owner(c);
        if (cr_grpc_conn_alive(c))
            watch(l, e);
        else if (!cr_grpc_conn_is_dirty(c))
            close_entry(l, e);
    }
}

static void adopt(cr_grpc_loop *l, int fd, const struct sockaddr *sa)
{
    cr_grpc_server *srv = l->srv;
    bool tls = srv->tls && sa->sa_family != AF_UNIX; /* TLS is TCP's, as for HTTP */
    cr_grpc_transport *tp = tls ? cr_grpc_tls_transport(srv->tls, fd) : cr_grpc_plain_transport(fd);
    if (!tp) {
        close(fd);
        return;
    }
    atomic_fetch_add(&srv->conns, 1); /* every adopted socket is counted until its entry closes */
    entry *e = calloc(1, sizeof *e);
    cr_grpc_conn *c = e ? cr_grpc_conn_new(srv, &l->done, tp, sa, l->rbuf, &l->dirty) : NULL;
    if (!c) {
        if (!e)
            tp->ops->free(tp);
        free(e);
        atomic_fetch_sub(&srv->conns, 1);
        return;
    }
    e->conn = c;
    cr_grpc_conn_set_owner(c, e);
    e->next = l->conns;
    if (l->conns)
        l->conns->prev = e;
    l->conns = e;
    watch(l, e);
    cr_grpc_conn_read(c); /* the server's preface goes out now; a TLS handshake begins */
    e->ready = cr_grpc_conn_more_to_read(c);
}

static void adopt_inbox(cr_grpc_loop *l)
{
    pthread_mutex_lock(&l->inbox_mu);
    inbox_fd *in = l->inbox;
    l->inbox = NULL;
    pthread_mutex_unlock(&l->inbox_mu);
    while (in) {
        inbox_fd *next = in->next;
        adopt(l, in->fd, (const struct sockaddr *)&in->addr);
        free(in);
        in = next;
    }
}

/* A connection to the next loop in turn: at once when it is this one. */
static void hand_over(cr_grpc_loop *l, int fd, const struct sockaddr_storage *ss)
{
    cr_grpc_loop *to = l->all[l->next_loop++ % (unsigned)l->n_all];
    if (to == l)
        return adopt(l, fd, (const struct sockaddr *)ss);
    inbox_fd *in = malloc(sizeof *in);
    if (!in) {
        close(fd);
        return;
    }
    in->fd = fd;
    in->addr = *ss;
    pthread_mutex_lock(&to->inbox_mu);
    in->next = to->inbox;
    to->inbox = in;
    pthread_mutex_unlock(&to->inbox_mu);
    cr_grpc_done_wake(&to->done);
}

static void accept_all(cr_grpc_loop *l, int listen_fd)
{
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int fd = accept4(listen_fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                cr_log("warn", "gRPC: accept: %s", strerror(errno)); /* EMFILE: the next turn tries again */
            return;
        }
        if (atomic_load(&l->srv->conns) >= l->srv->cfg->max_connections) { /* --max-connections, as HTTP's */
            close(fd);
            continue;
        }
        int one = 1; /* answers are written whole: Nagle's delay would only hold the last frame */
        if (ss.ss_family != AF_UNIX)
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        hand_over(l, fd, &ss);
    }
}

/* ---- the loop ---------------------------------------------------------------------------------- */

/* The drain and its cut-off, once each; the deadlines a few times a second. */
static void housekeeping(cr_grpc_loop *l)
{
    bool drain = atomic_load(&l->srv->draining), cut = atomic_load(&l->srv->cut_off);
    double now = cr_now();
    if ((drain && !l->goaway_sent) || (cut && !l->cut_off_done)) {
        for (entry *e = l->conns; e; e = e->next)
            cut && !l->cut_off_done ? cr_grpc_conn_cut_off(e->conn) : cr_grpc_conn_goaway(e->conn);
        l->goaway_sent = drain || l->goaway_sent;
        l->cut_off_done = cut || l->cut_off_done;
    }
    if (now - l->last_tick < TICK_S)
        return;
    l->last_tick = now;
    for (entry *e = l->conns; e; e = e->next)
        cr_grpc_conn_tick(e->conn, now);
}

static bool any_ready(const cr_grpc_loop *l)
{
    for (const entry *e = l->conns; e; e = e->next)
        if (e->ready)
            return true;
    return false;
}

static void read_ready(cr_grpc_loop *l)
{
    for (entry *e = l->conns; e; e = e->next)
        if (e->ready) {
            cr_grpc_conn_read(e->conn);
            e->ready = cr_grpc_conn_more_to_read(e->conn);
        }
}

static void on_event(cr_grpc_loop *l, const struct epoll_event *ev)
{
    for (int i = 0; i < CR_GRPC_LISTEN_MAX; i++)
        if (ev->data.ptr == &listen_tag[i])
            return accept_all(l, l->listen_fd[i]);
    if (ev->data.ptr == &done_tag) {
        cr_grpc_done_run(&l->done); /* the continuations queue answers: the connections are dirty */
        return adopt_inbox(l);
    }
    entry *e = ev->data.ptr;
    if (ev->events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        cr_grpc_conn_read(e->conn);
        e->ready = cr_grpc_conn_more_to_read(e->conn);
    } else if (ev->events & EPOLLOUT) {
        cr_grpc_conn_read(e->conn); /* a TLS handshake may be waiting to write; else it only marks it dirty */
    }
}

static void *loop_main(void *arg)
{
    cr_grpc_loop *l = arg;
    struct epoll_event evs[64];
    while (!atomic_load(&l->stop)) {
        int n = epoll_wait(l->epfd, evs, 64, any_ready(l) ? 0 : (int)(TICK_S * 1000));
        for (int i = 0; i < n; i++)
            on_event(l, &evs[i]);
        read_ready(l);
        housekeeping(l);
        flush_dirty(l);
    }
    return NULL;
}

int cr_grpc_loop_start(cr_grpc_loop *l, const int listen_fd[CR_GRPC_LISTEN_MAX], cr_grpc_loop **all, int n,
                       char *err, size_t errlen)
{
    l->all = all;
    l->n_all = n;
    for (int i = 0; i < CR_GRPC_LISTEN_MAX; i++) {
        if (listen_fd[i] < 0)
            continue;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &listen_tag[i]};
        if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, listen_fd[i], &ev) < 0) {
            snprintf(err, errlen, "gRPC: cannot watch the listening socket: %s", strerror(errno));
            return -1;
        }
        l->listen_fd[i] = listen_fd[i];
    }
    int rc = pthread_create(&l->thread, NULL, loop_main, l);
    if (rc != 0) {
        snprintf(err, errlen, "gRPC: cannot start an event loop thread: %s", strerror(rc));
        return -1;
    }
    l->started = true;
    return 0;
}

void cr_grpc_loop_wake(cr_grpc_loop *l) { cr_grpc_done_wake(&l->done); }

void cr_grpc_loop_free(cr_grpc_loop *l)
{
    if (!l)
        return;
    if (l->started) {
        atomic_store(&l->stop, true);
        cr_grpc_done_wake(&l->done);
        pthread_join(l->thread, NULL);
    }
    l->dirty = NULL;
    while (l->conns)
        close_entry(l, l->conns);
    for (inbox_fd *in = l->inbox, *next; in; in = next) { /* handed over too late */
        next = in->next;
        close(in->fd);
        free(in);
    }
    if (l->done.efd >= 0)
        cr_grpc_done_destroy(&l->done); /* the jobs of calls that ended come back here last */
    if (l->epfd >= 0)
        close(l->epfd);
    pthread_mutex_destroy(&l->inbox_mu);
    free(l->rbuf);
    free(l);
}
