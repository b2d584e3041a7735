/* One job from decode to encode: the request, its state, its results and where the time went. */
#ifndef CRUNCHD_JOB_H
#define CRUNCHD_JOB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "server/obs/log.h"
#include "server/request.h"

typedef enum { CR_JOB_QUEUED, CR_JOB_RUNNING, CR_JOB_DONE, CR_JOB_FAILED, CR_JOB_CANCELLED } cr_job_state;

const char *cr_job_state_name(cr_job_state s);

typedef struct {
    double queue, h2d, kernel, d2h, total; /* milliseconds; total: queued to finished */
    /* From the request's headers to its job queued: the body's transfer and decoding. For a
     * big upload this is most of what the client waits, and is no part of total. */
    double receive;
} cr_phase_ms;

/* "receive;dur=…, queue;dur=…, …, total;dur=…" for a Server-Timing header. */
void cr_server_timing(const cr_phase_ms *ms, char *out, size_t n);

/* One row of "kernel": "all" compare mode. */
typedef struct {
    const cr_kernel *kernel;
    cr_status status;
    double ms;
    double rate;          /* GFLOP/s for gemm/ata, GB/s for histograms */
    double max_rel_error;
} cr_compare_row;

typedef struct cr_job cr_job;
struct cr_job {
    char id[37];                  /* UUIDv4, text form */
    char request_id[129];         /* the X-Request-Id of the request that made it */
    cr_request req;
    bool async;
    _Atomic int state;            /* cr_job_state */
    volatile int cancel;          /* set by DELETE, client disconnect or deadline */
    bool ran;                     /* a worker ran its kernel (req.task.kernel) */
    bool batchable;               /* may share a launch with queued jobs of its batch_key */
    bool laned;                   /* else may still run alone on a lane (run_launch), not awaited */
    cr_batch_key batch_key;
    int batch;                    /* jobs in the launch it ran in (1: alone) */
    uint32_t devices_tried;       /* devices that had no room for it (bit per device) */
    char device[128];
    cr_phase_ms ms;
    double enqueued_at, started_at, finished_at, deadline; /* monotonic seconds; deadline 0: none */
    cr_error error;               /* when FAILED or CANCELLED */
    cr_compare_row *compare;      /* "all" mode rows, n_compare of them */
    int n_compare;
    _Atomic int refs;             /* the job table and in-flight users each hold one */
    void *conn;                   /* the HTTP request (cr_conn) waiting for a sync job, NULL otherwise */
    void (*on_done)(cr_job *j);   /* called by the worker once the job is finished, any state */
    void *on_done_arg;            /* what on_done needs: the gRPC call's record (server/grpc/grpc_done.h) */
    int64_t debug_delay_ms;       /* --test-hooks only: the worker waits this long first */
    cr_job *next;                 /* queue link */
    cr_job *table_next;           /* job table bucket link */
    size_t table_bytes;           /* what the job table accounted for it */
    _Atomic bool fetched;         /* an async result was delivered at least once */
};

/* A new job with a fresh UUIDv4 and one reference, owning `req` (moved in); NULL on ENOMEM. */
cr_job *cr_job_new(cr_request *req, bool async);
void cr_job_ref(cr_job *j);
/* Drops a reference; the last one frees the job and its buffers. */
void cr_job_release(cr_job *j);
bool cr_job_finished(const cr_job *j);
/* The name of the kernel that ran the job, NULL before a worker took it. */
const char *cr_job_kernel_name(const cr_job *j);
/* The backend whose kernel ran the job: the daemon's, or the CPU's for a job small enough to run
 * on the HTTP thread (server/engine/host_path.c). */
const char *cr_job_backend_name(const cr_job *j, const char *daemon_backend);
/* The task's size as the access log shows it: "MxNxK" (gemm), "MxN" (ata), "count/bins". */
void cr_job_shape(const cr_job *j, char *out, size_t n);
/* The job's part of an access log line (id, op, kernel, shape, phases) into r; shape: room for
 * the shape text, which r points at. Both transports' log lines. */
void cr_job_log_fields(const cr_job *j, cr_log_request *r, char *shape, size_t n);
/* Bytes of memory the job holds (inputs, outputs), for the result cap. */
size_t cr_job_bytes(const cr_job *j);

#endif
