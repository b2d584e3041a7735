/* The Unix domain socket of --unix-socket: created, bound and listening here, then handed to a
 * second libmicrohttpd daemon (listener.c) that serves the same routes as TCP. Local clients
 * skip the TCP stack; the file's mode and group say who may connect, SO_PEERCRED who did.
 * Per-IP limits and TLS do not apply on it (docs/operations.md). */
#ifndef CRUNCHD_HTTP_UNIX_LISTENER_H
#define CRUNCHD_HTTP_UNIX_LISTENER_H

#include <stddef.h>
#include <sys/types.h>

typedef struct {
    char path[108];  /* sun_path's size */
    int fd;          /* listening; -1 when none */
    dev_t dev;       /* the file bound: only that one is unlinked at exit, never a successor's */
    ino_t ino;
} cr_unix_socket;

/* Listens on path with mode (its permission bits) and group (a name, a gid, or "" for the
 * daemon's). A socket file nothing listens on (connect() refused) is a stale one and replaced;
 * one a live daemon answers on, or a file that is not a socket, is refused. -1 with err. */
int cr_unix_listen(cr_unix_socket *s, const char *path, unsigned mode, const char *group, int backlog,
                   char *err, size_t errlen);

/* Unlinks the socket file if it is still the one we bound (the listening fd belongs to
 * libmicrohttpd once handed over, which closes it). */
void cr_unix_remove(cr_unix_socket *s);

#endif
