/* The bytes a connection has still to write, in order: small ones copied in (HTTP/2 frame
 * headers, nghttp2's control frames, a metadata answer), big ones only referenced where they lie
 * (an inference answer's tensors in the job's output buffer), each kept alive by a hold that is
 * dropped once its bytes are written. So a 256 MiB result goes from its buffer to the socket
 * with no copy in between, and the queue never holds more than the answers it refers to. */
#ifndef CRUNCHD_GRPC_OUTQ_H
#define CRUNCHD_GRPC_OUTQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* What keeps referenced bytes alive: freed when its last reference goes. */
typedef struct cr_grpc_hold {
    int refs;
    void (*free)(struct cr_grpc_hold *h);
} cr_grpc_hold;

void cr_grpc_hold_ref(cr_grpc_hold *h);
void cr_grpc_hold_release(cr_grpc_hold *h);

typedef struct {
    const uint8_t *p;
    size_t len;
    cr_grpc_hold *hold;
} cr_grpc_seg;

struct cr_grpc_chunk;

typedef struct {
    cr_grpc_seg *segs;          /* a ring of cap segments, n of them from head */
    size_t head, n, cap;
    size_t head_off;            /* bytes of segs[head] already written */
    struct cr_grpc_chunk *chunk;/* where copied bytes go */
    uint64_t bytes;             /* queued, not yet written */
    bool failed;                /* out of memory: the connection must close */
} cr_grpc_outq;

void cr_grpc_outq_init(cr_grpc_outq *q);
/* Drops every queued byte and its holds. */
void cr_grpc_outq_free(cr_grpc_outq *q);
/* Copies n bytes to the end. */
void cr_grpc_outq_copy(cr_grpc_outq *q, const void *p, size_t n);
/* References n bytes at p (alive while hold is), taking a reference on hold. */
void cr_grpc_outq_ref(cr_grpc_outq *q, const void *p, size_t n, cr_grpc_hold *hold);

/* Up to max iovecs of the queued bytes from the first unwritten one; how many. */
int cr_grpc_outq_iov(const cr_grpc_outq *q, struct iovec *iov, int max);
/* n bytes were written: their segments (and holds) go. */
void cr_grpc_outq_written(cr_grpc_outq *q, size_t n);

#endif
