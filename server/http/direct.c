/* Direct uploads on the Unix socket; see direct.h. */
#include "server/http/direct.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include "server/clock.h"
#include "server/http/body_stream.h"
#include "server/http/listener.h"
#include "server/http/request_id.h"
#include "server/http/routes.h"
#include "server/http/submit.h"
#include "server/http/upload.h"
#include "server/obs/log.h"

/* The stop flag is looked at this often while a job runs. */
#define WAIT_SLICE_NS 100000000L
#define ANSWER_HEAD_MAX 16384

struct cr_direct {
    int fd;
    const cr_head *head;
    const _Atomic bool *stop;
    bool expect_continue;      /* the client waits for "100 Continue" before sending its body */
    bool body_read;            /* answers are written at once from here on */
    bool close;                /* the connection ends with this answer */
    bool written;              /* an answer went out whole */
    struct MHD_Response *pending; /* an answer given before the body was read: sent after it */
    int pending_status;
    cr_span spans[2];
    int nspans;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool woken;
    cr_body_stream body;
};

static bool is_binary_type(const char *ct)
{
    static const char *const types[] = {"multipart/form-data", "application/x-npy", "application/octet-stream"};
    for (size_t i = 0; ct && i < sizeof types / sizeof *types; i++) {
        size_t n = strlen(types[i]);
        if (strncasecmp(ct, types[i], n) == 0 && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' '))
            return true;
    }
    return false;
}

static bool is_direct_route(const char *path)
{
    return !strcmp(path, "/v1/gemm") || !strcmp(path, "/v1/ata") || !strcmp(path, "/v1/histogram") ||
           !strcmp(path, "/v1/jobs");
}

/* Decimal digits only, no sign or space, at most 18 of them (no overflow). */
static bool parse_length(const char *v, unsigned long long *out)
{
    size_t n = v ? strlen(v) : 0;
    if (!n || n > 18 || strspn(v, "0123456789") != n)
        return false;
    *out = strtoull(v, NULL, 10);
    return true;
}

bool cr_direct_takes(cr_http *h, const cr_head *hd)
{
    const cr_config *cfg = h->deps.cfg;
    unsigned long long length = 0;
    const char *expect = cr_head_get(hd, "Expect");
    const char *id = cr_head_get(hd, "X-Request-Id");
    return cfg->unix_direct_min_kb > 0 && strcmp(hd->method, "POST") == 0 && is_direct_route(hd->path) &&
           cr_head_count(hd, "Content-Length") == 1 && parse_length(cr_head_get(hd, "Content-Length"), &length) &&
           length >= (unsigned long long)cfg->unix_direct_min_kb << 10 &&
           length <= (unsigned long long)cfg->max_body_mb << 20 &&
           cr_head_count(hd, "Content-Type") == 1 && is_binary_type(cr_head_get(hd, "Content-Type")) &&
           cr_head_count(hd, "Host") == 1 && !cr_head_get(hd, "Transfer-Encoding") &&
           !cr_head_get(hd, "Content-Encoding") && (!expect || strcasecmp(expect, "100-continue") == 0) &&
           cr_head_count(hd, "X-Request-Id") <= 1 && (!id || cr_request_id_valid(id)) &&
           (!h->auth.enabled || cr_auth_check(&h->auth, cr_head_get(hd, "Authorization"))) &&
           !cr_engine_draining(h->deps.engine);
}

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

int cr_direct_fd(const cr_direct *d)
{
    return d->fd;
}

typedef struct {
    char *text;
    size_t len;
    bool overflow, has_close;
} answer_head;

static void head_add(answer_head *a, const char *fmt, const char *name, const char *value)
{
    size_t room = ANSWER_HEAD_MAX - a->len;
    int n = snprintf(a->text + a->len, room, fmt, name, value);
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
    head_add(a, "%s: %s\r\n", name, value ? value : "");
    return MHD_YES;
}

/* Everything in iov out: blocking sends in slices (the socket's send timeout), given up when
 * --conn-timeout-s passes with no progress or the daemon stops. */
static int send_all(cr_direct *d, struct iovec *iov, int n, int timeout_s)
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
static int set_blocking(int fd, bool blocking)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, blocking ? fl & ~O_NONBLOCK : fl | O_NONBLOCK) < 0)
        return -1;
    struct timeval slice = {0, blocking ? WAIT_SLICE_NS / 1000 : 0};
    return setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &slice, sizeof slice) |
           setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &slice, sizeof slice);
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
    head_add(&a, "%s: %s\r\n", MHD_HTTP_HEADER_DATE, date);
    MHD_get_response_headers(r, head_field, &a);
    unsigned long long bytes = 0;
    for (int i = 0; i < d->nspans; i++)
        bytes += d->spans[i].n;
    char length[24];
    snprintf(length, sizeof length, "%llu", bytes);
    head_add(&a, "%s: %s\r\n", MHD_HTTP_HEADER_CONTENT_LENGTH, length);
    const char *asked = cr_head_get(d->head, "Connection");
    d->close |= a.has_close || !cr_body_stream_done(&d->body) || (asked && strcasestr(asked, "close"));
    if (d->close)
        head_add(&a, "%s: %s\r\n", MHD_HTTP_HEADER_CONNECTION, "close");
    head_add(&a, "%s%s\r\n", "", "");
    if (a.overflow)
        return -1;
    struct iovec iov[3] = {{text, a.len}};
    for (int i = 0; i < d->nspans; i++)
        iov[i + 1] = (struct iovec){(void *)d->spans[i].p, d->spans[i].n};
    return send_all(d, iov, 1 + d->nspans, c->h->deps.cfg->conn_timeout_s);
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

/* ---- the sync wait ---------------------------------------------------------------------------- */

void cr_direct_wake(cr_direct *d)
{
    pthread_mutex_lock(&d->mu);
    d->woken = true;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

static bool wait_woken(cr_direct *d)
{
    pthread_mutex_lock(&d->mu);
    while (!d->woken && !atomic_load(d->stop)) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += WAIT_SLICE_NS;
        if (until.tv_nsec >= 1000000000L)
            until.tv_sec++, until.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&d->cv, &d->mu, &until);
    }
    bool woken = d->woken;
    d->woken = false;
    pthread_mutex_unlock(&d->mu);
    return woken;
}

enum MHD_Result cr_direct_wait(cr_conn *c)
{
    for (;;) {
        if (!wait_woken(c->direct))
            return MHD_NO; /* the daemon stops: the connection goes unanswered */
        enum MHD_Result rc = cr_sync_resumed(c);
        if (rc != MHD_YES || c->status) /* else re-armed: wait on */
            return rc;
    }
}

/* ---- one request ------------------------------------------------------------------------------ */

/* The head was only peeked at: take it off the socket. */
static int consume_head(int fd, size_t len)
{
    char sink[4096];
    while (len) {
        ssize_t n = recv(fd, sink, len < sizeof sink ? len : sizeof sink, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        len -= (size_t)n;
    }
    return 0;
}

static int send_continue(cr_direct *d, int timeout_s)
{
    static const char line[] = "HTTP/1.1 100 Continue\r\n\r\n";
    struct iovec iov = {(void *)line, sizeof line - 1};
    return send_all(d, &iov, 1, timeout_s);
}

static cr_conn *conn_new(cr_http *h, cr_direct *d, const cr_head *hd)
{
    cr_conn *c = calloc(1, sizeof *c);
    char allow[128];
    if (!c)
        return NULL;
    snprintf(c->method, sizeof c->method, "%s", hd->method);
    snprintf(c->path, sizeof c->path, "%s", hd->path);
    const cr_route *r = cr_route_find(c->method, c->path, &c->id, allow, sizeof allow);
    if (!r) { /* cr_direct_takes saw one of ours */
        free(c);
        return NULL;
    }
    c->h = h;
    c->direct = d;
    c->t0 = cr_now();
    c->handler = r->handler;
    c->label = r->label;
    c->fd = d->fd;
    cr_peer_read_fd(d->fd, &c->peer);
    cr_request_id_take(cr_head_get(hd, "X-Request-Id"), c->request_id);
    c->authenticated = h->auth.enabled;
    atomic_fetch_add(&h->active, 1);
    cr_metrics_direct();
    return c;
}

/* The body, read into the upload's arrays; or, after an early refusal, dropped (libmicrohttpd
 * reads it too before answering). 0, or the status the log gives a broken connection. */
static int read_body(cr_conn *c, cr_direct *d)
{
    int timeout_s = c->h->deps.cfg->conn_timeout_s;
    if (d->written) /* refused at once with Expect: the body never comes */
        return 0;
    int rc = !d->pending && d->expect_continue ? send_continue(d, timeout_s) : 0;
    if (rc == 0)
        rc = d->pending || !c->upload ? cr_body_stream_discard(&d->body) : cr_upload_receive(c, &d->body);
    d->body_read = true;
    if (rc == 0)
        return 0;
    if (d->body.error == CR_STREAM_SLOW) {
        cr_metrics_slow_closed(1);
        return 408;
    }
    return 499;
}

bool cr_direct_serve(cr_http *h, int fd, const cr_head *hd, const _Atomic bool *stop)
{
    const cr_config *cfg = h->deps.cfg;
    cr_direct *d = calloc(1, sizeof *d);
    cr_conn *c = NULL;
    bool keep = false;
    if (!d)
        return false;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    d->fd = fd;
    d->head = hd;
    d->stop = stop;
    d->expect_continue = cr_head_get(hd, "Expect") != NULL;
    if (consume_head(fd, hd->len) < 0 || set_blocking(fd, true) < 0 || !(c = conn_new(h, d, hd)))
        goto cleanup;
    cr_body_stream_init(&d->body, fd, strtoull(cr_head_get(hd, "Content-Length"), NULL, 10), c->t0,
                        cfg->read_timeout_s, cfg->min_body_rate_kbs, cfg->conn_timeout_s, stop);
    cr_upload_begin(c);
    int broke = read_body(c, d);
    if (!broke && d->pending) {
        struct MHD_Response *r = d->pending;
        d->pending = NULL;
        cr_direct_queue(c, d->pending_status, r);
    } else if (!broke && !d->written) {
        c->handler(c);
    }
    keep = !broke && d->written && !d->close && set_blocking(fd, false) == 0;
    cr_conn_end(c, broke ? broke : d->written ? 0 : 499);
    c = NULL;
cleanup:
    if (d->pending)
        MHD_destroy_response(d->pending);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    free(d);
    return keep;
}
