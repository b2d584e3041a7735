/* One HTTP/2 connection of the gRPC listener: nghttp2's server session over a transport
 * (grpc_transport.h), its streams as calls (grpc_call.h), and its bytes each way: what arrives is
 * parsed as it is read, what goes out waits in an output queue (grpc_outq.h) that refers to the
 * answers' buffers instead of copying them. Driven by its event loop (grpc_listener.c), on that
 * loop's thread only. */
#ifndef CRUNCHD_GRPC_CONN_H
#define CRUNCHD_GRPC_CONN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "server/grpc/grpc_done.h"
#include "server/grpc/grpc_server.h"
#include "server/grpc/grpc_transport.h"

typedef struct cr_grpc_conn cr_grpc_conn;

/* The read buffer a loop's connections share: what is read is parsed (and copied where it goes)
 * before the next read, so one per loop is enough, and an idle connection costs no buffer. */
#define CR_GRPC_READ_BUF (256u << 10)

/* A connection on tp (taken) from the peer at sa, reading through rbuf (CR_GRPC_READ_BUF bytes,
 * the loop's). dirty: the loop's list of connections with something to write, which the
 * connection joins itself (flushed by the loop). NULL when out of memory (tp is freed). */
cr_grpc_conn *cr_grpc_conn_new(cr_grpc_server *srv, cr_grpc_done *done, cr_grpc_transport *tp,
                               const struct sockaddr *sa, uint8_t *rbuf, cr_grpc_conn **dirty);
/* The socket is readable: handshakes, reads a bounded amount and parses it, running what it
 * completes; then writes. */
void cr_grpc_conn_read(cr_grpc_conn *c);
/* Writes what it can of what is due (nghttp2's frames, the calls' answers). */
void cr_grpc_conn_flush(cr_grpc_conn *c);
/* The next connection on the dirty list (and off it); whether it is on it (again). */
cr_grpc_conn *cr_grpc_conn_next_dirty(cr_grpc_conn *c);
bool cr_grpc_conn_is_dirty(const cr_grpc_conn *c);
/* The loop's record of it. */
void cr_grpc_conn_set_owner(cr_grpc_conn *c, void *owner);
void *cr_grpc_conn_owner(const cr_grpc_conn *c);

/* What the loop waits for: more to read without waiting (TLS's buffer, or the read's bound),
 * the socket writable. */
bool cr_grpc_conn_more_to_read(const cr_grpc_conn *c);
bool cr_grpc_conn_wants_write(const cr_grpc_conn *c);
/* false once the connection is over: free it. */
bool cr_grpc_conn_alive(const cr_grpc_conn *c);
int cr_grpc_conn_fd(const cr_grpc_conn *c);

/* The drain began: GOAWAY (the streams it has go on; no new ones). */
void cr_grpc_conn_goaway(cr_grpc_conn *c);
/* Deadlines of its calls, and its own idleness: a connection with no call for --conn-timeout-s
 * gets GOAWAY (a client reconnects when it needs to). */
void cr_grpc_conn_tick(cr_grpc_conn *c, double now);
void cr_grpc_conn_cut_off(cr_grpc_conn *c);

/* Closes it: its calls end (cancelled unless they had), their jobs come back later. */
void cr_grpc_conn_free(cr_grpc_conn *c);

#endif
