/* Who serves each connection of the Unix socket. We accept them ourselves and peek at each
 * one's first request head: a big binary upload (direct.h) is served on a thread of its own,
 * reading the body straight into its arrays; every other connection is handed to libmicrohttpd
 * (MHD_add_connection) with its bytes unread, and is served there as on TCP. A direct
 * connection that stays open comes back here for its next request. A connection whose head is
 * not whole within a second goes to libmicrohttpd too; one that sends nothing is closed after
 * --read-timeout-s (or --conn-timeout-s), as libmicrohttpd would. */
#ifndef CRUNCHD_HTTP_UNIX_ACCEPT_H
#define CRUNCHD_HTTP_UNIX_ACCEPT_H

#include "server/http/conn.h"

typedef struct cr_unix_accept cr_unix_accept;

/* Takes listen_fd (closed at stop); mhd must have been started with MHD_USE_NO_LISTEN_SOCKET. */
cr_unix_accept *cr_unix_accept_start(cr_http *h, int listen_fd, struct MHD_Daemon *mhd, char *err, size_t errlen);
/* Stops accepting, closes the connections still being looked at, and waits for the direct
 * requests in flight (they end at once: a drain has waited for them already). */
void cr_unix_accept_stop(cr_unix_accept *a);

#endif
