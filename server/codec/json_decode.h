/* The JSON request decoder: a body of POST /v1/{gemm,ata,histogram} or /v1/jobs -> a validated
 * cr_request (design.md, "HTTP API v1"). */
#ifndef CRUNCHD_JSON_DECODE_H
#define CRUNCHD_JSON_DECODE_H

#include <stddef.h>

#include "server/request.h"

/* Decodes a JSON body. op == CR_OP_COUNT means "read the op from the body's \"op\" field" (the
 * async /v1/jobs form). lim NULL: cr_request_limits(NULL). On failure returns -1 with err filled
 * (field named) and *out freed. */
int cr_request_from_json(cr_op op, const char *body, size_t len, const cr_limits *lim,
                         cr_request *out, cr_error *err);
/* The same for owner (server/http/peer.h's client), whose resident tensors the body may name
 * ({"tensor": "ID"}) and keep its result as ("output": {"tensor": ...}). */
int cr_request_from_json_as(cr_op op, const char *body, size_t len, const cr_limits *lim, const char *owner,
                            cr_request *out, cr_error *err);

#endif
