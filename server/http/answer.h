/* A finished job's answer: its error, or its result as JSON or, when the client sent Accept:
 * application/x-npy, as a .npy body (C order; gemm/ata the matrix in the job's dtype, histogram
 * the counts as <u8) with the JSON answer's other fields as headers (X-Crunchd-Job-Id, -Op,
 * -Kernel, -Backend, -Device, -Dtype, -Gflops or -Gbps; float histograms -Range "lo,hi" and,
 * when it fits in 4 KiB, -Edges). A .npy body is read straight from the job's output buffer. */
#ifndef CRUNCHD_HTTP_ANSWER_H
#define CRUNCHD_HTTP_ANSWER_H

#include <stdbool.h>

#include "server/http/conn.h"

/* The job's answer: its error when it did not finish done, else its result (200) in the format
 * the client accepts, with Server-Timing and job headers. */
enum MHD_Result cr_send_job(cr_conn *c, cr_job *j);

/* Before a sync job is queued: a big .npy result of a job that runs where its inputs already are
 * (received straight to a device, server/codec/binary_decode.h) stays on that device and is sent
 * from there piece by piece (backend.h, sink_read): the worker copies nothing back, the copy
 * overlaps the send, and no host buffer holds the result whole. The direct path sends the pieces
 * from the backend's ring; libmicrohttpd (TLS, or a connection it took at its first request)
 * through a reader that copies them into its buffer. Nothing changes for any other request.
 * -1 with err when the memory budget refuses the staging. */
int cr_answer_plan(cr_conn *c, cr_request *r, cr_error *err);

#endif
