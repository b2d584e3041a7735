/* Unit tests for the direct path's body reader (server/http/body_stream.c), over a socketpair:
 * a bounded fill reads no further than asked, so array bytes after a parsed head stay in the
 * socket to be received in place (a plain fill takes up to its 64 KiB buffer); what was buffered
 * is handed out first and the rest comes from the socket, in order; the body's length bounds
 * every read, so the next request's bytes are never taken. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/http/body_stream.h"
#include "tests/unit/check.h"

#define BODY (128 * 1024)

static char body[BODY + 100], got[BODY + 64];
static _Atomic bool stop;

/* A stream over one end of a socketpair whose other end has sent the body and, after it, 100
 * bytes of a next request. */
static int open_stream(cr_body_stream *s, int fds[2])
{
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) < 0)
        return -1;
    int big = 4 << 20;
    setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    setsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    for (size_t i = 0; i < sizeof body; i++)
        body[i] = (char)(i * 131 + (i >> 9));
    if (write(fds[0], body, sizeof body) != (ssize_t)sizeof body)
        return -1;
    cr_body_stream_init(s, fds[1], BODY, 0.0, 0, 0, 0, &stop);
    return 0;
}

static void test_bounded_fill_leaves_the_rest_in_the_socket(void)
{
    int fds[2];
    static cr_body_stream s;
    CHECK(open_stream(&s, fds) == 0);
    ssize_t n = cr_body_stream_fill_upto(&s, 10, 600);
    CHECK_MSG(n >= 10 && n <= 600, "a fill up to 600 bytes buffered %zd", n);
    CHECK(memcmp(cr_body_stream_data(&s), body, (size_t)n) == 0);
    cr_body_stream_take(&s, 10);
    /* the buffered bytes first, then the socket's, in order, into the destination */
    size_t have = 0;
    while (have < BODY - 10) {
        ssize_t k = cr_body_stream_read(&s, got + have, BODY - 10 - have);
        if (k <= 0)
            break;
        if (have == 0)
            CHECK_MSG(k == n - 10, "the first read hands out the %zd buffered bytes, gave %zd", n - 10, k);
        have += (size_t)k;
    }
    CHECK(have == BODY - 10 && memcmp(got, body + 10, have) == 0);
    CHECK(cr_body_stream_read(&s, got, 1) == 0); /* the body's end: the next request stays */
    char next[100];
    CHECK(recv(fds[1], next, sizeof next, MSG_DONTWAIT) == 100 && memcmp(next, body + BODY, 100) == 0);
    close(fds[0]);
    close(fds[1]);
}

static void test_plain_fill_takes_a_buffer(void)
{
    int fds[2];
    static cr_body_stream s;
    CHECK(open_stream(&s, fds) == 0);
    ssize_t n = cr_body_stream_fill(&s, 10);
    CHECK_MSG(n > 600 && n <= CR_BODY_STREAM_BUF, "a plain fill buffered %zd", n);
    /* a bound below what is buffered reads nothing more */
    CHECK(cr_body_stream_fill_upto(&s, 20, 30) == n);
    close(fds[0]);
    close(fds[1]);
}

/* The body as chunks of the given sizes (extensions on some, trailers at the end), then the next
 * request's bytes; the reader hands out exactly the data, in order, whatever piece it asks for. */
static void check_chunked(const size_t *sizes, int n, size_t piece, bool trailers)
{
    int fds[2];
    static cr_body_stream s;
    static char wire[BODY * 2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    int big = 4 << 20;
    setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    size_t w = 0, data = 0;
    for (int i = 0; i < n; i++) {
        w += (size_t)snprintf(wire + w, 64, i % 3 == 1 ? "%zx;name=value\r\n" : "%zX\r\n", sizes[i]);
        memcpy(wire + w, body + data, sizes[i]);
        w += sizes[i], data += sizes[i];
        memcpy(wire + w, "\r\n", 2), w += 2;
    }
    w += (size_t)snprintf(wire + w, 64, trailers ? "0\r\nX-Digest: 1\r\n\r\nNEXT" : "0\r\n\r\nNEXT");
    CHECK(write(fds[0], wire, w) == (ssize_t)w);
    cr_body_stream_init(&s, fds[1], 0, 0.0, 0, 0, 0, &stop);
    cr_body_stream_chunked(&s);
    size_t have = 0;
    ssize_t k;
    if (cr_body_stream_fill_upto(&s, 1, 7) > 0) { /* a parser's look at the first bytes */
        CHECK(memcmp(cr_body_stream_data(&s), body, s.len - s.pos) == 0);
    }
    while ((k = cr_body_stream_read(&s, got + have, piece < sizeof got - have ? piece : sizeof got - have)) > 0)
        have += (size_t)k;
    CHECK_MSG(k == 0 && have == data && memcmp(got, body, data) == 0, "chunked: %zu of %zu bytes, read %zd", have, data, k);
    CHECK(cr_body_stream_done(&s));
    char next[8] = {0};
    CHECK(recv(fds[1], next, sizeof next, MSG_DONTWAIT) == 4 && memcmp(next, "NEXT", 4) == 0);
    close(fds[0]);
    close(fds[1]);
}

static void test_chunked_bodies(void)
{
    static const size_t small[] = {1, 2, 3, 4095, 4096, 4097, 10, 65536};
    static const size_t one[] = {BODY};
    check_chunked(small, 8, 1000, false);
    check_chunked(small, 8, 1 << 20, true);
    check_chunked(one, 1, 3, false);
    check_chunked(one, 1, BODY, true);
    check_chunked(one, 0, 100, false); /* no data at all */
}

/* Framing that is not HTTP's: the read fails (CR_STREAM_BAD), it never hands out wrong bytes. */
static void test_bad_chunked_framing(void)
{
    static const char *const bad[] = {"zz\r\nabc", "3\r\nabcX\r\n0\r\n\r\n", "3\nabc\r\n",
                                      "1000000000000000\r\n", "3 x\r\nabc\r\n", "3\r\nabc"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int fds[2];
        static cr_body_stream s;
        CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
        CHECK(write(fds[0], bad[i], strlen(bad[i])) == (ssize_t)strlen(bad[i]));
        shutdown(fds[0], SHUT_WR);
        cr_body_stream_init(&s, fds[1], 0, 0.0, 0, 0, 0, &stop);
        cr_body_stream_chunked(&s);
        char out[64];
        ssize_t k, total = 0;
        while ((k = cr_body_stream_read(&s, out, sizeof out)) > 0)
            total += k;
        CHECK_MSG(k < 0 && (s.error == CR_STREAM_BAD || s.error == CR_STREAM_GONE), "bad framing %zu read %zd", i, k);
        close(fds[0]);
        close(fds[1]);
    }
}

int main(void)
{
    test_bounded_fill_leaves_the_rest_in_the_socket();
    test_plain_fill_takes_a_buffer();
    test_chunked_bodies();
    test_bad_chunked_framing();
    return check_summary("test_body_stream");
}
