/* The HTTP front: libmicrohttpd with its internal thread pool. This file owns the daemon, the
 * three stages of every request (route and check, body, dispatch), its completion and the
 * per-request log line; routes.c says which handler a path gets. */
#ifndef CRUNCHD_HTTP_LISTENER_H
#define CRUNCHD_HTTP_LISTENER_H

#include <stdbool.h>
#include <stdint.h>

#include "server/http/conn.h"

/* Loads what the HTTP flags name (CORS origins, the token file, TLS's key pair and priorities,
 * which libmicrohttpd is asked to accept) and tests that the port is free, listening nowhere yet:
 * main calls it before the engine, which on cuda takes seconds to start (workers, the
 * autotune), so that a typo in --tls-key or a busy --port is refused at once. NULL with err. */
cr_http *cr_http_prepare(const cr_config *cfg, char *err, size_t errlen);
/* Starts listening with what cr_http_prepare loaded; the bound port is in *port (useful with
 * --port 0). -1 with err; h is still the caller's to stop. */
int cr_http_listen(cr_http *h, const cr_http_deps *deps, uint16_t *port, char *err, size_t errlen);
/* Both at once (the fuzz harnesses' daemons). NULL with err. */
cr_http *cr_http_start(const cr_http_deps *deps, uint16_t *port, char *err, size_t errlen);
/* Stops listening (if it started) and frees h. */
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
