/* Who is on the other end of a connection: an IP address over TCP, a uid and pid over the Unix
 * socket (SO_PEERCRED, as the kernel saw them at connect()). For the log line, and as the client
 * that per-client limits count against. */
#ifndef CRUNCHD_HTTP_PEER_H
#define CRUNCHD_HTTP_PEER_H

#include <arpa/inet.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

#define CR_PEER_CLIENT_MAX 64 /* "ip:" and an IPv6 address, "uid:N", "token" */

typedef struct {
    bool is_unix;
    uid_t uid;                     /* unix peers */
    pid_t pid;                     /* unix peers; 0 when not visible (another pid namespace) */
    char addr[INET6_ADDRSTRLEN];   /* TCP peers; "" when unknown */
} cr_peer;

/* The peer of conn; a unix peer whose credentials cannot be read has uid -1 and pid 0. */
void cr_peer_read(struct MHD_Connection *conn, cr_peer *out);
/* The peer at sa, as accept() gave it (acceptor.c); fd: its socket, for a Unix peer's
 * credentials. */
void cr_peer_from_addr(const struct sockaddr *sa, int fd, cr_peer *out);
/* "127.0.0.1", or "unix:uid=1000,pid=42": how the log line names it. */
void cr_peer_label(const cr_peer *p, char *out, size_t n);
/* The client of a request for per-client limits: "token" when it carried the bearer token
 * (one shared token is one client), else "ip:ADDR" or "uid:N". */
void cr_peer_client(const cr_peer *p, bool token, char *out, size_t n);

#endif
