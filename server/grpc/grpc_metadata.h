/* What a gRPC request's metadata say, as doc/PROTOCOL-HTTP2.md defines them: the content type,
 * grpc-timeout (the call's deadline), grpc-encoding (how its messages are compressed), and the
 * triton_grpc_error switch of Triton's streaming (errors as the stream's status, not in-band). */
#ifndef CRUNCHD_GRPC_METADATA_H
#define CRUNCHD_GRPC_METADATA_H

#include <stdbool.h>
#include <stdint.h>

#include "server/codec/coding.h"

/* The encodings we decode, as grpc-accept-encoding lists them. */
#define CR_GRPC_ACCEPT_ENCODING "identity,deflate,gzip"

/* application/grpc, alone or with a +subtype (application/grpc+proto) or parameters. */
bool cr_grpc_content_type_ok(const char *ct);
/* grpc-timeout: 1 to 8 digits and a unit (H M S m u n) into microseconds (a nanosecond count
 * rounds up). false when malformed. */
bool cr_grpc_timeout_parse(const char *v, int64_t *us);
/* grpc-encoding: identity, gzip or deflate (false for anything else: the call is UNIMPLEMENTED). */
bool cr_grpc_encoding_parse(const char *v, cr_coding *out);
/* triton_grpc_error's value: "true" (any case) turns it on. */
bool cr_grpc_flag_true(const char *v);

#endif
