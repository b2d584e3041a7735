/* An event loop of the gRPC listener: one thread, its epoll set, its connections
 * (grpc_conn.h) and the eventfd its finished jobs wake it through (grpc_done.h). Everything a
 * connection and its calls do happens on their loop's thread; the engine's workers only queue
 * finished jobs to it. One loop also accepts, handing the connections round-robin to all. */
#ifndef CRUNCHD_GRPC_LOOP_H
#define CRUNCHD_GRPC_LOOP_H

#include <stddef.h>

#include "server/grpc/grpc_server.h"

typedef struct cr_grpc_loop cr_grpc_loop;

/* A loop of srv, not started. NULL with err. */
cr_grpc_loop *cr_grpc_loop_new(cr_grpc_server *srv, char *err, size_t errlen);
/* The listening sockets one loop may watch: TCP and the Unix socket. */
#define CR_GRPC_LISTEN_MAX 2

/* Starts its thread. Each listen_fd >= 0 (non-blocking): this loop accepts on it and gives the
 * connections in turn to the n loops of all (itself among them); those of a Unix socket are
 * never TLS. -1 with err. */
int cr_grpc_loop_start(cr_grpc_loop *l, const int listen_fd[CR_GRPC_LISTEN_MAX], cr_grpc_loop **all, int n,
                       char *err, size_t errlen);
/* srv's drain or cut-off flag changed: the loop looks at it now. */
void cr_grpc_loop_wake(cr_grpc_loop *l);
/* Stops the thread, closing its connections (their calls end; jobs still out come back through
 * the loop's queue, which is emptied last), and frees the loop. Call once no job can finish any
 * more (the engine stopped). */
void cr_grpc_loop_free(cr_grpc_loop *l);

#endif
