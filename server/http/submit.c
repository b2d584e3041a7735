/* Jobs from HTTP requests; see submit.h. */
#include "server/http/submit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "server/clock.h"
#include "server/http/answer.h"
#include "server/http/direct_io.h"
#include "server/http/respond.h"

/* Orders a worker's resume against the request forgetting its job (the connection may be gone). */
static pthread_mutex_t resume_mu = PTHREAD_MUTEX_INITIALIZER;

/* X-Crunchd-Timeout-Ms: decimal digits, 1..CR_TIMEOUT_MS_MAX like the body's timeout_ms (strtoll
 * alone would take "+5", " 5" and clamp 10^30 to LLONG_MAX without a word). */
static int parse_timeout_header(const char *v, int64_t *out, cr_error *err)
{
    static const char name[] = "X-Crunchd-Timeout-Ms";
    if (*v < '0' || *v > '9')
        return cr_fail(err, 400, "invalid_parameter", name,
                       "%s must be a positive integer of milliseconds, got \"%.40s\"", name, v);
    char *end = NULL;
    errno = 0;
    unsigned long long ms = strtoull(v, &end, 10);
    if (*end)
        return cr_fail(err, 400, "invalid_parameter", name,
                       "%s must be a positive integer of milliseconds, got \"%.40s\"", name, v);
    if (ms < 1)
        return cr_fail(err, 400, "invalid_parameter", name, "%s must be an integer >= 1, got %llu", name, ms);
    if (errno == ERANGE || ms > (unsigned long long)CR_TIMEOUT_MS_MAX)
        return cr_fail(err, 400, "invalid_parameter", name, "%s must be an integer <= %lld, got %.40s", name,
                       CR_TIMEOUT_MS_MAX, v);
    *out = (int64_t)ms;
    return 0;
}

int cr_apply_job_headers(cr_conn *c, cr_job *j, cr_error *err)
{
    _Static_assert(sizeof j->request_id == sizeof c->request_id, "a request id fits its job");
    memcpy(j->request_id, c->request_id, sizeof j->request_id);
    const char *timeout = cr_header(c, "X-Crunchd-Timeout-Ms");
    int64_t ms = 0;
    /* checked even when the body's timeout_ms wins: a bad header is a bad request either way */
    if (timeout && parse_timeout_header(timeout, &ms, err) < 0)
        return -1;
    if (timeout && j->req.timeout_ms == 0)
        j->req.timeout_ms = ms;
    const char *delay = cr_header(c, "X-Crunchd-Debug-Delay-Ms");
    if (delay && c->h->deps.cfg->test_hooks)
        j->debug_delay_ms = strtoll(delay, NULL, 10);
    return 0;
}

static void waiting_add(cr_conn *c)
{
    if (!c->direct) { /* a direct request's socket is set already */
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        c->fd = ci ? ci->connect_fd : -1;
    }
    pthread_mutex_lock(&c->h->waiting_mu);
    c->wait_prev = NULL;
    c->wait_next = c->h->waiting_head;
    if (c->wait_next)
        c->wait_next->wait_prev = c;
    c->h->waiting_head = c;
    pthread_mutex_unlock(&c->h->waiting_mu);
}

static void waiting_remove(cr_conn *c)
{
    pthread_mutex_lock(&c->h->waiting_mu);
    if (c->wait_prev)
        c->wait_prev->wait_next = c->wait_next;
    else if (c->h->waiting_head == c)
        c->h->waiting_head = c->wait_next;
    if (c->wait_next)
        c->wait_next->wait_prev = c->wait_prev;
    c->wait_prev = c->wait_next = NULL;
    pthread_mutex_unlock(&c->h->waiting_mu);
}

/* Resuming a connection that is not suspended is undefined in libmicrohttpd, and a job may be
 * finished by its worker while the drain's cut-off resumes its connection: whoever resumes
 * first clears j->conn (the waiting cr_conn, under resume_mu), so each suspension is resumed
 * exactly once. A direct request's thread is woken instead (direct.h). */
static void resume_once(cr_job *j)
{
    cr_conn *c = j->conn;
    if (!c)
        return;
    if (c->direct)
        cr_direct_wake(c->direct);
    else
        MHD_resume_connection(c->conn);
    j->conn = NULL;
}

static void resume_on_done(cr_job *j)
{
    pthread_mutex_lock(&resume_mu);
    resume_once(j);
    pthread_mutex_unlock(&resume_mu);
}

static enum MHD_Result wait_direct(cr_conn *c);

/* Suspends before queueing so a fast worker can never resume a connection not yet suspended. */
enum MHD_Result cr_run_sync(cr_conn *c, cr_job *j, cr_conn_encoder enc)
{
    j->ms.receive = (cr_now() - c->t0) * 1e3;
    c->encode = enc;
    c->job = j;
    switch (cr_engine_run_here(c->h->deps.engine, j, &c->pending)) {
    case 1: return enc ? enc(c, j) : cr_send_job(c, j);
    case -1: return cr_send_error(c, &c->pending);
    default: break; /* for a device: queue it */
    }
    j->conn = c;
    j->on_done = resume_on_done;
    c->waiting = true;
    if (!c->direct)
        MHD_suspend_connection(c->conn);
    waiting_add(c);
    if (cr_engine_submit(c->h->deps.engine, j, &c->pending) < 0) {
        c->has_pending = true;
        resume_on_done(j);
    }
    return c->direct ? wait_direct(c) : MHD_YES;
}

static enum MHD_Result answer_cut_off(cr_conn *c)
{
    cr_error err;
    cr_fail(&err, 503, "draining", "",
            "the daemon is shutting down and its drain period (--drain-timeout-s) ran out before "
            "this job finished; retry on another instance");
    return cr_send_error(c, &err);
}

enum MHD_Result cr_sync_resumed(cr_conn *c)
{
    if (c->has_pending)
        return cr_send_error(c, &c->pending);
    if (cr_job_finished(c->job)) /* its result wins over a cut-off that raced it */
        return c->encode ? c->encode(c, c->job) : cr_send_job(c, c->job);
    if (atomic_load(&c->cut_off))
        return answer_cut_off(c);
    /* Nothing resumes an unfinished job's connection but the cut-off; should anything else, wait
     * on, re-armed for exactly one more resume (or answer, if the job finished meanwhile). */
    pthread_mutex_lock(&resume_mu);
    bool finished = cr_job_finished(c->job);
    if (!finished) {
        c->job->conn = c;
        if (!c->direct)
            MHD_suspend_connection(c->conn);
    }
    pthread_mutex_unlock(&resume_mu);
    if (finished)
        return c->encode ? c->encode(c, c->job) : cr_send_job(c, c->job);
    return MHD_YES;
}

/* A direct request (direct_io.h) waits on its own thread instead of being suspended: woken as a
 * resumed connection would be, it answers the same way (or waits on, re-armed). */
static enum MHD_Result wait_direct(cr_conn *c)
{
    for (;;) {
        if (!cr_direct_wait_woken(c->direct))
            return MHD_NO; /* the daemon stops: the connection goes unanswered */
        enum MHD_Result rc = cr_sync_resumed(c);
        if (rc != MHD_YES || c->status)
            return rc;
    }
}

int cr_sync_cut_off(cr_http *h)
{
    int n = 0;
    pthread_mutex_lock(&h->waiting_mu);
    for (cr_conn *c = h->waiting_head; c; c = c->wait_next) {
        pthread_mutex_lock(&resume_mu);
        if (c->job && c->job->conn && !cr_job_finished(c->job)) {
            atomic_store(&c->cut_off, true); /* before the resume: its thread reads it next */
            resume_once(c->job);
            n++;
        }
        pthread_mutex_unlock(&resume_mu);
    }
    pthread_mutex_unlock(&h->waiting_mu);
    return n;
}

int cr_sync_waiting(cr_http *h)
{
    int n = 0;
    pthread_mutex_lock(&h->waiting_mu);
    for (const cr_conn *c = h->waiting_head; c; c = c->wait_next)
        n++;
    pthread_mutex_unlock(&h->waiting_mu);
    return n;
}

void cr_sync_forget(cr_conn *c)
{
    if (c->waiting)
        waiting_remove(c);
    if (!c->job)
        return;
    pthread_mutex_lock(&resume_mu);
    c->job->conn = NULL;
    pthread_mutex_unlock(&resume_mu);
    if (c->waiting && !cr_job_finished(c->job))
        cr_engine_cancel(c->h->deps.engine, c->job); /* nobody is left to answer */
    cr_job_release(c->job);
    c->job = NULL;
}

/* EOF on a peek means the client closed its end; pending bytes (a pipelined request) do not. */
static bool peer_closed(int fd)
{
    char byte;
    if (fd < 0)
        return false;
    ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

void cr_sync_tick(cr_http *h)
{
    pthread_mutex_lock(&h->waiting_mu);
    for (cr_conn *c = h->waiting_head; c; c = c->wait_next)
        if (c->job && !c->job->cancel && !cr_job_finished(c->job) && peer_closed(c->fd))
            cr_engine_cancel(h->deps.engine, c->job);
    pthread_mutex_unlock(&h->waiting_mu);
}
