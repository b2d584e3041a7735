/* gRPC's length-prefixed messages; see grpc_frame.h. */
#include "server/grpc/grpc_frame.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/clock.h"
#include "server/codec/body_inflate.h"
#include "server/memory.h"

void cr_grpc_msg_free(cr_grpc_msg *m)
{
    free(m->p);
    if (m->charged)
        cr_mem_release(CR_MEM_BODY, m->charged);
    memset(m, 0, sizeof *m);
}

void cr_grpc_reader_init(cr_grpc_reader *r, uint64_t max_len, cr_coding coding)
{
    memset(r, 0, sizeof *r);
    r->max_len = max_len < CR_GRPC_MESSAGE_MAX ? max_len : CR_GRPC_MESSAGE_MAX;
    r->coding = coding;
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

/* The prefix is in: the message's buffer, once its length passed the limits. */
static int begin_message(cr_grpc_reader *r, cr_error *err)
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
    if (cr_mem_charge(CR_MEM_BODY, len, "a gRPC message", err) < 0)
        return -1;
    r->cur.charged = len;
    r->cur.len = len;
    r->cur.t0 = cr_now();
    if (!(r->cur.p = malloc(len ? len : 1))) {
        cr_grpc_msg_free(&r->cur);
        return cr_fail(err, 503, "host_memory", "", "out of memory for a message of %u bytes", len);
    }
    r->got = 0;
    return 0;
}

/* A compressed message's bytes, inflated into a buffer that grows within the limit. */
typedef struct {
    cr_grpc_reader *r;
    cr_grpc_msg out;
    size_t cap;
    cr_error *err;
    bool failed;
} inflate_sink;

static int inflate_piece(void *cls, const char *data, size_t n)
{
    inflate_sink *s = cls;
    if (s->out.len + n > s->r->max_len) {
        too_large(s->r, s->out.len + n, "more than ", s->err);
        return s->failed = true, 1;
    }
    if (s->out.len + n > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64 << 10;
        cap = cap < s->out.len + n ? s->out.len + n : cap;
        cap = cap > s->r->max_len ? (size_t)s->r->max_len : cap;
        if (cr_mem_grow(CR_MEM_BODY, s->out.charged, cap, "a decompressed gRPC message", s->err) < 0)
            return s->failed = true, 1;
        uint8_t *p = realloc(s->out.p, cap);
        if (!p) {
            cr_mem_release(CR_MEM_BODY, cap - s->out.charged);
            cr_fail(s->err, 503, "host_memory", "", "out of memory decompressing a message");
            return s->failed = true, 1;
        }
        s->out.p = p;
        s->out.charged = cap;
        s->cap = cap;
    }
    memcpy(s->out.p + s->out.len, data, n);
    s->out.len += n;
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
    if (rc != 0) {
        cr_grpc_msg_free(&s.out);
        return -1;
    }
    s.out.t0 = r->cur.t0;
    cr_grpc_msg_free(&r->cur);
    r->cur = s.out;
    return 0;
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
            if (begin_message(r, err) < 0)
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
    if (r->have < 5 || !r->cur.p || r->compressed || r->got >= r->cur.len)
        return NULL;
    *room = r->cur.len - r->got;
    return r->cur.p + r->got;
}
