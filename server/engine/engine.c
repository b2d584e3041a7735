/* The job engine; see engine.h. One shared queue feeds every worker of every device, so an idle
 * worker anywhere takes the next job: the least-loaded device gets it without bookkeeping. */
#include "server/engine/engine.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/engine/autotune.h"
#include "server/clock.h"
#include "server/engine/compare.h"
#include "server/engine/queue.h"

enum { CANCEL_NONE, CANCEL_CLIENT, CANCEL_DEADLINE };

typedef struct {
    cr_engine *e;
    int device;
    cr_worker *bw;
    pthread_t thread;
    bool started;
    cr_job *current;          /* guarded by e->current_mu */
} worker_slot;

struct cr_engine {
    const cr_backend *b;
    const cr_config *cfg;
    cr_queue q;
    worker_slot *workers;
    int n_workers;
    int n_devices;
    cr_device_info dev[CR_METRICS_MAX_DEVICES];
    _Atomic bool dev_ready[CR_METRICS_MAX_DEVICES];
    uint64_t max_device_bytes;
    _Atomic bool draining, failed;
    pthread_mutex_t current_mu;
    cr_auto_table auto_table;
};

const cr_backend *cr_engine_backend(const cr_engine *e) { return e->b; }
int cr_engine_device_count(const cr_engine *e) { return e->n_devices; }
bool cr_engine_draining(const cr_engine *e) { return atomic_load(&e->draining); }
bool cr_engine_failed(const cr_engine *e) { return atomic_load(&e->failed); }
void cr_engine_begin_drain(cr_engine *e) { atomic_store(&e->draining, true); }

const cr_auto_table *cr_engine_auto_table(const cr_engine *e) { return &e->auto_table; }

static void finish(cr_engine *e, cr_job *j, cr_job_state state)
{
    (void)e;
    cr_request_free_inputs(&j->req);
    j->finished_at = cr_now();
    j->ms.total = (j->finished_at - j->enqueued_at) * 1e3;
    if (state == CR_JOB_DONE)
        cr_metrics_job(j->req.task.op, &j->ms, cr_task_flops(&j->req.task));
    atomic_store(&j->state, state);
    if (j->on_done)
        j->on_done(j);
}

static void fail(cr_engine *e, cr_job *j, int http, const char *code, const char *field,
                 const char *msg)
{
    cr_fail(&j->error, http, code, field, "%s", msg);
    finish(e, j, CR_JOB_FAILED);
}

static void finish_cancelled(cr_engine *e, cr_job *j)
{
    if (j->cancel == CANCEL_DEADLINE) {
        fail(e, j, 504, "deadline_exceeded", "timeout_ms", "the job's deadline passed before it finished");
        return;
    }
    cr_fail(&j->error, 409, "cancelled", "", "the job was cancelled");
    finish(e, j, CR_JOB_CANCELLED);
}

static void fail_with_status(cr_engine *e, cr_job *j, cr_status st, const char *msg)
{
    switch (st) {
    case CR_E_CANCELLED: finish_cancelled(e, j); return;
    case CR_E_INVALID: fail(e, j, 400, "invalid_field", "", msg); return;
    case CR_E_SHAPE: fail(e, j, 422, "shape_mismatch", "", msg); return;
    case CR_E_UNSUPPORTED: fail(e, j, 400, "unsupported", "kernel", msg); return;
    case CR_E_NOMEM_HOST: fail(e, j, 503, "host_memory", "", msg); return;
    case CR_E_NOMEM_DEVICE: fail(e, j, 507, "device_memory", "", msg); return;
    case CR_E_FATAL: fail(e, j, 503, "device_fault", "", msg); return;
    default: fail(e, j, 500, "internal", "", msg); return;
    }
}

/* --test-hooks: hold the worker for a while, so tests can see queued/running states. */
static void debug_delay(const cr_job *j)
{
    double until = cr_now() + (double)j->debug_delay_ms / 1e3;
    while (!j->cancel && cr_now() < until)
        nanosleep(&(struct timespec){.tv_nsec = 2000000}, NULL);
}

static void mark_fatal(cr_engine *e, int device)
{
    if (device >= 0 && device < CR_METRICS_MAX_DEVICES)
        atomic_store(&e->dev_ready[device], false);
    atomic_store(&e->failed, true);
}

static void run_job(cr_engine *e, worker_slot *w, cr_job *j)
{
    char msg[256] = "";
    cr_timings tm = {0};
    cr_task *t = &j->req.task;
    j->started_at = cr_now();
    j->ms.queue = (j->started_at - j->enqueued_at) * 1e3;
    if (atomic_load(&e->failed)) {
        fail(e, j, 503, "device_fault", "", "the device failed; the daemon is restarting");
        return;
    }
    atomic_store(&j->state, CR_JOB_RUNNING);
    if (j->debug_delay_ms > 0)
        debug_delay(j);
    if (j->cancel) {
        finish_cancelled(e, j);
        return;
    }
    t->cancel = &j->cancel;
    j->ran = true;
    cr_status st = j->req.kernel.mode == CR_KERNEL_ALL ? cr_run_compare(e->b, w->bw, j, &tm, msg, sizeof msg)
                                                       : e->b->run(w->bw, t, &tm, msg, sizeof msg);
    snprintf(j->device, sizeof j->device, "%s", tm.device);
    j->ms.h2d = tm.h2d_ms;
    j->ms.kernel = tm.kernel_ms;
    j->ms.d2h = tm.d2h_ms;
    if (st == CR_E_FATAL)
        mark_fatal(e, w->device);
    if (st != CR_OK)
        fail_with_status(e, j, st, msg);
    else
        finish(e, j, CR_JOB_DONE);
}

static void set_current(worker_slot *w, cr_job *j)
{
    pthread_mutex_lock(&w->e->current_mu);
    w->current = j;
    pthread_mutex_unlock(&w->e->current_mu);
}

static void *worker_main(void *arg)
{
    worker_slot *w = arg;
    cr_job *j;
    while ((j = cr_queue_pop(&w->e->q))) {
        set_current(w, j);
        run_job(w->e, w, j);
        set_current(w, NULL);
        cr_queue_done(&w->e->q);
        cr_job_release(j);
    }
    return NULL;
}

/* The job's kernel, resolved once here by the registry and stored on its task. */
static int resolve_kernel(cr_engine *e, cr_job *j, cr_error *err)
{
    char msg[sizeof err->message];
    cr_task *t = &j->req.task;
    switch (cr_kernel_resolve(e->b, &e->auto_table, &j->req.kernel, t, &t->kernel, msg, sizeof msg)) {
    case CR_RESOLVE_OK: return 0;
    case CR_RESOLVE_NO_KERNEL: return cr_fail(err, 400, "unsupported", "dtype", "%s", msg);
    case CR_RESOLVE_UNKNOWN: return cr_fail(err, 400, "unknown_kernel", "kernel", "%s", msg);
    case CR_RESOLVE_PRECISION: return cr_fail(err, 400, "unsupported", "precision", "%s", msg);
    case CR_RESOLVE_SHAPE: return cr_fail(err, 400, "unsupported", "kernel", "%s", msg);
    default: return cr_fail(err, 400, "unsupported", "dtype", "%s", msg);
    }
}

int cr_engine_submit(cr_engine *e, cr_job *j, cr_error *err)
{
    if (atomic_load(&e->failed))
        return cr_fail(err, 503, "device_fault", "", "the device failed; the daemon is restarting");
    if (atomic_load(&e->draining))
        return cr_fail(err, 503, "draining", "", "the daemon is shutting down; retry on another instance");
    if (resolve_kernel(e, j, err) < 0)
        return -1;
    uint64_t need = e->b->task_device_bytes(&j->req.task);
    if (need > e->max_device_bytes)
        return cr_fail(err, 507, "device_memory", "",
                       "the job needs %.1f MiB of device memory; the largest device has %.1f MiB",
                       (double)need / 1048576.0, (double)e->max_device_bytes / 1048576.0);
    if (cr_request_alloc_output(&j->req, err) < 0)
        return -1;
    double now = cr_now();
    int64_t timeout = j->req.timeout_ms > 0 ? j->req.timeout_ms : e->cfg->job_timeout_ms;
    j->enqueued_at = now;
    j->deadline = now + (double)timeout / 1e3;
    cr_job_ref(j);
    int rc = cr_queue_push(&e->q, j);
    if (rc == 0)
        return 0;
    cr_job_release(j);
    if (rc == -2)
        return cr_fail(err, 503, "draining", "", "the daemon is shutting down");
    return cr_fail(err, 503, "queue_full", "", "%d jobs are waiting; retry later", e->cfg->queue_depth);
}

void cr_engine_cancel(cr_engine *e, cr_job *j)
{
    if (cr_job_finished(j))
        return;
    if (!j->cancel)
        j->cancel = CANCEL_CLIENT;
    if (cr_queue_remove(&e->q, j)) {
        j->enqueued_at = j->enqueued_at > 0 ? j->enqueued_at : cr_now();
        finish_cancelled(e, j);
        cr_job_release(j); /* the queue's reference */
    }
}

bool cr_engine_ready(cr_engine *e, const char **reason)
{
    int queued, running;
    if (atomic_load(&e->failed))
        return *reason = "device failed", false;
    if (atomic_load(&e->draining))
        return *reason = "draining", false;
    cr_queue_counts(&e->q, &queued, &running);
    if (queued >= e->cfg->queue_depth)
        return *reason = "queue saturated", false;
    for (int d = 0; d < e->n_devices; d++)
        if (atomic_load(&e->dev_ready[d]))
            return *reason = "", true;
    return *reason = "no usable device", false;
}

bool cr_engine_wait_idle(cr_engine *e, double deadline_s) { return cr_queue_wait_idle(&e->q, deadline_s); }

void cr_engine_tick(cr_engine *e, double now)
{
    cr_job *expired = cr_queue_take_expired(&e->q, atomic_load(&e->failed) ? INFINITY : now);
    while (expired) {
        cr_job *next = expired->next;
        if (atomic_load(&e->failed))
            fail(e, expired, 503, "device_fault", "", "the device failed; the daemon is restarting");
        else {
            expired->cancel = CANCEL_DEADLINE;
            finish_cancelled(e, expired);
        }
        cr_job_release(expired);
        expired = next;
    }
    pthread_mutex_lock(&e->current_mu);
    for (int i = 0; i < e->n_workers; i++) {
        cr_job *j = e->workers[i].current;
        if (j && j->deadline > 0 && now > j->deadline && !j->cancel)
            j->cancel = CANCEL_DEADLINE;
    }
    pthread_mutex_unlock(&e->current_mu);
}

void cr_engine_gauges(cr_engine *e, cr_metrics_gauges *g)
{
    cr_queue_counts(&e->q, &g->queued, &g->running);
    g->has_pinned = e->b->host_usage != NULL;
    if (g->has_pinned)
        e->b->host_usage(&g->pinned_in_use, &g->pinned_cached);
    g->n_devices = e->n_devices;
    for (int d = 0; d < e->n_devices; d++) {
        cr_device_info info = e->dev[d];
        if (atomic_load(&e->dev_ready[d]))
            e->b->device_info(d, &info);
        snprintf(g->dev[d].name, sizeof g->dev[d].name, "%d:%.100s", d, info.name);
        g->dev[d].used_bytes = info.memory_total - info.memory_free;
        g->dev[d].ready = atomic_load(&e->dev_ready[d]);
    }
}

static int create_workers(cr_engine *e, char *err, size_t errlen)
{
    int per_device = e->cfg->workers;
    e->workers = calloc((size_t)(e->n_devices * per_device), sizeof *e->workers);
    if (!e->workers)
        return snprintf(err, errlen, "out of memory"), -1;
    for (int d = 0; d < e->n_devices; d++)
        for (int i = 0; i < per_device; i++) {
            worker_slot *w = &e->workers[e->n_workers];
            *w = (worker_slot){.e = e, .device = d};
            if (e->b->worker_create(d, &w->bw, err, errlen) != CR_OK)
                return -1;
            e->n_workers++;
        }
    return 0;
}

static int probe_devices(cr_engine *e, char *err, size_t errlen)
{
    e->n_devices = e->b->device_count();
    if (e->n_devices <= 0)
        return snprintf(err, errlen, "the %s backend found no device", e->b->name), -1;
    if (e->n_devices > CR_METRICS_MAX_DEVICES)
        e->n_devices = CR_METRICS_MAX_DEVICES;
    for (int d = 0; d < e->n_devices; d++) {
        if (e->b->device_info(d, &e->dev[d]) != CR_OK)
            return snprintf(err, errlen, "cannot read device %d", d), -1;
        atomic_store(&e->dev_ready[d], true);
        if (e->dev[d].memory_total > e->max_device_bytes)
            e->max_device_bytes = e->dev[d].memory_total;
    }
    /* The CPU backend reports no device memory limit of its own. */
    if (e->max_device_bytes == 0)
        e->max_device_bytes = UINT64_MAX;
    return 0;
}

cr_engine *cr_engine_start(const cr_backend *b, const cr_config *c, char *err, size_t errlen)
{
    cr_engine *e = calloc(1, sizeof *e);
    if (!e)
        return snprintf(err, errlen, "out of memory"), NULL;
    e->b = b;
    e->cfg = c;
    pthread_mutex_init(&e->current_mu, NULL);
    if (cr_queue_init(&e->q, c->queue_depth) < 0) {
        snprintf(err, errlen, "cannot create the job queue");
        free(e);
        return NULL;
    }
    if (b->init(c->workers, err, errlen) != CR_OK)
        goto fail_queue;
    if (probe_devices(e, err, errlen) < 0 || create_workers(e, err, errlen) < 0)
        goto fail_backend;
    if (cr_autotune(b, e->workers[0].bw, b->id != CR_BACKEND_CPU, &e->auto_table, err, errlen) != CR_OK)
        goto fail_backend;
    for (int i = 0; i < e->n_workers; i++) {
        if (pthread_create(&e->workers[i].thread, NULL, worker_main, &e->workers[i])) {
            snprintf(err, errlen, "cannot start worker thread %d", i);
            cr_engine_stop(e);
            return NULL;
        }
        e->workers[i].started = true;
    }
    return e;
fail_backend:
    for (int i = 0; i < e->n_workers; i++)
        b->worker_destroy(e->workers[i].bw);
    free(e->workers);
    b->shutdown();
fail_queue:
    cr_queue_destroy(&e->q);
    free(e);
    return NULL;
}

void cr_engine_stop(cr_engine *e)
{
    if (!e)
        return;
    cr_queue_close(&e->q);
    for (int i = 0; i < e->n_workers; i++)
        if (e->workers[i].started)
            pthread_join(e->workers[i].thread, NULL);
    for (int i = 0; i < e->n_workers; i++)
        e->b->worker_destroy(e->workers[i].bw);
    e->b->shutdown();
    cr_queue_destroy(&e->q);
    pthread_mutex_destroy(&e->current_mu);
    free(e->workers);
    free(e->auto_table.rows);
    free(e);
}
