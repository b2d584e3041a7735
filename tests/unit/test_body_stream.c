/* Unit tests for the direct path's body reader (server/http/body_stream.c), over a socketpair:
 * a bounded fill reads no further than asked, so array bytes after a parsed head stay in the
 * socket to be received in place (a plain fill takes up to its 64 KiB buffer); what was buffered
 * is handed out first and the rest comes from the socket, in order; the body's length bounds
 * every read, so the next request's bytes are never taken. */
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/http/body_stream.h"
#include "tests/unit/check.h"

#define BODY (128 * 1024)

static char body[BODY + 100], got[BODY];
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

int main(void)
{
    test_bounded_fill_leaves_the_rest_in_the_socket();
    test_plain_fill_takes_a_buffer();
    return check_summary("test_body_stream");
}
