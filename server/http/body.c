/* Request bodies in memory; see body.h. */
#include "server/http/body.h"

#include <stdlib.h>
#include <string.h>

#include "server/memory.h"

int cr_body_append(cr_conn *c, const char *data, size_t n, cr_error *err)
{
    if (c->len + n > c->limit)
        return -1;
    if (c->len + n > c->cap) {
        size_t cap = c->cap ? c->cap : 4096;
        while (cap < c->len + n)
            cap *= 2;
        if (cap > c->limit)
            cap = c->limit;
        if (cr_mem_grow(CR_MEM_BODY, c->cap, cap, "the request body", err) < 0)
            return -2;
        char *p = realloc(c->body, cap);
        if (!p) {
            cr_mem_release(CR_MEM_BODY, cap - c->cap);
            cr_fail(err, 503, "host_memory", "", "out of memory reading the body");
            return -2;
        }
        c->body = p;
        c->cap = cap;
    }
    memcpy(c->body + c->len, data, n);
    c->len += n;
    return 0;
}

void cr_body_free(cr_conn *c)
{
    cr_mem_release(CR_MEM_BODY, c->cap);
    free(c->body);
    c->body = NULL;
    c->cap = 0;
}

void cr_body_refuse_later(cr_conn *c, const cr_error *err)
{
    if (c->body_refused)
        return; /* the first reason is the one answered */
    cr_body_free(c);
    c->pending = *err;
    c->has_pending = c->body_refused = true;
}
