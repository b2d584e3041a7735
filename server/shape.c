/* Shapes and numpy.matmul's rules; see shape.h. */
#include "server/shape.h"

#include <stdio.h>
#include <string.h>

uint64_t cr_shape_count(const cr_shape *s)
{
    uint64_t n = 1;
    for (int d = 0; d < s->rank; d++)
        if (s->dims[d] < 0 || __builtin_mul_overflow(n, (uint64_t)s->dims[d], &n))
            return UINT64_MAX;
    return n;
}

void cr_shape_format(const cr_shape *s, char *out, size_t n)
{
    size_t at = (size_t)snprintf(out, n, "(");
    for (int d = 0; d < s->rank && at < n; d++)
        at += (size_t)snprintf(out + at, n - at, "%s%lld", d ? ", " : "", (long long)s->dims[d]);
    if (at < n)
        snprintf(out + at, n - at, s->rank == 1 ? ",)" : ")");
}

cr_shape cr_shape_2d(int64_t rows, int64_t cols)
{
    cr_shape s = {.rank = 2};
    s.dims[0] = rows;
    s.dims[1] = cols;
    return s;
}

int cr_shape_check(const cr_shape *s, const char *field, int64_t max_stack, cr_error *err)
{
    char text[160];
    if (s->rank < 1 || s->rank > CR_RANK_MAX)
        return cr_fail(err, 400, "invalid_field", field, "%s has %d dimensions; a matrix operand has 1 to %d",
                       field, s->rank, CR_RANK_MAX);
    uint64_t stack = 1;
    for (int d = 0; d < s->rank; d++) {
        if (s->dims[d] < 1) {
            cr_shape_format(s, text, sizeof text);
            return cr_fail(err, 400, "invalid_field", field, "%s has shape %s: every dimension must be >= 1", field,
                           text);
        }
        if (d < s->rank - 2 && __builtin_mul_overflow(stack, (uint64_t)s->dims[d], &stack))
            stack = UINT64_MAX;
    }
    if (stack > (uint64_t)max_stack) {
        cr_shape_format(s, text, sizeof text);
        return cr_fail(err, 413, "too_large", field, "%s has shape %s: a stack of %llu matrices, over the limit of %lld "
                       "(--max-stack)", field, text, (unsigned long long)stack, (long long)max_stack);
    }
    return 0;
}

/* ---- numpy.matmul ------------------------------------------------------------------------- */

/* The batch dimensions of a (promoted) operand: all but its last two. */
static void batch_of(const cr_shape *s, cr_shape *b)
{
    b->rank = s->rank - 2;
    memcpy(b->dims, s->dims, sizeof b->dims[0] * (size_t)b->rank);
}

/* numpy's broadcast of two batch shapes into r; -1 when a pair of dimensions differs, neither 1. */
static int broadcast(const cr_shape *x, const cr_shape *y, cr_shape *r)
{
    r->rank = x->rank > y->rank ? x->rank : y->rank;
    for (int d = 0; d < r->rank; d++) {
        int dx = d - (r->rank - x->rank), dy = d - (r->rank - y->rank);
        int64_t a = dx >= 0 ? x->dims[dx] : 1, b = dy >= 0 ? y->dims[dy] : 1;
        if (a != b && a != 1 && b != 1)
            return -1;
        r->dims[d] = a == 1 ? b : a;
    }
    return 0;
}

static int refuse_shapes(cr_error *err, int status, const char *field, const char *what, const cr_shape *x,
                         const char *xn, const cr_shape *y, const char *yn)
{
    char sx[160], sy[160];
    cr_shape_format(x, sx, sizeof sx);
    cr_shape_format(y, sy, sizeof sy);
    return cr_fail(err, status, status == 422 ? "shape_mismatch" : "invalid_field", field, "%s %s and %s %s: %s", xn,
                   sx, yn, sy, what);
}

/* A matrix operand as numpy.matmul sees it: a 1-D one promoted to a matrix (row for a, column for b). */
static cr_shape promoted(const cr_shape *s, bool is_a)
{
    if (s->rank != 1)
        return *s;
    return is_a ? cr_shape_2d(1, s->dims[0]) : cr_shape_2d(s->dims[0], 1);
}

static void plan_stack(cr_task *t, const cr_shape *r, const cr_shape *ba, const cr_shape *bb, const cr_shape *bc)
{
    memset(&t->stack, 0, sizeof t->stack);
    bool stacked = r->rank > 0 || (bc && bc->rank > 0);
    if (!stacked)
        return;
    int nrank[CR_STACK_OPERANDS] = {ba->rank, bb ? bb->rank : -1, bc ? bc->rank : -1};
    int64_t ndims[CR_STACK_OPERANDS][CR_STACK_DIMS] = {{0}};
    memcpy(ndims[0], ba->dims, sizeof(int64_t) * (size_t)ba->rank);
    if (bb)
        memcpy(ndims[1], bb->dims, sizeof(int64_t) * (size_t)bb->rank);
    if (bc)
        memcpy(ndims[2], bc->dims, sizeof(int64_t) * (size_t)bc->rank);
    cr_stack_plan(&t->stack, r->rank, r->dims, nrank, ndims);
}

/* c aligned with the whole result (batch..., m, n): numpy broadcasts it against the result as the
 * client sees it (without a 1-D operand's removed dimension), which puts a 1 back where that was. */
static int align_c(const cr_shape *c, const cr_shape *out, const cr_shape *full, bool a1d, bool b1d,
                   cr_shape *c_full, cr_error *err)
{
    if (c->rank > out->rank)
        return refuse_shapes(err, 422, "c", "c has more dimensions than the result", c, "c", out, "the result");
    for (int d = 0; d < c->rank; d++) {
        int64_t cd = c->dims[c->rank - 1 - d], od = out->dims[out->rank - 1 - d];
        if (cd != od && cd != 1)
            return refuse_shapes(err, 422, "c", "c does not broadcast to the result's shape", c, "c", out,
                                 "the result");
    }
    /* out's dimension j is full's map[j]: full lacks m when a is 1-D, n when b is 1-D */
    c_full->rank = full->rank;
    for (int d = 0; d < full->rank; d++)
        c_full->dims[d] = 1;
    int map[CR_RANK_MAX], j = 0;
    for (int d = 0; d < full->rank; d++)
        if (!((a1d && d == full->rank - 2) || (b1d && d == full->rank - 1)))
            map[j++] = d;
    for (int d = 0; d < c->rank; d++)
        c_full->dims[map[out->rank - c->rank + d]] = c->dims[d];
    return 0;
}

int cr_matmul_plan(const cr_shape *a, const cr_shape *b, const cr_shape *c, bool trans_a, bool trans_b,
                   cr_task *t, cr_shape *out, cr_shape *c_full, bool *c_expand, cr_error *err)
{
    *c_expand = false;
    if (a->rank == 1 && trans_a)
        return cr_fail(err, 400, "invalid_field", "trans_a", "trans_a transposes a matrix; a is 1-D (a vector)");
    if (b->rank == 1 && trans_b)
        return cr_fail(err, 400, "invalid_field", "trans_b", "trans_b transposes a matrix; b is 1-D (a vector)");
    cr_shape A = promoted(a, true), B = promoted(b, false), ba, bb, r, full;
    cr_gemm_task *g = &t->u.gemm;
    g->trans_a = trans_a;
    g->trans_b = trans_b;
    g->m = A.dims[A.rank - (trans_a ? 1 : 2)];
    g->k = A.dims[A.rank - (trans_a ? 2 : 1)];
    int64_t kb = B.dims[B.rank - (trans_b ? 1 : 2)];
    g->n = B.dims[B.rank - (trans_b ? 2 : 1)];
    if (kb != g->k) {
        char what[160];
        snprintf(what, sizeof what, "op(a) is %lld x %lld but op(b) is %lld x %lld: inner dimensions differ",
                 (long long)g->m, (long long)g->k, (long long)kb, (long long)g->n);
        return refuse_shapes(err, 422, "b", what, a, "a", b, "b");
    }
    batch_of(&A, &ba);
    batch_of(&B, &bb);
    if (broadcast(&ba, &bb, &r) < 0)
        return refuse_shapes(err, 422, "b", "their batch dimensions do not broadcast", a, "a", b, "b");
    full = r;
    full.dims[full.rank++] = g->m;
    full.dims[full.rank++] = g->n;
    *out = r;
    if (a->rank != 1)
        out->dims[out->rank++] = g->m;
    if (b->rank != 1)
        out->dims[out->rank++] = g->n;
    cr_shape bc;
    if (c) {
        if (align_c(c, out, &full, a->rank == 1, b->rank == 1, c_full, err))
            return -1;
        *c_expand = c_full->dims[full.rank - 2] != g->m || c_full->dims[full.rank - 1] != g->n;
        batch_of(c_full, &bc);
    }
    plan_stack(t, &r, &ba, &bb, c ? &bc : NULL);
    return 0;
}

int cr_ata_plan(const cr_shape *a, bool trans_a, cr_task *t, cr_shape *out, cr_error *err)
{
    if (a->rank < 2)
        return cr_fail(err, 400, "invalid_field", "a", "a must be a matrix or a stack of them (2 to %d dimensions), "
                       "got %d", CR_RANK_MAX, a->rank);
    cr_ata_task *x = &t->u.ata;
    x->trans_a = trans_a;
    x->m = a->dims[a->rank - (trans_a ? 1 : 2)];
    x->n = a->dims[a->rank - (trans_a ? 2 : 1)];
    cr_shape ba;
    batch_of(a, &ba);
    plan_stack(t, &ba, &ba, NULL, NULL);
    *out = ba;
    out->dims[out->rank++] = x->n;
    out->dims[out->rank++] = x->n;
    return 0;
}

/* ---- c broadcast within its matrices ------------------------------------------------------- */

cr_shape cr_expanded_c_shape(const cr_shape *c_full, const cr_task *t)
{
    cr_shape e = *c_full;
    e.dims[e.rank - 2] = t->u.gemm.m;
    e.dims[e.rank - 1] = t->u.gemm.n;
    return e;
}

void cr_expand_c(const void *src, const cr_shape *c_full, const cr_task *t, void *dst, size_t es)
{
    cr_shape e = cr_expanded_c_shape(c_full, t);
    int64_t stride[CR_RANK_MAX], idx[CR_RANK_MAX] = {0}, step = 1;
    for (int d = e.rank - 1; d >= 0; d--) { /* c's own strides, 0 where it broadcasts */
        stride[d] = c_full->dims[d] == 1 ? 0 : step;
        step *= c_full->dims[d];
    }
    uint64_t n = cr_shape_count(&e);
    int64_t at = 0;
    for (uint64_t i = 0; i < n; i++) {
        memcpy((char *)dst + i * es, (const char *)src + (size_t)at * es, es);
        for (int d = e.rank - 1; d >= 0; d--) { /* the next index, C order */
            at += stride[d];
            if (++idx[d] < e.dims[d])
                break;
            at -= stride[d] * e.dims[d];
            idx[d] = 0;
        }
    }
}
