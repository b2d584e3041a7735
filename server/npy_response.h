/* A finished job's result as a .npy body (client sent Accept: application/x-npy): C order,
 * gemm/ata the matrix in the job's dtype, histogram the counts as <u8 (uint64). The JSON
 * answer's other fields travel as headers (X-Crunchd-Job-Id, -Op, -Kernel, -Backend, -Device,
 * -Dtype, -Gflops or -Gbps; for float histograms -Range "lo,hi" and, when it fits in 4 KiB,
 * -Edges). The data is read straight from the job's output buffer: no copy of the matrix. */
#ifndef CRUNCHD_NPY_RESPONSE_H
#define CRUNCHD_NPY_RESPONSE_H

#include <stdbool.h>

#include "http_conn.h"

/* Whether the request's Accept header asks for application/x-npy. */
bool cr_wants_npy(cr_conn *c);

/* Answers a DONE job as .npy (200); holds a job reference until the body is sent. */
enum MHD_Result cr_send_job_npy(cr_conn *c, cr_job *j);

#endif
