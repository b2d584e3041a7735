/* One gRPC call; see grpc_call.h. */
#include "server/grpc/grpc_call.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/clock.h"
#include "server/grpc/grpc_metadata.h"
#include "server/obs/log.h"
#include "server/obs/metrics.h"

/* A job the call waits for: the loop's record, and the method's continuation. */
typedef struct {
    cr_grpc_pending p;
    void (*fn)(cr_grpc_call *c, cr_job *j, void *arg);
} call_job;

cr_grpc_call *cr_grpc_call_new(void *conn, const cr_grpc_stream_ops *ops, cr_grpc_server *srv, cr_grpc_done *done,
                               const cr_peer *peer, int32_t stream_id)
{
    cr_grpc_call *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->conn = conn;
    c->ops = ops;
    c->srv = srv;
    c->done = done;
    c->peer = peer;
    c->stream_id = stream_id;
    c->t0 = cr_now();
    c->code = CR_GRPC_OK;
    c->log_status = 200;
    atomic_fetch_add(&srv->active, 1);
    return c;
}

/* ---- metadata -------------------------------------------------------------------------------- */

static bool is(const char *name, size_t nlen, const char *want)
{
    return nlen == strlen(want) && memcmp(name, want, nlen) == 0;
}

static void grpc_timeout(cr_grpc_call *c, const char *v)
{
    int64_t us;
    if (!cr_grpc_timeout_parse(v, &us)) {
        c->bad_timeout = true;
        return;
    }
    c->deadline = c->t0 + (double)us / 1e6;
}

void cr_grpc_call_header(cr_grpc_call *c, const char *name, size_t nlen, const char *value, size_t vlen)
{
    if (is(name, nlen, ":method"))
        c->post = strcmp(value, "POST") == 0;
    else if (is(name, nlen, ":path")) {
        c->path_long = vlen >= sizeof c->path;
        snprintf(c->path, sizeof c->path, "%s", value);
    } else if (is(name, nlen, "content-type")) {
        c->grpc_type = cr_grpc_content_type_ok(value);
        snprintf(c->content_type, sizeof c->content_type, "%s", value);
    } else if (is(name, nlen, "grpc-timeout"))
        grpc_timeout(c, value);
    else if (is(name, nlen, "grpc-encoding")) {
        c->bad_coding = !cr_grpc_encoding_parse(value, &c->coding);
        snprintf(c->coding_name, sizeof c->coding_name, "%s", value);
    } else if (is(name, nlen, "authorization"))
        c->auth_ok = cr_auth_check(&c->srv->auth, value);
    else if (is(name, nlen, "x-request-id"))
        c->bad_request_id = cr_request_id_take(value, c->request_id) != 0;
    else if (is(name, nlen, "triton_grpc_error"))
        c->grpc_error_mode = cr_grpc_flag_true(value);
    else if (is(name, nlen, "x-crunchd-debug-delay-ms"))
        c->debug_delay_ms = strtoll(value, NULL, 10);
}

/* An end before any message; http: the :status that goes with it. */
static void refuse(cr_grpc_call *c, int http, cr_grpc_code code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void end_call(cr_grpc_call *c, cr_grpc_code code, const char *message, int trailers_http);

static void refuse(cr_grpc_call *c, int http, cr_grpc_code code, const char *fmt, ...)
{
    char msg[sizeof c->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->log_status = http != 200 ? http : cr_grpc_code_http(code);
    snprintf(c->log_error, sizeof c->log_error, "%s", cr_grpc_code_name(code));
    end_call(c, code, msg, http);
}

/* What the metadata refuse, in the order a client most needs to hear it. */
static bool refused(cr_grpc_call *c, const cr_grpc_method *m)
{
    if (!c->post)
        return refuse(c, 405, CR_GRPC_UNIMPLEMENTED, "gRPC calls are POST requests"), true;
    if (!c->grpc_type)
        return refuse(c, 415, CR_GRPC_INVALID_ARGUMENT, "content-type must be application/grpc, got \"%.40s\"",
                      c->content_type), true;
    if ((!m || !m->open) && c->srv->auth.enabled && !c->auth_ok) /* unknown RPCs and known ones look alike */
        return refuse(c, 200, CR_GRPC_UNAUTHENTICATED,
                      "this daemon needs 'authorization: Bearer <token>' metadata (see --auth-token-file)"), true;
    if (!m)
        return refuse(c, 200, CR_GRPC_UNIMPLEMENTED, "unknown method %.100s%s (crunchd serves "
                      "inference.GRPCInferenceService and grpc.health.v1.Health)", c->path,
                      c->path_long ? "..." : ""), true;
    if (c->bad_request_id)
        return refuse(c, 200, CR_GRPC_INVALID_ARGUMENT, "x-request-id must be 1 to %d characters of A-Z a-z 0-9 "
                      ". _ : - (this answer's request id was made for it)", CR_REQUEST_ID_MAX), true;
    if (c->bad_timeout)
        return refuse(c, 200, CR_GRPC_INVALID_ARGUMENT, "grpc-timeout must be 1 to 8 digits and a unit (H, M, S, m, "
                      "u, n)"), true;
    if (c->bad_coding)
        return refuse(c, 200, CR_GRPC_UNIMPLEMENTED, "grpc-encoding \"%.24s\" is not supported (grpc-accept-encoding: "
                      CR_GRPC_ACCEPT_ENCODING ")", c->coding_name), true;
    return false;
}

void cr_grpc_call_headers_done(cr_grpc_call *c, const cr_grpc_method *m)
{
    if (!c->request_id[0])
        cr_request_id_take(NULL, c->request_id);
    c->rpc = m ? m->name : "unknown";
    if (refused(c, m))
        return;
    c->method = m;
    c->authenticated = c->srv->auth.enabled && c->auth_ok;
    cr_grpc_reader_init(&c->rd, m->big ? c->srv->max_message : CR_GRPC_SMALL_MESSAGE_MAX, c->coding,
                        m->big ? &c->srv->messages : NULL);
}

/* ---- request messages ------------------------------------------------------------------------ */

static bool on_message(void *cls, cr_grpc_msg *m)
{
    cr_grpc_call *c = cls;
    c->messages_in++;
    c->msg_t0 = c->method->on_end ? m->t0 : c->t0;
    if (!c->method->on_end && c->messages_in > 1) {
        cr_error e;
        cr_fail(&e, 400, "invalid_field", "message", "%s takes one request message; a second one came",
                c->method->name);
        cr_grpc_call_fail(c, &e);
        return false;
    }
    c->method->on_message(c, m);
    return cr_grpc_call_open(c);
}

/* What a client may still send after our answer before it is told to stop: a small body is
 * simply read and dropped (some HTTP/2 clients, curl among them, take a reset for a failure even
 * after a complete answer); a big upload refused at its first bytes is stopped. */
#define AFTER_END_MAX (256u << 10)

void cr_grpc_call_data(cr_grpc_call *c, const uint8_t *p, size_t n)
{
    c->bytes_in += n;
    cr_metrics_bytes_in(n);
    if (c->end_on_wire && !c->remote_closed && (c->after_end += n) > AFTER_END_MAX && !c->stop_asked) {
        c->stop_asked = true;
        c->ops->stop_client(c->conn, c);
    }
    if (!c->method || !cr_grpc_call_open(c))
        return; /* refused, or answered: what the client still sends is dropped */
    cr_error err;
    if (cr_grpc_reader_feed(&c->rd, p, n, on_message, c, &err) < 0)
        cr_grpc_call_fail(c, &err);
}

uint8_t *cr_grpc_call_dest(cr_grpc_call *c, size_t *room)
{
    *room = 0;
    return c->method && cr_grpc_call_open(c) ? cr_grpc_reader_dest(&c->rd, room) : NULL;
}

void cr_grpc_call_remote_end(cr_grpc_call *c)
{
    c->remote_closed = true;
    if (!c->method || !cr_grpc_call_open(c))
        return;
    cr_error err;
    if (cr_grpc_reader_end(&c->rd, &err) < 0)
        return cr_grpc_call_fail(c, &err);
    if (c->method->on_end)
        return c->method->on_end(c);
    if (c->messages_in == 0) {
        cr_fail(&err, 400, "missing_field", "message", "%s needs a request message; the stream ended without one",
                c->method->name);
        cr_grpc_call_fail(c, &err);
    }
}

/* ---- the answer ------------------------------------------------------------------------------ */

bool cr_grpc_call_open(const cr_grpc_call *c) { return !c->finished && !c->stream_closed; }

static void out_release(cr_grpc_out *m) { cr_grpc_hold_release(&m->hold); }

static void uncount_waiting(cr_grpc_call *c)
{
    if (c->counted_waiting)
        atomic_fetch_sub(&c->srv->waiting, 1);
    c->counted_waiting = false;
}

void cr_grpc_call_send(cr_grpc_call *c, cr_grpc_out *m)
{
    if (!cr_grpc_call_open(c)) {
        out_release(m);
        return;
    }
    m->next = NULL;
    if (c->out_tail)
        c->out_tail->next = m;
    else
        c->out_head = m;
    c->out_tail = m;
    c->out_queued += m->len;
    if (!c->started) {
        c->started = true;
        c->ops->start(c->conn, c);
    } else {
        c->ops->resume(c->conn, c);
    }
}

/* The status is decided: trailers after what is queued, or alone when nothing was sent. */
static void end_call(cr_grpc_call *c, cr_grpc_code code, const char *message, int trailers_http)
{
    if (!cr_grpc_call_open(c))
        return;
    c->finished = true;
    c->code = code;
    snprintf(c->message, sizeof c->message, "%s", message ? message : "");
    uncount_waiting(c);
    if (!c->started) {
        c->trailers_sent = true;
        c->ops->trailers_only(c->conn, c, trailers_http);
        return;
    }
    c->ops->resume(c->conn, c);
}

void cr_grpc_call_finish(cr_grpc_call *c, cr_grpc_code code, const char *message)
{
    if (code != CR_GRPC_OK && c->log_status == 200) {
        c->log_status = cr_grpc_code_http(code);
        snprintf(c->log_error, sizeof c->log_error, "%s", cr_grpc_code_name(code));
    }
    end_call(c, code, message, 200);
}

void cr_grpc_call_fail(cr_grpc_call *c, const cr_error *e)
{
    char msg[sizeof e->message + sizeof e->field + 16];
    /* the field in words when the message does not name it already */
    if (e->field[0] && !strstr(e->message, e->field))
        snprintf(msg, sizeof msg, "%s (field: %s)", e->message, e->field);
    else
        snprintf(msg, sizeof msg, "%s", e->message);
    if (cr_grpc_call_open(c)) {
        c->log_status = e->http;
        snprintf(c->log_error, sizeof c->log_error, "%s", e->code);
    }
    end_call(c, cr_grpc_code_of(e), msg, 200);
}

void cr_grpc_call_reply(cr_grpc_call *c, cr_grpc_out *m)
{
    cr_grpc_call_send(c, m);
    cr_grpc_call_finish(c, CR_GRPC_OK, NULL);
}

void cr_grpc_put_prefix(uint8_t out[5], uint64_t len)
{
    out[0] = 0;
    out[1] = (uint8_t)(len >> 24);
    out[2] = (uint8_t)(len >> 16);
    out[3] = (uint8_t)(len >> 8);
    out[4] = (uint8_t)len;
}

static void out_free_plain(cr_grpc_hold *h) { free(h); }

cr_grpc_out *cr_grpc_out_bytes(size_t n, uint8_t **body)
{
    cr_grpc_out *m = malloc(sizeof *m + 5 + n);
    if (!m)
        return NULL;
    uint8_t *p = (uint8_t *)(m + 1);
    m->hold = (cr_grpc_hold){1, out_free_plain};
    m->iov[0] = (struct iovec){p, 5 + n};
    m->n = 1;
    m->len = 5 + n;
    m->next = NULL;
    cr_grpc_put_prefix(p, n);
    *body = p + 5;
    return m;
}

uint64_t cr_grpc_call_sendable(const cr_grpc_call *c) { return c->out_queued; }

/* References n bytes of m from offset off: the spans they lie in. */
static void frame_spans(cr_grpc_outq *q, cr_grpc_out *m, uint64_t off, size_t n)
{
    for (int i = 0; i < m->n && n; i++) {
        size_t len = m->iov[i].iov_len;
        if (off >= len) {
            off -= len;
            continue;
        }
        size_t k = len - off < n ? len - (size_t)off : n;
        cr_grpc_outq_ref(q, (const uint8_t *)m->iov[i].iov_base + off, k, &m->hold);
        n -= k;
        off = 0;
    }
}

void cr_grpc_call_frame(cr_grpc_call *c, cr_grpc_outq *q, size_t n)
{
    while (n && c->out_head) {
        cr_grpc_out *m = c->out_head;
        size_t k = m->len - c->out_off < n ? (size_t)(m->len - c->out_off) : n;
        frame_spans(q, m, c->out_off, k);
        c->out_off += k;
        c->out_queued -= k;
        n -= k;
        if (c->out_off < m->len)
            break;
        c->out_head = m->next;
        if (!c->out_head)
            c->out_tail = NULL;
        c->out_off = 0;
        out_release(m); /* the queue holds what it still has to write */
    }
}

bool cr_grpc_call_trailers_due(const cr_grpc_call *c) { return c->finished && !c->out_head && !c->trailers_sent; }

void cr_grpc_call_status_text(const cr_grpc_call *c, char *status, size_t slen, char *message, size_t mlen)
{
    snprintf(status, slen, "%d", (int)c->code);
    cr_grpc_percent_encode(c->message, message, mlen);
}

/* ---- jobs ------------------------------------------------------------------------------------ */

static void call_free(cr_grpc_call *c);

/* On the loop's thread: the job is finished. */
static void job_back(cr_grpc_pending *p)
{
    call_job *cj = (call_job *)p;
    cr_grpc_call *c = p->call;
    if (p->call_prev)
        p->call_prev->call_next = p->call_next;
    else
        c->pending = p->call_next;
    if (p->call_next)
        p->call_next->call_prev = p->call_prev;
    if (--c->n_pending == 0)
        uncount_waiting(c);
    cj->fn(c, p->job, p->arg);
    cr_job_release(p->job);
    free(cj);
    if (c->stream_closed && c->n_pending == 0)
        call_free(c);
}

/* The call's deadline as the job's, unless the request asked for a shorter one. -1 with err
 * when it has passed already. */
static int deadline_into(const cr_grpc_call *c, cr_job *j, cr_error *err)
{
    if (c->deadline <= 0)
        return 0;
    double left_ms = (c->deadline - cr_now()) * 1e3;
    if (left_ms <= 0)
        return cr_fail(err, 504, "deadline_exceeded", "grpc-timeout",
                       "the call's deadline (grpc-timeout) passed before its job could start");
    int64_t ms = (int64_t)ceil(left_ms);
    if (j->req.timeout_ms == 0 || j->req.timeout_ms > ms)
        j->req.timeout_ms = ms;
    return 0;
}

int cr_grpc_call_run(cr_grpc_call *c, cr_job *j, void (*fn)(cr_grpc_call *c, cr_job *j, void *arg), void *arg,
                     cr_error *err)
{
    _Static_assert(sizeof j->request_id >= sizeof c->request_id, "a request id fits its job");
    memcpy(j->request_id, c->request_id, sizeof c->request_id);
    j->ms.receive = (cr_now() - (c->msg_t0 > 0 ? c->msg_t0 : c->t0)) * 1e3;
    if (c->srv->cfg->test_hooks && c->debug_delay_ms > 0)
        j->debug_delay_ms = c->debug_delay_ms;
    call_job *cj = calloc(1, sizeof *cj);
    if (!cj || deadline_into(c, j, err) < 0) {
        if (!cj)
            cr_fail(err, 503, "host_memory", "", "out of memory");
        free(cj);
        cr_job_release(j);
        return -1;
    }
    if (!c->method->on_end && !c->job) { /* a unary call's line in the access log names its job */
        cr_job_ref(j);
        c->job = j;
    }
    cj->fn = fn;
    cj->p = (cr_grpc_pending){.q = c->done, .job = j, .fn = job_back, .call = c, .arg = arg};
    j->on_done = cr_grpc_done_on_job;
    j->on_done_arg = &cj->p;
    int rc = cr_engine_run(c->srv->engine, j, err);
    if (rc != 0) { /* finished here (the host path), or refused */
        free(cj);
        if (rc == 1)
            fn(c, j, arg);
        cr_job_release(j);
        return rc < 0 ? -1 : 0;
    }
    cj->p.call_next = c->pending;
    if (c->pending)
        c->pending->call_prev = &cj->p;
    c->pending = &cj->p;
    c->n_pending++;
    if (!c->counted_waiting && cr_grpc_call_open(c)) {
        c->counted_waiting = true;
        atomic_fetch_add(&c->srv->waiting, 1);
    }
    return 0;
}

static void cancel_jobs(cr_grpc_call *c)
{
    /* a queued job comes back at once, through the loop's queue: the list stays as it is here */
    for (cr_grpc_pending *p = c->pending; p; p = p->call_next)
        cr_engine_cancel(c->srv->engine, p->job);
}

void cr_grpc_call_tick(cr_grpc_call *c, double now)
{
    if (cr_grpc_call_open(c) && c->method && c->method->on_tick)
        c->method->on_tick(c, now);
    if (!cr_grpc_call_open(c) || c->deadline <= 0 || now < c->deadline)
        return;
    cr_error e;
    cr_fail(&e, 504, "deadline_exceeded", "grpc-timeout", "the call's deadline (grpc-timeout) passed");
    cr_grpc_call_fail(c, &e);
    cancel_jobs(c);
}

void cr_grpc_call_cut_off(cr_grpc_call *c)
{
    if (!cr_grpc_call_open(c) || (c->n_pending == 0 && !(c->method && c->method->on_end)))
        return;
    cr_error e;
    cr_fail(&e, 503, "draining", "", "the daemon is shutting down and its drain period (--drain-timeout-s) ran "
            "out before this call finished; retry on another instance");
    cr_grpc_call_fail(c, &e); /* its jobs are the engine's cut-off's */
}

/* ---- the end --------------------------------------------------------------------------------- */

static void log_call(const cr_grpc_call *c, double seconds)
{
    char shape[64] = "", peer[64];
    cr_peer_label(c->peer, peer, sizeof peer);
    cr_log_request r = {.method = "POST", .path = c->path[0] ? c->path : "-", .peer = peer,
                        .status = c->log_status, .request_id = c->request_id, .ms = seconds * 1e3,
                        .bytes_in = c->bytes_in, .error_code = c->log_error[0] ? c->log_error : NULL,
                        .grpc_status = cr_grpc_code_name(c->code)};
    if (c->job)
        cr_job_log_fields(c->job, &r, shape, sizeof shape);
    cr_log_req(&r);
}

static void call_free(cr_grpc_call *c)
{
    while (c->out_head) {
        cr_grpc_out *m = c->out_head;
        c->out_head = m->next;
        out_release(m);
    }
    if (c->ctx_free)
        c->ctx_free(c);
    if (c->job)
        cr_job_release(c->job);
    cr_grpc_reader_free(&c->rd);
    atomic_fetch_sub(&c->srv->active, 1);
    free(c);
}

void cr_grpc_call_stream_closed(cr_grpc_call *c)
{
    if (!c->finished) { /* reset by the client, or its connection went: nginx's 499 */
        c->finished = true;
        c->code = CR_GRPC_CANCELLED;
        c->log_status = 499;
        snprintf(c->message, sizeof c->message, "the client cancelled the call");
        uncount_waiting(c);
        cancel_jobs(c);
    }
    c->stream_closed = true;
    double seconds = cr_now() - c->t0;
    cr_metrics_grpc(c->rpc ? c->rpc : "unknown", cr_grpc_code_name(c->code), seconds);
    log_call(c, seconds);
    cr_grpc_reader_free(&c->rd); /* a half-received message's memory goes now */
    if (c->n_pending == 0)
        call_free(c);
}
