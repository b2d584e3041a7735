/* A finished job -> ModelInferResponse (ModelStreamInferResponse on a stream), as a message of
 * the call (grpc_call.h): the fields that are not tensors packed by protobuf-c, then one
 * raw_output_contents entry per output in the order of outputs, as tritonclient pairs them (an
 * output in shared memory has an empty one, as Triton sends), each tensor's bytes referenced in
 * the job's own buffer and written from there to the socket: the answer holds the job until its
 * bytes are gone. Shapes are cr_request_result_shape's (a stack's whole shape), parameters those
 * of /v2 (job_id, kernel, backend, device, batch). */
#ifndef CRUNCHD_INFER_RESPONSE_H
#define CRUNCHD_INFER_RESPONSE_H

#include <stdbool.h>

#include "server/grpc/grpc_call.h"
#include "server/kserve/kserve_internal.h"

/* The answer of a done job j (a reference is taken), its shared-memory outputs written first.
 * stream: wrapped as a ModelStreamInferResponse. NULL with err (503 out of memory, 413 past
 * gRPC's 2 GiB). */
cr_grpc_out *cr_grpc_infer_answer(cr_job *j, const cr_ks_spec *s, const char *backend, bool stream, cr_error *err);

/* A stream's in-band error: a ModelStreamInferResponse with error_message and an infer_response
 * that holds only the request's id. NULL when out of memory. */
cr_grpc_out *cr_grpc_stream_error(const char *id, const char *message);

#endif
