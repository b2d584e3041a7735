/* libFuzzer harness for multipart/form-data request bodies, end to end over HTTP.
 *
 * Why over a socket: our multipart code (server/upload.c) is libmicrohttpd's post processor
 * feeding binary_request.c, and MHD_create_post_processor() takes a live MHD_Connection (it
 * reads the request's Content-Type from it); a connection cannot be made without a daemon. So
 * this harness starts the daemon's real HTTP front (cr_http_start, the cpu engine, small
 * limits: tests/fuzz/fuzz_daemon.h, shared with fuzz_direct_multipart.c) on an ephemeral port
 * of 127.0.0.1 once per process, and sends each input as the body of a multipart POST. That
 * fuzzes exactly the production path: MHD's header and boundary parsing, its post processor,
 * our part iterator, the .npy header parser, the streaming copy into the arrays and, for
 * bodies that decode, the job itself and the response encoder.
 *
 * Input layout: byte 0 picks the route (and query string; the routes of fuzz_daemon.h), the
 * rest is the body, sent with boundary "crunchdfuzz" and an exact Content-Length. The oracle:
 * an answer must come (no hang, no dropped connection), be a status the API defines, and never
 * 500 (a bug); the sanitizers watch the daemon's threads, which run in this process.
 *
 * Run with -close_fd_mask=2 (the daemon logs a line per request; sanitizer reports still
 * reach libFuzzer's copy of stderr) and -detect_leaks=0 (the daemon's threads free a request
 * after the client has its answer, so libFuzzer's per-input malloc/free balance would misfire;
 * LeakSanitizer still runs at exit and in the HTTP suites): see fuzz_multipart.options. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz_daemon.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    char *flags[] = {"fuzz_multipart", "--bind", "127.0.0.1", "--port", "0", NULL};
    if (fuzz_daemon_config(5, flags) < 0)
        abort();
    fuzz_daemon_start();
    return 0; /* the daemon lives as long as the process: libFuzzer never returns to tear down */
}

/* The status code of the answer; 0 when no status line came, -1 when the connection was reset
 * before one did (read_answer: the daemon answered early and closed; not a bug). */
static int read_status(int fd)
{
    char head[16];
    if (read_answer(fd, head, sizeof head) < 0)
        return -1;
    int status = 0;
    if (sscanf(head, "HTTP/1.%*d %d", &status) != 1)
        return 0;
    return status;
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
