/* The job engine; see engine.h. One shared queue feeds every worker of every device (worker.c),
 * so an idle worker anywhere takes the next job: the least-loaded device gets it without
 * bookkeeping, and a job that finds no room on one device goes back for another. This file:
 * admission (the kernel resolved once, batchability, limits), deadlines, cancel, the end of a
 * job, per-device accounting, start and stop. */
#include "server/engine/engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/clock.h"
#include "server/engine/auto_cache.h"
#include "server/engine/autotune.h"
#include "server/engine/engine_internal.h"
#include "server/engine/streams.h"
#include "server/engine/tensors.h"
#include "server/machine.h"
#include "server/obs/log.h"

const cr_backend *cr_engine_backend(const cr_engine *e) { return e->b; }
int cr_engine_device_count(const cr_engine *e) { return e->n_devices; }
bool cr_engine_draining(const cr_engine *e) { return atomic_load(&e->draining); }
bool cr_engine_failed(const cr_engine *e) { return atomic_load(&e->failed); }
void cr_engine_begin_drain(cr_engine *e) { atomic_store(&e->draining, true); }

const cr_auto_table *cr_engine_auto_table(const cr_engine *e) { return &e->auto_table; }

void cr_engine_finish(cr_engine *e, cr_job *j, cr_job_state state)
{
    (void)e;
    /* before the end drops the output's hold: a kept result is listed while the job still holds it */
    if (state == CR_JOB_DONE && j->req.result_tensor.t && cr_tensor_keep_result(&j->req, &j->error) < 0)
        state = CR_JOB_FAILED;
    if (j->req.stream && state == CR_JOB_DONE) /* a stream's part: folded before its memory goes */
        cr_stream_part_done(j);
    else if (j->req.stream)
        cr_stream_part_drop(&j->req);
    cr_request_end(&j->req);
    j->finished_at = cr_now();
    j->ms.total = (j->finished_at - j->enqueued_at) * 1e3;
    if (state == CR_JOB_DONE)
        cr_metrics_job(j->req.task.op, &j->ms, cr_task_flops(&j->req.task), cr_task_matrices(&j->req.task));
    atomic_store(&j->state, state);
    if (j->on_done)
        j->on_done(j);
}

void cr_engine_fail(cr_engine *e, cr_job *j, int http, const char *code, const char *field, const char *msg)
{
    cr_fail(&j->error, http, code, field, "%s", msg);
    cr_engine_finish(e, j, CR_JOB_FAILED);
}

void cr_engine_finish_cancelled(cr_engine *e, cr_job *j)
{
    if (j->cancel == CANCEL_DEADLINE) {
        cr_engine_fail(e, j, 504, "deadline_exceeded", "timeout_ms", "the job's deadline passed before it finished");
        return;
    }
    if (j->cancel == CANCEL_DRAIN) {
        cr_engine_fail(e, j, 503, "draining", "", "the daemon is shutting down and its drain period (--drain-timeout-s) ran out before "
                       "this job finished; retry on another instance");
        return;
    }
    cr_fail(&j->error, 409, "cancelled", "", "the job was cancelled");
    cr_engine_finish(e, j, CR_JOB_CANCELLED);
}

void cr_engine_fail_status(cr_engine *e, cr_job *j, cr_status st, const char *msg)
{
    switch (st) {
    case CR_E_CANCELLED: cr_engine_finish_cancelled(e, j); return;
    case CR_E_INVALID: cr_engine_fail(e, j, 400, "invalid_field", "", msg); return;
    case CR_E_SHAPE: cr_engine_fail(e, j, 422, "shape_mismatch", "", msg); return;
    case CR_E_UNSUPPORTED: cr_engine_fail(e, j, 400, "unsupported", "kernel", msg); return;
    case CR_E_NOMEM_HOST: cr_engine_fail(e, j, 503, "host_memory", "", msg); return;
    case CR_E_NOMEM_DEVICE: cr_engine_fail(e, j, 507, "device_memory", "", msg); return;
    case CR_E_FATAL: cr_engine_fail(e, j, 503, "device_fault", "", msg); return;
    default: cr_engine_fail(e, j, 500, "internal", "", msg); return;
    }
}

void cr_engine_mark_fatal(cr_engine *e, int device)
{
    if (device >= 0 && device < CR_METRICS_MAX_DEVICES)
        atomic_store(&e->dev_ready[device], false);
    atomic_store(&e->failed, true);
}

void cr_engine_device_busy(cr_engine *e, int device, double t0, double t1, int jobs)
{
    if (device < 0 || device >= e->n_devices)
        return;
    cr_device_stats *d = &e->stats[device];
    atomic_fetch_add(&d->jobs, (uint64_t)jobs);
    atomic_fetch_add(&d->batches, 1);
    pthread_mutex_lock(&e->device_mu); /* overlapping launches count once */
    double from = t0 > d->busy_until ? t0 : d->busy_until;
    if (t1 > from)
        d->busy_s += t1 - from;
    if (t1 > d->busy_until)
        d->busy_until = t1;
    pthread_mutex_unlock(&e->device_mu);
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

/* Whether the job may share a launch: batching is on, the job is small enough to gain, and it
 * asked for "auto" or named the very row that serves batches (never compare mode, never a
 * hand-written kernel, never a test-delayed job). */
static void mark_batchable(cr_engine *e, cr_job *j)
{
    const cr_task *t = &j->req.task;
    j->batchable = false;
    if (!e->b->batch_launch || e->cfg->batch_max < 1 || j->req.kernel.mode == CR_KERNEL_ALL || j->debug_delay_ms > 0 ||
        j->req.on_device)
        return;
    const cr_kernel *row = cr_kernel_batch_row(e->b, t);
    if (!row || (j->req.kernel.mode == CR_KERNEL_NAMED && row != t->kernel))
        return;
    cr_batch_key_of(t, row, &j->batch_key);
    j->batchable = true;
}

/* The table behind "auto": read from --auto-cache when this binary measured it on this device,
 * else measured (most of a cuda start: the log says how long) and written there. */
static int build_auto_table(cr_engine *e, char *err, size_t errlen)
{
    const cr_backend *b = e->b;
    const char *path = e->cfg->auto_cache;
    char key[512], why[256] = "";
    cr_auto_cache_key(b, e->n_devices > 0 ? e->dev[0].name : "none", key, sizeof key);
    if (path[0] && cr_auto_cache_load(path, key, b, &e->auto_table, why, sizeof why) == 0) {
        cr_log("info", "auto: %zu kernel choices read from %s (GET /v1/kernels shows them)", e->auto_table.n, path);
        return 0;
    }
    double at = cr_now();
    if (cr_autotune(b, e->workers[0].bw, b->id != CR_BACKEND_CPU, &e->auto_table, err, errlen) != CR_OK)
        return -1;
    cr_log("info", "auto: %zu kernel choices measured in %.1f s (GET /v1/kernels shows them)%s%s",
           e->auto_table.n, cr_now() - at, path[0] ? "; --auto-cache not used: " : "", why);
    if (b->host_trim) /* the probes' staging (up to 512 MiB of pinned blocks) is no request's cache */
        b->host_trim();
    if (b->device_trim) /* nor are their device buffers, which the pool would keep */
        b->device_trim();
    char werr[512];
    if (path[0] && cr_auto_cache_save(path, key, &e->auto_table, werr, sizeof werr) < 0)
        cr_log("warn", "auto: not kept for the next start: %s", werr);
    return 0;
}

/* Whether a job that is not batched may still run on a lane, its worker going on to the next
 * job meanwhile: the backend can, and the job is neither compare mode (several runs, checked on
 * the host) nor test-delayed nor bigger than the backend's run_launch_max_bytes (cuda: 64 MiB,
 * a 2048² float32 GEMM takes 48). */
static void mark_laned(cr_engine *e, cr_job *j, uint64_t device_bytes)
{
    uint64_t max = e->b->run_launch_max_bytes;
    j->laned = !j->batchable && e->b->run_launch && e->b->lanes > 0 && j->req.kernel.mode != CR_KERNEL_ALL &&
               j->debug_delay_ms <= 0 && (max == 0 || device_bytes <= max);
}

/* A job whose tensors are in a device's memory (CUDA shared memory) runs on that device: every
 * other one counts as tried already, so the queue gives it to that device's workers only. */
static int place_on_data(cr_engine *e, cr_job *j, cr_error *err)
{
    int d = j->req.device;
    if (d < 0 || d >= e->n_devices)
        return cr_fail(err, 400, "invalid_field", "shared_memory_region",
                       "the tensors are on device %d; this daemon serves devices 0 to %d", d, e->n_devices - 1);
    /* operands in device memory are read by every kernel as they are; only the result, which
     * compare mode checks on the host, must come back there */
    if (j->req.kernel.mode == CR_KERNEL_ALL && j->req.buf_on_device[CR_BUF_OUTPUT])
        return cr_fail(err, 400, "invalid_field", "kernel",
                       "compare mode (kernel \"all\") checks results on the host: not with a result kept in "
                       "device memory (a resident tensor, CUDA shared memory)");
    j->devices_tried = (uint32_t)((1ull << e->n_devices) - 1) & ~(1u << d);
    return 0;
}

int cr_engine_submit(cr_engine *e, cr_job *j, cr_error *err)
{
    if (atomic_load(&e->failed))
        return cr_fail(err, 503, "device_fault", "", "the device failed; the daemon is restarting");
    if (atomic_load(&e->draining))
        return cr_fail(err, 503, "draining", "", "the daemon is shutting down; retry on another instance");
    if (resolve_kernel(e, j, err) < 0 || (j->req.on_device && place_on_data(e, j, err) < 0))
        return -1;
    mark_batchable(e, j);
    uint64_t need = e->b->task_device_bytes(&j->req.task);
    mark_laned(e, j, need);
    if (need > e->max_device_bytes)
        return cr_fail(err, 507, "device_memory", "",
                       "the job needs %.1f MiB of device memory; the largest device has %.1f MiB",
                       (double)need / 1048576.0, (double)e->max_device_bytes / 1048576.0);
    if (cr_request_alloc_output(&j->req, err) < 0 ||
        (e->b->task_host_bytes && cr_request_charge_work(&j->req, e->b->task_host_bytes(&j->req.task), err) < 0))
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

int cr_engine_run(cr_engine *e, cr_job *j, cr_error *err)
{
    void (*on_done)(cr_job *j) = j->on_done;
    j->on_done = NULL; /* a job finished here is the caller's to answer: 1 says so */
    int rc = cr_engine_run_here(e, j, err);
    j->on_done = on_done;
    if (rc != 0)
        return rc;
    return cr_engine_submit(e, j, err) < 0 ? -1 : 0;
}

void cr_engine_cancel(cr_engine *e, cr_job *j)
{
    if (cr_job_finished(j))
        return;
    if (!j->cancel)
        j->cancel = CANCEL_CLIENT;
    if (cr_queue_remove(&e->q, j)) {
        j->enqueued_at = j->enqueued_at > 0 ? j->enqueued_at : cr_now();
        cr_engine_finish_cancelled(e, j);
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

/* Flags every running job (alone or in a lane) to stop at its next phase boundary. */
static void cancel_running(cr_engine *e, int why)
{
    pthread_mutex_lock(&e->current_mu);
    for (int i = 0; i < e->n_workers; i++) {
        cr_worker_slot *w = &e->workers[i];
        if (w->current && !w->current->cancel)
            w->current->cancel = why;
        for (int l = 0; l < w->n_lanes; l++)
            for (int k = 0; k < w->lanes[l].n; k++)
                if (!w->lanes[l].jobs[k]->cancel)
                    w->lanes[l].jobs[k]->cancel = why;
    }
    pthread_mutex_unlock(&e->current_mu);
}

void cr_engine_cut_off(cr_engine *e)
{
    cr_job *queued = cr_queue_close_and_take(&e->q);
    while (queued) {
        cr_job *next = queued->next;
        queued->cancel = CANCEL_DRAIN;
        cr_engine_finish_cancelled(e, queued); /* a sync client's connection resumes: 503 */
        cr_job_release(queued);               /* the queue's reference */
        queued = next;
    }
    cancel_running(e, CANCEL_DRAIN);
}

void cr_engine_tick(cr_engine *e, double now)
{
    cr_job *expired = cr_queue_take_expired(&e->q, atomic_load(&e->failed) ? INFINITY : now);
    while (expired) {
        cr_job *next = expired->next;
        if (atomic_load(&e->failed))
            cr_engine_fail(e, expired, 503, "device_fault", "", "the device failed; the daemon is restarting");
        else {
            expired->cancel = CANCEL_DEADLINE;
            cr_engine_finish_cancelled(e, expired);
        }
        cr_job_release(expired);
        expired = next;
    }
    pthread_mutex_lock(&e->current_mu);
    for (int i = 0; i < e->n_workers; i++) {
        cr_worker_slot *w = &e->workers[i];
        cr_job *j = w->current;
        if (j && j->deadline > 0 && now > j->deadline && !j->cancel)
            j->cancel = CANCEL_DEADLINE;
        for (int l = 0; l < w->n_lanes; l++)
            for (int k = 0; k < w->lanes[l].n; k++) {
                j = w->lanes[l].jobs[k];
                if (j->deadline > 0 && now > j->deadline && !j->cancel)
                    j->cancel = CANCEL_DEADLINE;
            }
    }
    pthread_mutex_unlock(&e->current_mu);
}

void cr_engine_gauges(cr_engine *e, cr_metrics_gauges *g)
{
    cr_queue_counts(&e->q, &g->queued, &g->running);
    g->has_pinned = e->b->host_usage != NULL;
    if (g->has_pinned)
        e->b->host_usage(&g->pinned_in_use, &g->pinned_cached, &g->pinned_staging);
    g->n_devices = e->n_devices;
    g->has_device_pool = e->b->device_pool_usage != NULL;
    g->host_jobs = atomic_load(&e->host_jobs);
    for (int d = 0; d < e->n_devices; d++) {
        cr_device_info info = e->dev[d];
        if (atomic_load(&e->dev_ready[d]))
            e->b->device_info(d, &info);
        snprintf(g->dev[d].name, sizeof g->dev[d].name, "%d:%.100s", d, info.name);
        g->dev[d].used_bytes = info.memory_total - info.memory_free;
        g->dev[d].stream_held_bytes = g->dev[d].stream_cap_bytes = 0;
        if (e->b->sink_usage)
            e->b->sink_usage(d, &g->dev[d].stream_held_bytes, &g->dev[d].stream_cap_bytes);
        g->dev[d].pool_in_use_bytes = g->dev[d].pool_cached_bytes = 0;
        if (e->b->device_pool_usage)
            e->b->device_pool_usage(d, &g->dev[d].pool_in_use_bytes, &g->dev[d].pool_cached_bytes);
        g->dev[d].ready = atomic_load(&e->dev_ready[d]);
        g->dev[d].jobs = atomic_load(&e->stats[d].jobs);
        g->dev[d].launches = atomic_load(&e->stats[d].batches);
        pthread_mutex_lock(&e->device_mu);
        g->dev[d].busy_s = e->stats[d].busy_s;
        pthread_mutex_unlock(&e->device_mu);
    }
}

/* A worker's lanes: the backend's (none when it has neither batches nor tasks on lanes), each
 * with room for a whole batch. */
static int give_lanes(cr_engine *e, cr_worker_slot *w)
{
    int max = e->take.max;
    w->taken = calloc((size_t)max, sizeof *w->taken);
    if (!w->taken)
        return -1;
    w->n_lanes = (e->b->batch_launch && e->cfg->batch_max > 0) || e->b->run_launch ? e->b->lanes : 0;
    w->n_lanes = w->n_lanes > CR_MAX_LANES ? CR_MAX_LANES : w->n_lanes;
    for (int l = 0; l < w->n_lanes; l++) {
        cr_lane_slot *s = &w->lanes[l];
        s->jobs = calloc((size_t)max, sizeof *s->jobs);
        s->tasks = calloc((size_t)max, sizeof *s->tasks);
        s->st = calloc((size_t)max, sizeof *s->st);
        s->tm = calloc((size_t)max, sizeof *s->tm);
        if (!s->jobs || !s->tasks || !s->st || !s->tm)
            return -1;
    }
    return 0;
}

static void free_lanes(cr_worker_slot *w)
{
    free(w->taken);
    for (int l = 0; l < CR_MAX_LANES; l++) {
        free(w->lanes[l].jobs);
        free(w->lanes[l].tasks);
        free(w->lanes[l].st);
        free(w->lanes[l].tm);
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
            cr_worker_slot *w = &e->workers[e->n_workers];
            *w = (cr_worker_slot){.e = e, .device = d};
            if (give_lanes(e, w) < 0) {
                free_lanes(w);
                return snprintf(err, errlen, "out of memory for the workers' batches"), -1;
            }
            if (e->b->worker_create(d, &w->bw, err, errlen) != CR_OK) {
                free_lanes(w);
                return -1;
            }
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

/* Triton's dynamic batcher settings, from the configuration. */
static void set_take_policy(cr_engine *e, const cr_config *c)
{
    int n = cr_config_preferred(c, e->preferred, (int)(sizeof e->preferred / sizeof e->preferred[0]));
    n = n > (int)(sizeof e->preferred / sizeof e->preferred[0]) ? (int)(sizeof e->preferred / sizeof e->preferred[0]) : n;
    for (int i = 1; i < n; i++) /* ascending, as the take looks from the largest down */
        for (int k = i; k > 0 && e->preferred[k] < e->preferred[k - 1]; k--) {
            int t = e->preferred[k];
            e->preferred[k] = e->preferred[k - 1];
            e->preferred[k - 1] = t;
        }
    e->take = (cr_take_policy){.max = c->batch_max > 0 ? c->batch_max : 1, .delay_s = c->batch_delay_us / 1e6,
                               .preferred = e->preferred, .n_preferred = n > 0 ? n : 0};
}

static int start_threads(cr_engine *e, char *err, size_t errlen)
{
    for (int i = 0; i < e->n_workers; i++) {
        char name[16]; /* the kernel keeps 15 characters */
        if (pthread_create(&e->workers[i].thread, NULL, cr_worker_main, &e->workers[i]))
            return snprintf(err, errlen, "cannot start worker thread %d", i), -1;
        e->workers[i].started = true;
        /* named so that top -H and scripts/load_probe.py tell the workers' CPU from the HTTP
         * threads' (libmicrohttpd names its own MHD-worker); failure is harmless */
        snprintf(name, sizeof name, "cr-worker-%u", (unsigned)i % 10000u);
        pthread_setname_np(e->workers[i].thread, name);
    }
    return 0;
}

cr_engine *cr_engine_start(const cr_backend *b, cr_config *c, char *err, size_t errlen)
{
    cr_machine m;
    char line[320];
    cr_machine_read(&m);
    cr_config_size(c, &m, b->id == CR_BACKEND_CPU ? 0 : CR_GPUS_UNKNOWN);
    cr_engine *e = calloc(1, sizeof *e);
    if (!e)
        return snprintf(err, errlen, "out of memory"), NULL;
    e->b = b;
    e->cfg = c;
    pthread_mutex_init(&e->current_mu, NULL);
    pthread_mutex_init(&e->device_mu, NULL);
    set_take_policy(e, c);
    cr_backend_opts opts = {.workers_per_device = c->workers,
                            .wait = !strcmp(c->gpu_wait, "spin")    ? CR_WAIT_SPIN
                                    : !strcmp(c->gpu_wait, "block") ? CR_WAIT_BLOCK
                                                                    : CR_WAIT_YIELD};
    if (b->init(&opts, err, errlen) != CR_OK) {
        pthread_mutex_destroy(&e->current_mu);
        pthread_mutex_destroy(&e->device_mu);
        free(e);
        return NULL;
    }
    if (b != &cr_backend_cpu)
        cr_cpu_blas_on_caller();
    if (probe_devices(e, err, errlen) < 0 || create_workers(e, err, errlen) < 0)
        goto fail;
    cr_config_size(c, &m, b->id == CR_BACKEND_CPU ? 0 : e->n_devices);
    if (!c->queue_depth)
        c->queue_depth = 64 * e->n_workers > 256 ? 64 * e->n_workers : 256;
    if (cr_queue_init(&e->q, c->queue_depth) < 0) {
        snprintf(err, errlen, "cannot create the job queue");
        goto fail;
    }
    e->q_ready = true;
    if (build_auto_table(e, err, errlen) < 0)
        goto fail;
    if (start_threads(e, err, errlen) < 0)
        goto fail;
    cr_config_describe(c, &m, line, sizeof line);
    cr_log("info", "%s", line);
    return e;
fail:
    cr_engine_stop(e);
    return NULL;
}

void cr_engine_stop(cr_engine *e)
{
    if (!e)
        return;
    if (e->q_ready)
        cr_queue_close(&e->q);
    for (int i = 0; i < e->n_workers; i++)
        if (e->workers[i].started)
            pthread_join(e->workers[i].thread, NULL);
    for (int i = 0; i < e->n_workers; i++) {
        e->b->worker_destroy(e->workers[i].bw);
        free_lanes(&e->workers[i]);
    }
    e->b->shutdown();
    if (e->q_ready)
        cr_queue_destroy(&e->q);
    pthread_mutex_destroy(&e->current_mu);
    pthread_mutex_destroy(&e->device_mu);
    free(e->workers);
    free(e->auto_table.rows);
    free(e);
}
