/* The HTTP front; see listener.h. Every request passes three stages in the access handler:
 * routing (first call: method, path, content type, declared length), body upload (bounded),
 * dispatch to its handler. */
#include "server/http/listener.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <unistd.h>

#include "kernels/registry.h"
#include "server/clock.h"
#include "server/codec/json_encode.h"
#include "server/codec/media_type.h"
#include "server/http/acceptor.h"
#include "server/http/body.h"
#include "server/http/body_coding.h"
#include "server/http/preflight.h"
#include "server/http/framing.h"
#include "server/http/respond.h"
#include "server/http/routes.h"
#include "server/http/submit.h"
#include "server/http/request_end.h"
#include "server/http/upload.h"
#include "server/kserve/kserve.h"
#include "server/obs/log.h"

static enum MHD_Result refuse_405(cr_conn *c, const char *allow)
{
    cr_error e;
    size_t len = 0;
    cr_fail(&e, 405, "method_not_allowed", "", "%s is not allowed on %s; allowed: %s", c->method,
            c->path, allow);
    snprintf(c->error_code, sizeof c->error_code, "%s", e.code);
    char *body = c->kserve ? cr_json_error_v2(&e, &len) : cr_json_error(&e, &len);
    struct MHD_Response *r = cr_json_response(c, body, len);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    return cr_queue(c, 405, r);
}

static bool is_json_type(const char *ct)
{
    /* no type at all (curl -d without -H): be lenient, the body is still checked */
    return !ct || cr_media_type_is(ct, "application/json");
}

/* 401 with the challenge RFC 6750 asks for; the same answer for a missing or a wrong token. */
static enum MHD_Result refuse_401(cr_conn *c)
{
    c->extra_header = MHD_HTTP_HEADER_WWW_AUTHENTICATE;
    snprintf(c->extra_value, sizeof c->extra_value, "Bearer");
    return cr_refuse(c, 401, "unauthorized", "Authorization",
                     "this daemon needs 'Authorization: Bearer <token>' (see --auth-token-file)");
}

/* First call of a request: route it and check what can be refused before any body arrives. */
static enum MHD_Result begin(cr_http *h, struct MHD_Connection *conn, const char *url,
                             const char *method, void **con_cls)
{
    cr_conn *c = calloc(1, sizeof *c);
    if (!c)
        return MHD_NO;
    *con_cls = c;
    atomic_fetch_add(&h->active, 1);
    c->h = h;
    c->conn = conn;
    c->t0 = cr_now();
    c->label = CR_ROUTE_OTHER;
    snprintf(c->method, sizeof c->method, "%s", method);
    snprintf(c->path, sizeof c->path, "%s", url);
    /* every /v2 answer, 401, 404 and 405 included, in the v2 error shape tritonclient can print */
    c->kserve = strncmp(c->path, "/v2", 3) == 0 && (c->path[3] == '\0' || c->path[3] == '/');
    cr_peer_read(conn, &c->peer);
    bool id_ok = cr_request_id_take(cr_header(c, "X-Request-Id"), c->request_id) == 0; /* else one made */
    cr_error framing_err;
    if (cr_check_framing(conn, &framing_err) < 0) { /* before anything reads the body */
        c->close_after = true;
        return cr_send_error(c, &framing_err);
    }
    if (!id_ok)
        return cr_refuse(c, 400, "invalid_parameter", "X-Request-Id",
                         "X-Request-Id must be 1 to %d characters of A-Z a-z 0-9 . _ : - (this "
                         "answer's X-Request-Id was made for it)", CR_REQUEST_ID_MAX);
    if (cr_is_preflight(c)) /* browsers send no token with these */
        return cr_preflight(c);
    /* Before routing: without the token, unknown paths and known ones look the same. */
    bool exempt = cr_auth_exempt(&h->auth, c->path);
    if (!exempt && !cr_auth_check(&h->auth, cr_header(c, MHD_HTTP_HEADER_AUTHORIZATION)))
        return refuse_401(c);
    c->authenticated = h->auth.enabled && !exempt;
    char allow[128];
    const cr_route *r = cr_route_find(method, c->path, &c->id, allow, sizeof allow);
    if (!r)
        return allow[0] ? refuse_405(c, allow)
                        : cr_refuse(c, 404, "not_found", "", "no such route (see /v1/info and api/openapi.yaml)");
    c->handler = r->handler;
    c->label = r->label;
    c->kserve = r->kserve;
    if (strcmp(r->method, "POST") != 0)
        return (c->body_ignored = true), MHD_YES;
    cr_error err;
    if (cr_body_coding_begin(c, &err) < 0)
        return cr_send_error(c, &err);
    if (c->kserve)
        return cr_kserve_begin(c);
    if (!is_json_type(cr_header(c, MHD_HTTP_HEADER_CONTENT_TYPE)))
        return cr_upload_begin(c); /* .npy, multipart or raw bytes; 415 for anything else */
    c->limit = (size_t)h->deps.cfg->max_json_mb << 20;
    const char *cl = cr_header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > c->limit)
        return cr_refuse(c, 413, "too_large", "body", "the JSON body is larger than --max-json-mb");
    return MHD_YES;
}

/* A chunk of the body, decoded: into the route's reader (binary uploads stream it into their
 * arrays; JSON and KServe bodies are buffered). */
static enum MHD_Result read_body(cr_conn *c, const char *data, size_t n)
{
    if (c->upload)
        return cr_upload_feed(c, data, &n);
    cr_error err;
    int rc = cr_body_append(c, data, n, &err);
    if (rc == -1 && c->inflater) /* a coded body: refused whole once it has arrived */
        cr_fail(&err, 413, "too_large", "body", "%s (decoded)",
                c->limit_msg ? c->limit_msg : "the JSON body is larger than --max-json-mb");
    else if (rc == -1)
        return cr_refuse(c, 413, "too_large", "body", "%s",
                         c->limit_msg ? c->limit_msg : "the JSON body is larger than --max-json-mb");
    if (rc < 0)
        cr_body_refuse_later(c, &err);
    return MHD_YES;
}

static enum MHD_Result access_handler(void *cls, struct MHD_Connection *conn, const char *url,
                                      const char *method, const char *version,
                                      const char *upload_data, size_t *upload_data_size, void **con_cls)
{
    (void)version;
    cr_conn *c = *con_cls;
    if (!c) {
        const union MHD_ConnectionInfo *hs = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
        cr_read_clock_received(conn, hs ? hs->header_size : 0);
        return begin(cls, conn, url, method, con_cls);
    }
    if (*upload_data_size)
        cr_read_clock_received(conn, *upload_data_size);
    else
        cr_read_clock_stop(conn); /* the request is complete: served, no longer read */
    if (c->status) /* answered early (413/415/404/405): swallow what the client still sends */
        return (*upload_data_size = 0), MHD_YES;
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        cr_metrics_bytes_in(n);
        if (c->body_refused || c->body_ignored)
            return MHD_YES;
        return c->inflater ? cr_body_coding_feed(c, upload_data, n, read_body) : read_body(c, upload_data, n);
    }
    if (c->inflater)
        cr_body_coding_end(c);
    if (c->body_refused)
        return cr_send_error(c, &c->pending);
    if (c->waiting)
        return cr_sync_resumed(c);
    return c->handler(c);
}

static void request_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                              enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    cr_read_clock_restart(conn); /* the next request on this connection is due from now */
    cr_conn *c = *con_cls;
    if (!c)
        return;
    *con_cls = NULL;
    /* no answer was sent: too slow (read_deadline.h), or the client went away (nginx's 499) */
    bool unanswered = toe != MHD_REQUEST_TERMINATED_COMPLETED_OK;
    cr_conn_end(c, !unanswered ? 0 : cr_read_clock_was_cut(conn) ? 408 : 499);
}

static int make_addr(const char *bind, uint16_t port, struct sockaddr_storage *ss, char *err, size_t errlen)
{
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, bind, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        return 0;
    }
    if (inet_pton(AF_INET6, bind, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        return AF_INET6;
    }
    snprintf(err, errlen, "--bind: '%s' is not an IPv4 or IPv6 address", bind);
    return -1;
}

/* libmicrohttpd's own messages go through our log (escaped, in the chosen format) instead of
 * raw to stderr; the last one is kept for a start-up failure's message. Start-up is
 * single-threaded, so the buffer is only read while no other thread writes it. */
static char mhd_last_message[256];

/* cls: non-NULL for the Unix socket's daemon. Its connections come from MHD_add_connection,
 * whose sockets libmicrohttpd 0.9.75 takes for TCP: it tries TCP_NODELAY and TCP_CORK on each and
 * warns three times per answer that they failed. They cannot apply to a Unix socket (nothing
 * there delays a send), so those warnings are dropped. */
static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
    char msg[sizeof mhd_last_message];
    vsnprintf(msg, sizeof msg, fmt, ap);
    msg[strcspn(msg, "\n")] = '\0';
    if (cls && (strstr(msg, "TCP_NODELAY") || strstr(msg, "TCP_CORK") || strstr(msg, "push the data")))
        return;
    snprintf(mhd_last_message, sizeof mhd_last_message, "%s", msg);
    cr_log("warn", "libmicrohttpd: %s", msg);
}

/* Every connection's open and close: its read clock, and the count of the acceptor that handed
 * it over (acceptor.h), if any. */
static void conn_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                        enum MHD_ConnectionNotificationCode code)
{
    cr_http *h = cls;
    cr_read_deadlines_notify(&h->deadlines, conn, socket_context, code);
    if (code != MHD_CONNECTION_NOTIFY_CLOSED)
        return;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    cr_acceptor *a = sa && sa->sa_family == AF_UNIX ? h->unix_accept : h->tcp_accept;
    if (a)
        cr_acceptor_closed(a, sa);
}

/* Why libmicrohttpd could not start, in words an operator can act on. It does not report the
 * bind's errno, so a busy or forbidden port is found by trying the bind ourselves (as
 * libmicrohttpd does: SO_REUSEADDR, so sockets in TIME_WAIT do not count). */
/* The errno of a bind to ss as libmicrohttpd makes it (SO_REUSEADDR, so sockets in TIME_WAIT do
 * not count), the socket closed again; 0: it would bind. */
static int try_bind(const struct sockaddr_storage *ss)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, bind_errno = 0;
    socklen_t len = ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        bind_errno = bind(fd, (const struct sockaddr *)ss, len) == 0 ? 0 : errno;
        close(fd);
    }
    return bind_errno;
}

/* A bind that failed, in words an operator can act on; 0 when it did not. */
static int explain_bind(const cr_config *cfg, int bind_errno, char *err, size_t errlen)
{
    if (bind_errno == EADDRINUSE)
        snprintf(err, errlen, "cannot listen on %s port %d: the port is in use by another process "
                 "(another crunchd?); choose another --port, or give every process --reuse-port "
                 "to share it on purpose", cfg->bind, cfg->port);
    else if (bind_errno)
        snprintf(err, errlen, "cannot listen on %s port %d: %s", cfg->bind, cfg->port, strerror(bind_errno));
    return bind_errno ? -1 : 0;
}

static void explain_start_failure(const cr_config *cfg, const struct sockaddr_storage *ss, char *err,
                                  size_t errlen)
{
    if (explain_bind(cfg, try_bind(ss), err, errlen) == 0)
        snprintf(err, errlen, "cannot start the HTTP listener on %s port %d%s (%s)", cfg->bind, cfg->port,
                 cfg->tls_cert[0] ? " with TLS: is the key pair valid?" : "",
                 mhd_last_message[0] ? mhd_last_message : "no reason given");
}

/* libmicrohttpd's --max-connections. It splits its limit evenly over its threads, and a
 * connection handed over by an acceptor (MHD_add_connection) is queued to one thread that had
 * room when it was picked, then closed ("Server reached connection limit") if that thread is full
 * by the time it takes it, without the close notification, so the acceptor's count of it never
 * went down. With 30 threads and --max-connections 8 (a 32-core machine) most threads had a
 * limit of 0 or 1: a client's 2nd-4th connections were closed at once, and a drain waited forever
 * for connections already gone. Where an acceptor feeds it, the acceptor enforces the limits, so
 * every thread may take all of them. */
static unsigned mhd_connection_limit(const cr_config *cfg, bool fed_by_acceptor)
{
    unsigned total = (unsigned)cfg->max_connections;
    return fed_by_acceptor ? total * (unsigned)cfg->http_threads : total;
}

/* The options both daemons share: the same handlers, pool size and per-connection limits. The
 * logger comes first: libmicrohttpd reports what goes wrong with the options after it there,
 * and warned at every start (on stderr, past our log) while it was last. */
#define COMMON_OPTIONS(h, log_cls, fed_by_acceptor)                                                \
    MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, (log_cls),                                            \
    MHD_OPTION_THREAD_POOL_SIZE, (unsigned)(h)->deps.cfg->http_threads,                           \
    MHD_OPTION_CONNECTION_LIMIT, mhd_connection_limit((h)->deps.cfg, (fed_by_acceptor)),          \
    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(h)->deps.cfg->conn_timeout_s,                       \
    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(h)->deps.cfg->conn_memory_kb << 10,              \
    MHD_OPTION_NOTIFY_COMPLETED, request_completed, (h),                                          \
    MHD_OPTION_NOTIFY_CONNECTION, conn_notify, (h)

/* poll(), not epoll: libmicrohttpd 0.9.75's edge-triggered epoll misses a client's FIN that
 * arrives with the last bytes of a partial body, so abandoned uploads held their socket and
 * memory until --conn-timeout-s (found by scripts/soak.py); poll is level-triggered. */
static const unsigned BASE_FLAGS = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME |
                                   MHD_USE_ERROR_LOG;

/* The TCP socket's connections are ours to accept (acceptor.h: big uploads are read by us,
 * the rest handed to this daemon) unless TLS is on (its bytes cannot be peeked at) or the direct
 * path is off. libmicrohttpd still makes the socket (address, IPv6, SO_REUSEADDR/REUSEPORT) and is
 * then told to stop accepting on it; the limits move to the acceptor. */
static int accept_tcp(cr_http *h, char *err, size_t errlen)
{
    const cr_config *cfg = h->deps.cfg;
    int fd = MHD_quiesce_daemon(h->daemon), fl = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        snprintf(err, errlen, "cannot accept on %s port %d: %s", cfg->bind, cfg->port, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    cr_acceptor_cfg ac = {.transport = "tcp", .listen_fd = fd, .mhd = h->daemon, .direct_min_kb = cfg->direct_min_kb,
                          .max_connections = (unsigned)cfg->max_connections,
                          .max_per_ip = (unsigned)cfg->max_connections_per_ip};
    if (cr_acceptor_start(h, &ac, &h->tcp_accept, err, errlen) < 0) {
        close(fd);
        return -1;
    }
    return 0;
}

static int start_tcp(cr_http *h, uint16_t *port, char *err, size_t errlen)
{
    const cr_config *cfg = h->deps.cfg;
    struct sockaddr_storage ss;
    int fam = make_addr(cfg->bind, (uint16_t)cfg->port, &ss, err, errlen);
    if (fam < 0)
        return -1;
    bool tls = cr_tls_enabled(&h->tls), ours = !tls && cfg->direct_min_kb > 0;
    unsigned flags = BASE_FLAGS | (fam == AF_INET6 ? MHD_USE_IPv6 : 0) | (tls ? MHD_USE_TLS : 0);
    /* Without the option libmicrohttpd sets only SO_REUSEADDR (restarts do not wait for
     * TIME_WAIT); with 1 it sets SO_REUSEPORT, which lets a second daemon bind the same port and
     * silently take half the connections: only when the operator asks. */
    struct MHD_OptionItem reuse[] = {
        {cfg->reuse_port ? MHD_OPTION_LISTENING_ADDRESS_REUSE : MHD_OPTION_END, 1, NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    mhd_last_message[0] = '\0';
    h->daemon = MHD_start_daemon(
        flags, (uint16_t)cfg->port, NULL, NULL, access_handler, h,
        COMMON_OPTIONS(h, NULL, ours),
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, ours ? 0u : (unsigned)cfg->max_connections_per_ip,
        MHD_OPTION_ARRAY, h->tls.options,
        MHD_OPTION_ARRAY, reuse,
        MHD_OPTION_END);
    if (!h->daemon) {
        explain_start_failure(cfg, &ss, err, errlen);
        return -1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    *port = info ? info->port : (uint16_t)cfg->port;
    return ours ? accept_tcp(h, err, errlen) : 0;
}

/* The socket is ours to create (stale files, mode, group) and to accept on (acceptor.c: big
 * uploads are read by us, everything else is added to this libmicrohttpd daemon). No per-IP
 * limit: libmicrohttpd counts only IP addresses, and would refuse every unix peer under one. No
 * TLS: the file's permissions are the protection. */
static int start_unix(cr_http *h, char *err, size_t errlen)
{
    const cr_config *cfg = h->deps.cfg;
    if (cr_unix_listen(&h->unix_sock, cfg->unix_socket, cfg->unix_mode, cfg->unix_socket_group, 128, err,
                       errlen) < 0)
        return -1;
    /* Started on the socket so that it knows its connections are not TCP (it would set TCP
     * options on each and warn), then told to stop accepting: connections come from us. */
    h->unix_daemon = MHD_start_daemon(
        BASE_FLAGS, 0, NULL, NULL, access_handler, h,
        COMMON_OPTIONS(h, (void *)h, true),
        MHD_OPTION_LISTEN_SOCKET, h->unix_sock.fd,
        MHD_OPTION_END);
    int fl = h->unix_daemon && MHD_quiesce_daemon(h->unix_daemon) == h->unix_sock.fd ? fcntl(h->unix_sock.fd, F_GETFL) : -1;
    cr_acceptor_cfg ac = {.transport = "unix", .listen_fd = h->unix_sock.fd, .mhd = h->unix_daemon,
                          .direct_min_kb = cfg->direct_min_kb, .max_connections = (unsigned)cfg->max_connections};
    if (!h->unix_daemon || fl < 0 || fcntl(h->unix_sock.fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
        cr_acceptor_start(h, &ac, &h->unix_accept, err, errlen) < 0) {
        if (!h->unix_daemon || fl < 0)
            snprintf(err, errlen, "cannot serve on the unix socket %s", cfg->unix_socket);
        close(h->unix_sock.fd);
        cr_unix_remove(&h->unix_sock);
        return -1;
    }
    return 0;
}

/* Each acceptor stops before the daemon it feeds, and is freed after it: the daemon's last
 * closes are counted there. */
static void http_free(cr_http *h)
{
    cr_acceptor_stop(h->tcp_accept); /* closes the listening socket */
    cr_acceptor_stop(h->unix_accept);
    if (h->daemon)
        MHD_stop_daemon(h->daemon);
    if (h->unix_daemon) {
        MHD_stop_daemon(h->unix_daemon);
        cr_unix_remove(&h->unix_sock);
    }
    cr_acceptor_free(h->tcp_accept);
    cr_acceptor_free(h->unix_accept);
    cr_read_deadlines_destroy(&h->deadlines); /* after the daemons: every close was notified */
    pthread_mutex_destroy(&h->waiting_mu);
    cr_auth_clear(&h->auth);
    cr_tls_free(&h->tls);
    free(h);
}

/* libmicrohttpd checks the key pair and the priority string only as a daemon starts: one that
 * binds nothing is started and stopped here to ask it. */
static int check_tls(const cr_config *cfg, const cr_tls *tls, char *err, size_t errlen)
{
    if (!cr_tls_enabled(tls))
        return 0;
    mhd_last_message[0] = '\0';
    struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_TLS | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ERROR_LOG, 0, NULL,
                                            NULL, access_handler, NULL, MHD_OPTION_EXTERNAL_LOGGER, mhd_logger,
                                            NULL, MHD_OPTION_ARRAY, tls->options, MHD_OPTION_END);
    if (!d) {
        snprintf(err, errlen, "cannot serve TLS with --tls-cert %s and --tls-key %s%s (libmicrohttpd's warnings "
                 "above say why; the last: %s)", cfg->tls_cert, cfg->tls_key,
                 cfg->tls_priorities[0] ? " and --tls-priorities" : ": do the certificate and the key match?",
                 mhd_last_message[0] ? mhd_last_message : "none");
        return -1;
    }
    MHD_stop_daemon(d);
    return 0;
}

/* A port held by another process (the commonest start-up error) is named before the engine
 * starts; the start binds for real later. Not for --reuse-port, whose point is sharing. */
static int check_port(const cr_config *cfg, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    if (!cr_config_tcp(cfg) || cfg->port == 0 || cfg->reuse_port)
        return 0;
    if (make_addr(cfg->bind, (uint16_t)cfg->port, &ss, err, errlen) < 0)
        return -1;
    return explain_bind(cfg, try_bind(&ss), err, errlen);
}

cr_http *cr_http_prepare(const cr_config *cfg, char *err, size_t errlen)
{
    cr_http *h = calloc(1, sizeof *h);
    if (!h)
        return snprintf(err, errlen, "out of memory"), NULL;
    h->unix_sock.fd = -1;
    pthread_mutex_init(&h->waiting_mu, NULL);
    cr_read_deadlines_init(&h->deadlines, cfg->read_timeout_s, cfg->min_body_rate_kbs);
    if (cr_cors_load(&h->cors, cfg->cors_origin, err, errlen) < 0 ||
        cr_auth_load(&h->auth, cfg->auth_token_file, cfg->metrics_auth, err, errlen) < 0 ||
        cr_tls_load(&h->tls, cfg->tls_cert, cfg->tls_key, cfg->tls_priorities, err, errlen) < 0 ||
        check_tls(cfg, &h->tls, err, errlen) < 0 || check_port(cfg, err, errlen) < 0) {
        http_free(h);
        return NULL;
    }
    return h;
}

static void log_serving(const cr_http *h, const cr_config *cfg)
{
    if (h->auth.enabled)
        cr_log("info", "auth: every route but /healthz, /readyz%s needs the bearer token",
               h->auth.protect_metrics ? "" : " and /metrics");
    if (cr_tls_enabled(&h->tls))
        cr_log("info", "tls: serving HTTPS with %s%s", cfg->tls_cert, h->unix_daemon ? " (TCP only)" : "");
    if (h->unix_daemon)
        cr_log("info", "unix socket: %s, mode %04o%s%s", cfg->unix_socket, cfg->unix_mode,
               cfg->unix_socket_group[0] ? ", group " : "", cfg->unix_socket_group);
    if (cfg->direct_min_kb > 0 && (h->tcp_accept || h->unix_accept))
        cr_log("info", "direct path: binary uploads of %d KiB and more are read by crunchd itself (%s%s%s)",
               cfg->direct_min_kb, h->tcp_accept ? "TCP" : "", h->tcp_accept && h->unix_accept ? ", " : "",
               h->unix_accept ? "unix socket" : "");
    if (h->cors.enabled)
        cr_log("info", "cors: browsers may call from %s", h->cors.any ? "any origin" : cfg->cors_origin);
}

int cr_http_listen(cr_http *h, const cr_http_deps *deps, uint16_t *port, char *err, size_t errlen)
{
    const cr_config *cfg = deps->cfg;
    h->deps = *deps;
    *port = 0;
    if ((cr_config_tcp(cfg) && start_tcp(h, port, err, errlen) < 0) ||
        (cfg->unix_socket[0] && start_unix(h, err, errlen) < 0))
        return -1;
    log_serving(h, cfg);
    return 0;
}

cr_http *cr_http_start(const cr_http_deps *deps, uint16_t *port, char *err, size_t errlen)
{
    cr_http *h = cr_http_prepare(deps->cfg, err, errlen);
    if (h && cr_http_listen(h, deps, port, err, errlen) < 0) {
        http_free(h);
        return NULL;
    }
    return h;
}

void cr_http_tick(cr_http *h)
{
    cr_sync_tick(h);
    int slow = cr_read_deadlines_sweep(&h->deadlines, cr_now());
    if (slow > 0) {
        cr_metrics_slow_closed((uint64_t)slow);
        cr_log("warn", "closed %d connection(s) too slow to send their request (--read-timeout-s %d, "
               "--min-body-rate-kbs %d)", slow, h->deps.cfg->read_timeout_s, h->deps.cfg->min_body_rate_kbs);
    }
}

int cr_http_cut_off(cr_http *h) { return cr_sync_cut_off(h); }

int cr_http_waiting(cr_http *h) { return cr_sync_waiting(h); }

int cr_http_active(const cr_http *h) { return atomic_load(&h->active); }

void cr_http_stop(cr_http *h)
{
    if (h)
        http_free(h);
}
