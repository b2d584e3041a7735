/* Unit tests of the JSON request decoder (server/json_request.c, server/json_matrix.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "server/codec/json_decode.h"


static const cr_limits lim = {
    .max_elements = 1u << 20, .max_total_bytes = 32u << 20, .max_bins = 4096, .max_stack = 1 << 16,
};

static int decode(cr_op op, const char *body, cr_request *r, cr_error *e)
{
    memset(e, 0, sizeof *e);
    return cr_request_from_json(op, body, strlen(body), &lim, r, e);
}

/* ---- malformed inputs: each names its status, code and field ------------------------------ */

typedef struct {
    cr_op op;
    const char *body;
    int http;
    const char *code, *field;
} bad_case;

#define G CR_OP_GEMM
#define A CR_OP_ATA
#define H CR_OP_HISTOGRAM
#define J CR_OP_COUNT
#define M22 "{\"rows\":2,\"cols\":2,\"data\":[1,2,3,4]}"

static const bad_case bad_cases[] = {
    /* body */
    {G, "", 400, "invalid_json", ""},
    {G, "{", 400, "invalid_json", ""},
    {G, "{\"a\": [[1]], }", 400, "invalid_json", ""},
    {G, "{\"a\":[[1]],\"b\":[[1]]} x", 400, "invalid_json", ""},
    {G, "[1,2]", 400, "invalid_json", ""},
    {G, "42", 400, "invalid_json", ""},
    {G, "{\"a\":[[NaN]],\"b\":[[1]]}", 400, "invalid_json", ""},
    /* op */
    {J, "{\"a\":[[1]]}", 400, "missing_field", "op"},
    {J, "{\"op\":\"svd\",\"a\":[[1]]}", 400, "invalid_field", "op"},
    {J, "{\"op\":3,\"a\":[[1]]}", 400, "invalid_field", "op"},
    {G, "{\"op\":\"ata\",\"a\":[[1]]}", 400, "invalid_field", "op"},
    /* fields */
    {G, "{\"a\":[[1]],\"b\":[[1]],\"alpah\":2}", 400, "invalid_field", "alpah"},
    {G, "{\"a\":[[1]],\"b\":[[1]],\"a\":[[2]]}", 400, "invalid_field", "a"},
    {A, "{\"a\":[[1]],\"b\":[[1]]}", 400, "invalid_field", "b"},
    {H, "{\"data\":[1],\"alpha\":1}", 400, "invalid_field", "alpha"},
    {G, "{\"b\":[[1]]}", 400, "missing_field", "a"},
    {G, "{\"a\":[[1]]}", 400, "missing_field", "b"},
    {A, "{}", 400, "missing_field", "a"},
    {H, "{\"bins\":3}", 400, "missing_field", "data"},
    /* scalars */
    {G, "{\"a\":[[1]],\"b\":[[1]],\"dtype\":\"float8\"}", 400, "invalid_field", "dtype"},
    {A, "{\"a\":[[1]],\"dtype\":\"float16\"}", 400, "invalid_field", "dtype"}, /* GEMM only */
    {H, "{\"data\":[1],\"dtype\":\"bfloat16\"}", 400, "invalid_field", "dtype"},
    {G, "{\"a\":[[1,70000]],\"b\":[[1],[1]],\"dtype\":\"float16\"}", 400, "non_finite", "a[0][1]"},
    {G, "{\"a\":[[1]],\"b\":[[1]],\"dtype\":32}", 400, "invalid_field", "dtype"},
    {H, "{\"data\":[1],\"dtype\":\"int8\"}", 400, "invalid_field", "dtype"},
    {G, "{\"a\":[[1]],\"b\":[[1]],\"precision\":\"fp16\"}", 400, "invalid_field", "precision"},
    {G, "{\"a\":[[1]],\"b\":[[1]],\"precision\":\"tf32\",\"dtype\":\"float64\"}", 400,
     "unsupported", "precision"},
    {G, "{\"a\":[[1]],\"b\":[[1]],\"kernel\":\"Smem\"}", 400, "invalid_field", "kernel"},
    {G, "{\"a\":[[1]],\"b\":[[1]],\"kernel\":\"\"}", 400, "invalid_field", "kernel"},
    {G, "{\"a\":[[1]],\"b\":[[1]],\"kernel\":\"abcdefghijklmnopqrstuvwxyz012345\"}", 400,
     "invalid_field", "kernel"},
    {G, "{\"a\":[[1]],\"b\":[[1]],\"kernel\":null}", 400, "invalid_field", "kernel"},
    {G, "{\"a\":[[1]],\"b\":[[1]],\"alpha\":\"2\"}", 400, "invalid_field", "alpha"},
    {G, "{\"a\":[[1]],\"b\":[[1]],\"beta\":1e999}", 400, "non_finite", "beta"},
    {G, "{\"a\":[[1]],\"b\":[[1]],\"trans_a\":1}", 400, "invalid_field", "trans_a"},
    {G, "{\"a\":[[1]],\"b\":[[1]],\"trans_b\":\"true\"}", 400, "invalid_field", "trans_b"},
    {G, "{\"a\":[[1]],\"b\":[[1]],\"timeout_ms\":0}", 400, "invalid_field", "timeout_ms"},
    {G, "{\"a\":[[1]],\"b\":[[1]],\"timeout_ms\":2.5}", 400, "invalid_field", "timeout_ms"},
    {G, "{\"a\":[[1]],\"b\":[[1]],\"timeout_ms\":-5}", 400, "invalid_field", "timeout_ms"},
    /* matrix forms */
    {G, "{\"a\":[1,2,3],\"b\":[[1]]}", 422, "shape_mismatch", "b"}, /* a vector (3,) and b (1, 1) */
    {G, "{\"a\":[[[1,2]],[[3,4]]],\"b\":[[[1]],[[2]],[[3]]]}", 422, "shape_mismatch", "b"}, /* stacks of 2 and 3 */
    {G, "{\"a\":[[[1,2]],[[3,4],[5,6]]],\"b\":[[1]]}", 400, "invalid_field", "a"},        /* ragged stack */
    {G, "{\"a\":{\"shape\":[2,1,2],\"data\":[1,2,3]},\"b\":[[1]]}", 400, "invalid_field", "a.data"},
    {G, "{\"a\":{\"shape\":[2,1,-2],\"data\":[1,2,3]},\"b\":[[1]]}", 400, "invalid_field", "a.shape"},
    {G, "{\"a\":{\"shape\":[1,1,1,1,1,1,1,1,1],\"data\":[1]},\"b\":[[1]]}", 400, "invalid_field", "a.shape"},
    {G, "{\"a\":{\"shape\":[2,2],\"data\":[1,2,3,4],\"rows\":2},\"b\":[[1]]}", 400, "invalid_field", "a.rows"},
    {G, "{\"a\":[[1,2]],\"b\":[[1],[2]],\"c\":[[1,2],[3,4]]}", 422, "shape_mismatch", "c"},
    {G, "{\"a\":[1,2],\"b\":[1,2],\"trans_a\":true}", 400, "invalid_field", "trans_a"},
    {G, "{\"a\":[],\"b\":[[1]]}", 400, "invalid_field", "a"},
    {G, "{\"a\":\"1 2; 3 4\",\"b\":[[1]]}", 400, "invalid_field", "a"},
    {G, "{\"a\":[[1,2],[3,4],[5]],\"b\":[[1]]}", 400, "invalid_field", "a[2]"},
    {G, "{\"a\":[[1,2],3],\"b\":[[1]]}", 400, "invalid_field", "a[1]"},
    {G, "{\"a\":[[]],\"b\":[[1]]}", 400, "invalid_field", "a[0]"},
    {G, "{\"a\":[[1,2],[3,\"4\"]],\"b\":[[1],[1]]}", 400, "invalid_field", "a[1][1]"},
    {G, "{\"a\":[[1],[null]],\"b\":[[1]]}", 400, "invalid_field", "a[1][0]"},
    {G, "{\"a\":[[1,1e999]],\"b\":[[1],[1]]}", 400, "non_finite", "a[0][1]"},
    {G, "{\"a\":[[1,1e39]],\"b\":[[1],[1]]}", 400, "non_finite", "a[0][1]"},
    {G, "{\"a\":{\"rows\":2,\"data\":[1,2]},\"b\":[[1]]}", 400, "missing_field", "a.cols"},
    {G, "{\"a\":{\"cols\":2,\"data\":[1,2]},\"b\":[[1]]}", 400, "missing_field", "a.rows"},
    {G, "{\"a\":{\"rows\":1,\"cols\":2},\"b\":[[1]]}", 400, "missing_field", "a.data"},
    {G, "{\"a\":{\"rows\":0,\"cols\":2,\"data\":[]},\"b\":[[1]]}", 400, "invalid_field",
     "a.rows"},
    {G, "{\"a\":{\"rows\":-1,\"cols\":2,\"data\":[]},\"b\":[[1]]}", 400, "invalid_field",
     "a.rows"},
    {G, "{\"a\":{\"rows\":1.5,\"cols\":2,\"data\":[1,2,3]},\"b\":[[1]]}", 400, "invalid_field",
     "a.rows"},
    {G, "{\"a\":{\"rows\":1,\"cols\":\"2\",\"data\":[1,2]},\"b\":[[1]]}", 400, "invalid_field",
     "a.cols"},
    {G, "{\"a\":{\"rows\":2,\"cols\":2,\"data\":[1,2,3]},\"b\":[[1]]}", 400, "invalid_field",
     "a.data"},
    {G, "{\"a\":{\"rows\":2,\"cols\":2,\"data\":[1,2,3,4,5]},\"b\":[[1]]}", 400,
     "invalid_field", "a.data"},
    {G, "{\"a\":{\"rows\":1,\"cols\":2,\"data\":\"12\"},\"b\":[[1]]}", 400, "invalid_field",
     "a.data"},
    {G, "{\"a\":{\"rows\":2,\"cols\":4,\"data\":[1,2,3,4,5,6,7,true]},\"b\":[[1],[1],[1],[1]]}", 400,
     "invalid_field", "a.data[7]"},
    {G, "{\"a\":{\"rows\":1,\"cols\":1,\"data\":[1],\"order\":\"C\"},\"b\":[[1]]}", 400,
     "invalid_field", "a.order"},
    {G, "{\"a\":" M22 ",\"b\":{\"rows\":2,\"cols\":2,\"data\":[1,2,3,[4]]}}", 400,
     "invalid_field", "b.data[3]"},
    /* a member of the dict form twice: refused, not the first one quietly taken */
    {G, "{\"a\":{\"rows\":2,\"rows\":3,\"cols\":1,\"data\":[1,2]},\"b\":[[1]]}", 400,
     "invalid_field", "a.rows"},
    {G, "{\"a\":{\"rows\":1,\"cols\":2,\"cols\":2,\"data\":[1,2]},\"b\":[[1],[1]]}", 400,
     "invalid_field", "a.cols"},
    {G, "{\"a\":{\"rows\":1,\"cols\":2,\"data\":[1,2],\"data\":[3,4]},\"b\":[[1],[1]]}", 400,
     "invalid_field", "a.data"},
    {A, "{\"a\":{\"data\":[1],\"rows\":1,\"cols\":1,\"rows\":1}}", 400, "invalid_field",
     "a.rows"},
    {G, "{\"a\":" M22 ",\"b\":{\"rows\":2,\"cols\":2,\"data\":[1,2,3,4],\"cols\":2}}", 400,
     "invalid_field", "b.cols"},
    {A, "{\"a\":{\"rows\":1,\"rows\":1,\"cols\":1,\"order\":\"C\",\"data\":[1]}}", 400,
     "invalid_field", "a.rows"},
    /* long lists (the fast path's spans) in the wrong place: the errors of short ones */
    {A, "{\"a\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}", 400, "invalid_field", "a"},
    {A, "{\"a\":[[1],[2],[3],[4],[5],[6],[7],[8],[9],[1,2],[1],[1],[1],[1],[1],[1]]}", 400,
     "invalid_field", "a[9]"},
    {A, "{\"a\":[[1],[2],[3],[4],[5],[6],[7],[8],[],[1,2],[1],[1],[1],[1],[1],[1]]}", 400,
     "invalid_field", "a[8]"},
    {A, "{\"a\":{\"rows\":16,\"cols\":1,\"data\":[[1],[2],[3],[4],[5],[6],[7],[8],[9],[1],[1],"
        "[1],[1],[1],[1],[1]]}}", 400, "invalid_field", "a.data[0]"},
    {H, "{\"data\":[[1],[2],[3],[4],[5],[6],[7],[8],[9],[1],[1],[1],[1],[1],[1],[1]]}", 400,
     "invalid_field", "data[0]"},
    {H, "{\"data\":[0],\"range\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]}", 400, "invalid_field",
     "range"},
    /* sizes */
    {G, "{\"a\":{\"rows\":1e9,\"cols\":1e9,\"data\":[1]},\"b\":[[1]]}", 413, "too_large", "a"},
    {G, "{\"a\":{\"rows\":1e30,\"cols\":1,\"data\":[1]},\"b\":[[1]]}", 413, "too_large", "a"},
    {G, "{\"a\":{\"rows\":1,\"cols\":1,\"data\":[1]},\"b\":{\"rows\":1,\"cols\":2000000,"
        "\"data\":[1]}}", 413, "too_large", "b"},
    /* shapes */
    {G, "{\"a\":[[1,2]],\"b\":[[1,2]]}", 422, "shape_mismatch", "b"},
    {G, "{\"a\":[[1,2]],\"b\":[[1],[2]],\"trans_b\":true}", 422, "shape_mismatch", "b"},
    {G, "{\"a\":[[1,2]],\"b\":[[1],[2]],\"trans_a\":true}", 422, "shape_mismatch", "b"},
    {G, "{\"a\":[[1,2]],\"b\":[[1],[2]],\"c\":[[1,2]]}", 422, "shape_mismatch", "c"},
    {G, "{\"a\":[[1,2]],\"b\":[[1],[2]],\"c\":\"x\"}", 400, "invalid_field", "c"},
    /* histogram */
    {H, "{\"data\":[1,256]}", 400, "invalid_field", "data[1]"},
    {H, "{\"data\":[1,-1]}", 400, "invalid_field", "data[1]"},
    {H, "{\"data\":[0.5]}", 400, "invalid_field", "data[0]"},
    {H, "{\"data\":[[1,2]]}", 400, "invalid_field", "data[0]"},
    {H, "{\"data\":{\"rows\":1}}", 400, "invalid_field", "data"},
    {H, "{\"data\":[1,\"2\"],\"dtype\":\"float32\"}", 400, "invalid_field", "data[1]"},
    {H, "{\"data\":[1,1e999],\"dtype\":\"float64\"}", 400, "non_finite", "data[1]"},
    {H, "{\"data\":[1],\"dtype\":\"float32\",\"bins\":0}", 400, "invalid_field", "bins"},
    {H, "{\"data\":[1],\"dtype\":\"float32\",\"bins\":2.5}", 400, "invalid_field", "bins"},
    {H, "{\"data\":[1],\"dtype\":\"float32\",\"bins\":5000}", 413, "too_large", "bins"},
    {H, "{\"data\":[1],\"dtype\":\"float32\",\"range\":[1]}", 400, "invalid_field", "range"},
    {H, "{\"data\":[1],\"dtype\":\"float32\",\"range\":[2,1]}", 400, "invalid_field", "range"},
    {H, "{\"data\":[1],\"dtype\":\"float32\",\"range\":[0,\"1\"]}", 400, "invalid_field",
     "range[1]"},
    {H, "{\"data\":[1],\"dtype\":\"float32\",\"range\":[-1e999,1]}", 400, "non_finite",
     "range[0]"},
};

static void test_bad_cases(void)
{
    size_t n = sizeof bad_cases / sizeof bad_cases[0];
    for (size_t i = 0; i < n; i++) {
        const bad_case *c = &bad_cases[i];
        cr_request r;
        cr_error e;
        int rc = decode(c->op, c->body, &r, &e);
        CHECK_MSG(rc == -1 && e.http == c->http && strcmp(e.code, c->code) == 0 &&
                  strcmp(e.field, c->field) == 0,
              "case %zu %s: got rc=%d %d %s field \"%s\" (%s); want %d %s \"%s\"", i, c->body, rc,
              e.http, e.code, e.field, e.message, c->http, c->code, c->field);
        CHECK_MSG(e.message[0] != '\0', "case %zu has no message", i);
        CHECK_MSG(r.bufs[0] == NULL && r.bufs[1] == NULL && r.bufs[2] == NULL,
              "case %zu left buffers behind", i);
    }
    CHECK_MSG(n >= 40, "only %zu malformed cases", n);
}

/* ---- valid inputs ------------------------------------------------------------------------- */

static void test_gemm_forms_and_defaults(void)
{
    cr_request r;
    cr_error e;
    const char *body = "{\"a\": {\"rows\": 2, \"cols\": 3, \"data\": [1,2,3,4,5,6]},\n"
                       " \"b\": [[1,0],[0,1],[1,1]]}";
    int rc = decode(G, body, &r, &e);
    CHECK_MSG(rc == 0, "design.md example: %s", e.message);
    if (rc != 0)
        return;
    const cr_gemm_task *g = &r.task.u.gemm;
    CHECK_MSG(r.task.op == CR_OP_GEMM && r.task.dtype == CR_DT_F32 &&
              r.task.precision == CR_PREC_DEFAULT && r.task.kernel == NULL,
          "task defaults");
    CHECK_MSG(r.kernel.mode == CR_KERNEL_AUTO && strcmp(r.kernel.name, "auto") == 0, "kernel default %s",
              r.kernel.name);
    CHECK_MSG(g->m == 2 && g->n == 2 && g->k == 3, "shape %lld %lld %lld", (long long)g->m,
          (long long)g->n, (long long)g->k);
    CHECK_MSG(g->alpha == 1.0 && g->beta == 0.0 && !g->trans_a && !g->trans_b && g->c_in == NULL,
          "scalar defaults");
    CHECK_MSG(r.timeout_ms == 0 && r.body_bytes == strlen(body) && !r.is_float_hist, "misc");
    const float *a = g->a, *b = g->b;
    CHECK_MSG(a[0] == 1 && a[5] == 6 && b[0] == 1 && b[1] == 0 && b[4] == 1 && b[5] == 1,
          "values");
    CHECK_MSG(cr_request_alloc_output(&r, &e) == 0 && g->c_out != NULL &&
              r.buf_bytes[3] == 2 * 2 * sizeof(float),
          "alloc_output");
    cr_request_free(&r);
    CHECK_MSG(r.bufs[0] == NULL && r.task.u.gemm.a == NULL, "free zeroes");
    cr_request_free(&r); /* twice is fine */
}

static void test_gemm_all_fields(void)
{
    cr_request r;
    cr_error e;
    const char *body =
        "{\"op\":\"gemm\",\"a\":[[1,2],[3,4],[5,6]],\"b\":[[1,2,3],[4,5,6]],"
        "\"c\":{\"rows\":2,\"cols\":2,\"data\":[0.5,0.25,0.125,1]},\"dtype\":\"float64\","
        "\"precision\":\"fp32\",\"kernel\":\"blocktile\",\"alpha\":2.5,\"beta\":-1,"
        "\"trans_a\":true,\"trans_b\":true,\"timeout_ms\":1500}";
    int rc = decode(G, body, &r, &e);
    CHECK_MSG(rc == 0, "all fields: %s", e.message);
    if (rc != 0)
        return;
    const cr_gemm_task *g = &r.task.u.gemm;
    CHECK_MSG(g->m == 2 && g->k == 3 && g->n == 2, "trans shapes");
    CHECK_MSG(g->trans_a && g->trans_b && g->alpha == 2.5 && g->beta == -1, "scalars");
    CHECK_MSG(r.task.dtype == CR_DT_F64 && r.kernel.mode == CR_KERNEL_NAMED && strcmp(r.kernel.name, "blocktile") == 0 &&
              r.timeout_ms == 1500,
          "dtype/kernel/timeout");
    CHECK_MSG(g->c_in != NULL && ((const double *)g->c_in)[2] == 0.125, "c");
    cr_request_free(&r);

    rc = decode(G, "{\"a\":[[1]],\"b\":[[1]],\"precision\":\"tf32\",\"kernel\":\"all\"}", &r, &e);
    CHECK_MSG(rc == 0 && r.task.precision == CR_PREC_TF32 && r.kernel.mode == CR_KERNEL_ALL,
          "tf32: %s", e.message);
    cr_request_free(&r);
    rc = decode(G, "{\"a\":[[1]],\"b\":[[1]],\"beta\":2}", &r, &e);
    CHECK_MSG(rc == 0 && r.task.u.gemm.c_in == NULL && r.task.u.gemm.beta == 2,
          "beta without c means C = 0: %s", e.message);
    cr_request_free(&r);
}

static void test_precision_kept(void)
{
    cr_request r;
    cr_error e;
    int rc = decode(G, "{\"a\":[[0.30000000000000004, 1e-300]],\"b\":[[0.1],[2]],"
                       "\"dtype\":\"float64\"}", &r, &e);
    CHECK_MSG(rc == 0, "float64: %s", e.message);
    if (rc == 0) {
        const double *a = r.task.u.gemm.a;
        CHECK_MSG(a[0] == 0.30000000000000004 && a[0] != 0.3 && a[1] == 1e-300,
              "float64 values kept exactly");
    }
    cr_request_free(&r);
    rc = decode(G, "{\"a\":[[0.1, 16777217, 1e-45]],\"b\":[[1],[2],[3]]}", &r, &e);
    CHECK_MSG(rc == 0, "float32: %s", e.message);
    if (rc == 0) {
        const float *a = r.task.u.gemm.a;
        CHECK_MSG(a[0] == 0.1f && a[1] == 16777216.0f && a[2] == 1e-45f, "float32 rounding");
    }
    cr_request_free(&r);
}

static void test_ata(void)
{
    cr_request r;
    cr_error e;
    int rc = decode(A, "{\"a\":{\"rows\":3,\"cols\":2,\"data\":[1,2,3,4,5,6]},\"kernel\":"
                       "\"symtile\",\"dtype\":\"float64\"}", &r, &e);
    CHECK_MSG(rc == 0, "ata: %s", e.message);
    if (rc != 0)
        return;
    CHECK_MSG(r.task.op == CR_OP_ATA && r.task.u.ata.m == 3 && r.task.u.ata.n == 2 &&
              !r.task.u.ata.trans_a,
          "ata shape");
    CHECK_MSG(cr_request_alloc_output(&r, &e) == 0 && r.buf_bytes[3] == 4 * sizeof(double) &&
              r.task.u.ata.c_out != NULL,
          "ata output");
    cr_request_free(&r);
}

static void test_histogram(void)
{
    cr_request r;
    cr_error e;
    int rc = decode(H, "{\"data\":[0,3,255,3]}", &r, &e);
    CHECK_MSG(rc == 0, "u8 histogram: %s", e.message);
    if (rc == 0) {
        const cr_hist_task *h = &r.task.u.hist;
        CHECK_MSG(r.task.dtype == CR_DT_U8 && h->bins == 256 && h->lo == 0 && h->hi == 256 &&
                  h->count == 4 && !r.is_float_hist,
              "u8 defaults");
        CHECK_MSG(((const uint8_t *)h->data)[2] == 255, "u8 value");
        CHECK_MSG(cr_request_alloc_output(&r, &e) == 0 && r.task.u.hist.counts &&
                  r.task.u.hist.counts[255] == 0 && r.buf_bytes[3] == 256 * 8,
              "counts zeroed");
    }
    cr_request_free(&r);

    rc = decode(H, "{\"data\":[0.5,-2,7.25],\"dtype\":\"float32\"}", &r, &e);
    CHECK_MSG(rc == 0 && r.is_float_hist && r.task.u.hist.bins == 10 && r.task.u.hist.lo == -2 &&
              r.task.u.hist.hi == 7.25,
          "numpy default range [min, max]: %s", e.message);
    cr_request_free(&r);

    rc = decode(H, "{\"data\":[3,3],\"dtype\":\"float64\"}", &r, &e);
    CHECK_MSG(rc == 0 && r.task.u.hist.lo == 2.5 && r.task.u.hist.hi == 3.5,
          "numpy widens an empty range by 0.5: %s", e.message);
    cr_request_free(&r);

    rc = decode(H, "{\"data\":[1],\"dtype\":\"float32\",\"range\":[1,1]}", &r, &e);
    CHECK_MSG(rc == 0 && r.task.u.hist.lo == 0.5 && r.task.u.hist.hi == 1.5,
          "numpy widens an explicit empty range by 0.5: %s", e.message);
    cr_request_free(&r);

    rc = decode(H, "{\"data\":[],\"dtype\":\"float64\"}", &r, &e);
    CHECK_MSG(rc == 0 && r.task.u.hist.count == 0 && r.task.u.hist.lo == 0 &&
              r.task.u.hist.hi == 1,
          "empty data: numpy's [0, 1]: %s", e.message);
    cr_request_free(&r);

    rc = decode(H, "{\"data\":[0.1,0.9],\"dtype\":\"float64\",\"bins\":100,\"range\":[0,1]}",
                &r, &e);
    CHECK_MSG(rc == 0 && r.task.u.hist.bins == 100 && r.task.u.hist.lo == 0 &&
              r.task.u.hist.hi == 1 && ((const double *)r.task.u.hist.data)[0] == 0.1,
          "explicit bins/range: %s", e.message);
    cr_request_free(&r);

    rc = decode(H, "{\"data\":[1,2],\"bins\":16,\"range\":[0,32],\"kernel\":\"smem-vec\"}", &r,
                &e);
    CHECK_MSG(rc == 0 && r.task.u.hist.bins == 16 && r.task.u.hist.hi == 32 &&
              strcmp(r.kernel.name, "smem-vec") == 0,
          "u8 with bins/range: %s", e.message);
    cr_request_free(&r);
}

static void test_async_and_framing(void)
{
    cr_request r;
    cr_error e;
    int rc = decode(J, "{\"op\":\"histogram\",\"data\":[1]}", &r, &e);
    CHECK_MSG(rc == 0 && r.task.op == CR_OP_HISTOGRAM, "async op: %s", e.message);
    cr_request_free(&r);
    rc = decode(A, "{\"op\":\"ata\",\"a\":[[1]]}", &r, &e);
    CHECK_MSG(rc == 0 && r.task.op == CR_OP_ATA, "sync form may repeat its op: %s", e.message);
    cr_request_free(&r);

    /* The body is not NUL-terminated: bytes after len must not be read as part of it. */
    const char buf[] = "{\"data\":[7]}garbage";
    rc = cr_request_from_json(H, buf, 12, &lim, &r, &e);
    CHECK_MSG(rc == 0 && r.task.u.hist.count == 1, "length-delimited body: %s", e.message);
    cr_request_free(&r);
    char *exact = malloc(12); /* ASan catches any read past the end */
    memcpy(exact, buf, 12);
    rc = cr_request_from_json(H, exact, 12, &lim, &r, &e);
    CHECK_MSG(rc == 0, "exact-size body: %s", e.message);
    cr_request_free(&r);
    rc = cr_request_from_json(H, exact, 11, &lim, &r, &e);
    CHECK_MSG(rc == -1 && strcmp(e.code, "invalid_json") == 0 && strstr(e.message, "byte"),
          "truncated body names a position: %s", e.message);
    free(exact);
    rc = decode(H, " \n\t{\"data\":[1]} \r\n", &r, &e);
    CHECK_MSG(rc == 0, "surrounding whitespace: %s", e.message);
    cr_request_free(&r);
}

static void test_limits(void)
{
    cr_request r;
    cr_error e;
    cr_limits tight = {.max_elements = 100, .max_total_bytes = 1000, .max_bins = 256, .max_stack = 64};
    /* 10x10 a and b (400 B each) + 10x10 out (400 B) = 1200 B > 1000. */
    char body[4096];
    int n = snprintf(body, sizeof body, "{\"a\":{\"rows\":10,\"cols\":10,\"data\":[");
    for (int i = 0; i < 100; i++)
        n += snprintf(body + n, sizeof body - (size_t)n, "%s%d", i ? "," : "", i);
    n += snprintf(body + n, sizeof body - (size_t)n, "]},\"b\":{\"rows\":10,\"cols\":10,\"data\":[");
    for (int i = 0; i < 100; i++)
        n += snprintf(body + n, sizeof body - (size_t)n, "%s%d", i ? "," : "", i);
    snprintf(body + n, sizeof body - (size_t)n, "]}}");
    int rc = cr_request_from_json(G, body, strlen(body), &tight, &r, &e);
    CHECK_MSG(rc == -1 && e.http == 413 && strcmp(e.code, "too_large") == 0 &&
              strcmp(e.field, "b") == 0,
          "total bytes: %d %s %s", e.http, e.code, e.field);
    tight.max_total_bytes = 1200;
    rc = cr_request_from_json(G, body, strlen(body), &tight, &r, &e);
    CHECK_MSG(rc == 0, "exactly at the limit: %s", e.message);
    cr_request_free(&r);
    rc = cr_request_from_json(H, "{\"data\":[1,2,3]}", 16, NULL, &r, &e);
    CHECK_MSG(rc == 0, "NULL limits use defaults: %s", e.message);
    cr_request_free(&r);
}

static void test_messages(void)
{
    cr_request r;
    cr_error e;
    decode(G, "{\"a\":[[1]],\"b\":[[1]],\"we\\\"ird\\n\":1}", &r, &e);
    CHECK_MSG(strcmp(e.field, "we\"ird\n") == 0 && strstr(e.message, "we\"ird"),
          "unknown field named verbatim: %s", e.field);
    decode(G, "{\"a\":[1,2,3],\"b\":[[1]]}", &r, &e); /* numpy's words for shapes */
    CHECK_MSG(strstr(e.message, "a (3,) and b (1, 1)") != NULL, "shapes named: %s", e.message);
    decode(G, "{\"a\":[[1,2],[3,4],[5]],\"b\":[[1]]}", &r, &e);
    CHECK_MSG(strstr(e.message, "a[2]") != NULL, "ragged row named: %s", e.message);
    decode(G, "{\"a\":{\"rows\":1,\"cols\":1,\"data\":[1],\"rows\":2},\"b\":[[1]]}", &r, &e);
    CHECK_MSG(strcmp(e.message, "field \"rows\" appears twice in matrix a") == 0,
              "duplicate member named: %s", e.message);
    char longname[400] = "{\"";
    memset(longname + 2, 'x', 300);
    strcpy(longname + 302, "\":1}");
    decode(G, longname, &r, &e);
    CHECK_MSG(strlen(e.field) == sizeof e.field - 1 && strlen(e.message) < sizeof e.message,
          "long names truncated safely");
    cr_fail(&e, 400, "invalid_field", "f", "%s", "\xc3\xa9\xc3\xa9\xc3\xa9");
    CHECK_MSG(strcmp(e.message, "\xc3\xa9\xc3\xa9\xc3\xa9") == 0, "utf-8 kept");
    char many[600];
    for (int i = 0; i < 300; i++)
        memcpy(many + 2 * i, "\xc3\xa9", 2);
    many[600 - 1] = '\0';
    many[598] = '\0';
    cr_fail(&e, 400, "x", "", "a%s", many); /* 1 + 2k bytes: cut inside a character */
    size_t len = strlen(e.message);
    CHECK_MSG(len < sizeof e.message && ((unsigned char)e.message[len - 1] & 0xC0) == 0x80 &&
              ((unsigned char)e.message[len - 2]) == 0xC3,
          "truncation ends on a whole character (len %zu)", len);
}

/* Stacks in every JSON form: the shape, the strides numpy's broadcasting gives, the data in C order. */
static void test_stacks(void)
{
    static const char *const same[] = {
        "{\"a\":[[[1,2],[3,4]],[[5,6],[7,8]],[[9,10],[11,12]]],\"b\":[[1],[2]]}",
        "{\"a\":{\"shape\":[3,2,2],\"data\":[1,2,3,4,5,6,7,8,9,10,11,12]},\"b\":{\"rows\":2,\"cols\":1,\"data\":[1,2]}}",
        "{\"a\":{\"shape\":[3,2,2],\"data\":[[[1,2],[3,4]],[[5,6],[7,8]],[[9,10],[11,12]]]},\"b\":{\"shape\":[2,1],\"data\":[1,2]}}",
    };
    for (size_t k = 0; k < sizeof same / sizeof same[0]; k++) {
        cr_request r;
        cr_error e;
        CHECK_MSG(decode(G, same[k], &r, &e) == 0, "%s: %s", same[k], e.message);
        const cr_task *t = &r.task;
        const float *a = t->u.gemm.a;
        CHECK(r.shaped && r.out_shape.rank == 3 && r.out_shape.dims[0] == 3 && r.out_shape.dims[1] == 2 &&
              r.out_shape.dims[2] == 1);
        CHECK(t->stack.rank == 1 && t->stack.count == 3 && t->stack.stride[0][0] == 1 && t->stack.stride[1][0] == 0);
        CHECK(t->u.gemm.m == 2 && t->u.gemm.k == 2 && t->u.gemm.n == 1 && a[0] == 1 && a[11] == 12);
        cr_request_free(&r);
    }
    /* vectors: (k,) @ (b, k, n) -> (b, n), a promoted to one row */
    cr_request r;
    cr_error e;
    CHECK(decode(G, "{\"a\":[1,2],\"b\":[[[1,0],[0,1]],[[2,0],[0,2]]]}", &r, &e) == 0);
    CHECK(r.out_shape.rank == 2 && r.out_shape.dims[0] == 2 && r.out_shape.dims[1] == 2 && r.task.u.gemm.m == 1 &&
          r.task.stack.count == 2 && r.task.stack.stride[0][0] == 0);
    cr_request_free(&r);
    /* c a row: expanded into whole matrices, broadcast over the stack by a stride of 0 */
    CHECK(decode(G, "{\"a\":{\"shape\":[4,2,3],\"data\":[1,2,3,4,5,6,1,2,3,4,5,6,1,2,3,4,5,6,1,2,3,4,5,6]},"
                    "\"b\":[[1,0],[0,1],[1,1]],\"c\":[10,20],\"beta\":1}", &r, &e) == 0);
    const float *c = r.task.u.gemm.c_in;
    CHECK(r.task.stack.count == 4 && r.task.stack.mats[2] == 1 && r.task.stack.stride[2][0] == 0 && c[0] == 10 &&
          c[1] == 20 && c[2] == 10 && c[3] == 20 && r.buf_bytes[CR_BUF_C] == 4 * sizeof(float));
    cr_request_free(&r);
    /* AᵀA of a stack: (..., m, n) -> (..., n, n) */
    CHECK(decode(CR_OP_ATA, "{\"a\":{\"shape\":[2,3,4,2],\"data\":[" "1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8,"
                            "1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8,1,2,3,4,5,6,7,8]}}", &r, &e) == 0);
    CHECK(r.out_shape.rank == 4 && r.out_shape.dims[2] == 2 && r.task.stack.count == 6 && r.task.u.ata.m == 4);
    cr_request_free(&r);
}

int main(void)
{
    test_stacks();
    test_bad_cases();
    test_gemm_forms_and_defaults();
    test_gemm_all_fields();
    test_precision_kept();
    test_ata();
    test_histogram();
    test_async_and_framing();
    test_limits();
    test_messages();
    return check_summary("test_json_request");
}
