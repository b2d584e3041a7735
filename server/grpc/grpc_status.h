/* gRPC status codes (grpc/grpc doc/statuscodes.md) and how crunchd's errors (server/error.h: an
 * HTTP status and a code) become one of them, in one table; and the grpc-message trailer's
 * percent-encoding (doc/PROTOCOL-HTTP2.md). */
#ifndef CRUNCHD_GRPC_STATUS_H
#define CRUNCHD_GRPC_STATUS_H

#include <stddef.h>

#include "server/error.h"

typedef enum {
    CR_GRPC_OK = 0,
    CR_GRPC_CANCELLED = 1,
    CR_GRPC_UNKNOWN = 2,
    CR_GRPC_INVALID_ARGUMENT = 3,
    CR_GRPC_DEADLINE_EXCEEDED = 4,
    CR_GRPC_NOT_FOUND = 5,
    CR_GRPC_ALREADY_EXISTS = 6,
    CR_GRPC_PERMISSION_DENIED = 7,
    CR_GRPC_RESOURCE_EXHAUSTED = 8,
    CR_GRPC_FAILED_PRECONDITION = 9,
    CR_GRPC_ABORTED = 10,
    CR_GRPC_OUT_OF_RANGE = 11,
    CR_GRPC_UNIMPLEMENTED = 12,
    CR_GRPC_INTERNAL = 13,
    CR_GRPC_UNAVAILABLE = 14,
    CR_GRPC_DATA_LOSS = 15,
    CR_GRPC_UNAUTHENTICATED = 16,
    CR_GRPC_CODES
} cr_grpc_code;

/* "OK", "NOT_FOUND", ...: the metrics' and the access log's label. */
const char *cr_grpc_code_name(cr_grpc_code c);

/* The code of an error of the API: unknown model NOT_FOUND, bad requests INVALID_ARGUMENT,
 * limits and memory RESOURCE_EXHAUSTED, drain and a full queue UNAVAILABLE, deadlines
 * DEADLINE_EXCEEDED, auth UNAUTHENTICATED, a bug INTERNAL. */
cr_grpc_code cr_grpc_code_of(const cr_error *e);

/* The HTTP status an answer of code c is logged with (the access log's level follows it), where
 * no cr_error of the API says more. */
int cr_grpc_code_http(cr_grpc_code c);

/* msg percent-encoded for grpc-message: bytes outside 0x20..0x7e and '%' as %XX, cut at a
 * whole escape to fit out (NUL-terminated). Its length. */
size_t cr_grpc_percent_encode(const char *msg, char *out, size_t cap);

#endif
