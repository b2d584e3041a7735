/* The workers. Each takes from the one shared queue, so the least busy worker of any device takes
 * the next job, and runs either
 *   - a batch of small jobs with one batch key (one job or many) on a lane of its backend worker:
 *     one copy in, one launch, one copy out;
 *   - a job that is not batched (named hand-written kernels, jobs too big to gain from sharing a
 *     launch) on a lane too, through the backend's run_launch: its own copies and kernel; or
 *   - a job alone through the backend's run(), the worker waiting for it (compare mode, jobs
 *     over the backend's run_launch_max_bytes, backends without lanes).
 * Up to the backend's lanes are in flight per worker; the worker takes the next job while earlier
 * ones run, and waits for the oldest only when its lanes are full or nothing else is ready, so
 * the device is not left idle between jobs nor a thread spent per job in flight. Every job keeps
 * its own answer, status and timings; a batch's timings are its phases. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "server/clock.h"
#include "server/engine/compare.h"
#include "server/engine/engine_internal.h"

static void set_current(cr_worker_slot *w, cr_job *j)
{
    pthread_mutex_lock(&w->e->current_mu);
    w->current = j;
    pthread_mutex_unlock(&w->e->current_mu);
}

/* --test-hooks: hold the worker for a while, so tests can see queued/running states. */
static void debug_delay(const cr_job *j)
{
    double until = cr_now() + (double)j->debug_delay_ms / 1e3;
    while (!j->cancel && cr_now() < until)
        nanosleep(&(struct timespec){.tv_nsec = 2000000}, NULL);
}

/* A job leaves the queue for a worker; false when it ends right here (device failed, cancelled). */
static bool start_job(cr_engine *e, cr_job *j)
{
    j->started_at = cr_now();
    j->ms.queue = (j->started_at - j->enqueued_at) * 1e3;
    if (atomic_load(&e->failed)) {
        cr_engine_fail(e, j, 503, "device_fault", "", "the device failed; the daemon is restarting");
        return false;
    }
    atomic_store(&j->state, CR_JOB_RUNNING);
    if (j->debug_delay_ms > 0)
        debug_delay(j);
    if (j->cancel) {
        cr_engine_finish_cancelled(e, j);
        return false;
    }
    j->req.task.cancel = &j->cancel;
    j->ran = true;
    return true;
}

/* The end of a job that ran: its result, or the error its status says. A job cancelled while in
 * a batch (which cannot stop part-way) is answered as cancelled, its result dropped. */
static void end_job(cr_engine *e, const cr_worker_slot *w, cr_job *j, const cr_timings *tm, cr_status st,
                    const char *msg)
{
    snprintf(j->device, sizeof j->device, "%s", tm->device);
    j->ms.h2d = tm->h2d_ms;
    j->ms.kernel = tm->kernel_ms;
    j->ms.d2h = tm->d2h_ms;
    if (st == CR_E_FATAL)
        cr_engine_mark_fatal(e, w->device);
    if (st == CR_OK && j->cancel)
        st = CR_E_CANCELLED;
    if (st != CR_OK)
        cr_engine_fail_status(e, j, st, msg);
    else
        cr_engine_finish(e, j, CR_JOB_DONE);
}

/* No room on this worker's device: back to the queue for a device that has not said so yet. */
static bool try_elsewhere(cr_engine *e, const cr_worker_slot *w, cr_job *j)
{
    uint32_t all = (uint32_t)((1ull << e->n_devices) - 1);
    j->devices_tried |= 1u << w->device;
    if ((j->devices_tried & all) == all)
        return false;
    j->ran = false;
    atomic_store(&j->state, CR_JOB_QUEUED);
    cr_queue_requeue(&e->q, j);
    return true;
}

static void run_alone(cr_engine *e, cr_worker_slot *w, cr_job *j)
{
    char msg[256] = "";
    cr_timings tm = {0};
    set_current(w, j);
    if (start_job(e, j)) {
        double t0 = cr_now();
        cr_task *t = &j->req.task;
        cr_status st = j->req.kernel.mode == CR_KERNEL_ALL ? cr_run_compare(e->b, w->bw, j, &tm, msg, sizeof msg)
                                                           : e->b->run(w->bw, t, &tm, msg, sizeof msg);
        cr_engine_device_busy(e, w->device, t0, cr_now(), 1);
        j->batch = 1;
        if (st == CR_E_NOMEM_DEVICE && try_elsewhere(e, w, j)) {
            set_current(w, NULL);
            return; /* the queue holds it (and its reference) again */
        }
        end_job(e, w, j, &tm, st, msg);
    }
    set_current(w, NULL);
    cr_queue_done(&e->q, 1);
    cr_job_release(j);
}

/* ---- batches ---------------------------------------------------------------------------- */

static void lane_publish(cr_engine *e, cr_lane_slot *l, int n)
{
    pthread_mutex_lock(&e->current_mu); /* tick reads the lanes' jobs for their deadlines */
    l->n = n;
    pthread_mutex_unlock(&e->current_mu);
}

static void finish_lane(cr_engine *e, cr_worker_slot *w, cr_lane_slot *l, const char *msg)
{
    int n = l->n;
    cr_engine_device_busy(e, w->device, l->launched_at, cr_now(), n);
    for (int i = 0; i < n; i++)
        end_job(e, w, l->jobs[i], &l->tm[i], l->st[i], msg);
    l->alone = false;
    lane_publish(e, l, 0);
    cr_queue_done(&e->q, n);
    for (int i = 0; i < n; i++)
        cr_job_release(l->jobs[i]);
}

/* Starts jobs[0..n) on lane li: as one batch, or (alone) jobs[0] with its own kernel through
 * run_launch. Jobs that end before (cancelled meanwhile, device failed) stay out of it. True when
 * the lane is now busy; false when nothing was launched (a job alone with no room on this device
 * went back to the queue for another). */
static bool launch_lane(cr_engine *e, cr_worker_slot *w, int li, cr_job **jobs, int n, bool alone)
{
    cr_lane_slot *l = &w->lanes[li];
    char msg[256] = "";
    int k = 0;
    for (int i = 0; i < n; i++) {
        cr_job *j = jobs[i];
        if (!start_job(e, j)) {
            cr_queue_done(&e->q, 1);
            cr_job_release(j);
            continue;
        }
        if (!alone)
            j->req.task.kernel = j->batch_key.row; /* "auto" in a batch runs on the batch row */
        l->jobs[k] = j;
        l->tasks[k] = &j->req.task;
        k++;
    }
    if (!k)
        return false;
    for (int i = 0; i < k; i++) {
        l->jobs[i]->batch = k;
        l->tm[i] = (cr_timings){0};
    }
    l->alone = alone;
    lane_publish(e, l, k);
    l->launched_at = cr_now();
    bool ok;
    if (alone) {
        ok = (l->st[0] = e->b->run_launch(w->bw, li, l->tasks[0], msg, sizeof msg)) == CR_OK;
        if (l->st[0] == CR_E_NOMEM_DEVICE && try_elsewhere(e, w, l->jobs[0])) {
            l->alone = false;
            lane_publish(e, l, 0);
            return false; /* the queue holds it (and its reference) again */
        }
    } else {
        cr_metrics_batch(w->device, k);
        ok = e->b->batch_launch(w->bw, li, l->tasks, k, l->st, msg, sizeof msg) == CR_OK;
    }
    if (ok)
        return true;
    finish_lane(e, w, l, msg);
    return false;
}

static void complete_lane(cr_engine *e, cr_worker_slot *w, int li)
{
    char msg[256] = "";
    cr_lane_slot *l = &w->lanes[li];
    if (l->alone)
        l->st[0] = e->b->run_wait(w->bw, li, &l->tm[0], msg, sizeof msg);
    else
        e->b->batch_wait(w->bw, li, l->st, l->tm, msg, sizeof msg);
    finish_lane(e, w, l, msg);
}

void *cr_worker_main(void *arg)
{
    cr_worker_slot *w = arg;
    cr_engine *e = w->e;
    cr_take_policy take = e->take;
    int oldest = 0, inflight = 0;
    take.device = w->device;
    for (;;) {
        /* Lanes full: wait for the oldest before taking more, so the next job stays queued for
         * a worker that can start it now instead of waiting here behind this one's lanes. */
        if (inflight && inflight == w->n_lanes) {
            complete_lane(e, w, oldest);
            oldest = (oldest + 1) % w->n_lanes;
            inflight--;
        }
        int n = cr_queue_take(&e->q, &take, inflight == 0, w->taken);
        if (n <= 0) {
            if (!inflight)
                break; /* closed, and nothing left this worker may take */
            complete_lane(e, w, oldest);
            oldest = (oldest + 1) % w->n_lanes;
            inflight--;
            continue;
        }
        cr_job *first = w->taken[0];
        if (!first->batchable && !first->laned) {
            for (; inflight; inflight--, oldest = (oldest + 1) % w->n_lanes)
                complete_lane(e, w, oldest);
            run_alone(e, w, first);
            continue;
        }
        int li = (oldest + inflight) % w->n_lanes;
        if (launch_lane(e, w, li, w->taken, first->batchable ? n : 1, !first->batchable))
            inflight++;
    }
    return NULL;
}
