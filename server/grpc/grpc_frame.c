/* gRPC's length-prefixed messages; see grpc_frame.h. */
#include "server/grpc/grpc_frame.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/clock.h"
#include "server/codec/body_inflate.h"
#include "server/memory.h"

void cr_grpc_buf_ref(cr_grpc_buf *b) { atomic_fetch_add(&b->refs, 1); }

void cr_grpc_buf_release(void *p)
{
    cr_grpc_buf *b = p;
    if (!b || atomic_fetch_sub(&b->refs, 1) != 1)
        return;
    if (b->release)
        b->release(b->base);
    else
        free(b->base);
    if (b->charged)
        cr_mem_release(CR_MEM_BODY, b->charged);
    free(b);
}

void cr_grpc_msg_free(cr_grpc_msg *m)
{
    cr_grpc_buf_release(m->buf);
    memset(m, 0, sizeof *m);
}

void cr_grpc_reader_init(cr_grpc_reader *r, uint64_t max_len, cr_coding coding, const cr_grpc_alloc *alloc)
{
    memset(r, 0, sizeof *r);
    r->max_len = max_len < CR_GRPC_MESSAGE_MAX ? max_len : CR_GRPC_MESSAGE_MAX;
    r->coding = coding;
    r->alloc = alloc;
}

void cr_grpc_reader_free(cr_grpc_reader *r)
{
    cr_grpc_msg_free(&r->cur);
    r->have = 0;
    r->got = 0;
}

static int too_large(const cr_grpc_reader *r, uint64_t len, const char *what, cr_error *err)
{
    return cr_fail(err, 413, "too_large", "message",
                   "message %llu is %s%llu bytes, over this call's limit of %llu (--max-body-mb)",
                   (unsigned long long)r->messages + 1, what, (unsigned long long)len,
                   (unsigned long long)r->max_len);
}

/* Memory for a message of len bytes, charged first. A big one of a method with an allocator comes
 * from it (the backend's pinned memory on cuda), with room to put the byte its hint names (seen
 * in the first avail bytes) on a CR_GRPC_ALIGN boundary. NULL with err. */
static cr_grpc_buf *buf_new(const cr_grpc_reader *r, uint32_t len, const uint8_t *first, size_t avail, uint8_t **p,
                            cr_error *err)
{
    const cr_grpc_alloc *a = r->alloc;
    bool grade = a && !r->compressed && len >= CR_GRPC_TENSOR_GRADE_MIN;
    size_t cap = (size_t)len + (grade ? CR_GRPC_ALIGN : 0);
    if (cr_mem_charge(CR_MEM_BODY, cap, "a gRPC message", err) < 0)
        return NULL;
    cr_grpc_buf *b = calloc(1, sizeof *b);
    if (!b) {
        cr_mem_release(CR_MEM_BODY, cap);
        cr_fail(err, 503, "host_memory", "", "out of memory");
        return NULL;
    }
    atomic_init(&b->refs, 1);
    b->charged = cap;
    b->tensor_grade = grade;
    b->release = grade && a->alloc ? a->free : NULL;
    b->base = grade && a->alloc ? a->alloc(cap) : malloc(cap ? cap : 1);
    if (!b->base) {
        cr_mem_release(CR_MEM_BODY, cap);
        free(b);
        cr_fail(err, 503, "host_memory", "", "out of memory for a message of %u bytes", len);
        return NULL;
    }
    size_t at = grade && a->align ? a->align(first, avail) : 0, pad = 0;
    if (grade)
        pad = (CR_GRPC_ALIGN - ((uintptr_t)b->base + at) % CR_GRPC_ALIGN) % CR_GRPC_ALIGN;
    *p = b->base + pad;
    return b;
}

/* The prefix is in: the message's buffer, once its length passed the limits. first, avail: the
 * bytes of the message already at hand. */
static int begin_message(cr_grpc_reader *r, const uint8_t *first, size_t avail, cr_error *err)
{
    uint8_t flag = r->prefix[0];
    uint32_t len = (uint32_t)r->prefix[1] << 24 | (uint32_t)r->prefix[2] << 16 | (uint32_t)r->prefix[3] << 8 |
                   r->prefix[4];
    if (flag > 1)
        return cr_fail(err, 400, "invalid_field", "message",
                       "message %llu has compressed flag %u: a gRPC message's first byte is 0 or 1",
                       (unsigned long long)r->messages + 1, flag);
    if (flag && r->coding == CR_CODING_IDENTITY)
        return cr_fail(err, 400, "invalid_field", "grpc-encoding",
                       "message %llu is compressed but the call has no grpc-encoding",
                       (unsigned long long)r->messages + 1);
    if (len > r->max_len) /* a compressed one may not even be that long */
        return too_large(r, len, flag ? "compressed to " : "", err);
    r->compressed = flag;
    if (!(r->cur.buf = buf_new(r, len, first, avail < len ? avail : len, &r->cur.p, err)))
        return -1;
    r->cur.len = len;
    r->cur.t0 = cr_now();
    r->got = 0;
    return 0;
}

/* A compressed message's bytes, inflated into a buffer that grows within the limit. */
typedef struct {
    cr_grpc_reader *r;
    uint8_t *p;
    size_t len, cap;
    uint64_t charged;
    cr_error *err;
    bool failed;
} inflate_sink;

static int inflate_piece(void *cls, const char *data, size_t n)
{
    inflate_sink *s = cls;
    if (s->len + n > s->r->max_len) {
        too_large(s->r, s->len + n, "more than ", s->err);
        return s->failed = true, 1;
    }
    if (s->len + n > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64 << 10;
        cap = cap < s->len + n ? s->len + n : cap;
        cap = cap > s->r->max_len ? (size_t)s->r->max_len : cap;
        if (cr_mem_grow(CR_MEM_BODY, s->charged, cap, "a decompressed gRPC message", s->err) < 0)
            return s->failed = true, 1;
        uint8_t *p = realloc(s->p, cap);
        if (!p) {
            cr_mem_release(CR_MEM_BODY, cap - s->charged);
            cr_fail(s->err, 503, "host_memory", "", "out of memory decompressing a message");
            return s->failed = true, 1;
        }
        s->p = p;
        s->charged = s->cap = cap;
    }
    memcpy(s->p + s->len, data, n);
    s->len += n;
    return 0;
}

/* The inflated bytes as the message (plain memory: its tensors are copied out of it). */
static int adopt_inflated(cr_grpc_reader *r, inflate_sink *s, cr_error *err)
{
    cr_grpc_buf *b = calloc(1, sizeof *b);
    if (!b)
        return cr_fail(err, 503, "host_memory", "", "out of memory");
    atomic_init(&b->refs, 1);
    b->base = s->p ? s->p : malloc(1);
    b->charged = s->charged;
    double t0 = r->cur.t0;
    cr_grpc_msg_free(&r->cur);
    r->cur = (cr_grpc_msg){b, b->base, s->len, t0};
    return 0;
}

static int inflate_message(cr_grpc_reader *r, cr_error *err)
{
    cr_inflater *z = cr_inflater_new(r->coding);
    if (!z)
        return cr_fail(err, 503, "host_memory", "", "out of memory for a decompressor");
    inflate_sink s = {.r = r, .err = err};
    int rc = cr_inflater_feed(z, r->cur.p, r->cur.len, inflate_piece, &s, err);
    if (rc == 0)
        rc = cr_inflater_finish(z, err);
    cr_inflater_free(z);
    if (rc != 0 && !s.failed) { /* the data's fault, not a limit's: said as gRPC says it */
        char why[sizeof err->message];
        snprintf(why, sizeof why, "%s", err->message);
        cr_fail(err, 400, "invalid_encoding", "grpc-encoding", "message %llu is not valid %s data (%s)",
                (unsigned long long)r->messages + 1, cr_coding_name(r->coding), why);
    }
    if (rc == 0 && adopt_inflated(r, &s, err) == 0)
        return 0;
    free(s.p);
    if (s.charged)
        cr_mem_release(CR_MEM_BODY, s.charged);
    return -1;
}

/* The message is complete: decoded if it must be, handed over, and the reader ready for the next. */
static int finish_message(cr_grpc_reader *r, cr_grpc_on_message on_message, void *cls, bool *stop, cr_error *err)
{
    if (r->compressed && inflate_message(r, err) < 0)
        return -1;
    cr_grpc_msg m = r->cur;
    memset(&r->cur, 0, sizeof r->cur);
    r->have = 0;
    r->got = 0;
    r->messages++;
    *stop = !on_message(cls, &m);
    cr_grpc_msg_free(&m);
    return 0;
}

int cr_grpc_reader_feed(cr_grpc_reader *r, const uint8_t *p, size_t n, cr_grpc_on_message on_message, void *cls,
                        cr_error *err)
{
    while (n > 0) {
        if (r->have < 5) {
            size_t k = 5 - r->have < n ? 5 - r->have : n;
            memcpy(r->prefix + r->have, p, k);
            r->have += (unsigned)k, p += k, n -= k;
            if (r->have < 5)
                return 0;
            if (begin_message(r, p, n, err) < 0)
                return -1;
        }
        size_t k = r->cur.len - r->got < n ? r->cur.len - r->got : n;
        if (k && r->cur.p + r->got != p) /* received in place already: no copy */
            memcpy(r->cur.p + r->got, p, k);
        r->got += k, p += k, n -= k;
        if (r->got < r->cur.len)
            return 0;
        bool stop = false;
        if (finish_message(r, on_message, cls, &stop, err) < 0)
            return -1;
        if (stop)
            return 1;
    }
    return 0;
}

int cr_grpc_reader_end(const cr_grpc_reader *r, cr_error *err)
{
    if (r->have == 0)
        return 0;
    return cr_fail(err, 400, "invalid_field", "message", "the request stream ends inside message %llu (%s)",
                   (unsigned long long)r->messages + 1, r->have < 5 ? "in its 5-byte prefix" : "before its last byte");
}

uint8_t *cr_grpc_reader_dest(const cr_grpc_reader *r, size_t *room)
{
    *room = 0;
    if (r->have < 5 || !r->cur.buf || r->compressed || r->got >= r->cur.len)
        return NULL;
    *room = r->cur.len - r->got;
    return r->cur.p + r->got;
}
