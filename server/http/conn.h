/* One HTTP request in flight (cr_conn) and the listener's shared state (cr_http): the data every
 * file of server/http/ and server/kserve/ works on. Types only; the functions that act on them
 * live in respond.h (answers), submit.h (jobs), upload.h (binary bodies) and listener.h. */
#ifndef CRUNCHD_HTTP_CONN_H
#define CRUNCHD_HTTP_CONN_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/config.h"
#include "server/engine/engine.h"
#include "server/engine/job.h"
#include "server/engine/job_table.h"
#include "server/error.h"
#include "server/http/auth.h"
#include "server/http/cors.h"
#include "server/http/peer.h"
#include "server/http/read_deadline.h"
#include "server/http/request_id.h"
#include "server/http/tls.h"
#include "server/http/unix_listener.h"
#include "server/obs/metrics.h"

/* What the listener needs from the rest of the daemon. */
typedef struct {
    const cr_config *cfg;
    cr_engine *engine;
    cr_job_table *jobs;
} cr_http_deps;

typedef struct cr_http {
    struct MHD_Daemon *daemon;      /* TCP; NULL with --bind none */
    struct cr_acceptor *tcp_accept; /* accepts on TCP, feeds daemon (acceptor.h); NULL: with TLS or
                                       --direct-min-kb 0, libmicrohttpd accepts itself */
    struct MHD_Daemon *unix_daemon; /* --unix-socket: the same handlers on unix_sock; or NULL */
    cr_unix_socket unix_sock;
    struct cr_acceptor *unix_accept; /* accepts on unix_sock, feeds unix_daemon */
    cr_http_deps deps;
    _Atomic int active;
    pthread_mutex_t waiting_mu;   /* guards the list of suspended sync requests (submit.c) */
    struct cr_conn *waiting_head;
    cr_auth auth;                 /* --auth-token-file; disabled when none */
    cr_cors cors;                 /* --cors-origin; disabled when none */
    cr_tls tls;                   /* --tls-cert/--tls-key, alive as long as the daemon */
    cr_read_deadlines deadlines;  /* --read-timeout-s, --min-body-rate-kbs */
} cr_http;

typedef struct cr_conn cr_conn;
typedef enum MHD_Result (*cr_handler)(cr_conn *c);
/* Answers a finished sync job (its result or its error) in a route's own format. */
typedef enum MHD_Result (*cr_conn_encoder)(cr_conn *c, cr_job *j);

struct cr_inflater;

struct cr_conn {
    cr_http *h;
    struct MHD_Connection *conn; /* NULL when direct */
    struct cr_direct *direct;    /* a request read by us (direct.h); NULL: libmicrohttpd's */
    cr_peer peer;            /* who connected: IP address, or uid and pid on the Unix socket */
    bool authenticated;      /* carried the bearer token (--auth-token-file) */
    char request_id[CR_REQUEST_ID_MAX + 1]; /* the client's X-Request-Id, or one made for it */
    char method[16];
    char path[256];
    const char *id;          /* the first {hole} of the route's path ({id}, {model}), inside path */
    cr_handler handler;
    cr_route_label label;
    char *body;
    size_t len, cap, limit;
    struct cr_upload *upload; /* a binary body being streamed into its arrays (upload.c) */
    struct cr_ks_upload *ks_upload; /* a KServe binary body read by the direct path (kserve_direct.c) */
    struct cr_inflater *inflater; /* decodes a body sent with Content-Encoding (body_coding.c) */
    size_t wire_len;         /* a coded body's bytes as sent (len counts them decoded) */
    bool vary_encoding;      /* the answer could have been compressed: Vary: Accept-Encoding */
    const char *limit_msg;   /* the 413 message when the body passes limit; NULL: JSON's */
    bool kserve;             /* a KServe v2 route: its error bodies are {"error": "message"} */
    cr_conn_encoder encode;  /* answers the sync job once resumed; NULL: cr_send_job */
    void *ctx;               /* a handler's state across suspend/resume, freed by ctx_free */
    void (*ctx_free)(void *ctx);
    const char *extra_header;/* one more response header for cr_send (name, extra_value) */
    char extra_value[32];
    cr_job *job;             /* sync job we wait for, or the job a response is about */
    bool waiting;            /* suspended until job finishes */
    _Atomic bool cut_off;    /* the drain ran out: answer 503 draining without the job */
    cr_conn *wait_prev, *wait_next; /* in h->waiting_head while waiting */
    int fd;                  /* the socket, to notice a client that hangs up while we wait */
    bool close_after;        /* the answer closes the connection (its framing cannot be trusted) */
    bool has_pending;        /* an error to answer once resumed */
    bool body_refused;       /* the body was refused mid-way (memory budget): pending says why */
    bool body_ignored;       /* GET/DELETE: a body sent anyway is read and dropped, as HTTP allows */
    cr_error pending;
    int status;
    char error_code[32];
    double t0;
};

#endif
