/* gRPC status codes; see grpc_status.h. */
#include "server/grpc/grpc_status.h"

#include <stdbool.h>
#include <string.h>

static const char *const names[CR_GRPC_CODES] = {
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
    "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
    "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
};

const char *cr_grpc_code_name(cr_grpc_code c)
{
    return (unsigned)c < CR_GRPC_CODES ? names[c] : "UNKNOWN";
}

/* Codes of server/error.h whose gRPC code is not their HTTP status's; first match wins. */
static const struct {
    const char *code;
    cr_grpc_code grpc;
} by_code[] = {
    {"already_exists", CR_GRPC_ALREADY_EXISTS},
    {"in_use", CR_GRPC_FAILED_PRECONDITION},
    {"not_done", CR_GRPC_FAILED_PRECONDITION},
    {"cancelled", CR_GRPC_CANCELLED},
    {"queue_full", CR_GRPC_UNAVAILABLE},       /* Triton's answer to a full queue; retryable */
    {"draining", CR_GRPC_UNAVAILABLE},
    {"device_fault", CR_GRPC_UNAVAILABLE},     /* the daemon restarts: retry elsewhere */
    {"host_memory", CR_GRPC_RESOURCE_EXHAUSTED},
    {"memory_budget", CR_GRPC_RESOURCE_EXHAUSTED},
    {"device_memory", CR_GRPC_RESOURCE_EXHAUSTED},
    {"shm_limit", CR_GRPC_RESOURCE_EXHAUSTED},
    {"too_large", CR_GRPC_RESOURCE_EXHAUSTED},
    {"deadline_exceeded", CR_GRPC_DEADLINE_EXCEEDED},
    {"unsupported_media_type", CR_GRPC_INVALID_ARGUMENT},
};

/* Then by HTTP status. */
static cr_grpc_code by_status(int http)
{
    switch (http) {
    case 400: case 411: case 415: case 422: return CR_GRPC_INVALID_ARGUMENT;
    case 401: return CR_GRPC_UNAUTHENTICATED;
    case 403: return CR_GRPC_PERMISSION_DENIED;
    case 404: return CR_GRPC_NOT_FOUND;
    case 405: case 501: return CR_GRPC_UNIMPLEMENTED;
    case 409: return CR_GRPC_FAILED_PRECONDITION;
    case 413: case 429: case 507: return CR_GRPC_RESOURCE_EXHAUSTED;
    case 503: return CR_GRPC_UNAVAILABLE;
    case 504: return CR_GRPC_DEADLINE_EXCEEDED;
    default: return http >= 200 && http < 300 ? CR_GRPC_OK : CR_GRPC_INTERNAL;
    }
}

cr_grpc_code cr_grpc_code_of(const cr_error *e)
{
    for (size_t i = 0; i < sizeof by_code / sizeof by_code[0]; i++)
        if (strcmp(e->code, by_code[i].code) == 0)
            return by_code[i].grpc;
    return by_status(e->http);
}

int cr_grpc_code_http(cr_grpc_code c)
{
    static const int http[CR_GRPC_CODES] = {200, 499, 500, 400, 504, 404, 409, 403, 429, 400, 409, 400,
                                            501, 500, 503, 500, 401};
    return (unsigned)c < CR_GRPC_CODES ? http[c] : 500;
}

size_t cr_grpc_percent_encode(const char *msg, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t j = 0;
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
        bool plain = *p >= 0x20 && *p <= 0x7e && *p != '%';
        size_t need = plain ? 1 : 3;
        if (j + need >= cap)
            break;
        if (plain) {
            out[j++] = (char)*p;
            continue;
        }
        out[j++] = '%';
        out[j++] = hex[*p >> 4];
        out[j++] = hex[*p & 15];
    }
    if (cap)
        out[j] = '\0';
    return j;
}
