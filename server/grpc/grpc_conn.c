/* One HTTP/2 connection of the gRPC listener; see grpc_conn.h.
 *
 * nghttp2 does the framing, HPACK, the stream states and flow control; this file feeds it what
 * the transport reads (nghttp2_session_mem_recv) and hands what it produces to the output queue
 * (nghttp2_session_send with a send callback that never blocks). Answers are DATA frames whose
 * payload nghttp2 never copies (NGHTTP2_DATA_FLAG_NO_COPY): the frame header is copied into the
 * queue and the payload referenced where the call keeps it. */
#include "server/grpc/grpc_conn.h"

#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/clock.h"
#include "server/grpc/grpc_call.h"
#include "server/grpc/grpc_metadata.h"
#include "server/grpc/grpc_methods.h"
#include "server/http/peer.h"
#include "server/obs/log.h"
#include "server/obs/metrics.h"

/* Read per turn of the loop before the other connections get theirs. */
#define READ_BUDGET (4u << 20)
/* Output queued past this makes nghttp2 wait (its callbacks answer WOULDBLOCK) until the socket
 * took some: the queue holds copies only of small frames, references to the rest. */
#define OUTQ_HIGH (8u << 20)

/* Where the bytes read so far leave the client's stream: HTTP/2 frames (RFC 9113 §4.1) after the
 * 24-byte preface. Followed beside nghttp2 so that the rest of a big DATA frame can be received
 * straight into the message its bytes belong to (grpc_frame.h's cr_grpc_reader_dest). */
typedef struct {
    uint32_t preface_left;
    uint8_t hdr[9];
    unsigned hdr_have;      /* 9: inside a frame's payload (payload_left bytes to go) */
    uint32_t payload_left;
    uint8_t type, flags;
    int32_t stream_id;
} frame_track;

#define PREFACE_LEN 24
#define DATA_FRAME 0x0
#define PADDED 0x8
/* A direct receive is worth a system call of its own from this size on. */
#define DIRECT_MIN (64u << 10)

struct cr_grpc_conn {
    cr_grpc_server *srv;
    cr_grpc_done *done;
    cr_grpc_transport *tp;
    nghttp2_session *h2;
    cr_grpc_outq outq;
    cr_peer peer;
    uint8_t *rbuf;
    bool handshaken, dead, more_to_read, wants_write, goaway;
    double last_active;    /* monotonic: its last bytes in, or its last call's end */
    frame_track ft;
    cr_grpc_call *calls;
    cr_grpc_conn **dirty_head, *dirty_next;
    bool is_dirty;
    void *owner;
};

bool cr_grpc_conn_is_dirty(const cr_grpc_conn *c) { return c->is_dirty; }
void cr_grpc_conn_set_owner(cr_grpc_conn *c, void *owner) { c->owner = owner; }
void *cr_grpc_conn_owner(const cr_grpc_conn *c) { return c->owner; }

static void mark_dirty(cr_grpc_conn *c)
{
    if (c->is_dirty)
        return;
    c->is_dirty = true;
    c->dirty_next = *c->dirty_head;
    *c->dirty_head = c;
}

cr_grpc_conn *cr_grpc_conn_next_dirty(cr_grpc_conn *c)
{
    cr_grpc_conn *next = c->dirty_next;
    c->dirty_next = NULL;
    c->is_dirty = false;
    return next;
}

/* ---- the calls' side of their streams (cr_grpc_stream_ops) --------------------------------- */

static ssize_t read_answer(nghttp2_session *s, int32_t sid, uint8_t *buf, size_t length, uint32_t *flags,
                           nghttp2_data_source *source, void *user)
{
    (void)buf, (void)user;
    cr_grpc_call *call = source->ptr;
    uint64_t n = cr_grpc_call_sendable(call);
    if (n > 0) {
        *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
        return (ssize_t)(n < length ? n : length);
    }
    if (!cr_grpc_call_trailers_due(call))
        return NGHTTP2_ERR_DEFERRED;
    char status[16], message[3 * sizeof call->message + 1];
    cr_grpc_call_status_text(call, status, sizeof status, message, sizeof message);
    nghttp2_nv nv[] = {
        {(uint8_t *)"grpc-status", (uint8_t *)status, 11, strlen(status), NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)"grpc-message", (uint8_t *)message, 12, strlen(message), NGHTTP2_NV_FLAG_NONE},
    };
    *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    if (nghttp2_submit_trailer(s, sid, nv, message[0] ? 2 : 1) != 0)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* the stream is reset */
    call->trailers_sent = true;
    return 0;
}

#define NV(name, value) {(uint8_t *)(name), (uint8_t *)(value), sizeof(name) - 1, strlen(value), NGHTTP2_NV_FLAG_NONE}

static void stream_start(void *conn, cr_grpc_call *call)
{
    cr_grpc_conn *c = conn;
    nghttp2_nv nv[] = {NV(":status", "200"), NV("content-type", "application/grpc"),
                       NV("grpc-accept-encoding", CR_GRPC_ACCEPT_ENCODING)};
    nghttp2_data_provider dp = {.source.ptr = call, .read_callback = read_answer};
    if (nghttp2_submit_response(c->h2, call->stream_id, nv, sizeof nv / sizeof nv[0], &dp) != 0)
        nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, call->stream_id, NGHTTP2_INTERNAL_ERROR);
    mark_dirty(c);
}

static void stream_resume(void *conn, cr_grpc_call *call)
{
    cr_grpc_conn *c = conn;
    nghttp2_session_resume_data(c->h2, call->stream_id); /* not deferred: it is being read anyway */
    mark_dirty(c);
}

/* The status alone (no message was sent): one HEADERS frame that ends the stream. */
static void stream_trailers_only(void *conn, cr_grpc_call *call, int http)
{
    cr_grpc_conn *c = conn;
    char status_http[8], status[16], message[3 * sizeof call->message + 1];
    snprintf(status_http, sizeof status_http, "%d", http);
    cr_grpc_call_status_text(call, status, sizeof status, message, sizeof message);
    nghttp2_nv nv[] = {NV(":status", status_http), NV("content-type", "application/grpc"),
                       NV("grpc-accept-encoding", CR_GRPC_ACCEPT_ENCODING), NV("grpc-status", status),
                       NV("grpc-message", message)};
    size_t n = sizeof nv / sizeof nv[0] - (message[0] ? 0 : 1);
    if (nghttp2_submit_response(c->h2, call->stream_id, nv, n, NULL) != 0)
        nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, call->stream_id, NGHTTP2_INTERNAL_ERROR);
    mark_dirty(c);
}

/* The call ended while the client still sends a big body (a message refused at its prefix):
 * RST_STREAM NO_ERROR asks it to stop (RFC 9113 §8.1), sent after our end, never before it. */
static void stream_stop_client(void *conn, cr_grpc_call *call)
{
    cr_grpc_conn *c = conn;
    nghttp2_submit_rst_stream(c->h2, NGHTTP2_FLAG_NONE, call->stream_id, NGHTTP2_NO_ERROR);
    mark_dirty(c);
}

static const cr_grpc_stream_ops stream_ops = {stream_start, stream_resume, stream_trailers_only, stream_stop_client};

/* ---- nghttp2's callbacks --------------------------------------------------------------------- */

static cr_grpc_call *call_of(nghttp2_session *s, int32_t sid)
{
    return sid > 0 ? nghttp2_session_get_stream_user_data(s, sid) : NULL;
}

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *user)
{
    cr_grpc_conn *c = user;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    cr_grpc_call *call = cr_grpc_call_new(c, &stream_ops, c->srv, c->done, &c->peer, f->hd.stream_id);
    if (!call)
        return nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, f->hd.stream_id, NGHTTP2_INTERNAL_ERROR), 0;
    nghttp2_session_set_stream_user_data(s, f->hd.stream_id, call);
    call->next = c->calls;
    if (c->calls)
        c->calls->prev = call;
    c->calls = call;
    return 0;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                     const uint8_t *value, size_t vlen, uint8_t flags, void *user)
{
    (void)flags, (void)user;
    cr_grpc_call *call = call_of(s, f->hd.stream_id);
    if (call && f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST)
        cr_grpc_call_header(call, (const char *)name, nlen, (const char *)value, vlen);
    return 0;
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *user)
{
    (void)user;

    cr_grpc_call *call = call_of(s, f->hd.stream_id);
    if (!call)
        return 0;
    if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST)
        cr_grpc_call_headers_done(call, cr_grpc_method_find(call->path));
    if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) && (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        cr_grpc_call_remote_end(call);
    return 0;
}

static int on_data_chunk(nghttp2_session *s, uint8_t flags, int32_t sid, const uint8_t *data, size_t len,
                         void *user)
{
    (void)flags, (void)user;
    cr_grpc_call *call = call_of(s, sid);
    if (call)
        cr_grpc_call_data(call, data, len);
    return 0;
}

static void unlink_call(cr_grpc_conn *c, cr_grpc_call *call)
{
    if (call->prev)
        call->prev->next = call->next;
    else
        c->calls = call->next;
    if (call->next)
        call->next->prev = call->prev;
    call->prev = call->next = NULL;
}

static int on_stream_close(nghttp2_session *s, int32_t sid, uint32_t error_code, void *user)
{
    (void)error_code;
    cr_grpc_conn *c = user;
    cr_grpc_call *call = call_of(s, sid);
    if (!call)
        return 0;
    nghttp2_session_set_stream_user_data(s, sid, NULL);
    unlink_call(c, call);
    cr_grpc_call_stream_closed(call);
    return 0;
}

/* Our end of a stream is on the wire: from here a client still sending may be told to stop. */
static int on_frame_send(nghttp2_session *s, const nghttp2_frame *f, void *user)
{
    (void)user;
    cr_grpc_call *call = call_of(s, f->hd.stream_id);
    if (call && f->hd.type == NGHTTP2_HEADERS && (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        call->end_on_wire = true;
    return 0;
}

static ssize_t on_send(nghttp2_session *s, const uint8_t *data, size_t len, int flags, void *user)
{
    (void)s, (void)flags;
    cr_grpc_conn *c = user;
    if (c->outq.bytes >= OUTQ_HIGH)
        return NGHTTP2_ERR_WOULDBLOCK;
    cr_grpc_outq_copy(&c->outq, data, len);
    return c->outq.failed ? NGHTTP2_ERR_CALLBACK_FAILURE : (ssize_t)len;
}

static int on_send_data(nghttp2_session *s, nghttp2_frame *f, const uint8_t *framehd, size_t length,
                        nghttp2_data_source *source, void *user)
{
    (void)s, (void)f;
    cr_grpc_conn *c = user;
    if (c->outq.bytes >= OUTQ_HIGH)
        return NGHTTP2_ERR_WOULDBLOCK;
    cr_grpc_outq_copy(&c->outq, framehd, 9); /* no padding: we never ask for any */
    cr_grpc_call_frame(source->ptr, &c->outq, length);
    return c->outq.failed ? NGHTTP2_ERR_CALLBACK_FAILURE : 0;
}

static nghttp2_session_callbacks *callbacks(void)
{
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb) != 0)
        return NULL;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    nghttp2_session_callbacks_set_send_callback(cb, on_send);
    nghttp2_session_callbacks_set_send_data_callback(cb, on_send_data);
    return cb;
}

/* ---- the connection -------------------------------------------------------------------------- */

static int new_session(cr_grpc_conn *c)
{
    nghttp2_session_callbacks *cb = callbacks();
    nghttp2_option *opt = NULL;
    int rc = -1;
    if (!cb || nghttp2_option_new(&opt) != 0)
        goto cleanup;
    nghttp2_option_set_max_send_header_block_length(opt, CR_GRPC_MAX_HEADER_LIST);
    rc = nghttp2_session_server_new2(&c->h2, cb, c, opt) == 0 ? 0 : -1;
cleanup:
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cb);
    return rc;
}

/* The server's preface: our SETTINGS, and the connection's window opened wide. */
static int send_settings(cr_grpc_conn *c)
{
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, CR_GRPC_MAX_STREAMS},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, CR_GRPC_STREAM_WINDOW},
        {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, CR_GRPC_MAX_FRAME},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, CR_GRPC_MAX_HEADER_LIST},
    };
    if (nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]) != 0 ||
        nghttp2_session_set_local_window_size(c->h2, NGHTTP2_FLAG_NONE, 0, CR_GRPC_CONN_WINDOW) != 0)
        return -1;
    mark_dirty(c);
    return 0;
}

cr_grpc_conn *cr_grpc_conn_new(cr_grpc_server *srv, cr_grpc_done *done, cr_grpc_transport *tp,
                               const struct sockaddr *sa, uint8_t *rbuf, cr_grpc_conn **dirty)
{
    cr_grpc_conn *c = calloc(1, sizeof *c);
    if (!c) {
        tp->ops->free(tp);
        return NULL;
    }
    c->rbuf = rbuf;
    c->last_active = cr_now();
    c->srv = srv;
    c->done = done;
    c->tp = tp;
    c->dirty_head = dirty;
    c->ft.preface_left = PREFACE_LEN;
    cr_grpc_outq_init(&c->outq);
    cr_peer_from_addr(sa, tp->fd, &c->peer);
    if (new_session(c) < 0) {
        cr_grpc_conn_free(c);
        return NULL;
    }
    return c;
}

/* A TLS handshake goes first: 1 once done (the preface then sent), 0 while it is under way. */
static int handshake(cr_grpc_conn *c)
{
    if (c->handshaken)
        return 1;
    int rc = c->tp->ops->handshake(c->tp);
    if (rc < 0) {
        c->dead = true;
        return 0;
    }
    c->wants_write = rc == 0 && c->tp->ops->wants_write(c->tp);
    if (rc == 0)
        return 0;
    c->handshaken = true;
    if (send_settings(c) < 0)
        c->dead = true;
    return c->dead ? 0 : 1;
}

/* Follows n bytes handed to nghttp2 through the frame structure. */
static void track(frame_track *t, const uint8_t *p, size_t n)
{
    while (n) {
        size_t k;
        if (t->preface_left) {
            k = n < t->preface_left ? n : t->preface_left;
            t->preface_left -= (uint32_t)k;
        } else if (t->hdr_have < 9) {
            k = 9 - t->hdr_have < n ? 9 - t->hdr_have : n;
            memcpy(t->hdr + t->hdr_have, p, k);
            if ((t->hdr_have += (unsigned)k) == 9) {
                t->payload_left = (uint32_t)t->hdr[0] << 16 | (uint32_t)t->hdr[1] << 8 | t->hdr[2];
                t->type = t->hdr[3];
                t->flags = t->hdr[4];
                t->stream_id = (int32_t)(((uint32_t)t->hdr[5] << 24 | (uint32_t)t->hdr[6] << 16 |
                                          (uint32_t)t->hdr[7] << 8 | t->hdr[8]) & 0x7fffffffu);
                t->hdr_have = t->payload_left ? 9 : 0;
            }
        } else {
            k = n < t->payload_left ? n : t->payload_left;
            if ((t->payload_left -= (uint32_t)k) == 0)
                t->hdr_have = 0;
        }
        p += k;
        n -= k;
    }
}

/* Inside an unpadded DATA frame whose message is being received: where the next of its bytes go
 * and how many may be received there (0: read into the buffer as usual). */
static uint8_t *direct_dest(cr_grpc_conn *c, size_t *n)
{
    const frame_track *t = &c->ft;
    size_t room = 0;
    *n = 0;
    if (t->hdr_have != 9 || t->type != DATA_FRAME || (t->flags & PADDED) || t->payload_left < DIRECT_MIN)
        return NULL;
    cr_grpc_call *call = call_of(c->h2, t->stream_id);
    uint8_t *dest = call ? cr_grpc_call_dest(call, &room) : NULL;
    if (!dest || room < DIRECT_MIN)
        return NULL;
    *n = room < t->payload_left ? room : t->payload_left;
    return dest;
}

/* One read, into the message its bytes belong to when it can be, then parsed. -1: nothing more
 * now; else the bytes read. */
static ssize_t read_once(cr_grpc_conn *c, size_t budget)
{
    size_t n;
    uint8_t *dest = direct_dest(c, &n);
    if (!dest) {
        dest = c->rbuf;
        n = CR_GRPC_READ_BUF;
    }
    n = n < budget ? n : budget;
    ssize_t k = c->tp->ops->read(c->tp, dest, n);
    if (k == CR_IO_AGAIN)
        return -1;
    if (k <= 0) { /* closed or failed: nothing more will come, nothing can be answered */
        c->dead = true;
        return -1;
    }
    if (dest != c->rbuf)
        cr_metrics_grpc_in_place((uint64_t)k);
    c->last_active = cr_now();
    /* nghttp2 hands the bytes of an unpadded DATA frame to on_data_chunk where they lie: the
     * reader sees them already in place and does not copy them */
    if (nghttp2_session_mem_recv(c->h2, dest, (size_t)k) < 0)
        c->dead = true; /* not HTTP/2 (no client preface), or nghttp2 ran out of memory */
    track(&c->ft, dest, (size_t)k);
    return k;
}

static void read_some(cr_grpc_conn *c)
{
    for (size_t budget = READ_BUDGET; budget > 0 && !c->dead;) {
        ssize_t k = read_once(c, budget);
        if (k < 0)
            break;
        budget = (size_t)k < budget ? budget - (size_t)k : 0;
        c->more_to_read = budget == 0;
    }
}

void cr_grpc_conn_read(cr_grpc_conn *c)
{
    c->more_to_read = false;
    if (!c->dead && handshake(c) == 1)
        read_some(c);
    c->more_to_read = !c->dead && c->handshaken && (c->more_to_read || c->tp->ops->pending(c->tp));
    mark_dirty(c); /* its answers, or its end, are the loop's next step */
}

void cr_grpc_conn_flush(cr_grpc_conn *c)
{
    while (!c->dead && c->handshaken) {
        if (c->outq.bytes < OUTQ_HIGH && nghttp2_session_send(c->h2) != 0) {
            c->dead = true;
            return;
        }
        if (c->outq.bytes == 0) {
            c->wants_write = false;
            return;
        }
        struct iovec iov[64];
        int n = cr_grpc_outq_iov(&c->outq, iov, 64);
        ssize_t k = c->tp->ops->writev(c->tp, iov, n);
        if (k == CR_IO_AGAIN) {
            c->wants_write = true;
            return;
        }
        if (k < 0) {
            c->dead = true;
            return;
        }
        cr_grpc_outq_written(&c->outq, (size_t)k);
    }
}

bool cr_grpc_conn_more_to_read(const cr_grpc_conn *c) { return c->more_to_read; }
bool cr_grpc_conn_wants_write(const cr_grpc_conn *c) { return c->wants_write; }
int cr_grpc_conn_fd(const cr_grpc_conn *c) { return c->tp->fd; }

bool cr_grpc_conn_alive(const cr_grpc_conn *c)
{
    if (c->dead)
        return false;
    if (!c->handshaken)
        return true;
    return nghttp2_session_want_read(c->h2) || nghttp2_session_want_write(c->h2) || c->outq.bytes > 0;
}

void cr_grpc_conn_goaway(cr_grpc_conn *c)
{
    if (c->goaway || !c->handshaken || c->dead)
        return;
    c->goaway = true;
    /* streams the client opened after the last one we saw are refused (REFUSED_STREAM): a
     * client retries those on another connection, which is safe, nothing of them having run */
    nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c->h2),
                          NGHTTP2_NO_ERROR, (const uint8_t *)"draining", 8);
    mark_dirty(c);
}

void cr_grpc_conn_tick(cr_grpc_conn *c, double now)
{
    for (cr_grpc_call *call = c->calls; call; call = call->next)
        cr_grpc_call_tick(call, now);
    if (c->calls)
        c->last_active = now;
    else if (now - c->last_active > c->srv->cfg->conn_timeout_s)
        cr_grpc_conn_goaway(c);
}

void cr_grpc_conn_cut_off(cr_grpc_conn *c)
{
    for (cr_grpc_call *call = c->calls; call; call = call->next)
        cr_grpc_call_cut_off(call);
    cr_grpc_conn_goaway(c);
}

void cr_grpc_conn_free(cr_grpc_conn *c)
{
    if (!c)
        return;
    nghttp2_session_del(c->h2); /* frees its streams without a callback: the calls end below */
    c->h2 = NULL;
    while (c->calls) {
        cr_grpc_call *call = c->calls;
        unlink_call(c, call);
        cr_grpc_call_stream_closed(call);
    }
    cr_grpc_outq_free(&c->outq);
    c->tp->ops->free(c->tp);
    free(c);
}
