/* libFuzzer harness for multipart/form-data bodies on the direct path, end to end (over the
 * Unix socket; TCP's direct path is the same code behind the same acceptor).
 *
 * Why over a socket: a binary POST of at least --direct-min-kb is not
 * libmicrohttpd's: the acceptor (server/http/acceptor.c) peeks at its head (http_head.c),
 * direct.c takes it, and our own multipart reader (server/http/upload.c: cr_upload_receive,
 * skip_preamble, after_delimiter, receive_part_head, receive_part) reads the body straight from
 * the socket into the arrays, through cr_body_stream. None of that can run without a live
 * connection, so, as fuzz_multipart.c does for the libmicrohttpd path, this harness starts the
 * daemon's real HTTP front (cr_http_start, the cpu engine, small limits: tests/fuzz/fuzz_daemon.h,
 * which both share) once per process, here on a Unix socket of its own
 * (/tmp/crunchd-fuzz-direct-PID.sock, --bind none) with --direct-min-kb 1, and sends each
 * input as the body of a multipart POST.
 *
 * Input layout: byte 0 picks the route and query (bits 0-2, from fuzz_daemon.h's routes as in
 * fuzz_multipart.c, whose seeds fit), where the padding goes (bit 3), an "Expect: 100-continue"
 * (bit 4), the Content-Type's spelling of boundary "crunchdfuzz" (bits 5-6) and, without the
 * Expect, the request sent twice on one connection, the first kept alive (bit 7); the rest is the
 * body. Every body is padded to at least 1 KiB so that the direct path takes it: by default with a preamble of '.' bytes and a
 * CRLF before the input (a "--crunchdfuzz" at the input's start opens the first part), with bit
 * 3 with an epilogue of '.' bytes after it. '.' is no byte of a delimiter, of "--" or of transport
 * padding, so the padding never forms or completes one: what the parser sees is the input's.
 *
 * The oracle: an answer must come (no hang, no dropped connection), be a status the API defines,
 * and never 500 (a bug); and every request must have taken the direct path: every 64 inputs (and
 * after the first), crunchd_direct_requests_total{transport="unix"} on /metrics must equal the requests sent,
 * else the harness would be fuzzing libmicrohttpd without saying so. The sanitizers watch the
 * daemon's threads, which run in this process.
 *
 * Run with -close_fd_mask=2 (the daemon logs a line per request; sanitizer reports still reach
 * libFuzzer's copy of stderr) and -detect_leaks=0 (the daemon's threads free a request after the
 * client has its answer, so libFuzzer's per-input malloc/free balance would misfire): see
 * fuzz_direct_multipart.options. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/fuzz/fuzz_daemon.h"

#define DIRECT_MIN_KB 1
#define BODY_MIN (DIRECT_MIN_KB << 10) /* Content-Length at least this: the direct path's */
#define PAD '.'
#define METRICS_EVERY 64

/* The same boundary, spelled as clients do (quoted, among other parameters, no space). */
static const char *const content_types[] = {
    "multipart/form-data; boundary=" BOUNDARY,
    "multipart/form-data; charset=utf-8; boundary=\"" BOUNDARY "\"",
    "Multipart/Form-Data;boundary=" BOUNDARY ";x=y",
    "multipart/form-data; \tboundary=" BOUNDARY " ; name=\"boundary=no\"",
};

static char sock_path[108];
static unsigned long long sent; /* requests whose head went out whole: each one direct */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The Unix socket and its direct path come from the flags, as the daemon's own come (the
 * socket's mode parsed); fuzz_daemon.h removes the socket file at exit. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    char a0[] = "fuzz_direct_multipart", a1[] = "--unix-socket", a3[] = "--direct-min-kb", a4[] = "1",
         a5[] = "--bind", a6[] = "none";
    char *flags[] = {a0, a1, sock_path, a3, a4, a5, a6, NULL};
    snprintf(sock_path, sizeof sock_path, "/tmp/crunchd-fuzz-direct-%d.sock", (int)getpid());
    if (fuzz_daemon_config(7, flags) < 0 || cfg.direct_min_kb != DIRECT_MIN_KB || cr_config_tcp(&cfg))
        abort();
    fuzz_daemon_start();
    return 0;
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

/* One answer of a kept-alive exchange: its status (past a "100 Continue"), read whole by its
 * Content-Length; *closes when it says it closes, has no length, or the daemon closed. */
static int read_one_answer(int fd, bool *closes)
{
    static char buf[16384];
    size_t have = 0;
    char *end = NULL;
    *closes = true;
    while (!end && have < sizeof buf - 1) {
        ssize_t k = recv(fd, buf + have, sizeof buf - 1 - have, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            fprintf(stderr, "fuzz_direct_multipart: no answer within %d s\n", ANSWER_TIMEOUT_S);
            abort();
        }
        if (k <= 0)
            return have ? final_status(buf) : -1;
        have += (size_t)k;
        buf[have] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    int status = final_status(buf);
    const char *cl = strcasestr(buf, "\r\nContent-Length:");
    unsigned long long length = 0;
    if (!end || !cl || cl > end || sscanf(cl + 17, "%llu", &length) != 1)
        return status;
    *closes = strcasestr(buf, "\r\nConnection: close") != NULL;
    for (size_t body = have - (size_t)(end + 4 - buf); body < length;) {
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return *closes = true, status;
        body += (size_t)k;
    }
    return status;
}

/* Every request sent so far was served by direct.c (it counts each in the metric). */
static void check_all_direct(void)
{
    static char text[1 << 20];
    static const char req[] = "GET /metrics HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n\r\n";
    static const char name[] = "\ncrunchd_direct_requests_total{transport=\"unix\"} ";
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
    bool epilogue = data[0] & 0x08, expect = data[0] & 0x10, again = (data[0] & 0x80) && !expect;
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
    char head[512], head_kept[512];
    int n = snprintf(head, sizeof head,
                     "POST %s HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n%s"
                     "Content-Type: %s\r\nContent-Length: %zu\r\n\r\n",
                     route, expect ? "Expect: 100-continue\r\n" : "", ct, length);
    int fd = connect_daemon();
    /* bit 7: the same request first kept alive, then again at once on the connection (the worker
     * that answered takes the next request itself: acceptor.c's next_request_here) */
    if (fd >= 0 && again) {
        int nk = snprintf(head_kept, sizeof head_kept,
                          "POST %s HTTP/1.1\r\nHost: fuzz\r\nContent-Type: %s\r\nContent-Length: %zu\r\n\r\n",
                          route, ct, length);
        bool closes = true;
        if (send_all(fd, head_kept, (size_t)nk) < 0)
            abort();
        sent++;
        (void)send_all(fd, body, length);
        int first = read_one_answer(fd, &closes);
        if (first != -1 && (first == 0 || !allowed(first))) {
            fprintf(stderr, "fuzz_direct_multipart: %s (%s), kept alive, answered %d\n", route, ct, first);
            abort();
        }
        if (closes) { /* refused and closed: the next request goes on a new connection */
            close(fd);
            fd = connect_daemon();
        }
    }
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
