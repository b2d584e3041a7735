/* Cross-origin requests from browsers (the Fetch standard's CORS protocol), off unless
 * --cors-origin names the origins allowed: "https://app.example", "http://localhost:3000", or
 * "*" for any. The list is read once at start; this file only decides, the HTTP glue is in
 * preflight.c (OPTIONS) and respond.c (the headers of every answer). */
#ifndef CRUNCHD_CORS_H
#define CRUNCHD_CORS_H

#include <stdbool.h>
#include <stddef.h>

#define CR_CORS_MAX_ORIGINS 32

/* What browsers may send and read: the request headers our API takes, and the answer headers
 * beyond the CORS-safelisted ones a script needs. */
#define CR_CORS_ALLOW_HEADERS                                                                  \
    "Authorization, Content-Type, Content-Encoding, X-Request-Id, X-Crunchd-Timeout-Ms, "      \
    "Inference-Header-Content-Length"
#define CR_CORS_EXPOSE_HEADERS                                                                 \
    "Server-Timing, X-Request-Id, X-Crunchd-Job-Id, X-Crunchd-Op, X-Crunchd-Kernel, "          \
    "X-Crunchd-Backend, X-Crunchd-Device, X-Crunchd-Batch, X-Crunchd-Dtype, X-Crunchd-Gflops, "\
    "X-Crunchd-Gbps, X-Crunchd-Range, X-Crunchd-Edges, Location, Retry-After, "                \
    "Inference-Header-Content-Length"
#define CR_CORS_MAX_AGE_S "600"

typedef struct {
    bool enabled;
    bool any;                               /* "*" was given */
    int n;
    char list[1024];                        /* the origins, each NUL-terminated in place */
    const char *origins[CR_CORS_MAX_ORIGINS];
} cr_cors;

/* Parses a comma-separated list: "*" or origins "scheme://host[:port]" (http or https, no path;
 * a trailing "/" is dropped). Empty: disabled. -1 with err naming the bad entry. */
int cr_cors_load(cr_cors *c, const char *list, char *err, size_t errlen);

/* Whether a request's Origin may read our answers (false when disabled or origin is NULL). */
bool cr_cors_allows(const cr_cors *c, const char *origin);

#endif
