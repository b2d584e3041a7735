/* An input's typed contents (InferTensorContents: fp32_contents, int_contents, ...) as the raw
 * little-endian bytes of its datatype, what raw_input_contents would have carried, so that the
 * KServe decoder reads both forms the same way. protobuf-c unpacks a packed repeated field into
 * an array of its type, which for FP32, FP64, INT32, UINT32, INT64 and UINT64 are those bytes
 * already (no conversion); the narrower integers (INT8, INT16, UINT8, UINT16, which travel as
 * int32/uint32 values) are narrowed, each value checked against its type's range. */
#ifndef CRUNCHD_INFER_CONTENTS_H
#define CRUNCHD_INFER_CONTENTS_H

#include <stddef.h>

#include "api/grpc/grpc_service.pb-c.h"
#include "server/error.h"

/* The bytes of contents t of input `input` of datatype dt (one crunchd knows: kserve_model.c):
 * *bytes and *len, pointing into t or into *owned (malloc'd, the caller frees it; NULL when not
 * needed). -1 with err (400 naming the input) when dt has no typed field (FP16, BF16), the values
 * are in a field of another type, or one is out of dt's range. */
int cr_grpc_contents_bytes(const Inference__InferTensorContents *t, const char *dt, const char *input,
                           const void **bytes, size_t *len, void **owned, cr_error *err);

#endif
