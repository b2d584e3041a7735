/* Streams: an AᵀA or a histogram of data that arrives in parts, larger than any one request and
 * than memory (issue 37). Both are sums over the data: AᵀA = Σ AᵢᵀAᵢ over row blocks, a histogram
 * the sum of its parts' counts. A stream is a job (its id, GET /v1/jobs/{id}, the result fetched as
 * any job's) whose output buffer is an accumulator: float64 (or float32 when asked) n×n, uint64
 * counts. Each part is an ordinary job of its rows (on the device, by the kernel auto picks for a
 * tall, narrow block) whose result is folded into the accumulator when it is done, so the memory a
 * stream holds is its answer's size plus the parts in flight.
 *
 * Parts are numbered by the client: a seq is absorbed once (a repeat with the same bytes is
 * acknowledged, not counted; with other bytes it is a 409), parts come in any order and in parallel.
 * A part that fails (bad data, a client gone mid-body) is not absorbed and may be sent again.
 *
 * Open streams are owned objects (server/engine/owned.h): an owner, caps on their accumulators'
 * bytes and count, idle expiry (--stream-idle-s: no part for that long fails the stream with
 * stream_idle and frees it). A stream ends exactly once: finished (the result), abandoned
 * (DELETE), expired, or failed by a drain; nothing of it stays allocated after that but the job's
 * result. */
#ifndef CRUNCHD_ENGINE_STREAMS_H
#define CRUNCHD_ENGINE_STREAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/engine/job.h"
#include "server/error.h"

typedef struct cr_stream cr_stream;

typedef struct {
    cr_op op;            /* CR_OP_ATA or CR_OP_HISTOGRAM */
    cr_dtype dtype;      /* the parts' elements */
    int64_t cols;        /* AᵀA: n */
    bool acc_f32;        /* AᵀA: sum in float32 (default float64) */
    int32_t bins;        /* histograms: the range is fixed up front (numpy's data range cannot stream) */
    double lo, hi;
    cr_kernel_choice kernel;
} cr_stream_spec;

typedef struct {
    uint64_t parts, duplicates, rows, values, bytes;
    int in_flight;
    bool finishing;
    double opened_at, first_part_at, last_part_at; /* cr_now(); 0: no part yet */
    double idle_s;                                 /* --stream-idle-s */
} cr_stream_progress;

typedef struct {
    double idle_s;              /* 0: never */
    uint64_t max_bytes;         /* accumulators of every open stream */
    uint64_t client_max_bytes;  /* one owner's */
    size_t max_count;
} cr_stream_limits;

void cr_streams_init(const cr_stream_limits *lim);

/* A new stream of spec as job j (queued nowhere, state running), owned by owner: its accumulator
 * allocated (zeroed) as j's output, charged to the memory budget (503 memory_budget when it cannot
 * fit now) and to the stream caps (507 stream_limit). The stream holds a reference to j. */
int cr_stream_open(cr_job *j, const char *owner, const cr_stream_spec *spec, cr_error *err);

/* The open stream id of owner, held (release it); NULL with a 404 (or 409 stream_closed when it is
 * finishing, unless finishing_ok). */
cr_stream *cr_stream_acquire(const char *owner, const char *id, bool finishing_ok, cr_error *err);
void cr_stream_release(cr_stream *s);
/* One more hold on a stream the caller holds (a part's). */
void cr_stream_hold(cr_stream *s);
const cr_stream_spec *cr_stream_spec_of(const cr_stream *s);
void cr_stream_progress_of(cr_stream *s, cr_stream_progress *out);
/* A job's stream (NULL when it is none, or no longer open). */
cr_stream *cr_job_stream(const cr_job *j);

/* A digest of a part's bytes, to tell a repeat from a different part of the same seq. */
uint64_t cr_stream_digest(const void *p, size_t n);

typedef enum { CR_PART_NEW, CR_PART_REPEAT } cr_part_admit;
/* Admits part seq of s: NEW, marked in flight (the caller runs it and ends it with
 * cr_stream_part_done or cr_stream_part_drop); REPEAT, absorbed already (cr_stream_part_repeat
 * tells the same bytes from others); -1 with a 409 (the same seq in flight, the stream finishing). */
int cr_stream_part_begin(cr_stream *s, uint64_t seq, cr_part_admit *admit, cr_error *err);
/* A repeat of absorbed part seq with bytes of this digest: 0 when they are the same (acknowledged,
 * not counted), -1 with a 409 part_conflict when not. */
int cr_stream_part_repeat(cr_stream *s, uint64_t seq, uint64_t digest, cr_error *err);

/* The part's job finished done: its result folded into the accumulator, seq absorbed with the
 * digest of its bytes (taken here, on the worker, off the upload's path), and the stream's result
 * published when it was the last part of a finishing stream. Takes the request's hold on s
 * (j->req.stream is NULL after). */
void cr_stream_part_done(cr_job *j);
/* The part did not run or failed: seq may come again. Takes r's hold on s. */
void cr_stream_part_drop(cr_request *r);

/* No more parts: the result is published once the parts in flight are absorbed. 1 when it is
 * published now, 0 when parts are still in flight; -1 with err when there is nothing to finish. */
int cr_stream_finish(cr_stream *s, cr_error *err);
/* DELETE: the stream ends now, its parts in flight are dropped as they end. */
void cr_stream_abandon(cr_stream *s);

/* Fails the streams nobody sent a part for --stream-idle-s (stream_idle); how many. */
int cr_streams_sweep(double now);
/* A drain's end: every open stream fails with err. How many. */
int cr_streams_fail_all(const cr_error *err);
/* Open streams (a drain waits for them to finish). */
uint64_t cr_streams_open(void);
void cr_streams_usage(uint64_t *open, uint64_t *bytes, uint64_t *created, uint64_t *expired);

#endif
