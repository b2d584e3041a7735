/* What http.c and routes.c share about one request. */
#ifndef CRUNCHD_HTTP_CONN_H
#define CRUNCHD_HTTP_CONN_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "error.h"
#include "http.h"
#include "job.h"
#include "metrics.h"
#include "tls.h"

struct cr_http {
    struct MHD_Daemon *daemon;
    cr_http_deps deps;
    _Atomic int active;
    pthread_mutex_t waiting_mu;   /* guards the list of suspended sync requests */
    struct cr_conn *waiting_head;
    cr_auth auth;                 /* --auth-token-file; disabled when none */
    cr_tls tls;                   /* --tls-cert/--tls-key, alive as long as the daemon */
};

typedef struct cr_conn cr_conn;
typedef enum MHD_Result (*cr_handler)(cr_conn *c);
/* Answers a finished sync job (its result or its error) in a route's own format. */
typedef enum MHD_Result (*cr_conn_encoder)(cr_conn *c, cr_job *j);

struct cr_conn {
    cr_http *h;
    struct MHD_Connection *conn;
    char method[16];
    char path[256];
    const char *id;          /* the first {hole} of the route's path ({id}, {model}), inside path */
    cr_handler handler;
    cr_route_label label;
    char *body;
    size_t len, cap, limit;
    struct cr_upload *upload; /* a binary body being streamed into its arrays (upload.c) */
    const char *limit_msg;   /* the 413 message when the body passes limit; NULL: JSON's */
    bool kserve;             /* a KServe v2 route: its error bodies are {"error": "message"} */
    cr_conn_encoder encode;  /* answers the sync job once resumed; NULL: cr_send_job */
    void *ctx;               /* a handler's state across suspend/resume, freed by ctx_free */
    void (*ctx_free)(void *ctx);
    const char *extra_header;/* one more response header for cr_send (name, extra_value) */
    char extra_value[32];
    cr_job *job;             /* sync job we wait for, or the job a response is about */
    bool waiting;            /* suspended until job finishes */
    cr_conn *wait_prev, *wait_next; /* in h->waiting_head while waiting */
    int fd;                  /* the socket, to notice a client that hangs up while we wait */
    bool has_pending;        /* an error to answer once resumed */
    cr_error pending;
    int status;
    char error_code[32];
    double t0;
};

/* Responses. Each takes ownership of `body` (malloc'd). */
enum MHD_Result cr_send(cr_conn *c, int status, const char *content_type, char *body, size_t len);
enum MHD_Result cr_send_error(cr_conn *c, const cr_error *e);
/* A finished job's answer: result (200) or its error, with Server-Timing and job headers. */
enum MHD_Result cr_send_job(cr_conn *c, cr_job *j);
const char *cr_header(cr_conn *c, const char *name);

/* Route handlers (routes.c). */
enum MHD_Result cr_route_healthz(cr_conn *c);
enum MHD_Result cr_route_readyz(cr_conn *c);
enum MHD_Result cr_route_metrics(cr_conn *c);
enum MHD_Result cr_route_info(cr_conn *c);
enum MHD_Result cr_route_kernels(cr_conn *c);
enum MHD_Result cr_route_op(cr_conn *c);         /* POST /v1/{gemm,ata,histogram} */
enum MHD_Result cr_route_job_submit(cr_conn *c); /* POST /v1/jobs */
enum MHD_Result cr_route_job_status(cr_conn *c);
enum MHD_Result cr_route_job_result(cr_conn *c);
enum MHD_Result cr_route_job_delete(cr_conn *c);
/* Suspended sync requests: registered while their job runs; a client that hangs up cancels it. */
void cr_waiting_add(cr_conn *c);
void cr_waiting_remove(cr_conn *c);
/* Called again after a suspended sync request resumes. */
enum MHD_Result cr_route_op_resumed(cr_conn *c);
/* Runs j synchronously: suspends c, queues j and, once it finished, answers through enc. */
enum MHD_Result cr_run_sync(cr_conn *c, cr_job *j, cr_conn_encoder enc);
/* Request headers that shape a job: X-Crunchd-Timeout-Ms, the test-only delay. -1 with err. */
int cr_apply_job_headers(cr_conn *c, cr_job *j, cr_error *err);
/* The decoders' limits from the configuration. */
cr_limits cr_request_limits(const cr_config *cfg);

#endif
