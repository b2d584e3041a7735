/* A request body read from a socket we own (the Unix socket's direct path, direct.c), exactly
 * Content-Length bytes of it: small pieces through a buffer (multipart boundaries, .npy headers),
 * array data received straight into its destination. Every wait is bounded as libmicrohttpd's
 * connections are (read_deadline.h): the body must average --min-body-rate-kbs after
 * --read-timeout-s, and no single wait outlasts --conn-timeout-s. */
#ifndef CRUNCHD_HTTP_BODY_STREAM_H
#define CRUNCHD_HTTP_BODY_STREAM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CR_BODY_STREAM_BUF (64 * 1024)
/* Data received in place arrives in pieces of at most this: each is handed on (to the copy to the
 * device) as soon as it is whole. */
#define CR_BODY_STREAM_PIECE (2u << 20)

typedef enum {
    CR_STREAM_OK,
    CR_STREAM_GONE,    /* the client closed or reset the connection mid-body */
    CR_STREAM_SLOW,    /* a deadline passed (answered 408 in the log, the connection closed) */
    CR_STREAM_STOPPED, /* the daemon is stopping */
    CR_STREAM_BAD,     /* chunked framing that is not HTTP/1.1's (a 400 in the log, the connection closed) */
} cr_stream_error;

typedef struct {
    int fd;
    uint64_t left;             /* body bytes still on the wire (chunked: UINT64_MAX until the last chunk) */
    bool chunked;              /* Transfer-Encoding: chunked, of any length */
    uint64_t chunk_left;       /* chunked: data bytes left in the current chunk */
    uint64_t chunks;           /* chunked: chunks begun */
    uint64_t got;              /* body bytes read from the socket */
    double t0;                 /* when the head was read */
    double head_s, min_rate, idle_s; /* --read-timeout-s, --min-body-rate-kbs in bytes/s, --conn-timeout-s (0: none) */
    const _Atomic bool *stop;
    cr_stream_error error;
    size_t pos, len;           /* buf[pos, len) is read and not yet taken */
    char buf[CR_BODY_STREAM_BUF];
} cr_body_stream;

void cr_body_stream_init(cr_body_stream *s, int fd, uint64_t length, double t0, int head_s, int min_rate_kbs,
                         int idle_s, const _Atomic bool *stop);
/* The body is chunked (RFC 9112 7.1): its data as one stream of bytes, the framing checked and
 * dropped (chunk extensions and trailers are read and ignored), of any length. */
void cr_body_stream_chunked(cr_body_stream *s);
/* Buffered body bytes: at least min of them (min <= CR_BODY_STREAM_BUF) unless the body ends
 * first. Their count, or -1 (s->error says why). */
ssize_t cr_body_stream_fill(cr_body_stream *s, size_t min);
/* The same, reading no further than `most` buffered bytes (min <= most): for a parser that looks
 * at a few bytes (a part's head, a .npy header, a delimiter) before array data that is received
 * in place; the buffer's read-ahead would be array bytes copied out of it again. */
ssize_t cr_body_stream_fill_upto(cr_body_stream *s, size_t min, size_t most);
static inline const char *cr_body_stream_data(const cr_body_stream *s) { return s->buf + s->pos; }
/* Drops n buffered bytes (n <= what fill returned). */
void cr_body_stream_take(cr_body_stream *s, size_t n);
/* Up to n body bytes into dst: buffered ones first, then straight from the socket. Their count,
 * 0 at the body's end, -1 on an error. */
ssize_t cr_body_stream_read(cr_body_stream *s, void *dst, size_t n);
/* Reads and drops the rest of the body. 0, or -1. */
int cr_body_stream_discard(cr_body_stream *s);
/* Whether every body byte has been taken. */
static inline bool cr_body_stream_done(const cr_body_stream *s) { return !s->left && s->pos == s->len; }

#endif
