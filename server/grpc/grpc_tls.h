/* gRPC over TLS: the key pair of --tls-cert/--tls-key (read as server/http/tls.h reads them for
 * HTTPS) and --tls-priorities, as GnuTLS credentials shared by every connection, and a transport
 * (grpc_transport.h) that handshakes each connection without blocking and offers ALPN "h2", which
 * gRPC clients require. */
#ifndef CRUNCHD_GRPC_TLS_H
#define CRUNCHD_GRPC_TLS_H

#include <stddef.h>

#include "server/config.h"
#include "server/grpc/grpc_transport.h"

typedef struct cr_grpc_tls cr_grpc_tls;

/* The credentials of cfg's --tls-cert/--tls-key into *out; *out NULL when TLS is off. -1 with
 * err when the files cannot be read or GnuTLS takes neither them nor the priority string. */
int cr_grpc_tls_load(const cr_config *cfg, cr_grpc_tls **out, char *err, size_t errlen);
void cr_grpc_tls_free(cr_grpc_tls *t);

/* A TLS server session on fd (non-blocking), taking the fd; NULL when it cannot be made (fd is
 * then still the caller's). */
cr_grpc_transport *cr_grpc_tls_transport(cr_grpc_tls *tls, int fd);

#endif
