/* The RPCs the gRPC listener serves, by path: inference.GRPCInferenceService (Triton's KServe
 * v2 gRPC protocol) and grpc.health.v1.Health. A path not here is answered UNIMPLEMENTED. */
#ifndef CRUNCHD_GRPC_METHODS_H
#define CRUNCHD_GRPC_METHODS_H

#include "server/grpc/grpc_call.h"

/* The method of ":path" (exact, case-sensitive as gRPC's); NULL when there is none. */
const cr_grpc_method *cr_grpc_method_find(const char *path);

#endif
