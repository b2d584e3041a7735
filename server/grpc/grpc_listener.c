/* The gRPC listener; see grpc_listener.h.
 *
 * Why nghttp2 and protobuf-c, and not the gRPC C core library (grpc/grpc's libgrpc):
 *  - Dependencies. libgrpc drags in abseil, re2, c-ares, upb, BoringSSL or OpenSSL and its own
 *    build; Debian's packages (libgrpc-dev) are C++-centred, follow gRPC's release cadence, and
 *    bring their own TLS stack beside the GnuTLS that HTTPS already uses. nghttp2 and protobuf-c
 *    are two small, stable C libraries (Debian: libnghttp2-14, libprotobuf-c1) that do one thing
 *    each: HTTP/2 framing, HPACK and flow control; protobuf messages from our own .proto files.
 *  - Threading. libgrpc runs its own thread pools (executors, pollers, timers) and completion
 *    queues, which would sit beside libmicrohttpd's pool and the engine's workers with a second
 *    scheduler's idea of the cores. Here the threads are ours: a few epoll loops (--grpc-threads),
 *    each owning its connections; a finished job's on_done only queues it and writes an eventfd
 *    (grpc_done.h), so no worker ever blocks on the network and no lock is held across a call.
 *  - Zero copy of big tensors. libgrpc hands a message to the application as a grpc_byte_buffer
 *    of slices, which the protobuf layer copies again when it parses bytes fields, and takes an
 *    answer as slices it owns. Here a request is received into one buffer charged to the budget
 *    as soon as its 5-byte prefix says how long it is, raw_input_contents are read in place from
 *    it into the tensors' (pinned) buffers (infer_request.h), and an answer's tensors go from the
 *    job's output buffer to the socket (DATA frames nghttp2 never copies: grpc_conn.c).
 *  - The engine. A call is a request of the KServe decoder and a job of the engine like /v2's:
 *    the same limits, budget, host path, queue, batching, deadlines and drain, and the access
 *    log and metrics, without an adapter between two runtimes' lifecycles. libgrpc's server API
 *    (or its C++ one, which Triton uses) would own the call's lifetime and its threads.
 * What we give up is libgrpc's breadth (xDS, retries, channelz, ALTS); a server of one service
 * needs none of it, and the gRPC protocol (doc/PROTOCOL-HTTP2.md) is small enough to follow here:
 * grpc_frame.h, grpc_metadata.h, grpc_status.h. */
#include "server/grpc/grpc_listener.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/grpc/grpc_frame.h"
#include "server/grpc/grpc_loop.h"
#include "server/grpc/grpc_server.h"
#include "server/grpc/infer_request.h"
#include "server/http/unix_listener.h"
#include "server/obs/log.h"

#define MAX_LOOPS 64

struct cr_grpc {
    cr_grpc_server srv;
    char bind[64];
    int port;        /* as asked: -1 any free one; 0 no TCP */
    uint16_t bound;
    int listen_fd;   /* TCP's; -1 when none */
    cr_unix_socket unix_sock; /* --grpc-unix-socket's; its fd -1 when none */
    cr_grpc_loop *loops[MAX_LOOPS];
    int n_loops;
};

/* The address gRPC binds: --grpc-bind, else --bind's; "" when there is none (--bind none). */
static const char *bind_address(const cr_config *cfg)
{
    if (cfg->grpc_bind[0])
        return cfg->grpc_bind;
    return cr_config_tcp(cfg) ? cfg->bind : "";
}

static int make_addr(const char *bind, int port, struct sockaddr_storage *ss, socklen_t *len, char *err,
                     size_t errlen)
{
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    uint16_t p = htons((uint16_t)(port > 0 ? port : 0));
    if (inet_pton(AF_INET, bind, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = p;
        *len = sizeof *v4;
        return 0;
    }
    if (inet_pton(AF_INET6, bind, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = p;
        *len = sizeof *v6;
        return 0;
    }
    snprintf(err, errlen, "--grpc-bind: '%s' is not an IPv4 or IPv6 address", bind);
    return -1;
}

/* The socket bound (SO_REUSEADDR, so sockets in TIME_WAIT do not count; SO_REUSEPORT only with
 * --reuse-port, as for HTTP); -1 with err, a busy port named. listening: listen on it too. */
static int bind_socket(const cr_grpc *g, bool reuse_port, bool listening, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (make_addr(g->bind, g->port, &ss, &len, err, errlen) < 0)
        return -1;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | (listening ? SOCK_NONBLOCK : 0), 0), one = 1;
    if (fd < 0) {
        snprintf(err, errlen, "gRPC: socket: %s", strerror(errno));
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (reuse_port)
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, len) == 0 && (!listening || listen(fd, 1024) == 0))
        return fd;
    int e = errno;
    close(fd);
    if (e == EADDRINUSE)
        snprintf(err, errlen, "cannot listen on %s port %d for gRPC: the port is in use by another process "
                 "(another crunchd?); choose another --grpc-port, or --grpc-port 0 to turn gRPC off", g->bind, g->port);
    else
        snprintf(err, errlen, "cannot listen on %s port %d for gRPC: %s", g->bind, g->port, strerror(e));
    return -1;
}

int cr_grpc_prepare(const cr_config *cfg, cr_grpc **out, char *err, size_t errlen)
{
    *out = NULL;
    bool tcp = cfg->grpc_port != 0 && bind_address(cfg)[0];
    if (!tcp && !cfg->grpc_unix_socket[0])
        return 0;
    cr_grpc *g = calloc(1, sizeof *g);
    if (!g)
        return snprintf(err, errlen, "out of memory"), -1;
    g->listen_fd = g->unix_sock.fd = -1;
    g->port = tcp ? cfg->grpc_port : 0;
    snprintf(g->bind, sizeof g->bind, "%s", bind_address(cfg));
    g->srv.cfg = cfg;
    int fd = -1;
    if (cr_auth_load(&g->srv.auth, cfg->auth_token_file, cfg->metrics_auth, err, errlen) < 0 ||
        cr_grpc_tls_load(cfg, &g->srv.tls, err, errlen) < 0 ||
        (g->port > 0 && !cfg->reuse_port && (fd = bind_socket(g, false, false, err, errlen)) < 0)) {
        cr_grpc_stop(g);
        return -1;
    }
    if (fd >= 0)
        close(fd); /* free now; bound for good once the engine is up */
    *out = g;
    return 0;
}

/* The event loops: --grpc-threads, or as many as the HTTP threads (sized by the engine). */
static int loop_count(const cr_config *cfg)
{
    int n = cfg->grpc_threads > 0 ? cfg->grpc_threads : cfg->http_threads;
    return n < 1 ? 1 : n > MAX_LOOPS ? MAX_LOOPS : n;
}

static int start_loops(cr_grpc *g, char *err, size_t errlen)
{
    int n = loop_count(g->srv.cfg);
    for (int i = 0; i < n; i++)
        if (!(g->loops[g->n_loops] = cr_grpc_loop_new(&g->srv, err, errlen)))
            return -1;
        else
            g->n_loops++;
    for (int i = 0; i < n; i++) { /* the first loop accepts on TCP, the second (or the first) on the Unix socket */
        int fds[CR_GRPC_LISTEN_MAX] = {i == 0 ? g->listen_fd : -1, i == (n > 1) ? g->unix_sock.fd : -1};
        if (cr_grpc_loop_start(g->loops[i], fds, g->loops, n, err, errlen) < 0)
            return -1;
    }
    return 0;
}

/* --grpc-unix-socket listening, non-blocking as the loops accept (mode and group as HTTP's). */
static int listen_unix(cr_grpc *g, char *err, size_t errlen)
{
    const cr_config *cfg = g->srv.cfg;
    if (!cfg->grpc_unix_socket[0])
        return 0;
    if (cr_unix_listen(&g->unix_sock, cfg->grpc_unix_socket, cfg->unix_mode, cfg->unix_socket_group, 1024, err,
                       errlen) < 0)
        return -1;
    int flags = fcntl(g->unix_sock.fd, F_GETFL);
    if (flags < 0 || fcntl(g->unix_sock.fd, F_SETFL, flags | O_NONBLOCK) < 0)
        return snprintf(err, errlen, "--grpc-unix-socket: %s", strerror(errno)), -1;
    return 0;
}

static uint16_t bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        return 0;
    return ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                          : ((struct sockaddr_in *)&ss)->sin_port);
}

int cr_grpc_listen(cr_grpc *g, cr_engine *e, uint16_t *port, char *err, size_t errlen)
{
    *port = 0;
    if (!g)
        return 0;
    cr_grpc_server *s = &g->srv;
    const cr_backend *b = cr_engine_backend(e);
    s->engine = e;
    s->lim = cr_request_limits(s->cfg);
    /* tensors land in the backend's host memory (pinned on cuda), never its device sinks: the
     * KServe decoder reads some of them on the host */
    s->alloc = (cr_host_allocator){b->host_alloc, b->host_free, b->host_ready, NULL, 0};
    s->messages = (cr_grpc_alloc){b->host_alloc, b->host_free, cr_grpc_infer_align};
    uint64_t max = (uint64_t)s->cfg->max_body_mb << 20;
    s->max_message = max < CR_GRPC_MESSAGE_MAX ? max : CR_GRPC_MESSAGE_MAX;
    if ((g->port != 0 && (g->listen_fd = bind_socket(g, s->cfg->reuse_port, true, err, errlen)) < 0) ||
        listen_unix(g, err, errlen) < 0 || start_loops(g, err, errlen) < 0)
        return -1;
    *port = g->bound = g->listen_fd >= 0 ? bound_port(g->listen_fd) : 0;
    if (s->auth.enabled)
        cr_log("info", "gRPC: every method but grpc.health.v1.Health needs the bearer token (authorization metadata)");
    return 0;
}

void cr_grpc_describe(const cr_grpc *g, char *out, size_t n)
{
    char tcp[96] = "";
    if (!g) {
        snprintf(out, n, "off");
        return;
    }
    if (g->listen_fd >= 0)
        snprintf(tcp, sizeof tcp, "%s:%u%s", g->bind, (unsigned)g->bound, g->srv.tls ? " (TLS)" : "");
    snprintf(out, n, "%s%s%s%s", tcp, tcp[0] && g->unix_sock.fd >= 0 ? " and " : "",
             g->unix_sock.fd >= 0 ? "unix:" : "", g->unix_sock.fd >= 0 ? g->unix_sock.path : "");
}

static void wake_all(cr_grpc *g)
{
    for (int i = 0; i < g->n_loops; i++)
        cr_grpc_loop_wake(g->loops[i]);
}

void cr_grpc_drain(cr_grpc *g)
{
    if (!g)
        return;
    atomic_store(&g->srv.draining, true);
    wake_all(g);
}

int cr_grpc_cut_off(cr_grpc *g)
{
    if (!g)
        return 0;
    int waiting = atomic_load(&g->srv.waiting);
    atomic_store(&g->srv.cut_off, true);
    wake_all(g);
    return waiting;
}

int cr_grpc_active(const cr_grpc *g) { return g ? atomic_load(&g->srv.active) : 0; }

void cr_grpc_stop(cr_grpc *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->n_loops; i++)
        cr_grpc_loop_free(g->loops[i]);
    if (g->listen_fd >= 0)
        close(g->listen_fd);
    if (g->unix_sock.fd >= 0) {
        close(g->unix_sock.fd);
        cr_unix_remove(&g->unix_sock);
    }
    cr_grpc_tls_free(g->srv.tls);
    cr_auth_clear(&g->srv.auth);
    free(g);
}
