/* Big binary uploads, read by us instead of libmicrohttpd (issue 15), on the Unix socket and
 * over TCP without TLS: its read buffer put every byte through two copies in a row on one
 * thread, and a 134 MB upload arrived at half a bare socket's rate. A request is taken
 * (cr_direct_takes) when it is a POST (or a stream part's PUT) of at least --direct-min-kb of .npy, multipart .npy or raw
 * bytes to /v1/gemm, /v1/ata, /v1/histogram or /v1/jobs, framed by one Content-Length, not coded,
 * with a valid X-Request-Id and the bearer token when auth is on, while the daemon is not
 * draining; every other request, and every refusal of the head, stays with libmicrohttpd
 * (acceptor.c hands it over).
 *
 * A taken request runs through the same cr_conn and the route's own handler as any other: only
 * the transport differs (c->direct): cr_header, the query, cr_queue and the sync wait are served
 * from here. The arrays' bytes are received straight into their buffers (pinned on cuda, so the
 * device copies overlap the upload), the job is waited for on this thread, and the answer is
 * written with one sendmsg straight from the job's output. Not here: compressed answers (a
 * direct answer is never coded) and HTTP/1.0. */
#ifndef CRUNCHD_HTTP_DIRECT_H
#define CRUNCHD_HTTP_DIRECT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>

#include "server/http/conn.h"
#include "server/http/http_head.h"

typedef struct cr_direct cr_direct;

/* min_kb: the socket's threshold (0: none taken). */
bool cr_direct_takes(cr_http *h, const cr_head *hd, int min_kb);

/* Serves the request whose head hd is next, unread, on fd (non-blocking; peer: its address from
 * accept()): its answer, or its end when the client breaks off. Whether fd may carry another
 * request. */
bool cr_direct_serve(cr_http *h, int fd, const struct sockaddr *peer, const cr_head *hd, const _Atomic bool *stop);

#endif
