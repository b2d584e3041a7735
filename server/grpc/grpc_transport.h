/* How a gRPC connection's bytes move: a socket as it is (h2c, prior knowledge) or through TLS
 * (grpc_tls.h). Non-blocking both ways; the connection (grpc_conn.h) never knows which. The
 * fuzz harness plugs in one of its own. */
#ifndef CRUNCHD_GRPC_TRANSPORT_H
#define CRUNCHD_GRPC_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

enum { CR_IO_AGAIN = -2, CR_IO_ERROR = -1 };

typedef struct cr_grpc_transport cr_grpc_transport;

typedef struct {
    /* Bytes read (> 0), 0 when the peer closed, CR_IO_AGAIN or CR_IO_ERROR. */
    ssize_t (*read)(cr_grpc_transport *t, void *buf, size_t n);
    /* Bytes written (> 0), CR_IO_AGAIN or CR_IO_ERROR. */
    ssize_t (*writev)(cr_grpc_transport *t, const struct iovec *iov, int n);
    /* 1 once the transport carries HTTP/2 (at once for a plain socket), 0 while a handshake is
     * under way (wait for the socket), -1 when it failed. */
    int (*handshake)(cr_grpc_transport *t);
    /* Bytes already decrypted and waiting: read them before waiting for the socket. */
    bool (*pending)(cr_grpc_transport *t);
    /* Whether the handshake's next step writes (wait for the socket to be writable). */
    bool (*wants_write)(cr_grpc_transport *t);
    void (*free)(cr_grpc_transport *t);
} cr_grpc_transport_ops;

struct cr_grpc_transport {
    const cr_grpc_transport_ops *ops;
    int fd; /* the socket, closed by free; -1 for a harness's transport */
};

/* The socket fd (non-blocking) as it is. NULL when out of memory (fd then stays the caller's). */
cr_grpc_transport *cr_grpc_plain_transport(int fd);

#endif
