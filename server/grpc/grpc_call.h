/* One gRPC call (an HTTP/2 stream): its metadata and their checks, its request messages (cut by
 * grpc_frame.h and handed to its method), its answer (messages queued as spans, then the
 * trailers with grpc-status), the jobs it waits for, its deadline, and its end: the access log
 * line and the metrics. Lives on its connection's event loop thread; the HTTP/2 side is the
 * connection's (grpc_conn.c), reached through cr_grpc_stream_ops. */
#ifndef CRUNCHD_GRPC_CALL_H
#define CRUNCHD_GRPC_CALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "server/codec/coding.h"
#include "server/engine/job.h"
#include "server/error.h"
#include "server/grpc/grpc_done.h"
#include "server/grpc/grpc_frame.h"
#include "server/grpc/grpc_outq.h"
#include "server/grpc/grpc_server.h"
#include "server/grpc/grpc_status.h"
#include "server/http/peer.h"
#include "server/http/request_id.h"

typedef struct cr_grpc_call cr_grpc_call;

/* An RPC: its path, how its messages are taken, and who may call it. */
typedef struct {
    const char *path;    /* "/inference.GRPCInferenceService/ModelInfer" */
    const char *name;    /* "ModelInfer": the metrics' rpc label */
    bool open;           /* answered without the token (health checks, as /healthz) */
    bool big;            /* its messages may be as large as --max-body-mb (inference) */
    /* Each request message, in order; the method may take it (m->p = NULL). A unary method gets
     * exactly one and must end the call (cr_grpc_call_reply, cr_grpc_call_finish or _fail), now
     * or once its job finishes. */
    void (*on_message)(cr_grpc_call *c, cr_grpc_msg *m);
    /* Streaming methods only (NULL: unary): the client half-closed its side. */
    void (*on_end)(cr_grpc_call *c);
    /* Optional: a few times a second while the call is open (a watch sends what changed). */
    void (*on_tick)(cr_grpc_call *c, double now);
} cr_grpc_method;

/* An answer message: its bytes as spans (the 5-byte prefix first), freed through its hold once
 * the call and every queued reference to it are done. */
#define CR_GRPC_OUT_SPANS 8
typedef struct cr_grpc_out {
    cr_grpc_hold hold;
    struct iovec iov[CR_GRPC_OUT_SPANS];
    int n;
    uint64_t len;
    struct cr_grpc_out *next;
} cr_grpc_out;

/* What a call asks of its HTTP/2 stream (grpc_conn.c). */
typedef struct {
    /* The first message is queued: response headers, then data as the call has it. */
    void (*start)(void *conn, cr_grpc_call *c);
    /* More bytes are queued, or the trailers are due. */
    void (*resume)(void *conn, cr_grpc_call *c);
    /* The call ended before any message: one HEADERS with the status (http: :status). */
    void (*trailers_only)(void *conn, cr_grpc_call *c, int http);
    /* Our end is on the wire and the client goes on sending: RST_STREAM NO_ERROR. */
    void (*stop_client)(void *conn, cr_grpc_call *c);
} cr_grpc_stream_ops;

struct cr_grpc_call {
    void *conn;
    const cr_grpc_stream_ops *ops;
    cr_grpc_server *srv;
    cr_grpc_done *done;          /* the loop's queue of finished jobs */
    const cr_peer *peer;         /* the connection's */
    int32_t stream_id;
    const cr_grpc_method *method; /* NULL until the metadata were accepted */
    const char *rpc;             /* the metrics' label: the method's name, "unknown" for others */
    char path[128];
    double t0, deadline;         /* monotonic seconds; deadline 0: no grpc-timeout */

    /* metadata, as received */
    bool post, path_long, grpc_type, bad_timeout, bad_coding, auth_ok, bad_request_id, grpc_error_mode;
    char content_type[64], coding_name[32];
    cr_coding coding;
    char request_id[CR_REQUEST_ID_MAX + 1];
    bool authenticated;          /* carried the token (the client of its shared-memory regions) */
    int64_t debug_delay_ms;      /* x-crunchd-debug-delay-ms, honoured under --test-hooks (as HTTP's) */

    cr_grpc_reader rd;
    uint64_t messages_in, bytes_in;
    double msg_t0;               /* the arrival of the request message being handled */
    bool remote_closed;          /* the client's END_STREAM */
    bool end_on_wire, stop_asked;/* our END_STREAM went out; the client was asked to stop sending */
    uint64_t after_end;          /* request bytes that came after it */

    /* the answer */
    cr_grpc_out *out_head, *out_tail;
    uint64_t out_off, out_queued; /* bytes of out_head already framed; bytes queued, unframed */
    bool started;                /* response headers submitted */
    bool finished;               /* the status is decided: trailers (or trailers-only) follow */
    bool trailers_sent;
    cr_grpc_code code;
    char message[256];
    int log_status;              /* the access log's HTTP status for it */
    char log_error[32];          /* and its error code (server/error.h's, or the gRPC code's) */

    /* jobs */
    cr_grpc_pending *pending;    /* waiting for these */
    int n_pending;
    bool counted_waiting;        /* in srv->waiting */
    cr_job *job;                 /* a unary call's job, for the log line (a reference) */

    void *ctx;                   /* the method's state (a stream's requests), freed by ctx_free */
    void (*ctx_free)(cr_grpc_call *c);
    bool stream_closed;          /* the stream is gone: the call is freed once no job is pending */
    cr_grpc_call *prev, *next;   /* the connection's calls */
};

/* A call on stream_id of conn. NULL when out of memory. */
cr_grpc_call *cr_grpc_call_new(void *conn, const cr_grpc_stream_ops *ops, cr_grpc_server *srv, cr_grpc_done *done,
                               const cr_peer *peer, int32_t stream_id);
/* One request header (name lower-case, value NUL-terminated, as nghttp2 hands them). */
void cr_grpc_call_header(cr_grpc_call *c, const char *name, size_t nlen, const char *value, size_t vlen);
/* The headers are complete; m: the method of the path (NULL: none). Refusals end the call now. */
void cr_grpc_call_headers_done(cr_grpc_call *c, const cr_grpc_method *m);
/* Request bytes (DATA) and where the next may be received in place (grpc_frame.h). */
void cr_grpc_call_data(cr_grpc_call *c, const uint8_t *p, size_t n);
uint8_t *cr_grpc_call_dest(cr_grpc_call *c, size_t *room);
/* The client's END_STREAM. */
void cr_grpc_call_remote_end(cr_grpc_call *c);
/* The stream is closed (our end sent, or reset): logs the call, cancels its jobs; the call is
 * freed now or once its last job is back. */
void cr_grpc_call_stream_closed(cr_grpc_call *c);
/* The deadline (grpc-timeout), the method's own tick and the drain's cut-off, looked at a few
 * times a second. */
void cr_grpc_call_tick(cr_grpc_call *c, double now);
void cr_grpc_call_cut_off(cr_grpc_call *c);

/* ---- for methods ---------------------------------------------------------------------------- */

/* Whether the call may still send: not finished, its stream not gone. */
bool cr_grpc_call_open(const cr_grpc_call *c);
/* Queues an answer message (takes it). */
void cr_grpc_call_send(cr_grpc_call *c, cr_grpc_out *m);
/* Ends the call with a status; queued messages go first. message: NULL for none. */
void cr_grpc_call_finish(cr_grpc_call *c, cr_grpc_code code, const char *message);
/* Ends it with an error of the API: its gRPC code (grpc_status.h) and message, naming the field. */
void cr_grpc_call_fail(cr_grpc_call *c, const cr_error *e);
/* A unary answer: the message, then OK. */
void cr_grpc_call_reply(cr_grpc_call *c, cr_grpc_out *m);
/* An answer message of n bytes of protobuf (packed by the caller into the returned buffer, after
 * its 5-byte prefix); NULL when out of memory. */
cr_grpc_out *cr_grpc_out_bytes(size_t n, uint8_t **body);
/* The 5-byte prefix of an uncompressed message of len bytes. */
void cr_grpc_put_prefix(uint8_t out[5], uint64_t len);

/* Runs j (the caller's reference goes with it) as /v2 runs a job: on this thread when it is tiny
 * (the host path), else through the engine's queue; the deadline from grpc-timeout, the request
 * id and the time it took to arrive (from the call's headers, or on a stream from its message's
 * first byte) go into it first. fn runs once it finished, on this thread, whatever became of the
 * call (it checks cr_grpc_call_open), with arg. 0, or -1 with err when the engine refused it. */
int cr_grpc_call_run(cr_grpc_call *c, cr_job *j, void (*fn)(cr_grpc_call *c, cr_job *j, void *arg), void *arg,
                     cr_error *err);

/* ---- for the connection's data source ----------------------------------------------------- */

/* Bytes queued and not yet framed. */
uint64_t cr_grpc_call_sendable(const cr_grpc_call *c);
/* Puts the next n of them into q, referenced where they lie. */
void cr_grpc_call_frame(cr_grpc_call *c, cr_grpc_outq *q, size_t n);
/* Whether the trailers are due: finished and everything framed. */
bool cr_grpc_call_trailers_due(const cr_grpc_call *c);
/* grpc-status and grpc-message, formatted for the trailers into the caller's buffers. */
void cr_grpc_call_status_text(const cr_grpc_call *c, char *status, size_t slen, char *message, size_t mlen);

#endif
