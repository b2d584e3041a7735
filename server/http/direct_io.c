/* The direct path's transport; see direct_io.h. */
#include "server/http/direct_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include "server/clock.h"

#define ANSWER_HEAD_MAX 16384

/* ---- cr_conn's transport --------------------------------------------------------------------- */

const char *cr_direct_header(const cr_direct *d, const char *name)
{
    return cr_head_get(d->head, name);
}

int cr_direct_args(const cr_direct *d, MHD_KeyValueIterator it, void *cls)
{
    int n = 0;
    for (int i = 0; i < d->head->nargs; i++) {
        n++;
        if (it && it(cls, MHD_GET_ARGUMENT_KIND, d->head->args[i].name, d->head->args[i].value) != MHD_YES)
            break;
    }
    return n;
}

void cr_direct_keep_body(cr_direct *d, const cr_span *spans, int n)
{
    d->nspans = 0;
    for (int i = 0; i < n && d->nspans < 2; i++)
        if (spans[i].n)
            d->spans[d->nspans++] = spans[i];
}

void cr_direct_stream_last(cr_direct *d, int (*read)(cr_sink *s, const void **p, size_t *len), cr_sink *s)
{
    d->stream_read = read;
    d->stream = s;
}

typedef struct {
    char *text;
    size_t len;
    bool overflow, has_close;
} answer_head;

/* "name: value" and CRLF; with name NULL, the blank line that ends the head. */
static void head_add(answer_head *a, const char *name, const char *value)
{
    size_t room = ANSWER_HEAD_MAX - a->len;
    int n = name ? snprintf(a->text + a->len, room, "%s: %s\r\n", name, value) : snprintf(a->text + a->len, room, "\r\n");
    if (n < 0 || (size_t)n >= room)
        a->overflow = true;
    else
        a->len += (size_t)n;
}

static enum MHD_Result head_field(void *cls, enum MHD_ValueKind kind, const char *name, const char *value)
{
    (void)kind;
    answer_head *a = cls;
    if (strcasecmp(name, MHD_HTTP_HEADER_CONNECTION) == 0) {
        a->has_close |= strcasecmp(value, "close") == 0;
        return MHD_YES;
    }
    head_add(a, name, value ? value : "");
    return MHD_YES;
}

/* Everything in iov out: blocking sends in slices (the socket's send timeout), given up when
 * --conn-timeout-s passes with no progress or the daemon stops. */
int cr_direct_send(cr_direct *d, struct iovec *iov, int n, int timeout_s)
{
    double since = cr_now();
    while (n > 0) {
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t sent = sendmsg(d->fd, &m, MSG_NOSIGNAL);
        if (sent < 0 && errno == EINTR)
            continue;
        if (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return -1;
        if (sent < 0) {
            if (atomic_load(d->stop) || cr_now() - since > timeout_s)
                return -1;
            continue;
        }
        since = cr_now();
        for (size_t left = (size_t)sent; n > 0 && left >= iov->iov_len; n--)
            left -= iov->iov_len, sent -= (ssize_t)iov->iov_len, iov++;
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + sent;
            iov->iov_len -= (size_t)sent;
        }
    }
    return 0;
}

/* Blocking, with a timeout of one slice each way (body_stream.h): this thread sleeps in the
 * kernel while bytes move, and wakes at least once a slice. nonblocking: back as it was. */
int cr_direct_set_blocking(int fd, bool blocking)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, blocking ? fl & ~O_NONBLOCK : fl | O_NONBLOCK) < 0)
        return -1;
    struct timeval slice = {0, blocking ? CR_DIRECT_SLICE_NS / 1000 : 0};
    return setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &slice, sizeof slice) |
           setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &slice, sizeof slice);
}

/* The last span from a device, each piece as the backend hands it out. A failure after the head
 * went out can only close the connection: the client sees a body shorter than announced. */
static int send_stream(cr_direct *d, int timeout_s)
{
    const void *p;
    size_t n;
    int rc;
    while ((rc = d->stream_read(d->stream, &p, &n)) == 1) {
        struct iovec iov = {(void *)p, n};
        if (cr_direct_send(d, &iov, 1, timeout_s) != 0)
            return -1;
    }
    return rc;
}

static int write_answer(cr_conn *c, int status, struct MHD_Response *r)
{
    cr_direct *d = c->direct;
    char text[ANSWER_HEAD_MAX], date[64];
    answer_head a = {text, 0, false, false};
    const char *reason = MHD_get_reason_phrase_for((unsigned)status);
    int n = snprintf(text, sizeof text, "HTTP/1.1 %d %s\r\n", status, reason && *reason ? reason : "Unknown");
    a.len = (size_t)n;
    time_t now = time(NULL);
    struct tm tm;
    strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", gmtime_r(&now, &tm));
    head_add(&a, MHD_HTTP_HEADER_DATE, date);
    MHD_get_response_headers(r, head_field, &a);
    unsigned long long bytes = 0;
    for (int i = 0; i < d->nspans; i++)
        bytes += d->spans[i].n;
    char length[24];
    snprintf(length, sizeof length, "%llu", bytes);
    head_add(&a, MHD_HTTP_HEADER_CONTENT_LENGTH, length);
    const char *asked = cr_head_get(d->head, "Connection");
    d->close |= a.has_close || !cr_body_stream_done(&d->body) || (asked && strcasestr(asked, "close"));
    if (d->close)
        head_add(&a, MHD_HTTP_HEADER_CONNECTION, "close");
    head_add(&a, NULL, NULL);
    if (a.overflow)
        return -1;
    int timeout_s = c->h->deps.cfg->conn_timeout_s, in_memory = d->nspans - (d->stream && d->nspans ? 1 : 0);
    struct iovec iov[3] = {{text, a.len}};
    for (int i = 0; i < in_memory; i++)
        iov[i + 1] = (struct iovec){(void *)d->spans[i].p, d->spans[i].n};
    int rc = cr_direct_send(d, iov, 1 + in_memory, timeout_s);
    return rc || in_memory == d->nspans ? rc : send_stream(d, timeout_s);
}

enum MHD_Result cr_direct_queue(cr_conn *c, int status, struct MHD_Response *r)
{
    cr_direct *d = c->direct;
    if (!d->body_read && !d->expect_continue) { /* as libmicrohttpd: answered once the body is in */
        if (d->pending)
            MHD_destroy_response(d->pending);
        d->pending = r;
        d->pending_status = status;
        return MHD_YES;
    }
    if (!d->body_read) /* the client waits for our word: the refusal now, and no body follows */
        d->close = true;
    int rc = write_answer(c, status, r);
    MHD_destroy_response(r);
    d->written = rc == 0;
    return rc == 0 ? MHD_YES : MHD_NO;
}

/* ---- the sync wait (submit.c) ---------------------------------------------------------------------------- */

void cr_direct_wake(cr_direct *d)
{
    pthread_mutex_lock(&d->mu);
    d->woken = true;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

bool cr_direct_wait_woken(cr_direct *d)
{
    pthread_mutex_lock(&d->mu);
    while (!d->woken && !atomic_load(d->stop)) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += CR_DIRECT_SLICE_NS;
        if (until.tv_nsec >= 1000000000L)
            until.tv_sec++, until.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&d->cv, &d->mu, &until);
    }
    bool woken = d->woken;
    d->woken = false;
    pthread_mutex_unlock(&d->mu);
    return woken;
}
