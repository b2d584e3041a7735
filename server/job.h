/* One job from decode to encode: the request, its state, its results and where the time went. */
#ifndef CRUNCHD_JOB_H
#define CRUNCHD_JOB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "request.h"

typedef enum { CR_JOB_QUEUED, CR_JOB_RUNNING, CR_JOB_DONE, CR_JOB_FAILED, CR_JOB_CANCELLED } cr_job_state;

const char *cr_job_state_name(cr_job_state s);

typedef struct {
    double queue, h2d, kernel, d2h, total; /* milliseconds */
} cr_phase_ms;

/* One row of "kernel": "all" compare mode. */
typedef struct {
    char kernel[CR_KERNEL_NAME_MAX];
    cr_status status;
    double ms;
    double rate;          /* GFLOP/s for gemm/ata, GB/s for histograms */
    double max_rel_error;
} cr_compare_row;

typedef struct cr_job cr_job;
struct cr_job {
    char id[37];                  /* UUIDv4, text form */
    cr_request req;
    bool async;
    _Atomic int state;            /* cr_job_state */
    volatile int cancel;          /* set by DELETE, client disconnect or deadline */
    const char *kernel_used;      /* resolved from auto, for the response */
    char device[128];
    cr_phase_ms ms;
    double enqueued_at, started_at, finished_at, deadline; /* monotonic seconds; deadline 0: none */
    cr_error error;               /* when FAILED or CANCELLED */
    cr_compare_row *compare;      /* "all" mode rows, n_compare of them */
    int n_compare;
    _Atomic int refs;             /* the job table and in-flight users each hold one */
    void *conn;                   /* suspended MHD connection of a sync job, NULL otherwise */
    cr_job *next;                 /* queue link */
};

#endif
