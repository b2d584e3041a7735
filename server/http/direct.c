/* Direct uploads; see direct.h. */
#include "server/http/direct.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "server/clock.h"
#include "server/http/body_stream.h"
#include "server/http/direct_io.h"
#include "server/http/request_end.h"
#include "server/http/request_id.h"
#include "server/http/routes.h"
#include "server/http/upload.h"
#include "server/codec/media_type.h"
#include "server/kserve/kserve.h"

static bool is_direct_route(const char *path)
{
    return !strcmp(path, "/v1/gemm") || !strcmp(path, "/v1/ata") || !strcmp(path, "/v1/histogram") ||
           !strcmp(path, "/v1/jobs") || !strcmp(path, "/v1/tensors");
}

/* POST /v2/models/{model}[/versions/{v}]/infer: what cr_route_find would match. */
static bool is_kserve_infer(const char *path)
{
    char allow[128];
    const char *id = NULL;
    const cr_route *r = cr_route_find("POST", path, &id, allow, sizeof allow);
    return r && r->handler == cr_kserve_infer;
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

/* A binary upload of ours (.npy, multipart, raw bytes to /v1), or a KServe inference request with
 * binary tensors (Inference-Header-Content-Length; JSON-only bodies stay with libmicrohttpd). */
static bool direct_body(const cr_head *hd)
{
    unsigned long long hl;
    const char *ct = cr_head_get(hd, "Content-Type");
    if (is_direct_route(hd->path))
        return cr_head_count(hd, "Content-Type") == 1 && cr_upload_takes(ct);
    return is_kserve_infer(hd->path) && cr_head_count(hd, "Inference-Header-Content-Length") == 1 &&
           parse_length(cr_head_get(hd, "Inference-Header-Content-Length"), &hl) && cr_head_count(hd, "Content-Type") <= 1 &&
           (!ct || cr_media_type_is(ct, "application/octet-stream") || cr_media_type_is(ct, "application/json"));
}

bool cr_direct_takes(cr_http *h, const cr_head *hd, int min_kb)
{
    const cr_config *cfg = h->deps.cfg;
    unsigned long long length = 0;
    const char *expect = cr_head_get(hd, "Expect");
    const char *id = cr_head_get(hd, "X-Request-Id");
    return min_kb > 0 && strcmp(hd->method, "POST") == 0 && direct_body(hd) &&
           cr_head_count(hd, "Content-Length") == 1 && parse_length(cr_head_get(hd, "Content-Length"), &length) &&
           length >= (unsigned long long)min_kb << 10 &&
           length <= (unsigned long long)cfg->max_body_mb << 20 &&
           cr_head_count(hd, "Host") == 1 && !cr_head_get(hd, "Transfer-Encoding") &&
           !cr_head_get(hd, "Content-Encoding") && (!expect || strcasecmp(expect, "100-continue") == 0) &&
           cr_head_count(hd, "X-Request-Id") <= 1 && (!id || cr_request_id_valid(id)) &&
           (!h->auth.enabled || cr_auth_check(&h->auth, cr_head_get(hd, "Authorization"))) &&
           !cr_engine_draining(h->deps.engine);
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
    return cr_direct_send(d, &iov, 1, timeout_s);
}

static cr_conn *conn_new(cr_http *h, cr_direct *d, const struct sockaddr *peer, const cr_head *hd)
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
    c->kserve = r->kserve;
    c->fd = d->fd;
    cr_peer_from_addr(peer, d->fd, &c->peer);
    cr_request_id_take(cr_head_get(hd, "X-Request-Id"), c->request_id);
    c->authenticated = h->auth.enabled;
    atomic_fetch_add(&h->active, 1);
    cr_metrics_direct(c->peer.is_unix);
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
        rc = d->pending || (!c->upload && !c->ks_upload) ? cr_body_stream_discard(&d->body)
             : c->ks_upload                              ? cr_kserve_direct_receive(c, &d->body)
                                                         : cr_upload_receive(c, &d->body);
    d->body_read = true;
    if (rc == 0)
        return 0;
    if (d->body.error == CR_STREAM_SLOW) {
        cr_metrics_slow_closed(1);
        return 408;
    }
    return 499;
}

bool cr_direct_serve(cr_http *h, int fd, const struct sockaddr *peer, const cr_head *hd, const _Atomic bool *stop)
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
    if (consume_head(fd, hd->len) < 0 || cr_direct_set_blocking(fd, true) < 0 || !(c = conn_new(h, d, peer, hd)))
        goto cleanup;
    cr_body_stream_init(&d->body, fd, strtoull(cr_head_get(hd, "Content-Length"), NULL, 10), c->t0,
                        cfg->read_timeout_s, cfg->min_body_rate_kbs, cfg->conn_timeout_s, stop);
    /* MHD_NO with nothing answered: out of memory; the connection closes, as libmicrohttpd's
     * would (logged 499 on both paths) */
    bool began = (c->kserve ? cr_kserve_direct_begin(c) : cr_upload_begin(c)) == MHD_YES || d->pending || d->written;
    int broke = began ? read_body(c, d) : 499;
    if (!broke && d->pending) {
        struct MHD_Response *r = d->pending;
        d->pending = NULL;
        cr_direct_queue(c, d->pending_status, r);
    } else if (!broke && !d->written) {
        c->handler(c);
    }
    keep = !broke && d->written && !d->close && cr_direct_set_blocking(fd, false) == 0;
    cr_conn_end(c, broke ? broke : d->written ? 0 : 499);
cleanup:
    if (d->pending)
        MHD_destroy_response(d->pending);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    free(d);
    return keep;
}
