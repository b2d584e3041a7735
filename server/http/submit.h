/* Handing a decoded request's job to the engine from HTTP, and waiting for it without blocking an
 * HTTP thread: a synchronous request suspends its connection until the worker finishes the job,
 * is resumed by it, and answers then; a client that hangs up meanwhile cancels its job. */
#ifndef CRUNCHD_HTTP_SUBMIT_H
#define CRUNCHD_HTTP_SUBMIT_H

#include "server/http/conn.h"

/* Request headers that shape a job: X-Crunchd-Timeout-Ms (when the body gave no timeout), the
 * request's X-Request-Id (kept in the job: GET /v1/jobs/{id} shows it), and the test-only delay
 * under --test-hooks. -1 with err (400 naming the header). */
int cr_apply_job_headers(cr_conn *c, cr_job *j, cr_error *err);

/* Runs j synchronously: suspends c, queues j and, once it finished, answers through enc (NULL:
 * cr_send_job). Takes the caller's reference to j. */
enum MHD_Result cr_run_sync(cr_conn *c, cr_job *j, cr_conn_encoder enc);

/* Called by the listener when a suspended request is resumed: answers it, or keeps waiting. */
enum MHD_Result cr_sync_resumed(cr_conn *c);

/* The request is complete (answered, or the client left): detaches it from its job, cancelling
 * a sync job nobody is left to answer, and drops the request's reference. */
void cr_sync_forget(cr_conn *c);

/* The drain ran out: every sync request still waiting for its job is resumed and answered 503
 * draining (Retry-After), its job left to the engine's cut-off. Returns how many. */
int cr_sync_cut_off(cr_http *h);
/* Sync requests not yet complete: suspended, or resumed and their answer not yet sent. While any
 * is suspended libmicrohttpd must not be stopped (it aborts the process). */
int cr_sync_waiting(cr_http *h);

/* Cancels the jobs of synchronous clients that hung up (a suspended connection is not polled
 * by libmicrohttpd, so we peek at its socket). */
void cr_sync_tick(cr_http *h);

#endif
