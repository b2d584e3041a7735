/* One line per request (and a few lifecycle lines) to stderr, as text or JSON. Never bodies or
 * tokens. Every string is escaped for the format (clients choose methods, paths and names). */
#ifndef CRUNCHD_LOG_H
#define CRUNCHD_LOG_H

#include <stdbool.h>

/* Which requests get an access log line (--access-log): all, only 4xx and 5xx, or none. */
typedef enum { CR_ACCESS_LOG_ALL, CR_ACCESS_LOG_ERRORS, CR_ACCESS_LOG_OFF } cr_access_log;

void cr_log_init(bool json, cr_access_log access);
/* Writes the access lines gathered so far (the housekeeping tick calls it; so does exit). */
void cr_log_flush(void);
/* A lifecycle message: level is "info", "warn" or "error"; written at once, after the access
 * lines gathered before it. */
void cr_log(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

typedef struct {
    const char *method, *path;
    const char *peer;          /* "127.0.0.1", "unix:uid=1000,pid=42" (cr_peer_label) */
    int status;
    double ms;
    unsigned long long bytes_in;
    const char *request_id;  /* X-Request-Id: the client's, or the one made for it */
    const char *id, *op, *kernel, *shape, *error_code;
    const char *grpc_status;   /* a gRPC call's status code ("NOT_FOUND"); NULL for HTTP */
    double queue_ms, h2d_ms, kernel_ms, d2h_ms;
} cr_log_request;

/* The access log line: level info for 1xx-3xx, warn for 4xx (499 included), error for 5xx.
 * Gathered per thread and written within about 0.1 s (cr_log_flush). */
void cr_log_req(const cr_log_request *r);
const char *cr_log_level_of_status(int status);

#endif
