/* gRPC's length-prefixed messages (doc/PROTOCOL-HTTP2.md): one direction of a call is a byte
 * stream of messages, each a compressed flag (1 byte), a big-endian length (4 bytes) and that
 * many bytes. The reader cuts a call's request stream into messages as its DATA arrives in
 * pieces of any size: a message's length is checked against the limit and charged to the memory
 * budget as soon as its 5-byte prefix is in, before any of its bytes are kept, and a compressed
 * one is inflated (grpc-encoding gzip or deflate) within the same limit. No HTTP/2 here. */
#ifndef CRUNCHD_GRPC_FRAME_H
#define CRUNCHD_GRPC_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stdatomic.h>

#include "server/codec/coding.h"
#include "server/error.h"

/* The largest message gRPC can frame (its length is a signed 32-bit integer for most peers). */
#define CR_GRPC_MESSAGE_MAX 2147483647u

/* A received message's memory, charged to the budget (CR_MEM_BODY) while it lives, and counted:
 * a request whose tensors stay where they arrived (infer_request.h) holds it until its job's
 * inputs are freed, which may be on a worker thread. */
typedef struct cr_grpc_buf {
    _Atomic int refs;
    uint8_t *base;           /* as allocated */
    void (*release)(void *); /* frees base; NULL: free() */
    uint64_t charged;
    bool tensor_grade;       /* from the backend's host allocator (pinned on cuda): a tensor may stay in it */
} cr_grpc_buf;

void cr_grpc_buf_ref(cr_grpc_buf *b);
/* Drops a reference (a request's hold_release: void *). */
void cr_grpc_buf_release(void *b);

/* One received message: len bytes at p, inside buf (NULL for an empty reader slot). */
typedef struct {
    cr_grpc_buf *buf;
    uint8_t *p;
    size_t len;
    double t0; /* when its prefix came in (monotonic seconds): a stream's request's arrival */
} cr_grpc_msg;

/* Drops the message's reference to its memory. */
void cr_grpc_msg_free(cr_grpc_msg *m);

/* Takes a complete message (it may keep it: m->p = NULL after moving it out); false stops the
 * feed, which then returns 1. */
typedef bool (*cr_grpc_on_message)(void *cls, cr_grpc_msg *m);

/* Where in a message, seen from its first avail bytes, a byte should be aligned (the start of
 * its first big tensor); 0 when there is none or it cannot be told yet. */
typedef size_t (*cr_grpc_align_hint)(const uint8_t *first, size_t avail);

typedef struct {
    uint64_t max_len;   /* bytes one message may have, decoded */
    cr_coding coding;   /* grpc-encoding of compressed messages; identity: none may be */
    /* Big messages (CR_GRPC_TENSOR_GRADE_MIN and up) of a method whose tensors may stay in them
     * come from this allocator (NULL: malloc), aligned where align says. */
    const struct cr_grpc_alloc *alloc;
    uint8_t prefix[5];
    unsigned have;      /* prefix bytes in */
    bool compressed;
    cr_grpc_msg cur;    /* the message being received (its buffer exists once the prefix is in) */
    size_t got;
    uint64_t messages;  /* complete so far */
} cr_grpc_reader;

/* The backend's host memory for big messages (pinned on cuda) and where to align them. */
typedef struct cr_grpc_alloc {
    void *(*alloc)(size_t bytes); /* NULL: malloc, which is tensor-grade where the backend has none */
    void (*free)(void *p);
    cr_grpc_align_hint align;
} cr_grpc_alloc;

/* Messages from this size on are worth keeping their tensors in place: HTTP's --direct-min-kb
 * default, from which uploads are received straight into the (pinned) tensors too. Smaller ones
 * are malloc'd and their tensors copied, which costs less than a pinned block. */
#define CR_GRPC_TENSOR_GRADE_MIN (256u << 10)
/* Their chosen byte lands on this boundary: a vector load's, and a cache line's. */
#define CR_GRPC_ALIGN 64

/* alloc: NULL for a method whose messages are only parsed (metadata, shared memory). */
void cr_grpc_reader_init(cr_grpc_reader *r, uint64_t max_len, cr_coding coding, const cr_grpc_alloc *alloc);

/* Feeds n bytes of the stream, handing each complete message to on_message. 0 when all were
 * taken; 1 when on_message stopped it; -1 with err when the stream is malformed (a flag other
 * than 0 and 1, a compressed message without grpc-encoding, bad compressed data: 400) or over a
 * limit (413 too_large, the budget's 503/413): the reader is then done. */
int cr_grpc_reader_feed(cr_grpc_reader *r, const uint8_t *p, size_t n, cr_grpc_on_message on_message, void *cls,
                        cr_error *err);

/* The stream ended (END_STREAM): -1 with err when it ended inside a message. */
int cr_grpc_reader_end(const cr_grpc_reader *r, cr_error *err);

/* Where the next bytes of the message being received belong, and how many more it takes (*room);
 * NULL outside a message's uncompressed body. A transport may receive them there itself and
 * then feed the same bytes from that address: they are not copied again. */
uint8_t *cr_grpc_reader_dest(const cr_grpc_reader *r, size_t *room);

void cr_grpc_reader_free(cr_grpc_reader *r);

#endif
