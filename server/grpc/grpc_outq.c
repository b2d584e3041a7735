/* The connection's outgoing bytes; see grpc_outq.h. */
#include "server/grpc/grpc_outq.h"

#include <stdlib.h>
#include <string.h>

/* Copied bytes are packed into chunks of this size; a chunk is itself a hold, released by the
 * queue when the next one takes its place and by each of its segments once written. */
#define CHUNK_BYTES (64 << 10)

typedef struct cr_grpc_chunk {
    cr_grpc_hold hold;
    size_t used;
    uint8_t data[CHUNK_BYTES];
} cr_grpc_chunk;

void cr_grpc_hold_ref(cr_grpc_hold *h) { h->refs++; }

void cr_grpc_hold_release(cr_grpc_hold *h)
{
    if (h && --h->refs == 0)
        h->free(h);
}

static void chunk_free(cr_grpc_hold *h) { free(h); }

void cr_grpc_outq_init(cr_grpc_outq *q) { memset(q, 0, sizeof *q); }

void cr_grpc_outq_free(cr_grpc_outq *q)
{
    for (size_t i = 0; i < q->n; i++)
        cr_grpc_hold_release(q->segs[(q->head + i) % q->cap].hold);
    free(q->segs);
    if (q->chunk)
        cr_grpc_hold_release(&q->chunk->hold);
    memset(q, 0, sizeof *q);
}

static cr_grpc_seg *last_seg(cr_grpc_outq *q)
{
    return q->n ? &q->segs[(q->head + q->n - 1) % q->cap] : NULL;
}

static bool grow(cr_grpc_outq *q)
{
    if (q->n < q->cap)
        return true;
    size_t cap = q->cap ? q->cap * 2 : 64;
    cr_grpc_seg *s = malloc(cap * sizeof *s);
    if (!s)
        return false;
    for (size_t i = 0; i < q->n; i++)
        s[i] = q->segs[(q->head + i) % q->cap];
    free(q->segs);
    q->segs = s;
    q->cap = cap;
    q->head = 0;
    return true;
}

static void push(cr_grpc_outq *q, const uint8_t *p, size_t n, cr_grpc_hold *hold)
{
    if (!grow(q)) {
        q->failed = true;
        return;
    }
    cr_grpc_hold_ref(hold);
    q->segs[(q->head + q->n) % q->cap] = (cr_grpc_seg){p, n, hold};
    q->n++;
    q->bytes += n;
}

void cr_grpc_outq_ref(cr_grpc_outq *q, const void *p, size_t n, cr_grpc_hold *hold)
{
    if (n && !q->failed)
        push(q, p, n, hold);
}

/* A chunk with room for at least one more byte. */
static cr_grpc_chunk *chunk_with_room(cr_grpc_outq *q)
{
    if (q->chunk && q->chunk->used < CHUNK_BYTES)
        return q->chunk;
    cr_grpc_chunk *c = malloc(sizeof *c);
    if (!c)
        return NULL;
    c->hold = (cr_grpc_hold){1, chunk_free};
    c->used = 0;
    if (q->chunk)
        cr_grpc_hold_release(&q->chunk->hold);
    return q->chunk = c;
}

void cr_grpc_outq_copy(cr_grpc_outq *q, const void *p, size_t n)
{
    const uint8_t *src = p;
    while (n && !q->failed) {
        cr_grpc_chunk *c = chunk_with_room(q);
        if (!c) {
            q->failed = true;
            return;
        }
        size_t k = CHUNK_BYTES - c->used < n ? CHUNK_BYTES - c->used : n;
        uint8_t *dst = c->data + c->used;
        memcpy(dst, src, k);
        c->used += k;
        cr_grpc_seg *s = last_seg(q);
        if (s && s->hold == &c->hold && s->p + s->len == dst) { /* grows the segment before it */
            s->len += k;
            q->bytes += k;
        } else {
            push(q, dst, k, &c->hold);
        }
        src += k;
        n -= k;
    }
}

int cr_grpc_outq_iov(const cr_grpc_outq *q, struct iovec *iov, int max)
{
    int k = 0;
    for (size_t i = 0; i < q->n && k < max; i++, k++) {
        const cr_grpc_seg *s = &q->segs[(q->head + i) % q->cap];
        size_t off = i == 0 ? q->head_off : 0;
        iov[k] = (struct iovec){(void *)(s->p + off), s->len - off};
    }
    return k;
}

void cr_grpc_outq_written(cr_grpc_outq *q, size_t n)
{
    q->bytes -= n;
    while (n && q->n) {
        cr_grpc_seg *s = &q->segs[q->head];
        size_t left = s->len - q->head_off;
        if (n < left) {
            q->head_off += n;
            return;
        }
        n -= left;
        cr_grpc_hold_release(s->hold);
        q->head = (q->head + 1) % q->cap;
        q->n--;
        q->head_off = 0;
    }
    if (q->n == 0 && q->chunk) { /* an idle connection keeps no chunk */
        cr_grpc_hold_release(&q->chunk->hold);
        q->chunk = NULL;
    }
}
