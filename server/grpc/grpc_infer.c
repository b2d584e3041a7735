/* ModelInfer and ModelStreamInfer (grpc_handlers.h): a request decoded as /v2 decodes one
 * (infer_request.h), its job run exactly as /v2 runs it (cr_job_new, the host path or the
 * engine's queue, its limits and budget: grpc_call.h's cr_grpc_call_run), its answer encoded
 * from the finished job (infer_response.h). The request's message is freed as soon as its tensors
 * are in their buffers, before the job runs.
 *
 * A stream answers each request as its job finishes, with its id; many run at once, up to half
 * the engine's queue per stream (the rest wait in the stream's backlog, charged to the budget as
 * messages), so one stream of a thousand requests does not fill the queue that every client
 * shares. A request that fails is answered in-band (error_message), or ends the stream with its
 * status when the client sent triton_grpc_error: true. */
#include <stdlib.h>
#include <string.h>

#include "server/engine/owned.h"
#include "server/grpc/grpc_handlers.h"
#include "server/grpc/grpc_pb.h"
#include "server/grpc/infer_request.h"
#include "server/grpc/infer_response.h"
#include "server/kserve/kserve_internal.h"

typedef struct {
    cr_ks_spec spec;
} infer_req;

static const char *backend_of(const cr_grpc_call *c, const cr_job *j)
{
    return cr_job_backend_name(j, cr_engine_backend(c->srv->engine)->name);
}

static void req_free(cr_job *j, infer_req *r)
{
    cr_ks_shm_release_outputs(j ? &j->req : NULL, &r->spec);
    cr_ks_spec_free(&r->spec);
    free(r);
}

/* Decodes m into a job; NULL with err. */
static cr_job *decode_job(cr_grpc_call *c, cr_grpc_msg *m, infer_req **out, cr_error *err)
{
    cr_request req;
    infer_req *r = calloc(1, sizeof *r);
    *out = NULL;
    if (!r) {
        cr_fail(err, 503, "host_memory", "", "out of memory");
        return NULL;
    }
    char owner[CR_OWNER_MAX]; /* as HTTP names a client: the token, else the peer's address */
    cr_peer_client(c->peer, c->authenticated, owner, sizeof owner);
    if (cr_grpc_infer_decode(m, &c->srv->lim, c->srv->alloc, owner, &req, &r->spec, err) < 0) {
        free(r);
        return NULL;
    }
    /* the tensors are in their buffers, or borrow the message's (which they then hold): either way
     * the message itself is done with */
    cr_grpc_msg_free(m);
    cr_job *j = cr_job_new(&req, false);
    if (!j) {
        cr_request_free(&req);
        req_free(NULL, r);
        cr_fail(err, 503, "host_memory", "", "out of memory");
        return NULL;
    }
    *out = r;
    return j;
}

/* ---- ModelInfer ------------------------------------------------------------------------------ */

/* The job finished: its answer, or its error; shared-memory outputs released before the client
 * can read the answer and unregister them. */
static void unary_done(cr_grpc_call *c, cr_job *j, void *arg)
{
    infer_req *r = arg;
    cr_error err;
    cr_ks_stats_record(r->spec.model, j);
    cr_grpc_out *answer = NULL;
    bool done = atomic_load(&j->state) == CR_JOB_DONE, open = cr_grpc_call_open(c);
    if (done && open)
        answer = cr_grpc_infer_answer(j, &r->spec, backend_of(c, j), false, &err);
    req_free(j, r);
    if (!open)
        return; /* answered already (its deadline, the cut-off) or gone */
    if (!done)
        cr_grpc_call_fail(c, &j->error);
    else if (answer)
        cr_grpc_call_reply(c, answer);
    else
        cr_grpc_call_fail(c, &err);
}

void cr_grpc_model_infer(cr_grpc_call *c, cr_grpc_msg *m)
{
    cr_error err;
    infer_req *r;
    cr_job *j = decode_job(c, m, &r, &err);
    if (!j)
        return cr_grpc_call_fail(c, &err);
    if (cr_grpc_call_run(c, j, unary_done, r, &err) < 0) {
        req_free(NULL, r);
        cr_grpc_call_fail(c, &err);
    }
}

/* ---- ModelStreamInfer ------------------------------------------------------------------------ */

typedef struct {
    cr_grpc_msg *backlog; /* requests not started yet, a ring */
    size_t head, n, cap;
    int in_flight, max_in_flight;
    bool ended, pumping;
} stream_state;

static void stream_free(cr_grpc_call *c)
{
    stream_state *s = c->ctx;
    for (size_t i = 0; i < s->n; i++)
        cr_grpc_msg_free(&s->backlog[(s->head + i) % s->cap]);
    free(s->backlog);
    free(s);
}

static stream_state *stream_of(cr_grpc_call *c)
{
    if (c->ctx)
        return c->ctx;
    stream_state *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    int depth = c->srv->cfg->queue_depth;
    s->max_in_flight = depth / 2 > 1 ? depth / 2 : 1;
    c->ctx = s;
    c->ctx_free = stream_free;
    return s;
}

/* A request that failed: in-band, or the stream's end in triton_grpc_error mode. */
static void stream_error(cr_grpc_call *c, const char *id, const cr_error *e)
{
    if (!cr_grpc_call_open(c))
        return;
    if (c->grpc_error_mode)
        return cr_grpc_call_fail(c, e);
    char text[sizeof e->message + sizeof e->field + 16];
    if (e->field[0] && !strstr(e->message, e->field))
        snprintf(text, sizeof text, "%s (field: %s)", e->message, e->field);
    else
        snprintf(text, sizeof text, "%s", e->message);
    cr_grpc_out *o = cr_grpc_stream_error(id, text);
    if (o)
        cr_grpc_call_send(c, o);
    else
        cr_grpc_failf(c, 503, "host_memory", "", "out of memory for an answer");
}

static void stream_pump(cr_grpc_call *c, stream_state *s);

static void stream_done(cr_grpc_call *c, cr_job *j, void *arg)
{
    infer_req *r = arg;
    stream_state *s = c->ctx;
    cr_error err;
    s->in_flight--;
    cr_ks_stats_record(r->spec.model, j);
    cr_grpc_out *answer = NULL;
    bool done = atomic_load(&j->state) == CR_JOB_DONE, open = cr_grpc_call_open(c);
    if (done && open && !(answer = cr_grpc_infer_answer(j, &r->spec, backend_of(c, j), true, &err)))
        stream_error(c, r->spec.id, &err);
    else if (!done)
        stream_error(c, r->spec.id, &j->error);
    req_free(j, r);
    if (answer)
        cr_grpc_call_send(c, answer);
    stream_pump(c, s);
}

static void stream_start(cr_grpc_call *c, stream_state *s, cr_grpc_msg *m)
{
    cr_error err;
    infer_req *r;
    c->msg_t0 = m->t0; /* its job's receive phase: from its own arrival, not the stream's */
    cr_job *j = decode_job(c, m, &r, &err);
    if (!j) {
        char id[CR_REQUEST_ID_MAX + 1];
        cr_grpc_infer_id(m->p, m->len, id, sizeof id);
        return stream_error(c, id, &err);
    }
    s->in_flight++;
    if (cr_grpc_call_run(c, j, stream_done, r, &err) < 0) {
        s->in_flight--;
        stream_error(c, r->spec.id, &err);
        req_free(NULL, r);
    }
}

/* Starts what the backlog holds while there is room; ends the stream once the client is done
 * and every request answered. Never re-entered: a job finished at once (the host path) comes
 * back here from inside it. */
static void stream_pump(cr_grpc_call *c, stream_state *s)
{
    if (s->pumping)
        return;
    s->pumping = true;
    while (s->n && s->in_flight < s->max_in_flight && cr_grpc_call_open(c)) {
        cr_grpc_msg m = s->backlog[s->head];
        s->head = (s->head + 1) % s->cap;
        s->n--;
        stream_start(c, s, &m);
        cr_grpc_msg_free(&m);
    }
    s->pumping = false;
    if (s->ended && s->in_flight == 0 && s->n == 0 && cr_grpc_call_open(c))
        cr_grpc_call_finish(c, CR_GRPC_OK, NULL);
}

static bool backlog_push(stream_state *s, cr_grpc_msg *m)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        cr_grpc_msg *b = malloc(cap * sizeof *b);
        if (!b)
            return false;
        for (size_t i = 0; i < s->n; i++)
            b[i] = s->backlog[(s->head + i) % s->cap];
        free(s->backlog);
        s->backlog = b;
        s->cap = cap;
        s->head = 0;
    }
    s->backlog[(s->head + s->n++) % s->cap] = *m;
    memset(m, 0, sizeof *m); /* the backlog's now */
    return true;
}

void cr_grpc_stream_infer(cr_grpc_call *c, cr_grpc_msg *m)
{
    stream_state *s = stream_of(c);
    if (!s || !backlog_push(s, m))
        return cr_grpc_failf(c, 503, "host_memory", "", "out of memory for the stream's requests");
    stream_pump(c, s);
}

void cr_grpc_stream_infer_end(cr_grpc_call *c)
{
    stream_state *s = stream_of(c);
    if (!s)
        return cr_grpc_failf(c, 503, "host_memory", "", "out of memory");
    s->ended = true;
    stream_pump(c, s);
}
