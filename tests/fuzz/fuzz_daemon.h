/* The in-process daemon of the end-to-end libFuzzer harnesses, and their side of the socket.
 *
 * Why it exists: fuzz_multipart.c (libmicrohttpd's multipart path, over TCP) and
 * fuzz_direct_multipart.c (the Unix socket's direct path) fuzz code that runs only on a live
 * connection, so each starts the daemon's real HTTP front in its own process and sends every
 * input over a socket. What that takes is the same for both and is kept here once: the config
 * with small limits, the cpu engine, the job table, cr_http_start, main.c's tick loop on a
 * thread of its own; connecting, sending, and reading an answer with a deadline (a hang is a
 * bug); the statuses the API defines. What differs comes from the daemon's flags: where it
 * listens (--bind 127.0.0.1 --port 0, or --bind none --unix-socket PATH) and what it serves
 * there. Each harness is one translation unit (Makefile: $(BUILD)/fuzz/%), so this holds static
 * functions and the daemon's state; include it once, from a harness only.
 *
 * Use: fuzz_daemon_config(argc, argv) with argv[0] the harness's name (it prefixes every
 * message) and then the daemon's flags; check what the harness relies on in cfg; then
 * fuzz_daemon_start(), from LLVMFuzzerInitialize. connect_daemon() reaches the daemon where it
 * listens: on 127.0.0.1 when it serves TCP, else on its Unix socket. */
#ifndef CRUNCHD_FUZZ_DAEMON_H
#define CRUNCHD_FUZZ_DAEMON_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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

/* Byte 0 of an input picks the route and query (its bits 0-2): one table for both harnesses,
 * so the seeds of one fit the other. */
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

static const char *harness; /* argv[0] of fuzz_daemon_config: the prefix of every message */
static uint16_t port;       /* the TCP port cr_http_start bound (--port 0: any free one) */
static cr_config cfg;
static cr_job_table jobs;
static cr_engine *engine;
static cr_http *http;

/* The daemon's own flags (argv[0] the harness's name), then small limits: the fuzzer must not
 * make the daemon allocate or compute much. -1 when the flags do not load. */
static int fuzz_daemon_config(int argc, char **argv)
{
    harness = argv[0];
    if (cr_config_load(&cfg, argc, argv, stderr) != 0)
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

/* The daemon is never stopped (libFuzzer does not return to tear down): its socket file goes. */
static void remove_socket(void)
{
    unlink(cfg.unix_socket);
}

/* Starts the daemon of cfg (fuzz_daemon_config) in this process; aborts when it cannot. */
static void fuzz_daemon_start(void)
{
    char err[256] = "";
    sigset_t alrm, old;
    /* The daemon never sees SIGALRM in production; libFuzzer's -timeout timer must interrupt the
     * harness's thread only, not the daemon's threads (they inherit this mask). */
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &alrm, &old);
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    if (cr_job_table_init(&jobs, cfg.result_ttl_s, (size_t)cfg.result_cap_mb << 20) < 0)
        abort();
    cr_log_init(false, CR_ACCESS_LOG_ALL);
    cr_engine *e = engine = cr_engine_start(&cr_backend_cpu, &cfg, err, sizeof err);
    if (!e) {
        fprintf(stderr, "%s: cpu engine: %s\n", harness, err);
        abort();
    }
    cr_http_deps deps = {.cfg = &cfg, .engine = e, .jobs = &jobs};
    pthread_t t;
    if (!(http = cr_http_start(&deps, &port, err, sizeof err))) {
        fprintf(stderr, "%s: http: %s\n", harness, err);
        abort();
    }
    if (cfg.unix_socket[0])
        atexit(remove_socket);
    if (pthread_create(&t, NULL, housekeeping, NULL) != 0)
        abort();
    pthread_sigmask(SIG_SETMASK, &old, NULL);
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

/* A connection to the daemon, its reads bounded by ANSWER_TIMEOUT_S; -1 with errno. Over TCP
 * (127.0.0.1) without Nagle's delay; on the Unix socket its sends are bounded too, so a body the
 * daemon stops reading ends in the read's verdict, not in a blocked harness. */
static int connect_daemon(void)
{
    union {
        struct sockaddr any;
        struct sockaddr_in in;
        struct sockaddr_un un;
    } a;
    socklen_t alen;
    bool tcp = cr_config_tcp(&cfg);
    memset(&a, 0, sizeof a);
    if (tcp) {
        a.in.sin_family = AF_INET;
        a.in.sin_port = htons(port);
        a.in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        alen = sizeof a.in;
    } else {
        a.un.sun_family = AF_UNIX;
        snprintf(a.un.sun_path, sizeof a.un.sun_path, "%s", cfg.unix_socket);
        alen = sizeof a.un;
    }
    int fd = socket(a.any.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct timeval tv = {.tv_sec = ANSWER_TIMEOUT_S};
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
        (tcp ? setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one)
             : setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv)) < 0 ||
        (connect(fd, &a.any, alen) < 0 && !connect_completes(fd))) {
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
            return -1; /* the daemon may answer early (413, 400, Expect) and close: not a bug */
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Reads until the daemon closes, keeping the first keep - 1 bytes in out (NUL-terminated).
 * Their count; -1 when the connection was reset before any byte came: the daemon answered early
 * (a malformed body is refused before its end; an Expect) and closed with our unsent bytes
 * unread, so the kernel reset the connection and may drop the answer. The daemon runs in this
 * process, so a reset is never a crash of it. (Found by fuzz_multipart; kept in
 * tests/fuzz/regressions/multipart/.) A hang is a bug: abort. */
static long read_answer(int fd, char *out, size_t keep)
{
    size_t got = 0, kept = 0;
    char buf[8192];
    for (;;) {
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            fprintf(stderr, "%s: no answer within %d s\n", harness, ANSWER_TIMEOUT_S);
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

/* The statuses the API defines for these requests; never 500 (a bug). */
static int allowed(int status)
{
    static const int ok[] = {200, 202, 400, 409, 411, 413, 415, 422, 503, 504, 507};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (status == ok[i])
            return 1;
    return 0;
}

#endif
