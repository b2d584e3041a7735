/* Bodies read from our own sockets; see body_stream.h. */
#include "server/http/body_stream.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "server/clock.h"
#include "server/obs/metrics.h"

void cr_body_stream_init(cr_body_stream *s, int fd, uint64_t length, double t0, int head_s, int min_rate_kbs,
                         int idle_s, const _Atomic bool *stop)
{
    s->fd = fd;
    s->left = length;
    s->got = 0;
    s->t0 = t0;
    s->head_s = head_s;
    s->min_rate = min_rate_kbs * 1024.0;
    s->idle_s = idle_s;
    s->stop = stop;
    s->error = CR_STREAM_OK;
    s->pos = s->len = 0;
    s->chunked = false;
    s->chunk_left = s->chunks = 0;
}

void cr_body_stream_chunked(cr_body_stream *s)
{
    s->chunked = true;
    s->left = UINT64_MAX;
}

/* When the body must have reached its current length plus one more byte, at the latest. */
static double deadline(const cr_body_stream *s, double since)
{
    double d = s->idle_s > 0 ? since + s->idle_s : 1e300;
    if (s->head_s > 0 && s->min_rate > 0) {
        double rate = s->t0 + s->head_s + (double)s->got / s->min_rate;
        d = rate < d ? rate : d;
    }
    return d;
}

static int fail(cr_body_stream *s, cr_stream_error e)
{
    s->error = e;
    return -1;
}

/* One recv of up to n bytes into dst. The socket blocks with a receive timeout of a slice
 * (direct_io.c sets both), so the thread sleeps in the kernel while the client sends, and
 * MSG_WAITALL (whole) fills a whole piece of array data per call: one system call per piece, no
 * poll between them (on the H100 machine the 128 MiB receive took the same 28.5 ms as a loop of
 * non-blocking recv and poll: the copy bounds it, not the calls). A slice that passes with
 * nothing received checks the stop flag and the deadlines. */
static ssize_t sock_recv(cr_body_stream *s, void *dst, size_t n, int flags)
{
    double until = deadline(s, cr_now());
    for (;;) {
        ssize_t got = recv(s->fd, dst, n, flags);
        if (got > 0 && (flags & MSG_PEEK))
            return got;
        if (got > 0) {
            s->got += (uint64_t)got;
            cr_metrics_bytes_in((uint64_t)got);
            /* a trickle gets bytes in every slice: its average is what is held against it */
            return cr_now() >= deadline(s, 1e300) ? fail(s, CR_STREAM_SLOW) : got;
        }
        if (got == 0)
            return fail(s, CR_STREAM_GONE);
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return fail(s, CR_STREAM_GONE);
        if (atomic_load(s->stop))
            return fail(s, CR_STREAM_STOPPED);
        if (cr_now() >= until)
            return fail(s, CR_STREAM_SLOW);
    }
}

/* ---- chunked framing ---- */

/* The next line without its CRLF into line (at most cap - 1 bytes, else the framing is bad),
 * taken off the socket to its LF and no further: the chunk's data after it is then received in
 * place, and a pipelined request after the body stays in the socket. Each peek either finds the LF
 * or takes what it saw (all of it line), so a line split across packets costs no spinning. */
static int raw_line(cr_body_stream *s, char *line, size_t cap)
{
    size_t have = 0;
    for (;;) {
        char peek[64];
        ssize_t n = sock_recv(s, peek, sizeof peek, MSG_PEEK);
        if (n < 0)
            return -1;
        char *lf = memchr(peek, '\n', (size_t)n);
        size_t take = lf ? (size_t)(lf - peek) + 1 : (size_t)n;
        if (have + take > cap + 1 || sock_recv(s, line + have, take, MSG_WAITALL) != (ssize_t)take)
            return s->error == CR_STREAM_OK ? fail(s, CR_STREAM_BAD) : -1;
        have += take;
        if (lf) {
            if (have < 2 || line[have - 2] != '\r') /* a bare LF */
                return fail(s, CR_STREAM_BAD);
            line[have - 2] = '\0';
            return 0;
        }
    }
}

/* Past the previous chunk's CRLF, the next chunk's size line; the last chunk's trailers. */
static int next_chunk(cr_body_stream *s)
{
    char line[258];
    if (s->chunks++ && (raw_line(s, line, 2) < 0 || line[0]))
        return s->error == CR_STREAM_OK ? fail(s, CR_STREAM_BAD) : -1;
    if (raw_line(s, line, 256) < 0)
        return -1;
    size_t digits = strspn(line, "0123456789abcdefABCDEF");
    if (!digits || digits > 15 || (line[digits] && line[digits] != ';'))
        return fail(s, CR_STREAM_BAD);
    s->chunk_left = strtoull(line, NULL, 16);
    if (s->chunk_left)
        return 0;
    do { /* the trailer fields, then the empty line that ends the body */
        if (raw_line(s, line, 256) < 0)
            return -1;
    } while (line[0]);
    s->left = 0;
    return 0;
}

/* Up to n data bytes of a chunked body, never past the chunk. 0 at the body's end. */
static ssize_t chunked_recv(cr_body_stream *s, void *dst, size_t n, bool whole)
{
    while (!s->chunk_left && s->left)
        if (next_chunk(s) < 0)
            return -1;
    if (!s->left)
        return 0;
    n = n < s->chunk_left ? n : (size_t)s->chunk_left;
    ssize_t got = sock_recv(s, dst, n, whole ? MSG_WAITALL : 0);
    if (got > 0)
        s->chunk_left -= (uint64_t)got;
    return got;
}

/* Up to n body bytes (n <= s->left) into dst. */
static ssize_t receive(cr_body_stream *s, void *dst, size_t n, bool whole)
{
    if (s->chunked)
        return chunked_recv(s, dst, n, whole);
    ssize_t got = sock_recv(s, dst, n, whole ? MSG_WAITALL : 0);
    if (got > 0)
        s->left -= (uint64_t)got;
    return got;
}

ssize_t cr_body_stream_fill(cr_body_stream *s, size_t min) { return cr_body_stream_fill_upto(s, min, sizeof s->buf); }

ssize_t cr_body_stream_fill_upto(cr_body_stream *s, size_t min, size_t most)
{
    if (s->len - s->pos >= min || !s->left)
        return (ssize_t)(s->len - s->pos);
    memmove(s->buf, s->buf + s->pos, s->len - s->pos);
    s->len -= s->pos;
    s->pos = 0;
    most = most < min ? min : most < sizeof s->buf ? most : sizeof s->buf;
    while (s->len < min && s->left) {
        size_t room = most - s->len;
        ssize_t got = receive(s, s->buf + s->len, room < s->left ? room : (size_t)s->left, false);
        if (got < 0)
            return -1;
        s->len += (size_t)got;
    }
    return (ssize_t)s->len;
}

void cr_body_stream_take(cr_body_stream *s, size_t n)
{
    s->pos += n;
}

ssize_t cr_body_stream_read(cr_body_stream *s, void *dst, size_t n)
{
    size_t buffered = s->len - s->pos;
    if (buffered) {
        size_t k = n < buffered ? n : buffered;
        memcpy(dst, s->buf + s->pos, k);
        s->pos += k;
        return (ssize_t)k;
    }
    if (!s->left || !n)
        return 0;
    n = n < s->left ? n : (size_t)s->left;
    return receive(s, dst, n < CR_BODY_STREAM_PIECE ? n : CR_BODY_STREAM_PIECE, true);
}

int cr_body_stream_discard(cr_body_stream *s)
{
    s->pos = s->len = 0;
    while (s->left) {
        ssize_t got = receive(s, s->buf, s->left < sizeof s->buf ? (size_t)s->left : sizeof s->buf, false);
        if (got < 0)
            return -1;
    }
    s->pos = s->len = 0;
    return 0;
}
