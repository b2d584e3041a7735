/* Read deadlines; see read_deadline.h. */
#include "server/http/read_deadline.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "server/clock.h"

struct cr_read_clock {
    cr_read_clock *prev, *next;
    int fd;
    _Atomic double since;      /* when the request being read became due (cr_now) */
    _Atomic uint64_t bytes;    /* of that request, so far */
    _Atomic bool reading;      /* false while a complete request is served */
    _Atomic bool cut;          /* shut down already (set under the list's lock) */
};

void cr_read_deadlines_init(cr_read_deadlines *d, int timeout_s, int min_rate_kbs)
{
    pthread_mutex_init(&d->mu, NULL);
    d->head = NULL;
    d->timeout_s = timeout_s;
    d->min_rate = (double)min_rate_kbs * 1024.0;
}

void cr_read_deadlines_destroy(cr_read_deadlines *d) { pthread_mutex_destroy(&d->mu); }

static void clock_open(cr_read_deadlines *d, struct MHD_Connection *conn, void **socket_context)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    cr_read_clock *k = calloc(1, sizeof *k);
    *socket_context = k;
    if (!k || !ci) /* no clock: this connection is left to --conn-timeout-s alone */
        return;
    k->fd = ci->connect_fd;
    atomic_store(&k->since, cr_now());
    atomic_store(&k->reading, true);
    pthread_mutex_lock(&d->mu);
    k->next = d->head;
    if (d->head)
        d->head->prev = k;
    d->head = k;
    pthread_mutex_unlock(&d->mu);
}

/* libmicrohttpd closes the socket only after this notification: once the clock is out of the
 * list (under the lock the sweep holds), its fd is never touched again. */
static void clock_close(cr_read_deadlines *d, void **socket_context)
{
    cr_read_clock *k = *socket_context;
    *socket_context = NULL;
    if (!k)
        return;
    pthread_mutex_lock(&d->mu);
    if (k->prev)
        k->prev->next = k->next;
    else if (d->head == k)
        d->head = k->next;
    if (k->next)
        k->next->prev = k->prev;
    pthread_mutex_unlock(&d->mu);
    free(k);
}

void cr_read_deadlines_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                              enum MHD_ConnectionNotificationCode code)
{
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        clock_open(cls, conn, socket_context);
    else
        clock_close(cls, socket_context);
}

static cr_read_clock *clock_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

void cr_read_clock_received(struct MHD_Connection *conn, size_t n)
{
    cr_read_clock *k = clock_of(conn);
    if (k)
        atomic_fetch_add_explicit(&k->bytes, n, memory_order_relaxed);
}

void cr_read_clock_stop(struct MHD_Connection *conn)
{
    cr_read_clock *k = clock_of(conn);
    if (k)
        atomic_store(&k->reading, false);
}

void cr_read_clock_restart(struct MHD_Connection *conn)
{
    cr_read_clock *k = clock_of(conn);
    if (!k)
        return;
    atomic_store(&k->bytes, 0);
    atomic_store(&k->since, cr_now());
    atomic_store(&k->reading, true);
}

bool cr_read_clock_was_cut(struct MHD_Connection *conn)
{
    cr_read_clock *k = clock_of(conn);
    return k && atomic_load(&k->cut);
}

static bool late(const cr_read_deadlines *d, const cr_read_clock *k, double now)
{
    if (!atomic_load(&k->reading))
        return false;
    double allowed = d->timeout_s;
    if (d->min_rate > 0)
        allowed += (double)atomic_load(&k->bytes) / d->min_rate;
    else if (atomic_load(&k->bytes) > 0)
        return false; /* no body rate: the deadline is for the headers only */
    return now - atomic_load(&k->since) > allowed;
}

int cr_read_deadlines_sweep(cr_read_deadlines *d, double now)
{
    int n = 0;
    if (d->timeout_s <= 0)
        return 0;
    pthread_mutex_lock(&d->mu);
    for (cr_read_clock *k = d->head; k; k = k->next)
        if (!atomic_load(&k->cut) && late(d, k, now)) {
            atomic_store(&k->cut, true); /* first: the connection's thread may see the shutdown at once */
            shutdown(k->fd, SHUT_RDWR);
            n++;
        }
    pthread_mutex_unlock(&d->mu);
    return n;
}
