/* The HTTP front: libmicrohttpd with its internal thread pool on epoll. Routes live in
 * routes.c; this file owns connections, bodies, suspension and the per-request log line. */
#ifndef CRUNCHD_HTTP_H
#define CRUNCHD_HTTP_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "engine.h"
#include "job_table.h"

typedef struct cr_http cr_http;

typedef struct {
    const cr_config *cfg;
    cr_engine *engine;
    cr_job_table *jobs;
} cr_http_deps;

/* Starts listening; the bound port is in *port (useful with --port 0). NULL with err. */
cr_http *cr_http_start(const cr_http_deps *deps, uint16_t *port, char *err, size_t errlen);
void cr_http_stop(cr_http *h);
/* Cancels the jobs of synchronous clients that hung up (a suspended connection is not polled
 * by libmicrohttpd, so we peek at its socket). Called a few times a second. */
void cr_http_tick(cr_http *h);
/* Requests begun and not yet completed (a drain waits for the answers in flight). */
int cr_http_active(const cr_http *h);

#endif
