/* libFuzzer harness for multipart/form-data request bodies, end to end over HTTP.
 *
 * Why over a socket: our multipart code (server/upload.c) is libmicrohttpd's post processor
 * feeding binary_request.c, and MHD_create_post_processor() takes a live MHD_Connection (it
 * reads the request's Content-Type from it); a connection cannot be made without a daemon. So
 * this harness starts the daemon's real HTTP front (cr_http_start, the cpu engine, small
 * limits) on an ephemeral port of 127.0.0.1 once per process, and sends each input as the body
 * of a multipart POST. That fuzzes exactly the production path: MHD's header and boundary
 * parsing, its post processor, our part iterator, the .npy header parser, the streaming copy
 * into the arrays and, for bodies that decode, the job itself and the response encoder.
 *
 * Input layout: byte 0 picks the route (and query string), the rest is the body, sent with
 * boundary "crunchdfuzz" and an exact Content-Length. The oracle: an answer must come (no
 * hang, no dropped connection), be a status the API defines, and never 500 (a bug); the
 * sanitizers watch the daemon's threads, which run in this process.
 *
 * Run with -close_fd_mask=2 (the daemon logs a line per request; sanitizer reports still
 * reach libFuzzer's copy of stderr) and -detect_leaks=0 (the daemon's threads free a request
 * after the client has its answer, so libFuzzer's per-input malloc/free balance would misfire;
 * LeakSanitizer still runs at exit and in the HTTP suites): see fuzz_multipart.options. */
#include <arpa/inet.h>
#include <pthread.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "server/clock.h"
#include "server/config.h"
#include "server/engine/engine.h"
#include "server/http/listener.h"
#include "server/engine/job_table.h"
#include "server/obs/log.h"

#define BOUNDARY "crunchdfuzz"
#define ANSWER_TIMEOUT_S 20

static const char *const routes[] = {
    "/v1/gemm",
    "/v1/gemm?dtype=float64&alpha=2&beta=0.5",
    "/v1/ata",
    "/v1/histogram",
    "/v1/histogram?bins=8&range=0,1",
    "/v1/jobs?op=gemm",
    "/v1/gemm?kernel=all",
    "/v1/gemm?trans_a=true&trans_b=true",
};
#define N_ROUTES (sizeof routes / sizeof routes[0])

static uint16_t port;
static cr_config cfg;
static cr_job_table jobs;
static cr_engine *engine;
static cr_http *http;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Small limits: the fuzzer must not make the daemon allocate or compute much. */
static int load_config(void)
{
    char *argv[] = {"fuzz_multipart", NULL};
    if (cr_config_load(&cfg, 1, argv, stderr) != 0)
        return -1;
    cfg.port = 0;
    snprintf(cfg.bind, sizeof cfg.bind, "127.0.0.1");
    snprintf(cfg.backend, sizeof cfg.backend, "cpu");
    cfg.workers = 1;
    cfg.http_threads = 2;
    cfg.queue_depth = 64;
    cfg.max_body_mb = 4;
    cfg.max_json_mb = 1;
    cfg.max_elements = 1 << 14;
    cfg.max_bins = 1 << 10;
    cfg.result_ttl_s = 1;
    cfg.result_cap_mb = 8;
    cfg.job_timeout_ms = 10000;
    return 0;
}

/* What main.c's loop does: deadlines, hung-up clients, expired async results (/v1/jobs). */
static void *housekeeping(void *arg)
{
    (void)arg;
    for (;;) {
        double now = cr_now();
        cr_http_tick(http);
        cr_engine_tick(engine, now);
        cr_job_table_sweep(&jobs, now);
        usleep(100 * 1000);
    }
    return NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    char err[256] = "";
    sigset_t alrm, old;
    /* The daemon never sees SIGALRM in production; libFuzzer's -timeout timer must interrupt the
     * harness's thread only, not the daemon's threads (they inherit this mask). */
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &alrm, &old);
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    if (load_config() < 0 || cr_job_table_init(&jobs, cfg.result_ttl_s, (size_t)cfg.result_cap_mb << 20) < 0)
        abort();
    cr_log_init(false, CR_ACCESS_LOG_ALL);
    cr_engine *e = engine = cr_engine_start(&cr_backend_cpu, &cfg, err, sizeof err);
    if (!e) {
        fprintf(stderr, "fuzz_multipart: cpu engine: %s\n", err);
        abort();
    }
    cr_http_deps deps = {.cfg = &cfg, .engine = e, .jobs = &jobs};
    pthread_t t;
    if (!(http = cr_http_start(&deps, &port, err, sizeof err))) {
        fprintf(stderr, "fuzz_multipart: http: %s\n", err);
        abort();
    }
    if (pthread_create(&t, NULL, housekeeping, NULL) != 0)
        abort();
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return 0; /* the daemon lives as long as the process: libFuzzer never returns to tear down */
}

/* libFuzzer's -timeout arms SIGALRM, which can interrupt connect(); the connection then goes on
 * in the background: wait for it rather than call the harness's own EINTR a daemon failure. */
static int connect_completes(int fd)
{
    if (errno != EINTR)
        return 0;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int err = 0;
    socklen_t len = sizeof err;
    int r;
    while ((r = poll(&p, 1, ANSWER_TIMEOUT_S * 1000)) < 0 && errno == EINTR)
        ;
    return r == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
}

static int connect_daemon(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {.tv_sec = ANSWER_TIMEOUT_S};
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0 ||
        (connect(fd, (struct sockaddr *)&a, sizeof a) < 0 && !connect_completes(fd))) {
        close(fd);
        return -1;
    }
    return fd;
}

static int send_all(int fd, const void *p, size_t n)
{
    const char *b = p;
    while (n) {
        ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1; /* the daemon may answer early (413, 400) and close: not a bug */
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Reads until the daemon closes; returns the status code, 0 when no status line came, -1 when
 * the connection was reset before one did: the daemon answered early (a malformed body is
 * refused before its end) and closed with our unsent bytes unread, so the kernel reset the
 * connection and may drop the answer. The daemon runs in this process, so a reset is never a
 * crash of it. (Found by this harness; kept in tests/fuzz/regressions/multipart/.) */
static int read_status(int fd)
{
    char head[16] = "";
    size_t got = 0;
    char buf[8192];
    for (;;) {
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            fprintf(stderr, "fuzz_multipart: no answer within %d s\n", ANSWER_TIMEOUT_S);
            abort(); /* a hang is a bug: a request that never completes holds a connection */
        }
        if (k < 0 && errno == ECONNRESET && got == 0)
            return -1;
        if (k <= 0)
            break;
        if (got < sizeof head - 1) {
            size_t take = (size_t)k < sizeof head - 1 - got ? (size_t)k : sizeof head - 1 - got;
            memcpy(head + got, buf, take);
            got += take;
        }
    }
    int status = 0;
    if (sscanf(head, "HTTP/1.%*d %d", &status) != 1)
        return 0;
    return status;
}

static int allowed(int status)
{
    static const int ok[] = {200, 202, 400, 409, 411, 413, 415, 422, 503, 504, 507};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (status == ok[i])
            return 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *route = routes[data[0] % N_ROUTES];
    data++, size--;
    char head[512];
    int n = snprintf(head, sizeof head,
                     "POST %s HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n"
                     "Content-Type: multipart/form-data; boundary=" BOUNDARY "\r\n"
                     "Content-Length: %zu\r\n\r\n", route, size);
    int fd = connect_daemon();
    if (fd < 0) {
        fprintf(stderr, "fuzz_multipart: cannot connect: %s\n", strerror(errno));
        abort();
    }
    /* A failed send means the daemon answered early and closed: read what it said. */
    if (send_all(fd, head, (size_t)n) == 0)
        (void)send_all(fd, data, size);
    int status = read_status(fd);
    close(fd);
    if (status == -1)
        return 0;
    if (status == 0 || !allowed(status)) {
        fprintf(stderr, "fuzz_multipart: %s answered %d\n", route, status);
        abort();
    }
    return 0;
}
