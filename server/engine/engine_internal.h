/* What engine.c (admission, deadlines, life cycle) and worker.c (the workers' loop) share. Not for
 * any file outside server/engine/. */
#ifndef CRUNCHD_ENGINE_INTERNAL_H
#define CRUNCHD_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "kernels/registry.h"
#include "server/config.h"
#include "server/engine/queue.h"
#include "server/obs/metrics.h"

typedef struct cr_engine cr_engine; /* the public face of it: server/engine/engine.h */

enum { CANCEL_NONE, CANCEL_CLIENT, CANCEL_DEADLINE, CANCEL_DRAIN };

#define CR_MAX_LANES 4

/* What a worker has in flight on a lane of its backend worker: a batch, or one job alone. */
typedef struct {
    cr_job **jobs;
    cr_task **tasks;
    cr_status *st;
    cr_timings *tm;
    int n;                    /* 0: free; guarded by the engine's current_mu for tick's reads */
    bool alone;               /* jobs[0] through run_launch, not a batch */
    double launched_at;
} cr_lane_slot;

typedef struct {
    cr_engine *e;
    int device;
    cr_worker *bw;
    pthread_t thread;
    bool started;
    cr_job *current;          /* the job running alone; guarded by e->current_mu */
    cr_lane_slot lanes[CR_MAX_LANES];
    int n_lanes;
    cr_job **taken;           /* cr_queue_take's output, batch_max entries */
} cr_worker_slot;

typedef struct {
    _Atomic uint64_t jobs, batches;
    double busy_s, busy_until; /* guarded by device_mu */
} cr_device_stats;

struct cr_engine {
    const cr_backend *b;
    const cr_config *cfg;
    cr_queue q;
    bool q_ready;
    cr_take_policy take;
    int preferred[16];
    cr_worker_slot *workers;
    int n_workers;
    int n_devices;
    cr_device_info dev[CR_METRICS_MAX_DEVICES];
    _Atomic bool dev_ready[CR_METRICS_MAX_DEVICES];
    cr_device_stats stats[CR_METRICS_MAX_DEVICES];
    pthread_mutex_t device_mu;
    uint64_t max_device_bytes;
    _Atomic bool draining, failed;
    _Atomic uint64_t host_jobs; /* run on the caller's thread (host_path.c) */
    pthread_mutex_t current_mu;
    cr_auto_table auto_table;
};

/* A job's end, in every state; on_done runs, and the queue's count of running jobs stays the
 * caller's to update. */
void cr_engine_finish(cr_engine *e, cr_job *j, cr_job_state state);
void cr_engine_fail(cr_engine *e, cr_job *j, int http, const char *code, const char *field, const char *msg);
/* Cancelled by the client (409), by its deadline (504) or by the end of a drain (503). */
void cr_engine_finish_cancelled(cr_engine *e, cr_job *j);
/* A backend status as the job's error. */
void cr_engine_fail_status(cr_engine *e, cr_job *j, cr_status st, const char *msg);
/* A sticky device error: the device is unusable and the daemon must restart. */
void cr_engine_mark_fatal(cr_engine *e, int device);
/* Device `device` worked from t0 to t1 on `jobs` jobs in one launch (per-device metrics). */
void cr_engine_device_busy(cr_engine *e, int device, double t0, double t1, int jobs);

/* A worker thread (worker.c). */
void *cr_worker_main(void *arg);

#endif
