/* A gRPC connection over a plain socket; see grpc_transport.h. */
#include "server/grpc/grpc_transport.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static ssize_t plain_read(cr_grpc_transport *t, void *buf, size_t n)
{
    for (;;) {
        ssize_t k = recv(t->fd, buf, n, 0);
        if (k >= 0)
            return k;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? CR_IO_AGAIN : CR_IO_ERROR;
    }
}

static ssize_t plain_writev(cr_grpc_transport *t, const struct iovec *iov, int n)
{
    struct msghdr m = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n};
    for (;;) {
        ssize_t k = sendmsg(t->fd, &m, MSG_NOSIGNAL);
        if (k >= 0)
            return k;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? CR_IO_AGAIN : CR_IO_ERROR;
    }
}

static int plain_handshake(cr_grpc_transport *t)
{
    (void)t;
    return 1;
}

static bool plain_none(cr_grpc_transport *t)
{
    (void)t;
    return false;
}

static void plain_free(cr_grpc_transport *t)
{
    if (t->fd >= 0)
        close(t->fd);
    free(t);
}

static const cr_grpc_transport_ops plain_ops = {plain_read, plain_writev, plain_handshake, plain_none, plain_none,
                                                plain_free};

cr_grpc_transport *cr_grpc_plain_transport(int fd)
{
    cr_grpc_transport *t = malloc(sizeof *t);
    if (!t)
        return NULL;
    t->ops = &plain_ops;
    t->fd = fd;
    return t;
}
