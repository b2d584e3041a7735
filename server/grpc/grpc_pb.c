/* protobuf-c messages of calls; see grpc_pb.h. */
#include "server/grpc/grpc_pb.h"

#include <stdarg.h>
#include <stdio.h>

ProtobufCMessage *cr_grpc_unpack(cr_grpc_call *c, const ProtobufCMessageDescriptor *d, const cr_grpc_msg *m)
{
    ProtobufCMessage *out = protobuf_c_message_unpack(d, NULL, m->len, m->p);
    if (!out)
        cr_grpc_failf(c, 400, "invalid_field", "message", "the request is not a valid %s message", d->name);
    return out;
}

void cr_grpc_reply_pb(cr_grpc_call *c, const ProtobufCMessage *m)
{
    uint8_t *body;
    size_t n = protobuf_c_message_get_packed_size(m);
    cr_grpc_out *out = cr_grpc_out_bytes(n, &body);
    if (!out)
        return cr_grpc_failf(c, 503, "host_memory", "", "out of memory for the answer");
    protobuf_c_message_pack(m, body);
    cr_grpc_call_reply(c, out);
}

void cr_grpc_failf(cr_grpc_call *c, int http, const char *code, const char *field, const char *fmt, ...)
{
    cr_error e = {.http = http};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.message, sizeof e.message, fmt, ap);
    va_end(ap);
    snprintf(e.code, sizeof e.code, "%s", code);
    snprintf(e.field, sizeof e.field, "%s", field);
    cr_grpc_call_fail(c, &e);
}
