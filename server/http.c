/* HTTP plumbing; see http.h. Every request passes three stages in the access handler: routing
 * (first call: method, path, content type, declared length), body upload (bounded), dispatch. */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "clock.h"
#include "http_conn.h"
#include "json_response.h"
#include "kserve.h"
#include "log.h"
#include "npy_response.h"
#include "upload.h"

typedef struct {
    const char *path;       /* exact but for {holes}, each one path segment: /v1/jobs/{id} */
    const char *method;
    cr_handler handler;
    cr_route_label label;
} route;

static const route routes[] = {
    {"/healthz", "GET", cr_route_healthz, CR_ROUTE_OTHER},
    {"/readyz", "GET", cr_route_readyz, CR_ROUTE_OTHER},
    {"/metrics", "GET", cr_route_metrics, CR_ROUTE_OTHER},
    {"/v1/info", "GET", cr_route_info, CR_ROUTE_OTHER},
    {"/v1/kernels", "GET", cr_route_kernels, CR_ROUTE_OTHER},
    {"/v1/gemm", "POST", cr_route_op, CR_ROUTE_GEMM},
    {"/v1/ata", "POST", cr_route_op, CR_ROUTE_ATA},
    {"/v1/histogram", "POST", cr_route_op, CR_ROUTE_HISTOGRAM},
    {"/v1/jobs", "POST", cr_route_job_submit, CR_ROUTE_JOBS},
    {"/v1/jobs/{id}", "GET", cr_route_job_status, CR_ROUTE_JOBS},
    {"/v1/jobs/{id}", "DELETE", cr_route_job_delete, CR_ROUTE_JOBS},
    {"/v1/jobs/{id}/result", "GET", cr_route_job_result, CR_ROUTE_JOBS},
    {"/v2", "GET", cr_kserve_server_metadata, CR_ROUTE_OTHER},
    {"/v2/health/live", "GET", cr_kserve_live, CR_ROUTE_OTHER},
    {"/v2/health/ready", "GET", cr_kserve_ready, CR_ROUTE_OTHER},
    {"/v2/models/{model}", "GET", cr_kserve_model_metadata, CR_ROUTE_OTHER},
    {"/v2/models/{model}/versions/{version}", "GET", cr_kserve_model_metadata, CR_ROUTE_OTHER},
    {"/v2/models/{model}/ready", "GET", cr_kserve_model_ready, CR_ROUTE_OTHER},
    {"/v2/models/{model}/versions/{version}/ready", "GET", cr_kserve_model_ready, CR_ROUTE_OTHER},
    {"/v2/models/{model}/infer", "POST", cr_kserve_infer, CR_ROUTE_OTHER},
    {"/v2/models/{model}/versions/{version}/infer", "POST", cr_kserve_infer, CR_ROUTE_OTHER},
};
#define N_ROUTES (sizeof routes / sizeof routes[0])

/* The /v2 rows speak KServe v2: its body types and limits (kserve.c), its error bodies. */
static bool is_kserve(const route *r)
{
    return strncmp(r->path, "/v2", 3) == 0 && (r->path[3] == '\0' || r->path[3] == '/');
}

/* Matches a pattern whose {holes} each take one non-empty path segment; *id points at the
 * first hole's text inside path. */
static bool path_matches(const char *pattern, const char *path, const char **id)
{
    const char *first = NULL;
    while (*pattern) {
        if (*pattern == '{') {
            size_t seg = strcspn(path, "/");
            if (seg == 0)
                return false;
            first = first ? first : path;
            path += seg;
            pattern += strcspn(pattern, "}");
            pattern += *pattern ? 1 : 0;
        } else if (*pattern++ != *path++) {
            return false;
        }
    }
    if (*path)
        return false;
    *id = first;
    return true;
}

/* Finds the handler; on a path match with the wrong method, fills allow for a 405. */
static const route *find_route(const char *method, const char *path, const char **id, char *allow,
                               size_t allow_len)
{
    allow[0] = '\0';
    bool head = strcmp(method, "HEAD") == 0;
    for (size_t i = 0; i < N_ROUTES; i++) {
        const char *rid = NULL;
        if (!path_matches(routes[i].path, path, &rid))
            continue;
        if (strcmp(routes[i].method, method) == 0 || (head && strcmp(routes[i].method, "GET") == 0)) {
            *id = rid;
            return &routes[i];
        }
        size_t n = strlen(allow);
        snprintf(allow + n, allow_len - n, "%s%s%s", n ? ", " : "", routes[i].method,
                 strcmp(routes[i].method, "GET") == 0 ? ", HEAD" : "");
    }
    return NULL;
}

const char *cr_header(cr_conn *c, const char *name)
{
    return MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, name);
}

enum MHD_Result cr_send(cr_conn *c, int status, const char *content_type, char *body, size_t len)
{
    if (!body) {
        static const char oom[] = "{\"error\":{\"code\":\"host_memory\",\"message\":\"out of memory\"}}";
        status = 503;
        len = sizeof oom - 1;
        body = malloc(len);
        if (!body)
            return MHD_NO;
        memcpy(body, oom, len);
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (status == 503 || status == 429)
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (c->extra_header)
        MHD_add_response_header(r, c->extra_header, c->extra_value);
    if (c->job) {
        MHD_add_response_header(r, "X-Crunchd-Job-Id", c->job->id);
        char timing[256];
        cr_server_timing(&c->job->ms, timing, sizeof timing);
        MHD_add_response_header(r, "Server-Timing", timing);
        if (c->job->kernel_used)
            MHD_add_response_header(r, "X-Crunchd-Kernel", c->job->kernel_used);
    }
    c->status = status;
    enum MHD_Result ret = MHD_queue_response(c->conn, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

enum MHD_Result cr_send_error(cr_conn *c, const cr_error *e)
{
    size_t len = 0;
    snprintf(c->error_code, sizeof c->error_code, "%s", e->code);
    char *body = c->kserve ? cr_kserve_error_json(e, &len) : cr_json_error(e, &len);
    return cr_send(c, e->http, "application/json", body, len);
}

enum MHD_Result cr_send_job(cr_conn *c, cr_job *j)
{
    size_t len = 0;
    if (atomic_load(&j->state) != CR_JOB_DONE)
        return cr_send_error(c, &j->error);
    if (cr_wants_npy(c)) /* Accept: application/x-npy; errors stay JSON */
        return cr_send_job_npy(c, j);
    char *body = cr_json_job_result(j, c->h->deps.engine ? cr_engine_backend(c->h->deps.engine)->name : "",
                                    &len);
    return cr_send(c, 200, "application/json", body, len);
}

static enum MHD_Result refuse(cr_conn *c, int status, const char *code, const char *field, const char *msg)
{
    cr_error e;
    cr_fail(&e, status, code, field, "%s", msg);
    return cr_send_error(c, &e);
}

static enum MHD_Result refuse_405(cr_conn *c, const char *allow)
{
    cr_error e;
    size_t len = 0;
    cr_fail(&e, 405, "method_not_allowed", "", "%s is not allowed on %s; allowed: %s", c->method,
            c->path, allow);
    snprintf(c->error_code, sizeof c->error_code, "%s", e.code);
    char *body = cr_json_error(&e, &len);
    struct MHD_Response *r = body ? MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE) : NULL;
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    c->status = 405;
    enum MHD_Result ret = MHD_queue_response(c->conn, 405, r);
    MHD_destroy_response(r);
    return ret;
}

static bool is_json_type(const char *ct)
{
    if (!ct)
        return true; /* curl -d without -H: be lenient, the body is still checked */
    size_t n = strlen("application/json");
    return strncasecmp(ct, "application/json", n) == 0 && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

/* 401 with the challenge RFC 6750 asks for; the same answer for a missing or a wrong token. */
static enum MHD_Result refuse_401(cr_conn *c)
{
    c->extra_header = MHD_HTTP_HEADER_WWW_AUTHENTICATE;
    snprintf(c->extra_value, sizeof c->extra_value, "Bearer");
    return refuse(c, 401, "unauthorized", "Authorization",
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
    /* Before routing: without the token, unknown paths and known ones look the same. */
    if (!cr_auth_exempt(&h->auth, c->path) && !cr_auth_check(&h->auth, cr_header(c, MHD_HTTP_HEADER_AUTHORIZATION)))
        return refuse_401(c);
    char allow[128];
    const route *r = find_route(method, c->path, &c->id, allow, sizeof allow);
    if (!r)
        return allow[0] ? refuse_405(c, allow)
                        : refuse(c, 404, "not_found", "", "no such route (see /v1/info and api/openapi.yaml)");
    c->handler = r->handler;
    c->label = r->label;
    c->kserve = is_kserve(r);
    if (strcmp(r->method, "POST") != 0)
        return MHD_YES;
    if (c->kserve)
        return cr_kserve_begin(c);
    if (!is_json_type(cr_header(c, MHD_HTTP_HEADER_CONTENT_TYPE)))
        return cr_upload_begin(c); /* .npy, multipart or raw bytes; 415 for anything else */
    c->limit = (size_t)h->deps.cfg->max_json_mb << 20;
    const char *cl = cr_header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > c->limit)
        return refuse(c, 413, "too_large", "body", "the JSON body is larger than --max-json-mb");
    return MHD_YES;
}

static int append_body(cr_conn *c, const char *data, size_t n)
{
    if (c->len + n > c->limit)
        return -1;
    if (c->len + n > c->cap) {
        size_t cap = c->cap ? c->cap : 4096;
        while (cap < c->len + n)
            cap *= 2;
        if (cap > c->limit)
            cap = c->limit;
        char *p = realloc(c->body, cap);
        if (!p)
            return -2;
        c->body = p;
        c->cap = cap;
    }
    memcpy(c->body + c->len, data, n);
    c->len += n;
    return 0;
}

static enum MHD_Result access_handler(void *cls, struct MHD_Connection *conn, const char *url,
                                      const char *method, const char *version,
                                      const char *upload_data, size_t *upload_data_size, void **con_cls)
{
    (void)version;
    cr_conn *c = *con_cls;
    if (!c)
        return begin(cls, conn, url, method, con_cls);
    if (c->status) /* answered early (413/415/404/405): swallow what the client still sends */
        return (*upload_data_size = 0), MHD_YES;
    if (*upload_data_size && c->upload)
        return cr_upload_feed(c, upload_data, upload_data_size);
    if (*upload_data_size) {
        int rc = append_body(c, upload_data, *upload_data_size);
        cr_metrics_bytes_in(*upload_data_size);
        *upload_data_size = 0;
        if (rc == -1)
            return refuse(c, 413, "too_large", "body",
                          c->limit_msg ? c->limit_msg : "the JSON body is larger than --max-json-mb");
        if (rc == -2)
            return refuse(c, 503, "host_memory", "", "out of memory reading the body");
        return MHD_YES;
    }
    if (c->waiting)
        return cr_route_op_resumed(c);
    return c->handler(c);
}

static void shape_of(const cr_job *j, char *out, size_t n)
{
    const cr_task *t = &j->req.task;
    if (t->op == CR_OP_GEMM)
        snprintf(out, n, "%lldx%lldx%lld", (long long)t->u.gemm.m, (long long)t->u.gemm.n,
                 (long long)t->u.gemm.k);
    else if (t->op == CR_OP_ATA)
        snprintf(out, n, "%lldx%lld", (long long)t->u.ata.m, (long long)t->u.ata.n);
    else
        snprintf(out, n, "%lld/%d", (long long)t->u.hist.count, t->u.hist.bins);
}

static void log_request(const cr_conn *c)
{
    char shape[64] = "";
    cr_log_request r = {.method = c->method, .path = c->path, .status = c->status,
                        .ms = (cr_now() - c->t0) * 1e3, .bytes_in = c->len,
                        .error_code = c->error_code[0] ? c->error_code : NULL};
    if (c->job) {
        shape_of(c->job, shape, sizeof shape);
        r.id = c->job->id;
        r.op = cr_op_name(c->job->req.task.op);
        r.kernel = c->job->kernel_used;
        r.shape = shape;
        r.queue_ms = c->job->ms.queue;
        r.h2d_ms = c->job->ms.h2d;
        r.kernel_ms = c->job->ms.kernel;
        r.d2h_ms = c->job->ms.d2h;
    }
    cr_log_req(&r);
}

extern void cr_routes_forget_conn(cr_conn *c);

static void request_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                              enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)conn;
    cr_conn *c = *con_cls;
    if (!c)
        return;
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && !c->status)
        c->status = 499; /* the client went away before an answer: nginx's convention */
    cr_metrics_request(c->label, c->status);
    log_request(c);
    cr_routes_forget_conn(c);
    cr_upload_free(c);
    if (c->ctx_free)
        c->ctx_free(c->ctx);
    atomic_fetch_sub(&c->h->active, 1);
    free(c->body);
    free(c);
    *con_cls = NULL;
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

cr_http *cr_http_start(const cr_http_deps *deps, uint16_t *port, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    int fam = make_addr(deps->cfg->bind, (uint16_t)deps->cfg->port, &ss, err, errlen);
    if (fam < 0)
        return NULL;
    cr_http *h = calloc(1, sizeof *h);
    if (!h)
        return snprintf(err, errlen, "out of memory"), NULL;
    h->deps = *deps;
    const cr_config *cfg = deps->cfg;
    if (cr_auth_load(&h->auth, cfg->auth_token_file, cfg->metrics_auth, err, errlen) < 0 ||
        cr_tls_load(&h->tls, cfg->tls_cert, cfg->tls_key, err, errlen) < 0) {
        cr_auth_clear(&h->auth);
        free(h);
        return NULL;
    }
    pthread_mutex_init(&h->waiting_mu, NULL);
    /* poll(), not epoll: libmicrohttpd 0.9.75's edge-triggered epoll misses a client's FIN that
     * arrives with the last bytes of a partial body, so abandoned uploads held their socket and
     * memory until --conn-timeout-s (found by scripts/soak.py); poll is level-triggered. */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG | (fam == AF_INET6 ? MHD_USE_IPv6 : 0) |
                     (cr_tls_enabled(&h->tls) ? MHD_USE_TLS : 0);
    h->daemon = MHD_start_daemon(
        flags, (uint16_t)deps->cfg->port, NULL, NULL, access_handler, h,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)deps->cfg->http_threads,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)deps->cfg->max_connections,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)deps->cfg->conn_timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)deps->cfg->conn_memory_kb << 10,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)deps->cfg->max_connections_per_ip,
        MHD_OPTION_ARRAY, h->tls.options,
        MHD_OPTION_NOTIFY_COMPLETED, request_completed, h,
        MHD_OPTION_LISTENING_ADDRESS_REUSE, 1,
        MHD_OPTION_END);
    if (!h->daemon) {
        snprintf(err, errlen, "cannot listen on %s:%d (in use, not allowed, or a bad TLS key pair)",
                 deps->cfg->bind, deps->cfg->port);
        cr_auth_clear(&h->auth);
        cr_tls_free(&h->tls);
        pthread_mutex_destroy(&h->waiting_mu);
        free(h);
        return NULL;
    }
    if (h->auth.enabled)
        cr_log("info", "auth: every route but /healthz, /readyz%s needs the bearer token",
               h->auth.protect_metrics ? "" : " and /metrics");
    if (cr_tls_enabled(&h->tls))
        cr_log("info", "tls: serving HTTPS with %s", cfg->tls_cert);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    *port = info ? info->port : (uint16_t)deps->cfg->port;
    return h;
}

void cr_waiting_add(cr_conn *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    c->fd = ci ? ci->connect_fd : -1;
    pthread_mutex_lock(&c->h->waiting_mu);
    c->wait_prev = NULL;
    c->wait_next = c->h->waiting_head;
    if (c->wait_next)
        c->wait_next->wait_prev = c;
    c->h->waiting_head = c;
    pthread_mutex_unlock(&c->h->waiting_mu);
}

void cr_waiting_remove(cr_conn *c)
{
    pthread_mutex_lock(&c->h->waiting_mu);
    if (c->wait_prev)
        c->wait_prev->wait_next = c->wait_next;
    else if (c->h->waiting_head == c)
        c->h->waiting_head = c->wait_next;
    if (c->wait_next)
        c->wait_next->wait_prev = c->wait_prev;
    c->wait_prev = c->wait_next = NULL;
    pthread_mutex_unlock(&c->h->waiting_mu);
}

/* EOF on a peek means the client closed its end; pending bytes (a pipelined request) do not. */
static bool peer_closed(int fd)
{
    char byte;
    if (fd < 0)
        return false;
    ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

void cr_http_tick(cr_http *h)
{
    pthread_mutex_lock(&h->waiting_mu);
    for (cr_conn *c = h->waiting_head; c; c = c->wait_next)
        if (c->job && !c->job->cancel && !cr_job_finished(c->job) && peer_closed(c->fd))
            cr_engine_cancel(h->deps.engine, c->job);
    pthread_mutex_unlock(&h->waiting_mu);
}

int cr_http_active(const cr_http *h) { return atomic_load(&h->active); }

void cr_http_stop(cr_http *h)
{
    if (!h)
        return;
    MHD_stop_daemon(h->daemon);
    pthread_mutex_destroy(&h->waiting_mu);
    cr_auth_clear(&h->auth);
    cr_tls_free(&h->tls);
    free(h);
}
