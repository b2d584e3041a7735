/* The end of a request; see request_end.h. */
#include "server/http/request_end.h"

#include <stdio.h>
#include <stdlib.h>

#include "server/clock.h"
#include "server/http/body.h"
#include "server/http/body_coding.h"
#include "server/http/submit.h"
#include "server/http/upload.h"
#include "server/kserve/kserve.h"
#include "server/obs/log.h"

static void log_request(const cr_conn *c)
{
    char shape[64] = "", peer[64];
    cr_peer_label(&c->peer, peer, sizeof peer);
    cr_log_request r = {.method = c->method, .path = c->path, .peer = peer, .status = c->status,
                        .request_id = c->request_id,
                        .ms = (cr_now() - c->t0) * 1e3, .bytes_in = c->len,
                        .error_code = c->error_code[0] ? c->error_code : NULL};
    if (c->job)
        cr_job_log_fields(c->job, &r, shape, sizeof shape);
    cr_log_req(&r);
}

void cr_conn_end(cr_conn *c, int unanswered)
{
    if (!c->status)
        c->status = unanswered;
    cr_metrics_request(c->label, c->status, cr_now() - c->t0);
    log_request(c);
    cr_sync_forget(c);
    cr_upload_free(c);
    cr_kserve_direct_free(c);
    cr_body_coding_free(c);
    if (c->ctx_free)
        c->ctx_free(c->ctx);
    atomic_fetch_sub(&c->h->active, 1);
    cr_body_free(c);
    free(c);
}
