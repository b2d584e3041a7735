/* What every part of the gRPC listener shares: the daemon's configuration and engine, the
 * token and TLS credentials, the decoders' limits, and the daemon-wide state its threads read
 * (drain, cut-off) and count (calls in progress). One per daemon, made by grpc_listener.c. */
#ifndef CRUNCHD_GRPC_SERVER_H
#define CRUNCHD_GRPC_SERVER_H

#include <stdatomic.h>
#include <stdbool.h>

#include "server/codec/binary_decode.h"
#include "server/config.h"
#include "server/engine/engine.h"
#include "server/grpc/grpc_frame.h"
#include "server/grpc/grpc_tls.h"
#include "server/http/auth.h"
#include "server/request.h"

/* Flow control (RFC 9113 §5.2): what a client may send before we acknowledge it. Large, so that
 * one 256 MiB tensor streams at the socket's speed (the window never closes while WINDOW_UPDATEs
 * are in flight): nghttp2 acknowledges what we have received, and every message is charged to
 * the memory budget before its bytes are kept, so a window is never memory we did not ask for. */
#define CR_GRPC_STREAM_WINDOW (32u << 20)
#define CR_GRPC_CONN_WINDOW (64u << 20)
/* Frames as large as HTTP/2 allows: fewer headers to parse, and room to receive a tensor's bytes
 * straight into its message (grpc_conn.c). */
#define CR_GRPC_MAX_FRAME ((1u << 24) - 1)
/* Streams one connection may have open: perf_analyzer's contexts share channels. */
#define CR_GRPC_MAX_STREAMS 1024u
/* Metadata of one call, decoded: tritonclient sends a few hundred bytes. */
#define CR_GRPC_MAX_HEADER_LIST (64u << 10)
/* Messages of the RPCs that are not inference are small: a region's name and key. */
#define CR_GRPC_SMALL_MESSAGE_MAX (1u << 20)

typedef struct cr_grpc_server {
    const cr_config *cfg;
    cr_engine *engine;
    cr_auth auth;           /* --auth-token-file; disabled when none */
    cr_grpc_tls *tls;       /* NULL: cleartext HTTP/2 (h2c, prior knowledge) */
    cr_limits lim;          /* the decoders' limits, as HTTP's */
    cr_host_allocator alloc;/* where tensors land: the backend's host memory (pinned on cuda) */
    cr_grpc_alloc messages; /* where big inference messages land: the same memory, so tensors stay */
    uint64_t max_message;   /* --max-body-mb, at most 2^31 - 1 */
    _Atomic int active;     /* calls begun and not yet ended (a drain waits for none) */
    _Atomic int conns;      /* open connections, at most --max-connections */
    _Atomic int waiting;    /* calls whose answer waits for a job */
    _Atomic bool draining;  /* SIGTERM: GOAWAY sent, new jobs refused by the engine */
    _Atomic bool cut_off;   /* the drain's grace period is over: waiting calls answered now */
} cr_grpc_server;

#endif
