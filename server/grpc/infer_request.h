/* ModelInferRequest -> a cr_request, through the KServe decoder (server/kserve/kserve_internal.h,
 * cr_ks_decode_from), so that every rule of /v2 inference applies unchanged: datatypes, shapes
 * and stacks, limits before memory, parameters, outputs, shared memory, error messages.
 *
 * The message is read as /v2's binary tensor extension would carry it: its KServe JSON header is
 * written from the protobuf fields (inputs with name, datatype, shape and their parameters,
 * binary_data_size for each tensor that has bytes in the message; the request's parameters and
 * outputs likewise), and the decoder's binary section is the tensors where they lie in the
 * received message. raw_input_contents are never unpacked by protobuf-c: the top-level fields
 * are scanned (pb_wire.h), each field 7's bytes are only recorded, and protobuf-c gets the rest;
 * so a big tensor is copied at most once, into its buffer, and not at all when the message lies in
 * the backend's host memory and the tensor's bytes are aligned for its datatype: the input then
 * borrows them in the message (cr_ks_source's in_place), which lives until the job's inputs are
 * freed. Typed contents become raw bytes first (infer_contents.h). */
#ifndef CRUNCHD_INFER_REQUEST_H
#define CRUNCHD_INFER_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "server/codec/binary_decode.h"
#include "server/grpc/grpc_frame.h"
#include "server/kserve/kserve_internal.h"

/* Decodes m (a ModelInferRequest) into *req and *spec, tensors in buffers from alloc, for owner
 * (the client whose resident tensors an input may name: "tensor", server/engine/tensors.h). -1 with err: 404 for an unknown model or version, 400 for a malformed message or
 * request, 413 past a limit, 503 out of memory or budget; *req and *spec are then empty. */
int cr_grpc_infer_decode(const cr_grpc_msg *m, const cr_limits *lim, cr_host_allocator alloc, const char *owner,
                         cr_request *req, cr_ks_spec *spec, cr_error *err);

/* The offset of the first raw_input_contents entry's bytes in a ModelInferRequest of which the
 * first avail bytes are at hand; 0 when they do not reach it (grpc_frame.h's cr_grpc_align_hint:
 * the message is placed so that its tensor is aligned and may stay where it lands). */
size_t cr_grpc_infer_align(const uint8_t *first, size_t avail);

/* The request's id (field 3) when msg holds one, for an answer to a request that did not
 * decode: into out (n bytes), "" when there is none. */
void cr_grpc_infer_id(const uint8_t *msg, size_t len, char *out, size_t n);

#endif
