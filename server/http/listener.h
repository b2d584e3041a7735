/* The HTTP front: libmicrohttpd with its internal thread pool. This file owns the daemon, the
 * three stages of every request (route and check, body, dispatch), its completion and the
 * per-request log line; routes.c says which handler a path gets. */
#ifndef CRUNCHD_HTTP_LISTENER_H
#define CRUNCHD_HTTP_LISTENER_H

#include <stdbool.h>
#include <stdint.h>

#include "server/http/conn.h"

/* Starts listening; the bound port is in *port (useful with --port 0). NULL with err. */
cr_http *cr_http_start(const cr_http_deps *deps, uint16_t *port, char *err, size_t errlen);
/* Loads what the HTTP flags name (CORS origins, the token file, TLS's key pair and priorities,
 * which libmicrohttpd is asked to accept) and lets it go:
 * main calls it before the engine, which on cuda takes seconds to start (workers, the
 * autotune), so that a typo in --tls-key is refused at once. -1 with err: as cr_http_start's. */
int cr_http_check(const cr_config *cfg, char *err, size_t errlen);
void cr_http_stop(cr_http *h);
/* Cancels the jobs of synchronous clients that hung up. Called a few times a second. */
void cr_http_tick(cr_http *h);
/* Requests begun and not yet completed (a drain waits for the answers in flight). */
int cr_http_active(const cr_http *h);
/* The drain ran out: sync requests still waiting for their jobs are answered 503 draining now.
 * Returns how many. */
int cr_http_cut_off(cr_http *h);
/* Sync requests not yet complete. cr_http_stop must wait for 0: libmicrohttpd aborts the process
 * when it is stopped with a connection suspended. */
int cr_http_waiting(cr_http *h);


#endif
