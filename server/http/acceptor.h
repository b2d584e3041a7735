/* Who serves each connection of a socket we accept on ourselves: the Unix socket, and TCP
 * without TLS. We peek at each connection's first request head: a big binary upload (direct.h)
 * is served on a thread of ours, reading the body straight into its arrays; every other
 * connection is handed to libmicrohttpd (MHD_add_connection) with its bytes unread, and is served
 * there as if libmicrohttpd had accepted it. A direct connection that stays open comes back here
 * for its next request. A connection whose head is not whole within a second goes to
 * libmicrohttpd too; one that sends nothing is closed after --read-timeout-s (or
 * --conn-timeout-s), as libmicrohttpd would.
 *
 * --max-connections and --max-connections-per-ip are kept here as libmicrohttpd kept them
 * (conn_limits.h): at the total, the socket is not accepted on (new clients wait in the listen
 * backlog); over the per-address limit, a new connection is closed at once. */
#ifndef CRUNCHD_HTTP_ACCEPTOR_H
#define CRUNCHD_HTTP_ACCEPTOR_H

#include <sys/socket.h>

#include "server/http/conn.h"

typedef struct cr_acceptor cr_acceptor;

typedef struct {
    const char *transport;     /* "unix" or "tcp": the log's and the metrics' name */
    int listen_fd;             /* non-blocking; closed at stop */
    struct MHD_Daemon *mhd;    /* quiesced: it takes connections only from us */
    int direct_min_kb;         /* direct.h's threshold; 0: every connection goes to mhd */
    unsigned max_connections, max_per_ip; /* max_per_ip 0: none */
} cr_acceptor_cfg;

/* Sets *out before its thread starts (libmicrohttpd's closes find it there); 0, or -1 with err. */
int cr_acceptor_start(cr_http *h, const cr_acceptor_cfg *cfg, cr_acceptor **out, char *err, size_t errlen);
/* From libmicrohttpd's MHD_CONNECTION_NOTIFY_CLOSED: a connection we handed over has closed. */
void cr_acceptor_closed(cr_acceptor *a, const struct sockaddr *peer);
/* Stops accepting, closes the connections still being looked at, and waits for the direct
 * requests in flight (they end at once: a drain has waited for them already). */
void cr_acceptor_stop(cr_acceptor *a);
/* After stop and after libmicrohttpd's daemon has stopped (its closes are counted here). */
void cr_acceptor_free(cr_acceptor *a);

#endif
