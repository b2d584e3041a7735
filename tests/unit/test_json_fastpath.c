/* The JSON decoder's fast path for long numeric arrays (server/json_fastarray.c): same values,
 * same errors (field paths, codes, byte offsets) as when cJSON read every number. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tests/unit/check.h"
#include "server/codec/json_fastarray.h"
#include "server/codec/json_decode.h"

#define N 40 /* elements per array: over CR_JFAST_MIN */

static char body[1 << 16];

/* "[v0,v1,...]" with element k replaced by bad (when bad). */
static size_t list(char *out, int n, int bad_at, const char *bad, int offset)
{
    size_t len = 0;
    out[len++] = '[';
    for (int i = 0; i < n; i++) {
        if (i)
            out[len++] = ',';
        if (i == bad_at)
            len += (size_t)sprintf(out + len, "%s", bad);
        else
            len += (size_t)sprintf(out + len, "%d.%d", i + offset, i % 7);
    }
    out[len++] = ']';
    out[len] = '\0';
    return len;
}

static int decode(cr_op op, cr_request *r, cr_error *e)
{
    memset(e, 0, sizeof *e);
    return cr_request_from_json(op, body, strlen(body), NULL, r, e);
}

static void test_values_dict_nested_hist(void)
{
    char a[4096], b[4096];
    cr_request r;
    cr_error e;
    list(a, N, -1, "", 0);
    list(b, N, -1, "", 100);
    snprintf(body, sizeof body, "{\"a\":{\"rows\":1,\"cols\":%d,\"data\":%s},"
             "\"b\":{\"rows\":%d,\"cols\":1,\"data\":%s},\"dtype\":\"float64\"}", N, a, N, b);
    CHECK(decode(CR_OP_GEMM, &r, &e) == 0);
    const double *da = r.task.u.gemm.a, *db = r.task.u.gemm.b;
    for (int i = 0; i < N; i++) {
        char t[32];
        snprintf(t, sizeof t, "%d.%d", i, i % 7);
        CHECK(da[i] == strtod(t, NULL));
        snprintf(t, sizeof t, "%d.%d", i + 100, i % 7);
        CHECK(db[i] == strtod(t, NULL));
    }
    cr_request_free(&r);

    /* nested rows, float32: values through double, as before */
    size_t len = (size_t)sprintf(body, "{\"a\":[");
    for (int row = 0; row < 3; row++)
        len += (size_t)sprintf(body + len, "%s%s", row ? "," : "", (list(a, N, -1, "", row), a));
    sprintf(body + len, "],\"b\":[%s],\"trans_b\":true}", (list(b, N, -1, "", 5), b));
    CHECK(decode(CR_OP_GEMM, &r, &e) == 0);
    CHECK(r.task.u.gemm.m == 3 && r.task.u.gemm.k == N && r.task.u.gemm.n == 1);
    CHECK(((const float *)r.task.u.gemm.a)[N + 2] == (float)strtod("3.2", NULL));
    cr_request_free(&r);

    sprintf(body, "{\"data\":[%s0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,255]}", "");
    CHECK(decode(CR_OP_HISTOGRAM, &r, &e) == 0);
    CHECK(r.task.u.hist.count == 17 && ((const uint8_t *)r.task.u.hist.data)[16] == 255);
    cr_request_free(&r);
}

typedef struct {
    const char *bad;
    int status;
    const char *code;
    const char *dtype;
} bad_case;

/* Element 23 of a long list is bad: the field names it as before. */
static void test_element_errors(void)
{
    static const bad_case cases[] = {
        {"1e999", 400, "non_finite", "float64"},
        {"-1e999", 400, "non_finite", "float64"},
        {"1e39", 400, "non_finite", "float32"},
        {"\"x\"", 400, "invalid_field", "float64"},
        {"null", 400, "invalid_field", "float32"},
        {"true", 400, "invalid_field", "float32"},
        {"[1]", 400, "invalid_field", "float32"},
        {"{}", 400, "invalid_field", "float32"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char a[4096], b[4096];
        cr_request r;
        cr_error e;
        list(a, N, 23, cases[k].bad, 0);
        list(b, N, -1, "", 0);
        snprintf(body, sizeof body, "{\"a\":{\"rows\":1,\"cols\":%d,\"data\":%s},\"b\":{\"rows\":%d,"
                 "\"cols\":1,\"data\":%s},\"dtype\":\"%s\"}", N, a, N, b, cases[k].dtype);
        CHECK(decode(CR_OP_GEMM, &r, &e) == -1);
        CHECK(e.http == cases[k].status && strcmp(e.code, cases[k].code) == 0);
        CHECK(strcmp(e.field, "a.data[23]") == 0);
        if (strcmp(e.field, "a.data[23]") != 0)
            fprintf(stderr, "case %s: field %s (%s)\n", cases[k].bad, e.field, e.message);

        /* nested: a[1][23] */
        char row[4096];
        list(row, N, -1, "", 0);
        /* op(b) must be N x 1: b as 1 x N transposed */
        snprintf(body, sizeof body, "{\"a\":[%s,%s],\"b\":[%s],\"trans_b\":true,\"dtype\":\"%s\"}",
                 row, a, b, cases[k].dtype);
        CHECK(decode(CR_OP_GEMM, &r, &e) == -1);
        CHECK(strcmp(e.code, cases[k].code) == 0 && strcmp(e.field, "a[1][23]") == 0);
        if (strcmp(e.field, "a[1][23]") != 0)
            fprintf(stderr, "nested case %s: field %s (%s)\n", cases[k].bad, e.field, e.message);
    }
    /* uint8 histogram data out of range */
    char d[4096];
    cr_request r;
    cr_error e;
    size_t len = (size_t)sprintf(d, "[");
    for (int i = 0; i < N; i++)
        len += (size_t)sprintf(d + len, "%s%d", i ? "," : "", i == 30 ? 256 : i);
    sprintf(d + len, "]");
    snprintf(body, sizeof body, "{\"data\":%s}", d);
    CHECK(decode(CR_OP_HISTOGRAM, &r, &e) == -1 && strcmp(e.field, "data[30]") == 0);
}

/* Syntax errors: the byte offset in the message is the body's, as cJSON reports it on the body. */
static void test_syntax_offsets(void)
{
    static const char *const tails[] = {"}", "", "]", ",}", "} x", "}}"};
    static const char *const inner[] = {"1,,2", "1e", "1.5.3", "--1", "1 2", "+1", ".5"};
    for (size_t t = 0; t < sizeof tails / sizeof tails[0]; t++)
        for (size_t k = 0; k < sizeof inner / sizeof inner[0]; k++) {
            char a[4096], b[4096];
            list(a, N, -1, "", 0);
            list(b, N, 7, inner[k], 0);
            bool bad_inner = t == 0;
            snprintf(body, sizeof body, "{\"a\":{\"rows\":1,\"cols\":%d,\"data\":%s},\"b\":%s%s", N,
                     a, bad_inner ? b : a, tails[t]);
            cr_request r;
            cr_error e;
            int rc = decode(CR_OP_GEMM, &r, &e);
            const char *end = NULL;
            cJSON *direct = cJSON_ParseWithLengthOpts(body, strlen(body), &end, 0);
            if (direct) { /* valid JSON (maybe with trailing text): compare only when it failed */
                cJSON_Delete(direct);
                if (rc == 0)
                    cr_request_free(&r);
                continue;
            }
            CHECK(rc == -1 && strcmp(e.code, "invalid_json") == 0);
            char want[64];
            snprintf(want, sizeof want, "(error at byte %zu)", (size_t)(end - body));
            CHECK(strstr(e.message, want) != NULL);
            if (!strstr(e.message, want))
                fprintf(stderr, "%s: %s, want %s\n", body + strlen(body) - 20, e.message, want);
        }
    /* trailing text after a long array */
    char a[4096];
    list(a, N, -1, "", 0);
    snprintf(body, sizeof body, "{\"data\":%s} x", a);
    cr_request r;
    cr_error e;
    CHECK(decode(CR_OP_HISTOGRAM, &r, &e) == -1);
    char want[64];
    snprintf(want, sizeof want, "(at byte %zu)", strlen(body) - 1);
    CHECK(strstr(e.message, want) != NULL);
}

/* '[' and quotes inside strings, escaped quotes: never taken for arrays. */
static void test_strings(void)
{
    char a[4096];
    list(a, N, -1, "", 0);
    snprintf(body, sizeof body, "{\"kernel\":\"a\\\"[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]\","
             "\"data\":%s}", a);
    cr_request r;
    cr_error e;
    CHECK(decode(CR_OP_HISTOGRAM, &r, &e) == -1 && strcmp(e.field, "kernel") == 0);
    snprintf(body, sizeof body, "{\"x\":\"[\",\"data\":%s,\"dtype\":\"float32\"}", a);
    CHECK(decode(CR_OP_HISTOGRAM, &r, &e) == -1 && strcmp(e.field, "x") == 0);
    snprintf(body, sizeof body, "{\"dtype\":\"float32\",\"data\":%s}", a);
    CHECK(decode(CR_OP_HISTOGRAM, &r, &e) == 0 && r.task.u.hist.count == N);
    cr_request_free(&r);
    /* a long numeric range is a list but not [lo, hi] */
    snprintf(body, sizeof body, "{\"dtype\":\"float32\",\"data\":[1],\"range\":%s}", a);
    CHECK(decode(CR_OP_HISTOGRAM, &r, &e) == -1 && strcmp(e.field, "range") == 0);
}

/* Numbers: the fast path gives strtod's double for every spelling the scan accepts. */
static void test_numbers(void)
{
    static const char *const nums[] = {
        "0", "-0", "0.0", "-0.0", "1", "01", "1.", "1.e5", "123456789012345678",
        "1234567890123456789", "12345678901234567890123", "0.1", "0.30000000000000004",
        "2.2250738585072014e-308", "4.9e-324", "1.7976931348623157e308", "9007199254740993",
        "1e22", "1e23", "1e-22", "1e-23", "3.4028235e38", "0.000001234567890123456789",
        "123456.789e-3", "7.450580596923828125e-9", "1E5", "1e+5",
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        char text[128];
        snprintf(text, sizeof text, "%s]", nums[i]);
        const char *p = text;
        double got = cr_jfast_next(&p), want = strtod(nums[i], NULL);
        CHECK(memcmp(&got, &want, sizeof got) == 0 && *p == ']');
        if (memcmp(&got, &want, sizeof got) != 0)
            fprintf(stderr, "%s: %.17g, want %.17g\n", nums[i], got, want);
    }
}

int main(void)
{
    test_values_dict_nested_hist();
    test_element_errors();
    test_syntax_offsets();
    test_strings();
    test_numbers();
    return check_summary("test_json_fastpath");
}
