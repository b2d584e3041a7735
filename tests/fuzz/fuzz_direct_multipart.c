/* libFuzzer harness for multipart/form-data bodies on the Unix socket's direct path, end to end.
 *
 * Why over a socket: on --unix-socket, a binary POST of at least --unix-direct-min-kb is not
 * libmicrohttpd's: the acceptor (server/http/unix_accept.c) peeks at its head (http_head.c),
 * direct.c takes it, and our own multipart reader (server/http/upload.c: cr_upload_receive,
 * skip_preamble, after_delimiter, receive_part_head, receive_part) reads the body straight from
 * the socket into the arrays, through cr_body_stream. None of that can run without a live
 * connection, so, as fuzz_multipart.c does for the libmicrohttpd path, this harness starts the
 * daemon's real HTTP front (cr_http_start, the cpu engine, small limits) once per process, here
 * on a Unix socket of its own (/tmp/crunchd-fuzz-direct-PID.sock, --bind none) with
 * --unix-direct-min-kb 1, and sends each input as the body of a multipart POST.
 *
 * Input layout: byte 0 picks the route and query (bits 0-2, as in fuzz_multipart.c, whose seeds
 * fit), where the padding goes (bit 3), an "Expect: 100-continue" (bit 4) and the Content-Type's
 * spelling of boundary "crunchdfuzz" (bits 5-6); the rest is the body. Every body is padded to at
 * least 1 KiB so that the direct path takes it: by default with a preamble of '.' bytes and a
 * CRLF before the input (a "--crunchdfuzz" at the input's start opens the first part), with bit
 * 3 with an epilogue of '.' bytes after it. '.' is no byte of a delimiter, of "--" or of transport
 * padding, so the padding never forms or completes one: what the parser sees is the input's.
 *
 * The oracle: an answer must come (no hang, no dropped connection), be a status the API defines,
 * and never 500 (a bug); and every request must have taken the direct path: every 64 inputs (and
 * after the first), crunchd_unix_direct_requests_total on /metrics must equal the requests sent,
 * else the harness would be fuzzing libmicrohttpd without saying so. The sanitizers watch the
 * daemon's threads, which run in this process.
 *
 * Run with -close_fd_mask=2 (the daemon logs a line per request; sanitizer reports still reach
 * libFuzzer's copy of stderr) and -detect_leaks=0 (the daemon's threads free a request after the
 * client has its answer, so libFuzzer's per-input malloc/free balance would misfire): see
 * fuzz_direct_multipart.options. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "server/clock.h"
#include "server/config.h"
#include "server/engine/engine.h"
#include "server/engine/job_table.h"
#include "server/http/listener.h"
#include "server/obs/log.h"

#define BOUNDARY "crunchdfuzz"
#define ANSWER_TIMEOUT_S 20
#define DIRECT_MIN_KB 1
#define BODY_MIN (DIRECT_MIN_KB << 10) /* Content-Length at least this: the direct path's */
#define PAD '.'
#define METRICS_EVERY 64

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

/* The same boundary, spelled as clients do (quoted, among other parameters, no space). */
static const char *const content_types[] = {
    "multipart/form-data; boundary=" BOUNDARY,
    "multipart/form-data; charset=utf-8; boundary=\"" BOUNDARY "\"",
    "Multipart/Form-Data;boundary=" BOUNDARY ";x=y",
    "multipart/form-data; \tboundary=" BOUNDARY " ; name=\"boundary=no\"",
};

static char sock_path[108];
static cr_config cfg;
static cr_job_table jobs;
static cr_engine *engine;
static cr_http *http;
static unsigned long long sent; /* requests whose head went out whole: each one direct */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Small limits: the fuzzer must not make the daemon allocate or compute much. The Unix socket
 * and its direct path come from the flags, as the daemon's own come (the socket's mode parsed). */
static int load_config(void)
{
    char a0[] = "fuzz_direct_multipart", a1[] = "--unix-socket", a3[] = "--unix-direct-min-kb", a4[] = "1",
         a5[] = "--bind", a6[] = "none";
    char *argv[] = {a0, a1, sock_path, a3, a4, a5, a6, NULL};
    if (cr_config_load(&cfg, 7, argv, stderr) != 0)
        return -1;
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
    return cfg.unix_direct_min_kb == DIRECT_MIN_KB && !cr_config_tcp(&cfg) ? 0 : -1;
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

/* The daemon is never stopped (libFuzzer does not return to tear down): its socket file goes. */
static void remove_socket(void)
{
    unlink(sock_path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    char err[256] = "";
    uint16_t port = 0;
    sigset_t alrm, old;
    /* The daemon never sees SIGALRM in production; libFuzzer's -timeout timer must interrupt the
     * harness's thread only, not the daemon's threads (they inherit this mask). */
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &alrm, &old);
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    snprintf(sock_path, sizeof sock_path, "/tmp/crunchd-fuzz-direct-%d.sock", (int)getpid());
    if (load_config() < 0 || cr_job_table_init(&jobs, cfg.result_ttl_s, (size_t)cfg.result_cap_mb << 20) < 0)
        abort();
    cr_log_init(false, CR_ACCESS_LOG_ALL);
    cr_engine *e = engine = cr_engine_start(&cr_backend_cpu, &cfg, err, sizeof err);
    if (!e) {
        fprintf(stderr, "fuzz_direct_multipart: cpu engine: %s\n", err);
        abort();
    }
    cr_http_deps deps = {.cfg = &cfg, .engine = e, .jobs = &jobs};
    pthread_t t;
    if (!(http = cr_http_start(&deps, &port, err, sizeof err))) {
        fprintf(stderr, "fuzz_direct_multipart: http: %s\n", err);
        abort();
    }
    atexit(remove_socket);
    if (pthread_create(&t, NULL, housekeeping, NULL) != 0)
        abort();
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return 0;
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
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", sock_path);
    struct timeval tv = {.tv_sec = ANSWER_TIMEOUT_S};
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0 ||
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
            return -1; /* the daemon may answer early (Expect) and close: not a bug */
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Reads until the daemon closes, keeping the first keep - 1 bytes in out (NUL-terminated).
 * Their count; -1 when the connection was reset before any byte came (the daemon answered
 * early, with Expect, and closed with our body unread, so the answer may be lost; it runs in
 * this process, so a reset is never a crash of it). A hang is a bug: abort. */
static long read_answer(int fd, char *out, size_t keep)
{
    size_t got = 0, kept = 0;
    char buf[8192];
    for (;;) {
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            fprintf(stderr, "fuzz_direct_multipart: no answer within %d s\n", ANSWER_TIMEOUT_S);
            abort(); /* a request that never completes holds a connection and a thread */
        }
        if (k < 0 && errno == ECONNRESET && got == 0)
            return -1;
        if (k <= 0)
            break;
        got += (size_t)k;
        if (kept < keep - 1) {
            size_t take = (size_t)k < keep - 1 - kept ? (size_t)k : keep - 1 - kept;
            memcpy(out + kept, buf, take);
            kept += take;
        }
    }
    out[kept] = '\0';
    return (long)kept;
}

/* The final status of an answer, past a "100 Continue"; 0 when there is none. */
static int final_status(const char *head)
{
    int status = 0;
    if (sscanf(head, "HTTP/1.1 %d", &status) != 1)
        return 0;
    if (status == 100) {
        const char *end = strstr(head, "\r\n\r\n");
        return end ? final_status(end + 4) : 0;
    }
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

/* Every request sent so far was served by direct.c (it counts each in the metric). */
static void check_all_direct(void)
{
    static char text[1 << 20];
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n\r\n";
    static const char name[] = "\ncrunchd_unix_direct_requests_total ";
    int fd = connect_daemon();
    if (fd < 0 || send_all(fd, req, sizeof req - 1) < 0) {
        fprintf(stderr, "fuzz_direct_multipart: /metrics: %s\n", strerror(errno));
        abort();
    }
    long n = read_answer(fd, text, sizeof text);
    close(fd);
    const char *at = n > 0 ? strstr(text, name) : NULL;
    unsigned long long direct = 0;
    if (final_status(text) != 200 || !at || sscanf(at + sizeof name - 1, "%llu", &direct) != 1 || direct != sent) {
        fprintf(stderr, "fuzz_direct_multipart: %llu request(s) sent, %llu served on the direct path\n", sent,
                direct);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *route = routes[data[0] % N_ROUTES];
    bool epilogue = data[0] & 0x08, expect = data[0] & 0x10;
    const char *ct = content_types[(data[0] >> 5) & 3];
    data++, size--;
    /* preamble: '.'s and CRLF (at least the CRLF); epilogue: '.'s, when the input is short */
    size_t pad = epilogue ? (size < BODY_MIN ? BODY_MIN - size : 0) : (size + 2 < BODY_MIN ? BODY_MIN - size : 2);
    size_t length = size + pad;
    char *body = malloc(length);
    if (!body)
        abort();
    memset(body, PAD, pad);
    if (epilogue) {
        memcpy(body, data, size);
        memset(body + size, PAD, pad);
    } else {
        memcpy(body + pad - 2, "\r\n", 2);
        memcpy(body + pad, data, size);
    }
    char head[512];
    int n = snprintf(head, sizeof head,
                     "POST %s HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n%s"
                     "Content-Type: %s\r\nContent-Length: %zu\r\n\r\n",
                     route, expect ? "Expect: 100-continue\r\n" : "", ct, length);
    int fd = connect_daemon();
    if (fd < 0) {
        fprintf(stderr, "fuzz_direct_multipart: cannot connect to %s: %s\n", sock_path, strerror(errno));
        abort();
    }
    /* A failed send of the body means the daemon answered early and closed: read what it said. */
    if (send_all(fd, head, (size_t)n) < 0) {
        fprintf(stderr, "fuzz_direct_multipart: cannot send the head: %s\n", strerror(errno));
        abort();
    }
    sent++;
    (void)send_all(fd, body, length);
    free(body);
    char answer[64];
    long got = read_answer(fd, answer, sizeof answer);
    close(fd);
    int status = got < 0 ? -1 : final_status(answer);
    if (status != -1 && (status == 0 || !allowed(status))) {
        fprintf(stderr, "fuzz_direct_multipart: %s (%s%s) answered %d\n", route, ct,
                expect ? ", Expect: 100-continue" : "", status);
        abort();
    }
    if (sent == 1 || sent % METRICS_EVERY == 0)
        check_all_direct();
    return 0;
}
