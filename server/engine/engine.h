/* The job engine: admission (bounded queue), the worker pool over the backend's devices, kernel
 * choice ("auto" from a measured table, "all" compare mode), deadlines, cancel, drain, faults. */
#ifndef CRUNCHD_ENGINE_H
#define CRUNCHD_ENGINE_H

#include <stdbool.h>

#include "kernels/backend.h"
#include "kernels/registry.h"
#include "server/config.h"
#include "server/error.h"
#include "server/engine/job.h"
#include "server/obs/metrics.h"

typedef struct cr_engine cr_engine;

/* Sizes what c left to "auto" from the machine (server/machine.h), initialises the backend,
 * creates its workers, measures the auto table. NULL with err. */
cr_engine *cr_engine_start(const cr_backend *b, cr_config *c, char *err, size_t errlen);
/* Closes the queue, lets the workers finish what is queued, joins them, shuts the backend. */
void cr_engine_stop(cr_engine *e);

const cr_backend *cr_engine_backend(const cr_engine *e);
int cr_engine_device_count(const cr_engine *e);

/* Resolves the job's kernel (the registry: auto, all or a name, checked against the task), sets
 * the deadline, allocates the output and queues the job (taking a reference). -1 with err: 400
 * unknown_kernel/unsupported,
 * 503 queue_full/draining/device_fault, 507 device_memory. */
int cr_engine_submit(cr_engine *e, cr_job *j, cr_error *err);
/* Runs a job small enough that a device round trip would cost more than the job (--host-max-flops,
 * --host-max-values; kernel "auto", sync, not test-delayed) at once on the calling thread with the
 * CPU backend's kernels: 1 when it ran (finished in any state, on_done not called), 0 when it is
 * not such a job (submit it), -1 with err when its output could not be allocated. */
int cr_engine_run_here(cr_engine *e, cr_job *j, cr_error *err);
/* A job for a transport that waits for its on_done (set by the caller, with on_done_arg) instead
 * of suspending a connection (the gRPC listener): run at once on the calling thread when it is
 * tiny (cr_engine_run_here), else submitted. 1: it finished here (on_done not called); 0: it is
 * queued and on_done will be called once it finishes, in any state; -1 with err: refused
 * (on_done never called). */
int cr_engine_run(cr_engine *e, cr_job *j, cr_error *err);
/* Cancels a job: a queued one is finished as cancelled at once; a running one is flagged and
 * the backend stops at its next phase boundary. */
void cr_engine_cancel(cr_engine *e, cr_job *j);

void cr_engine_begin_drain(cr_engine *e);
bool cr_engine_draining(const cr_engine *e);
/* A sticky device error happened: the process must exit non-zero. */
bool cr_engine_failed(const cr_engine *e);
/* Ready: a device usable, not draining, queue below its capacity. reason when not. */
bool cr_engine_ready(cr_engine *e, const char **reason);
/* The drain's grace period is over: closes the queue (pushes fail, idle workers exit), fails
 * every queued job 503 draining and flags the running ones to stop at their next phase
 * boundary, where they fail 503 draining too (a kernel already launched runs to its end). */
void cr_engine_cut_off(cr_engine *e);
/* Waits for an idle queue until the monotonic deadline; true when idle. */
bool cr_engine_wait_idle(cr_engine *e, double deadline_s);
/* Periodic housekeeping (a few times a second): deadlines of queued and running jobs. */
void cr_engine_tick(cr_engine *e, double now);

void cr_engine_gauges(cr_engine *e, cr_metrics_gauges *g);

/* The auto table as measured at start: one row per (op, dtype, size class, precision). */
const cr_auto_table *cr_engine_auto_table(const cr_engine *e);

#endif
