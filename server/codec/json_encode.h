/* JSON response bodies (design.md, "HTTP API v1"). Each returns a malloc'd, NUL-terminated
 * string and its length in *len, or NULL when memory ran out.
 *
 * JSON has no Infinity or NaN: a non-finite result (float overflow in a kernel) is written as
 * null. Strings are escaped, and bytes that are not valid UTF-8 become U+FFFD, so the body is
 * always valid JSON whatever a client sent. */
#ifndef CRUNCHD_JSON_RESPONSE_H
#define CRUNCHD_JSON_RESPONSE_H

#include <stddef.h>

#include "server/codec/json_buf.h"
#include "server/error.h"
#include "server/engine/job.h"

/* {"error": {"code", "message", "field"?}}; field left out when empty. */
char *cr_json_error(const cr_error *e, size_t *len);

/* {"error": "message"}: the KServe v2 protocol's error body (its routes answer in this shape). */
char *cr_json_error_v2(const cr_error *e, size_t *len);

/* The synchronous answer (also GET /v1/jobs/{id}/result): id, op, kernel, backend, device,
 * dtype, result, timings_ms, gflops (gemm/ata) or gbps (histogram), and "kernels" rows in
 * compare mode. backend is the backend's name ("cpu", "cuda"). */
/* JSON numbers cannot be NaN or infinite, and writing null in a 200 breaks the number type the
 * API promises: a result with such values (an overflow) is a 422 non_finite_result in JSON,
 * naming how many there are; .npy answers carry them as they are. 0 when all are finite. */
int cr_json_nonfinite_result(const cr_job *j, cr_error *err);
char *cr_json_job_result(const cr_job *j, const char *backend, size_t *len);

/* GET /v1/jobs/{id}: id, op, status, timings_ms (done/failed), error (failed/cancelled). */
char *cr_json_job_status(const cr_job *j, size_t *len);

/* The 202 answer of POST /v1/jobs: {"id": "...", "status": "queued"}. */
char *cr_json_accepted(const cr_job *j, size_t *len);

/* A resident tensor's metadata object ({"id", "name"?, "shape", "dtype", "bytes", "device",
 * "expires_at", "instance"}), for /v1/tensors and results kept as tensors. */
void cr_jbuf_tensor(cr_jbuf *b, const char *id, const char *name, const cr_shape *shape, cr_dtype dt,
                    uint64_t bytes, int device, double expires_at);

#endif
