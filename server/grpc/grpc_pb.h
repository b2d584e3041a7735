/* protobuf-c messages in and out of gRPC calls: a request unpacked (a malformed one ends the
 * call INVALID_ARGUMENT), an answer packed behind its 5-byte prefix and sent with OK. */
#ifndef CRUNCHD_GRPC_PB_H
#define CRUNCHD_GRPC_PB_H

#include <protobuf-c/protobuf-c.h>

#include "server/grpc/grpc_call.h"

/* The message of type d in m; NULL with the call ended when it does not parse. */
ProtobufCMessage *cr_grpc_unpack(cr_grpc_call *c, const ProtobufCMessageDescriptor *d, const cr_grpc_msg *m);
/* m as the call's answer, then OK. */
void cr_grpc_reply_pb(cr_grpc_call *c, const ProtobufCMessage *m);
/* A failure with a status and a formatted message. */
void cr_grpc_failf(cr_grpc_call *c, int http, const char *code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#endif
