/* The error model of the API: every failure becomes one of these, then one JSON body
 * {"error": {"code", "message", "field"}} with its HTTP status. */
#ifndef CRUNCHD_ERROR_H
#define CRUNCHD_ERROR_H

#include <stdarg.h>

/* The codes, one vocabulary for every route (tests and api/openapi.yaml use the same):
 *   400 invalid_json       body is not JSON / not an object
 *   400 missing_field      a required field is absent              (field named)
 *   400 invalid_field      wrong type, ragged rows, bad value      (field named, e.g. "a.data[3]")
 *   400 non_finite         NaN/Infinity where a finite number is required (field named)
 *   400 unknown_kernel     no such kernel for this op on this backend     (field "kernel")
 *   400 unsupported        kernel/backend cannot do this dtype/precision  (field named)
 *   400 invalid_parameter  bad query-string or header value        (field named; X-Request-Id too);
 *                          ambiguous framing (Content-Length twice and different, or with
 *                          Transfer-Encoding): field that header, the connection then closes
 *   400 invalid_encoding   a gzip/deflate body that does not decode (field "Content-Encoding")
 *   401 unauthorized       missing or wrong bearer token
 *   403 origin_not_allowed a CORS preflight from an origin --cors-origin does not name (field "Origin")
 *   404 not_found          unknown route, or unknown/expired job id
 *   405 method_not_allowed (Allow header set)
 *   409 not_done           result asked for before the job finished; also "cancelled"/"failed" jobs
 *   409 already_exists     a shared memory region or tensor of that name exists
 *   409 in_use             unregistering a shared memory region a request holds
 *   411 length_required    body without Content-Length where one is needed
 *   413 too_large          body, JSON or declared sizes over a limit (field named when a size)
 *                          or a JSON body too costly to parse (its values outside numeric
 *                          lists; field: the top-level member)
 *   415 unsupported_media_type  a Content-Type the route does not take, or a Content-Encoding
 *                          other than gzip and deflate (field names the header)
 *   422 shape_mismatch     shapes do not conform                   (field named)
 *   422 non_finite_result  a JSON answer would need Inf/NaN (overflow); .npy carries them
 *   429/503 queue_full     admission control (Retry-After set)
 *   503 draining           shutting down (Retry-After set)
 *   503 device_fault       sticky device error; the daemon restarts
 *   503 host_memory        host allocation failed
 *   503 memory_budget      over --max-memory-mb now (Retry-After set); 413 when it never fits
 *   504 deadline_exceeded  timeout_ms passed
 *   507 device_memory      does not fit device memory
 *   507 shm_limit          registering would pass --shm-max-mb, --shm-client-max-mb (or the most
 *                          regions there may be)
 *   507 tensor_limit       keeping a tensor would pass --tensor-max-mb or --tensor-client-max-mb
 *   500 internal           a bug
 */
typedef struct {
    int http;          /* 400, 404, 413, 415, 422, 503, 507, ... */
    char code[32];     /* machine-readable: "invalid_json", "missing_field", "shape_mismatch", ... */
    char field[64];    /* the offending field ("a.data[3]", "b", "bins"); empty when none */
    char message[256]; /* for a human */
} cr_error;

/* Fills err and returns -1, so decoders can `return cr_fail(err, 400, ...)`. */
int cr_fail(cr_error *err, int http, const char *code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#endif
