/* Unit tests of numpy.matmul's shape rules (server/shape.c): every broadcasting case the API
 * documents, the stack strides each gives, 1-D promotion, c's broadcast and its expansion, and
 * the refusals with the fields they name. */
#include <string.h>

#include "tests/unit/check.h"
#include "server/shape.h"

static cr_shape S(int rank, ...)
{
    cr_shape s = {.rank = rank};
    __builtin_va_list ap;
    __builtin_va_start(ap, rank);
    for (int d = 0; d < rank; d++)
        s.dims[d] = __builtin_va_arg(ap, int);
    __builtin_va_end(ap);
    return s;
}

static bool same(const cr_shape *x, const cr_shape *y)
{
    return x->rank == y->rank && memcmp(x->dims, y->dims, sizeof x->dims[0] * (size_t)x->rank) == 0;
}

static int plan(cr_shape a, cr_shape b, const cr_shape *c, bool ta, bool tb, cr_task *t, cr_shape *out,
                cr_shape *cf, bool *expand, cr_error *e)
{
    memset(t, 0, sizeof *t);
    t->op = CR_OP_GEMM;
    return cr_matmul_plan(&a, &b, c, ta, tb, t, out, cf, expand, e);
}

static void test_broadcasting(void)
{
    cr_task t;
    cr_shape out, cf, want;
    bool ex;
    cr_error e;
    /* (m,k) @ (k,n): one matrix, no stack */
    CHECK(plan(S(2, 3, 4), S(2, 4, 5), NULL, false, false, &t, &out, &cf, &ex, &e) == 0);
    want = S(2, 3, 5);
    CHECK(same(&out, &want) && t.stack.rank == 0 && t.u.gemm.m == 3 && t.u.gemm.k == 4 && t.u.gemm.n == 5);
    /* (b,m,k) @ (b,k,n): strides one matrix each */
    CHECK(plan(S(3, 7, 3, 4), S(3, 7, 4, 5), NULL, false, false, &t, &out, &cf, &ex, &e) == 0);
    want = S(3, 7, 3, 5);
    CHECK(same(&out, &want) && t.stack.rank == 1 && t.stack.count == 7);
    CHECK(t.stack.stride[0][0] == 1 && t.stack.stride[1][0] == 1 && t.stack.mats[0] == 7 && t.stack.mats[1] == 7);
    /* (1,m,k) @ (b,k,n) and (m,k) @ (b,k,n): a broadcasts with stride 0 */
    for (int r = 2; r <= 3; r++) {
        cr_shape a = r == 3 ? S(3, 1, 3, 4) : S(2, 3, 4);
        CHECK(plan(a, S(3, 6, 4, 5), NULL, false, false, &t, &out, &cf, &ex, &e) == 0);
        want = S(3, 6, 3, 5);
        int64_t step;
        CHECK(same(&out, &want) && t.stack.count == 6 && t.stack.stride[0][0] == 0 && t.stack.mats[0] == 1);
        CHECK(cr_stack_uniform(&t.stack, 0, &step) && step == 0 && cr_stack_uniform(&t.stack, 1, &step) && step == 1);
    }
    /* (p,1,m,k) @ (q,k,n) -> (p,q,m,n): no common stride for a */
    CHECK(plan(S(4, 2, 1, 3, 4), S(3, 5, 4, 6), NULL, false, false, &t, &out, &cf, &ex, &e) == 0);
    want = S(4, 2, 5, 3, 6);
    int64_t step;
    CHECK(same(&out, &want) && t.stack.rank == 2 && t.stack.count == 10);
    CHECK(t.stack.stride[0][0] == 1 && t.stack.stride[0][1] == 0 && t.stack.stride[1][0] == 0 && t.stack.stride[1][1] == 1);
    CHECK(!cr_stack_uniform(&t.stack, 0, &step) && !cr_stack_uniform(&t.stack, 1, &step));
    CHECK(cr_stack_operand_index(&t.stack, 0, 7) == 1 && cr_stack_operand_index(&t.stack, 1, 7) == 2);
    /* trans flags act on the last two dimensions */
    CHECK(plan(S(3, 2, 4, 3), S(3, 2, 5, 4), NULL, true, true, &t, &out, &cf, &ex, &e) == 0);
    want = S(3, 2, 3, 5);
    CHECK(same(&out, &want) && t.u.gemm.k == 4 && t.u.gemm.trans_a && t.u.gemm.trans_b);
}

static void test_vectors(void)
{
    cr_task t;
    cr_shape out, cf, want;
    bool ex;
    cr_error e;
    CHECK(plan(S(1, 4), S(2, 4, 5), NULL, false, false, &t, &out, &cf, &ex, &e) == 0); /* (k,) @ (k,n) -> (n,) */
    want = S(1, 5);
    CHECK(same(&out, &want) && t.u.gemm.m == 1 && t.stack.rank == 0);
    CHECK(plan(S(3, 2, 3, 4), S(1, 4), NULL, false, false, &t, &out, &cf, &ex, &e) == 0); /* -> (2, 3) */
    want = S(2, 2, 3);
    CHECK(same(&out, &want) && t.u.gemm.n == 1 && t.stack.count == 2 && t.stack.mats[1] == 1);
    CHECK(plan(S(1, 4), S(1, 4), NULL, false, false, &t, &out, &cf, &ex, &e) == 0); /* a dot product: () */
    CHECK(out.rank == 0 && t.u.gemm.m == 1 && t.u.gemm.n == 1);
    CHECK(plan(S(1, 4), S(2, 4, 5), NULL, true, false, &t, &out, &cf, &ex, &e) < 0 && !strcmp(e.field, "trans_a"));
}

static void test_c(void)
{
    cr_task t;
    cr_shape out, cf;
    bool ex;
    cr_error e;
    cr_shape c = S(3, 1, 3, 5); /* broadcast over the stack only: a stride of 0, no expansion */
    CHECK(plan(S(3, 4, 3, 2), S(3, 4, 2, 5), &c, false, false, &t, &out, &cf, &ex, &e) == 0);
    CHECK(!ex && t.stack.stride[2][0] == 0 && t.stack.mats[2] == 1);
    c = S(1, 5); /* a row: expanded into whole matrices */
    CHECK(plan(S(3, 4, 3, 2), S(3, 4, 2, 5), &c, false, false, &t, &out, &cf, &ex, &e) == 0 && ex);
    cr_shape es = cr_expanded_c_shape(&cf, &t), want = S(3, 1, 3, 5);
    CHECK(same(&es, &want) && t.stack.stride[2][0] == 0);
    float row[5] = {1, 2, 3, 4, 5}, full[15];
    cr_expand_c(row, &cf, &t, full, sizeof(float));
    CHECK(full[0] == 1 && full[4] == 5 && full[5] == 1 && full[14] == 5);
    c = S(2, 4, 1); /* a column per matrix of the stack */
    CHECK(plan(S(3, 4, 3, 2), S(3, 4, 2, 5), &c, false, false, &t, &out, &cf, &ex, &e) < 0 && !strcmp(e.field, "c"));
    c = S(3, 4, 3, 1);
    CHECK(plan(S(3, 4, 3, 2), S(3, 4, 2, 5), &c, false, false, &t, &out, &cf, &ex, &e) == 0 && ex);
    float col[12], got[60];
    for (int i = 0; i < 12; i++)
        col[i] = (float)i;
    cr_expand_c(col, &cf, &t, got, sizeof(float));
    CHECK(got[0] == 0 && got[4] == 0 && got[5] == 1 && got[59] == 11 && t.stack.stride[2][0] == 1);
    c = S(0);  /* a scalar */
    CHECK(plan(S(2, 3, 2), S(2, 2, 5), &c, false, false, &t, &out, &cf, &ex, &e) == 0 && ex);
    c = S(2, 3, 4); /* too wide */
    CHECK(plan(S(2, 3, 2), S(2, 2, 5), &c, false, false, &t, &out, &cf, &ex, &e) < 0 && e.http == 422);
    c = S(1, 3); /* with a 1-D b the result is (m,): c (m,) lines up with it */
    CHECK(plan(S(2, 3, 2), S(1, 2), &c, false, false, &t, &out, &cf, &ex, &e) == 0 && !ex);
}

static void test_refusals(void)
{
    cr_task t;
    cr_shape out, cf;
    bool ex;
    cr_error e;
    CHECK(plan(S(3, 4, 8, 3), S(3, 4, 4, 3), NULL, false, false, &t, &out, &cf, &ex, &e) < 0 && e.http == 422 &&
          !strcmp(e.field, "b") && strstr(e.message, "(4, 8, 3)") && strstr(e.message, "inner"));
    CHECK(plan(S(3, 2, 3, 4), S(3, 3, 4, 5), NULL, false, false, &t, &out, &cf, &ex, &e) < 0 && e.http == 422 &&
          strstr(e.message, "broadcast"));
    cr_shape big = S(9, 1, 1, 1, 1, 1, 1, 1, 2, 2);
    CHECK(cr_shape_check(&big, "a", 1 << 20, &e) < 0 && e.http == 400 && !strcmp(e.field, "a"));
    cr_shape many = S(3, 1000, 3, 3);
    CHECK(cr_shape_check(&many, "b", 999, &e) < 0 && e.http == 413);
    cr_shape zero = S(3, 0, 3, 3);
    CHECK(cr_shape_check(&zero, "a", 1 << 20, &e) < 0 && e.http == 400);
    cr_shape ok = S(8, 2, 1, 2, 1, 2, 1, 3, 3);
    CHECK(cr_shape_check(&ok, "a", 1 << 20, &e) == 0);
    char text[64];
    cr_shape_format(&many, text, sizeof text);
    CHECK(!strcmp(text, "(1000, 3, 3)"));
    cr_shape one = S(1, 5);
    cr_shape_format(&one, text, sizeof text);
    CHECK(!strcmp(text, "(5,)"));
}

static void test_ata(void)
{
    cr_task t = {.op = CR_OP_ATA};
    cr_shape out, want;
    cr_error e;
    cr_shape a = S(4, 2, 3, 10, 4);
    CHECK(cr_ata_plan(&a, false, &t, &out, &e) == 0);
    want = S(4, 2, 3, 4, 4);
    CHECK(same(&out, &want) && t.stack.count == 6 && t.u.ata.m == 10 && t.u.ata.n == 4 && t.stack.mats[0] == 6);
    int64_t step;
    CHECK(cr_stack_uniform(&t.stack, 0, &step) && step == 1);
    a = S(1, 7);
    CHECK(cr_ata_plan(&a, false, &t, &out, &e) < 0 && !strcmp(e.field, "a"));
}

int main(void)
{
    test_broadcasting();
    test_vectors();
    test_c();
    test_refusals();
    test_ata();
    return check_summary("shape");
}
