/* The JSON decoders' fast path for numeric arrays (server/codec/json_fastarray.c): same values,
 * same errors (field paths, codes, byte offsets) as when cJSON read every number, for the v1
 * decoder and KServe's; and the bound on what cJSON may still build. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tests/unit/check.h"
#include "server/codec/json_fastarray.h"
#include "server/codec/json_decode.h"
#include "server/kserve/kserve_internal.h"

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

/* The scan keeps the values it converted: the same bits as strtod's, for every spelling. */
static void test_kept_values(void)
{
    static const char *const nums[] = {
        "0", "-0", "1.", "-.5", "1234567890123456789", "12345678901234567890123",
        "0.30000000000000004", "2.2250738585072014e-308", "4.9e-324", "1e23", "1e-23",
        "3.4028235e38", "123456.789e-3", "7.450580596923828125e-9", "1E5", "1e+5", "-0.1234",
    };
    enum { K = sizeof nums / sizeof nums[0] };
    char body[1024] = "[";
    for (size_t i = 0; i < K; i++)
        snprintf(body + strlen(body), sizeof body - strlen(body), "%s%s", i ? " , " : "", nums[i]);
    strcat(body, "]");
    cr_jfast f;
    CHECK(cr_jfast_scan(body, strlen(body), &f) == 0);
    CHECK(f.n_spans == 1 && f.spans[0].values_at == 0 && f.n_values == K);
    cr_jnums q = cr_jspan_numbers(&f, &f.spans[0]);
    for (size_t i = 0; i < K && f.n_values == K; i++) {
        double got = cr_jnums_next(&q), want = strtod(nums[i], NULL);
        CHECK(memcmp(&got, &want, sizeof got) == 0);
    }
    cr_jfast_free(&f);
}

/* Random spellings, as the scan meets them (runs of digits across its eight-byte steps, leading
 * zeros, more than 19 significant digits, exponents), each the list's last number so that the
 * body ends within eight bytes of it: every kept value is strtod's. */
static void test_random_kept_values(void)
{
    unsigned seed = 12345;
    int wrong = 0, kept = 0;
    for (int i = 0; i < 200000; i++) {
        char num[80], *w = num;
        seed = seed * 1103515245u + 12345u;
        unsigned r = seed >> 8;
        if (r & 1)
            *w++ = '-';
        int zeros = (r >> 1) % 4 == 0 ? (int)(r >> 3) % 6 : 0, int_len = (int)(r >> 6) % 24;
        int frac_len = (int)(r >> 11) % 24;
        if (i % 3 == 0) { /* a third of short spellings, the common case and its limits */
            int_len %= 9;
            frac_len %= 10;
        }
        for (int k = 0; k < zeros; k++)
            *w++ = '0';
        for (int k = 0; k < int_len; k++, seed = seed * 1103515245u + 12345u)
            *w++ = (char)('0' + (seed >> 16) % 10);
        if (zeros + int_len == 0)
            *w++ = '0';
        if (frac_len || (r >> 16) % 2) {
            *w++ = '.';
            for (int k = 0; k < frac_len; k++, seed = seed * 1103515245u + 12345u)
                *w++ = (char)('0' + (seed >> 16) % ((r >> 20) % 3 ? 10 : 2));
        }
        if ((r >> 17) % 3 == 0)
            w += sprintf(w, "e%s%d", (r >> 19) % 2 ? "-" : "", (int)(seed >> 20) % 330);
        *w = '\0';
        if (w - num > 63)
            continue; /* past the token bound: read through cJSON, not kept */
        /* last, after CR_JFAST_MIN numbers and 0-7 spaces (every alignment, the body ending
         * right after it), or first with the rest after it (where the short-number path reads
         * 8 bytes at a time) */
        bool first = i % 2;
        char body[200];
        int len = first ? snprintf(body, sizeof body, "[%*s%s,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]",
                                   (int)(r >> 22) % 8, "", num)
                        : snprintf(body, sizeof body, "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,%*s%s]",
                                   (int)(r >> 22) % 8, "", num);
        char *exact = malloc((size_t)len); /* no slack after ']': the scan must stop at the end */
        memcpy(exact, body, (size_t)len);
        cr_jfast f;
        double want = strtod(num, NULL);
        if (cr_jfast_scan(exact, (size_t)len, &f) == 0 && f.n_values > 0) {
            double got = f.values[first ? 0 : f.n_values - 1];
            kept += f.n_values == 17;
            wrong += memcmp(&got, &want, sizeof got) != 0 && isfinite(want);
            cr_jfast_free(&f);
        }
        free(exact);
    }
    CHECK_MSG(kept > 150000, "only %d of the random numbers were kept", kept);
    CHECK_MSG(wrong == 0, "%d random numbers kept with other bits than strtod's", wrong);
}

/* The values array is the thread's, lent to one scan at a time: a second scan while the first
 * holds it reads its numbers from text, with the same bits; once returned it is lent again. */
static void test_values_lent_once(void)
{
    const char *body = "[0.5, 1.25, -3, 4e2, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16.5]";
    cr_jfast a, b, c;
    CHECK(cr_jfast_scan(body, strlen(body), &a) == 0 && a.values && a.spans[0].values_at == 0);
    CHECK(cr_jfast_scan(body, strlen(body), &b) == 0 && !b.values && b.n_spans == 1 &&
          b.spans[0].values_at == -1);
    cr_jnums qa = cr_jspan_numbers(&a, &a.spans[0]), qb = cr_jspan_numbers(&b, &b.spans[0]);
    bool same = true;
    for (int i = 0; i < 16; i++) {
        double x = cr_jnums_next(&qa), y = cr_jnums_next(&qb);
        same = same && memcmp(&x, &y, sizeof x) == 0;
    }
    CHECK_MSG(same, "kept values and values read from text agree");
    cr_jfast_free(&b);
    cr_jfast_free(&a);
    CHECK(cr_jfast_scan(body, strlen(body), &c) == 0 && c.values && c.spans[0].values_at == 0);
    cr_jfast_free(&c);
}

/* Past CR_JFAST_VALUES_MAX kept values, the spans that did not fit are read from their text:
 * {"a": [[1.5, ...], ...], "data": [...]} with the second list too long to keep. */
static void test_values_bound(void)
{
    size_t first = 1000, second = CR_JFAST_VALUES_MAX, cap = 64 + 8 * (first + second);
    char *body = malloc(cap);
    CHECK(body != NULL);
    if (!body)
        return;
    size_t n = (size_t)sprintf(body, "{\"a\": [");
    for (size_t i = 0; i < first; i++)
        n += (size_t)sprintf(body + n, "%s[%zu.5]", i ? "," : "", i);
    n += (size_t)sprintf(body + n, "], \"data\": [");
    for (size_t i = 0; i < second; i++)
        n += (size_t)sprintf(body + n, "%s%zu", i ? "," : "", i % 7);
    n += (size_t)sprintf(body + n, "]}");
    cr_jfast f;
    CHECK(cr_jfast_scan(body, n, &f) == 0);
    CHECK(f.n_spans == 2 && f.values_full && f.n_values == first);
    if (f.n_spans == 2) {
        CHECK(f.spans[0].values_at == 0 && f.spans[1].values_at == -1);
        cr_jnums rows = cr_jspan_numbers(&f, &f.spans[0]), flat = cr_jspan_numbers(&f, &f.spans[1]);
        for (size_t i = 0; i < first; i++) {
            cr_jnums_row(&rows);
            CHECK(cr_jnums_next(&rows) == (double)i + 0.5);
        }
        for (size_t i = 0; i < second; i++)
            CHECK(cr_jnums_next(&flat) == (double)(i % 7));
    }
    cr_jfast_free(&f);
    free(body);
}

/* ---- the fast path against cJSON alone -------------------------------------------------------- */

/* Bodies built from random parts, each decoded twice: with the fast path and with it off (every
 * array through cJSON, numbers through strtod). Outcomes must be identical: the same status,
 * code, field and message, or the same arrays bit for bit. */

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;

static unsigned rnd(unsigned n)
{
    rnd_state = rnd_state * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)((rnd_state >> 33) % n);
}

typedef struct {
    char *p;
    size_t len, cap;
} sbuf;

static void add(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->len + (size_t)n + 1 > b->cap) {
        b->cap = (b->len + (size_t)n + 1) * 2;
        b->p = realloc(b->p, b->cap);
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

#define COUNT(a) (sizeof a / sizeof a[0])

/* Spellings cJSON reads as numbers, strtod's corner cases among them. */
static const char *const good_numbers[] = {
    "0", "-0", "1", "-1", "01", "1.", "-.5", "0.1", "123456.789e-3", "1e5", "1E+5", "-2.5e-3",
    "0.30000000000000004", "3.4028235e38", "4.9e-324", "9007199254740993", "1234567890123456789",
    "0.1000000000000000055511151231257827021181583404541015625", "255", "7", "2.2250738585072014e-308",
    "12", "0.000001234567890123456789",
};
/* What may stand where a number belongs, each refused somewhere: by cJSON's syntax, by the
 * decoder's types, or by its ranges (non-finite, float32 overflow, not a uint8). */
static const char *const bad_tokens[] = {
    "\"x\"", "null", "true", "[1]", "[]", "{}", "1e999", "-1e999", "1e39", "+1", ".5", "0x10",
    "1e", "1.5.3", "--1", "", "1 2", "NaN", "Infinity", "-", "1\x01", "\x01" "2", "256", "-1",
    "0.5", "1111111111111111111111111111111111111111111111111111111111111111111111", "1,", "[1,2]",
};
/* What may stand where a row belongs. */
static const char *const bad_rows[] = {"1", "\"x\"", "null", "{}", "[[1]]", "[1,[2]]", "[1,]", "[,1]"};

static void put_sep(sbuf *b)
{
    static const char *const seps[] = {", ", "\n,\t", " ,\r\n ", ",\x01", ",\x00"};
    unsigned k = rnd(200);
    if (k < 180)
        add(b, ",");
    else if (k < 198)
        add(b, "%s", seps[k % 3]);
    else if (k == 198)
        add(b, "%s", seps[3]);
    else {
        add(b, ",");
        b->p[b->len - 1] = ','; /* ",\0": a NUL between numbers */
        add(b, " ");
        b->p[b->len - 1] = '\0';
    }
}

typedef enum { M_OK, M_RAGGED, M_EMPTY_ROW, M_BAD_ELEM, M_BAD_ROW, M_VARIANTS } mvariant;

static mvariant pick_variant(void) { return rnd(3) ? M_OK : (mvariant)rnd(M_VARIANTS); }

static void put_elem(sbuf *b, bool bad)
{
    add(b, "%s", bad ? bad_tokens[rnd(COUNT(bad_tokens))] : good_numbers[rnd(COUNT(good_numbers))]);
}

static void put_list(sbuf *b, long n, mvariant v)
{
    long bad = v == M_BAD_ELEM && n ? (long)rnd((unsigned)n) : -1;
    add(b, "[");
    for (long i = 0; i < n; i++) {
        if (i)
            put_sep(b);
        put_elem(b, i == bad);
    }
    add(b, "]");
}

static void put_rows(sbuf *b, long rows, long cols, mvariant v)
{
    long odd = v != M_OK ? (long)rnd((unsigned)rows) : -1;
    add(b, "[");
    for (long i = 0; i < rows; i++) {
        if (i)
            put_sep(b);
        if (i == odd && v == M_BAD_ROW) {
            add(b, "%s", bad_rows[rnd(COUNT(bad_rows))]);
            continue;
        }
        long n = cols;
        if (i == odd && v == M_RAGGED)
            n = cols + (rnd(2) || cols == 1 ? 1 : -1);
        if (i == odd && v == M_EMPTY_ROW)
            n = 0;
        put_list(b, n, i == odd && v == M_BAD_ELEM ? M_BAD_ELEM : M_OK);
    }
    add(b, "]");
}

static const long dims[] = {1, 2, 3, 8, 15, 16, 17, 40};

static long pick_dim(void) { return dims[rnd(COUNT(dims))]; }

/* A matrix in one of the forms a client (or a mistake) gives: rows, a flat list, or the dict form
 * with a flat (or nested) data list. */
static void put_matrix(sbuf *b, long rows, long cols)
{
    unsigned form = rnd(6);
    if (form < 4) {
        put_rows(b, rows, cols, pick_variant());
        return;
    }
    if (form == 4) {
        put_list(b, rows * cols, pick_variant());
        return;
    }
    long r = rnd(8) ? rows : rows + 1;
    add(b, "{\"rows\":%ld,\"cols\":%ld,\"data\":", r, cols);
    if (rnd(4))
        put_list(b, rows * cols, pick_variant());
    else
        put_rows(b, rows, cols, pick_variant());
    add(b, rnd(20) ? "}" : ",\"rows\":1}");
}

static const char *const v1_dtypes[] = {"float32", "float64", "uint8"};

static cr_op v1_body(sbuf *b)
{
    long rows = pick_dim(), cols = pick_dim();
    const char *dt = v1_dtypes[rnd(rnd(3) ? 2 : 3)];
    switch (rnd(5)) {
    case 0:
        add(b, "{\"a\":");
        put_matrix(b, rows, cols);
        add(b, ",\"dtype\":\"%s\"}", dt);
        return CR_OP_ATA;
    case 1:
        add(b, "{\"dtype\":\"%s\",\"a\":", dt);
        put_matrix(b, rows, cols);
        add(b, ",\"trans_b\":true,\"b\":");
        put_matrix(b, pick_dim(), rnd(8) ? cols : cols + 1);
        add(b, "}");
        return CR_OP_GEMM;
    case 2:
        add(b, "{\"data\":");
        put_list(b, rows * cols, pick_variant());
        add(b, rnd(2) ? ",\"dtype\":\"%s\"}" : ",\"dtype\":\"%s\",\"range\":[0,300]}", dt);
        return CR_OP_HISTOGRAM;
    case 3:
        add(b, "{\"data\":");
        put_rows(b, rows, cols, pick_variant());
        add(b, "}");
        return CR_OP_HISTOGRAM;
    default:
        add(b, "{\"op\":\"ata\",\"a\":");
        put_matrix(b, rows, cols);
        add(b, "}");
        return CR_OP_COUNT;
    }
}

static const char *const ks_dtypes[] = {"FP32", "FP64", "UINT8"};

static void ks_tensor(sbuf *b, const char *name, long rows, long cols, const char *dt)
{
    add(b, "{\"name\":\"%s\",\"datatype\":\"%s\",\"shape\":", name, dt);
    if (rnd(30) == 0)
        put_list(b, 20, M_OK); /* a shape that is a long list */
    else if (cols)
        add(b, "[%ld,%ld]", rnd(10) ? rows : rows + 1, cols);
    else
        add(b, "[%ld]", rnd(10) ? rows : rows - 1);
    add(b, ",\"data\":");
    if (cols && rnd(3))
        put_rows(b, rows, cols, pick_variant());
    else if (!cols && rnd(5) == 0)
        put_rows(b, rows / 2 ? rows / 2 : 1, 2, pick_variant());
    else
        put_list(b, cols ? rows * cols : rows, pick_variant());
    add(b, "}");
}

static const char *ks_body(sbuf *b)
{
    long rows = pick_dim(), cols = pick_dim();
    const char *dt = ks_dtypes[rnd(rnd(3) ? 2 : 3)];
    switch (rnd(6)) {
    case 0:
        add(b, "{\"inputs\":[");
        ks_tensor(b, "a", rows, cols, dt);
        add(b, "]}");
        return "ata";
    case 1:
        add(b, "{\"inputs\":[");
        ks_tensor(b, "a", rows, cols, dt);
        add(b, ",");
        ks_tensor(b, "b", cols, pick_dim(), dt);
        add(b, "],\"parameters\":{\"alpha\":2}}");
        return "gemm";
    case 2:
        add(b, "{\"inputs\":[");
        ks_tensor(b, "data", rows * cols, 0, dt);
        add(b, rnd(2) ? "]}" : "],\"parameters\":{\"range_lo\":0,\"range_hi\":300}}");
        return "histogram";
    case 3: /* numbers where the inputs belong */
        add(b, "{\"inputs\":");
        if (rnd(2))
            put_list(b, rows * cols, M_OK);
        else
            put_rows(b, rows, cols, M_OK);
        add(b, "}");
        return "ata";
    case 4: /* numbers where the outputs belong */
        add(b, "{\"inputs\":[");
        ks_tensor(b, "a", rows, cols, dt);
        add(b, "],\"outputs\":");
        put_rows(b, rows, cols, M_OK);
        add(b, "}");
        return "ata";
    default:
        add(b, "{\"id\":\"x\",\"inputs\":[");
        ks_tensor(b, "a", rows, cols, "FP32");
        add(b, "]}");
        return "ata";
    }
}

/* Syntax errors anywhere: cut short, text after the value, a bracket or another structural byte
 * where it does not belong. */
static void mangle(sbuf *b)
{
    unsigned k = rnd(20);
    if (k == 0 && b->len > 1)
        b->len = 1 + rnd((unsigned)b->len - 1);
    else if (k == 1)
        add(b, " x");
    else if (k == 2 && b->len > 2)
        b->p[1 + rnd((unsigned)b->len - 2)] = rnd(2) ? ']' : '[';
    else if (k == 3 && b->len > 2) { /* one more structural byte anywhere */
        static const char bytes[] = "\"{}:,[] ";
        size_t at = 1 + rnd((unsigned)b->len - 2);
        add(b, " ");
        memmove(b->p + at + 1, b->p + at, b->len - at - 1);
        b->p[at] = bytes[rnd(sizeof bytes - 1)];
    }
}

/* The task's fields of its op (the union's other members alias its pointers). */
static void task_text(const cr_request *r, char *out, size_t n)
{
    const cr_task *t = &r->task;
    int k = snprintf(out, n, "op %d dt %d prec %d t %lld k %d %s float %d: ", (int)t->op,
                     (int)t->dtype, (int)t->precision, (long long)r->timeout_ms,
                     (int)r->kernel.mode, r->kernel.name, r->is_float_hist);
    if (t->op == CR_OP_GEMM)
        snprintf(out + k, n - (size_t)k, "%lld %lld %lld %.17g %.17g %d %d %d",
                 (long long)t->u.gemm.m, (long long)t->u.gemm.n, (long long)t->u.gemm.k,
                 t->u.gemm.alpha, t->u.gemm.beta, t->u.gemm.trans_a, t->u.gemm.trans_b,
                 t->u.gemm.c_in != NULL);
    else if (t->op == CR_OP_ATA)
        snprintf(out + k, n - (size_t)k, "%lld %lld", (long long)t->u.ata.m, (long long)t->u.ata.n);
    else
        snprintf(out + k, n - (size_t)k, "%lld %d %.17g %.17g", (long long)t->u.hist.count,
                 t->u.hist.bins, t->u.hist.lo, t->u.hist.hi);
}

static bool same_request(const cr_request *a, const cr_request *b)
{
    char ta[512], tb[512];
    task_text(a, ta, sizeof ta);
    task_text(b, tb, sizeof tb);
    if (strcmp(ta, tb) != 0)
        return false;
    for (int i = 0; i < CR_BUF_OUTPUT; i++)
        if (a->buf_bytes[i] != b->buf_bytes[i] ||
            (a->buf_bytes[i] && memcmp(a->bufs[i], b->bufs[i], a->buf_bytes[i]) != 0))
            return false;
    return true;
}

typedef struct {
    int rc;
    cr_error e;
    cr_request r;
    cr_ks_spec spec;
} outcome;

static void decode_v1(cr_op op, const sbuf *b, outcome *o)
{
    memset(&o->e, 0, sizeof o->e);
    o->rc = cr_request_from_json(op, b->p, b->len, NULL, &o->r, &o->e);
}

static void decode_ks(const char *model, const sbuf *b, outcome *o)
{
    static const cr_limits lim = {.max_elements = 1 << 20, .max_total_bytes = 1 << 26, .max_bins = 4096, .max_stack = 1 << 16};
    memset(&o->e, 0, sizeof o->e);
    o->rc = cr_ks_decode(cr_ks_model_find(model, strlen(model)), b->p, b->len, -1, &lim, &o->r,
                         &o->spec, &o->e);
}

static bool same_outcome(const outcome *x, const outcome *y, bool ks)
{
    if (x->rc != y->rc)
        return false;
    if (x->rc != 0)
        return x->e.http == y->e.http && !strcmp(x->e.code, y->e.code) &&
               !strcmp(x->e.field, y->e.field) && !strcmp(x->e.message, y->e.message);
    return same_request(&x->r, &y->r) &&
           (!ks || memcmp(x->spec.want, y->spec.want, sizeof x->spec.want) == 0);
}

static void free_outcome(outcome *o, bool ks)
{
    if (o->rc != 0)
        return;
    cr_request_free(&o->r);
    if (ks)
        cr_ks_spec_free(&o->spec);
}

/* One body both ways; *spans counts the bodies the fast path had something to do in. */
static void differential_one(const sbuf *b, bool ks, cr_op op, const char *model, int *spans,
                             int *accepted)
{
    outcome fast, slow;
    cr_jfast f;
    if (cr_jfast_scan(b->p, b->len, &f) == 0) {
        *spans += f.n_spans > 0;
        cr_jfast_free(&f);
    }
    ks ? decode_ks(model, b, &fast) : decode_v1(op, b, &fast);
    cr_jfast_set_enabled(false);
    ks ? decode_ks(model, b, &slow) : decode_v1(op, b, &slow);
    cr_jfast_set_enabled(true);
    bool same = same_outcome(&fast, &slow, ks);
    *accepted += fast.rc == 0;
    CHECK_MSG(same, "%s body (%zu bytes) %.300s\n  fast: %d %d %s \"%s\" %s\n  cJSON: %d %d %s \"%s\" %s",
              ks ? model : cr_op_name(op == CR_OP_COUNT ? CR_OP_ATA : op), b->len, b->p, fast.rc,
              fast.e.http, fast.e.code, fast.e.field, fast.e.message, slow.rc, slow.e.http,
              slow.e.code, slow.e.field, slow.e.message);
    free_outcome(&fast, ks);
    free_outcome(&slow, ks);
}

/* CRUNCHD_DIFF_BODIES and CRUNCHD_DIFF_SEED run a longer or another corpus. */
static void test_differential(void)
{
    int spans = 0, accepted = 0, n = 20000;
    if (getenv("CRUNCHD_DIFF_BODIES"))
        n = atoi(getenv("CRUNCHD_DIFF_BODIES"));
    if (getenv("CRUNCHD_DIFF_SEED"))
        rnd_state ^= strtoull(getenv("CRUNCHD_DIFF_SEED"), NULL, 10);
    for (int i = 0; i < n; i++) {
        sbuf b = {0};
        bool ks = i % 3 == 2;
        const char *model = NULL;
        cr_op op = CR_OP_COUNT;
        if (ks)
            model = ks_body(&b);
        else
            op = v1_body(&b);
        mangle(&b);
        differential_one(&b, ks, op, model, &spans, &accepted);
        free(b.p);
    }
    /* the corpus must exercise both the fast path and the decoders' success */
    CHECK_MSG(spans > n / 3 && accepted > n / 10, "%d of %d bodies had spans, %d decoded", spans, n,
              accepted);
    printf("differential: %d bodies (%d with spans, %d decoded): fast path == cJSON alone\n", n,
           spans, accepted);
}

/* ---- rows as one span ---------------------------------------------------------------------- */

/* Rows of any length are one span (not one per row, not a cJSON node per number); values are
 * strtod's. */
static void test_rows_are_one_span(void)
{
    static const long lens[] = {1, 2, 15, 16, 1000};
    for (size_t k = 0; k < COUNT(lens); k++) {
        long cols = lens[k], rows = 4000 / cols + 3;
        sbuf b = {0};
        add(&b, "{\"dtype\":\"float64\",\"a\":[");
        for (long i = 0; i < rows; i++) {
            add(&b, i ? ",[" : "[");
            for (long j = 0; j < cols; j++)
                add(&b, "%s%s", j ? "," : "", good_numbers[(size_t)(i * 7 + j) % COUNT(good_numbers)]);
            add(&b, "]");
        }
        add(&b, "]}");
        cr_jfast f;
        CHECK(cr_jfast_scan(b.p, b.len, &f) == 0);
        CHECK_MSG(f.n_spans == 1 && f.spans[0].rows == rows && f.spans[0].cols == cols &&
                      f.spans[0].count == rows * cols && f.spans[0].odd_row == -1 &&
                      f.skel_len == strlen("{\"dtype\":\"float64\",\"a\":[]}"),
                  "rows of %ld: %zu spans", cols, f.n_spans);
        cr_jfast_free(&f);
        cr_request r;
        cr_error e;
        int rc = cr_request_from_json(CR_OP_ATA, b.p, b.len, NULL, &r, &e);
        CHECK_MSG(rc == 0 && r.task.u.ata.m == rows && r.task.u.ata.n == cols, "rows of %ld: %s",
                  cols, e.message);
        bool exact = rc == 0;
        for (long i = 0; exact && i < rows; i++)
            for (long j = 0; j < cols; j++) {
                double want = strtod(good_numbers[(size_t)(i * 7 + j) % COUNT(good_numbers)], NULL);
                exact &= memcmp(&((const double *)r.task.u.ata.a)[i * cols + j], &want, 8) == 0;
            }
        CHECK_MSG(exact, "rows of %ld: values are strtod's", cols);
        if (rc == 0)
            cr_request_free(&r);
        free(b.p);
    }
}

/* The shape errors of rows kept as a span name the same row as before. */
static void test_row_span_errors(void)
{
    static const struct {
        const char *rows;
        const char *field, *message;
    } cases[] = {
        {"[[1],[2],[3],[4],[5],[6],[7],[8],[9],[1,2]]", "a[9]",
         "a[9] has 2 numbers but a[0] has 1: rows must be equally long"},
        {"[[1],[2],[3],[4],[5],[],[7],[8],[9],[1,2]]", "a[5]", "a[5] is an empty row"},
        {"[[],[2],[3],[4],[5],[6],[7],[8],[9],[1]]", "a[0]", "a[0] is an empty row"},
        {"[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]", "a",
         "a must be a matrix or a stack of them (2 to 8 dimensions), got 1"},
    };
    for (size_t k = 0; k < COUNT(cases); k++) {
        snprintf(body, sizeof body, "{\"a\":%s}", cases[k].rows);
        cr_request r;
        cr_error e;
        CHECK(decode(CR_OP_ATA, &r, &e) == -1);
        CHECK_MSG(e.http == 400 && !strcmp(e.code, "invalid_field") && !strcmp(e.field, cases[k].field) &&
                      !strcmp(e.message, cases[k].message),
                  "%s: %s %s", cases[k].rows, e.field, e.message);
    }
    /* histogram data as rows: the first element is a list, as cJSON saw it */
    snprintf(body, sizeof body, "{\"data\":[[1],[2],[3],[4],[5],[6],[7],[8],[9],[1],[1],[1],[1],[1],[1],[1]]}");
    cr_request r;
    cr_error e;
    CHECK(decode(CR_OP_HISTOGRAM, &r, &e) == -1 && !strcmp(e.field, "data[0]") &&
          !strcmp(e.message, "data[0] must be a number, got a list"));
}

/* ---- the bounds ------------------------------------------------------------------------------ */

/* Many small arrays that are each a span: the bookkeeping stops at its budget. */
static void test_span_budget(void)
{
    sbuf b = {0};
    add(&b, "{\"a\":[");
    for (int i = 0; i < 200000; i++)
        add(&b, "%s[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],\"x\"", i ? "," : "");
    add(&b, "]}");
    cr_jfast f;
    CHECK(cr_jfast_scan(b.p, b.len, &f) == 0);
    size_t spent = f.n_spans * (sizeof(cr_jspan) + sizeof(cr_jspan *));
    CHECK_MSG(f.n_spans > 1000 && spent <= CR_JFAST_BUDGET_MIN + b.len / 4,
              "%zu spans, %zu bytes for a %zu-byte body", f.n_spans, spent, b.len);
    cr_jfast_free(&f);
    cr_request r;
    cr_error e;
    CHECK(cr_request_from_json(CR_OP_ATA, b.p, b.len, NULL, &r, &e) == -1);
    CHECK_MSG(e.http == 413 && !strcmp(e.code, "too_large") && !strcmp(e.field, "a"),
              "%d %s %s: %s", e.http, e.code, e.field, e.message);
    free(b.p);
}

/* What cJSON still parses is bounded: past 1 MiB + half the body, a 413 naming the member it
 * stopped in; below it, the errors of before. */
static void test_tree_budget(void)
{
    static const struct {
        const char *route, *head, *unit, *tail;
        int repeat;
        int http;
        const char *code, *field;
    } cases[] = {
        /* rows of one number, one of them not: nothing is a span, everything a node */
        {"v1", "{\"a\":[", "[1],", "[\"x\"]]}", 1000000, 413, "too_large", "a"},
        {"v1", "{\"a\":[", "[1],", "[\"x\"]]}", 1000, 400, "invalid_field", "a[1000][0]"},
        {"v1", "{\"data\":[", "{},", "{}]}", 1000000, 413, "too_large", "data"},
        {"v1", "{\"data\":[", "null,", "1]}", 1000, 400, "invalid_field", "data[0]"},
        {"ks", "{\"inputs\":[{\"name\":\"a\",\"datatype\":\"FP32\",\"shape\":[1,2],\"data\":[",
         "[1],", "[1,\"x\"]]}]}", 1000000, 413, "too_large", "inputs"},
    };
    for (size_t k = 0; k < COUNT(cases); k++) {
        sbuf b = {0};
        add(&b, "%s", cases[k].head);
        for (int i = 0; i < cases[k].repeat; i++)
            add(&b, "%s", cases[k].unit);
        add(&b, "%s", cases[k].tail);
        outcome o;
        bool ks = cases[k].route[0] == 'k';
        if (ks)
            decode_ks("ata", &b, &o);
        else
            decode_v1(CR_OP_ATA, &b, &o);
        if (!ks && cases[k].head[2] == 'd') {
            free_outcome(&o, ks);
            decode_v1(CR_OP_HISTOGRAM, &b, &o);
        }
        CHECK_MSG(o.rc == -1 && o.e.http == cases[k].http && !strcmp(o.e.code, cases[k].code) &&
                      !strcmp(o.e.field, cases[k].field),
                  "case %zu: %d %s %s: %s", k, o.e.http, o.e.code, o.e.field, o.e.message);
        free_outcome(&o, ks);
        free(b.p);
    }
}

/* ---- KServe -------------------------------------------------------------------------------- */

static int ks_binary(const char *head, const void *data, size_t n, cr_request *r, cr_ks_spec *s,
                     cr_error *e)
{
    static const cr_limits lim = {.max_elements = 1 << 20, .max_total_bytes = 1 << 26, .max_bins = 4096, .max_stack = 1 << 16};
    size_t hl = strlen(head);
    memcpy(body, head, hl);
    memcpy(body + hl, data, n);
    memset(e, 0, sizeof *e);
    return cr_ks_decode(cr_ks_model_find("histogram", 9), body, hl + n, (int64_t)hl, &lim, r, s, e);
}

/* A float histogram's NaN has no bin: refused (400), not dropped, with a range or without. */
static void test_kserve_nan(void)
{
    float f[4] = {0.5f, 0.25f, NAN, 0.75f};
    double d[4] = {0.5, NAN, 0.25, 0.75};
    cr_request r;
    cr_ks_spec s;
    cr_error e;
    const char *f32 = "{\"inputs\":[{\"name\":\"data\",\"datatype\":\"FP32\",\"shape\":[4],"
                      "\"parameters\":{\"binary_data_size\":16}}],\"parameters\":{\"range_lo\":0,"
                      "\"range_hi\":1}}";
    CHECK(ks_binary(f32, f, sizeof f, &r, &s, &e) == -1 && e.http == 400 &&
          !strcmp(e.code, "non_finite") && strstr(e.message, "NaN (element 2)"));
    const char *f64 = "{\"inputs\":[{\"name\":\"data\",\"datatype\":\"FP64\",\"shape\":[4],"
                      "\"parameters\":{\"binary_data_size\":32}}],\"parameters\":{\"range_lo\":0,"
                      "\"range_hi\":1}}";
    CHECK(ks_binary(f64, d, sizeof d, &r, &s, &e) == -1 && e.http == 400 &&
          !strcmp(e.code, "non_finite") && strstr(e.message, "NaN (element 1)"));
    const char *no_range = "{\"inputs\":[{\"name\":\"data\",\"datatype\":\"FP32\",\"shape\":[4],"
                           "\"parameters\":{\"binary_data_size\":16}}]}";
    CHECK(ks_binary(no_range, f, sizeof f, &r, &s, &e) == -1 && e.http == 400 &&
          !strcmp(e.field, "data"));
    f[2] = INFINITY; /* outside any finite range: numpy leaves it out, and so do we */
    CHECK(ks_binary(f32, f, sizeof f, &r, &s, &e) == 0 && r.task.u.hist.count == 4);
    cr_request_free(&r);
    cr_ks_spec_free(&s);
}

/* Rank-1 data given as rows: a 400 naming the data and both shapes (it was a 500). */
static void test_kserve_rows_for_a_list(void)
{
    static const cr_limits lim = {.max_elements = 1 << 20, .max_total_bytes = 1 << 26, .max_bins = 4096, .max_stack = 1 << 16};
    static const char *const bodies[] = {
        "{\"inputs\":[{\"name\":\"data\",\"datatype\":\"UINT8\",\"shape\":[2],\"data\":[[1],[2]]}]}",
        "{\"inputs\":[{\"name\":\"data\",\"datatype\":\"UINT8\",\"shape\":[16],\"data\":"
        "[[1],[2],[1],[2],[1],[2],[1],[2],[1],[2],[1],[2],[1],[2],[1],[2]]}]}",
    };
    for (size_t k = 0; k < COUNT(bodies); k++) {
        cr_request r;
        cr_ks_spec s;
        cr_error e = {0};
        int rc = cr_ks_decode(cr_ks_model_find("histogram", 9), bodies[k], strlen(bodies[k]), -1,
                              &lim, &r, &s, &e);
        CHECK_MSG(rc == -1 && e.http == 400 && !strcmp(e.field, "data.data") && strstr(e.message, "nested as (") &&
                      strstr(e.message, "but the shape says ("),
                  "%d %s %s", e.http, e.field, e.message);
    }
}

int main(void)
{
    test_values_dict_nested_hist();
    test_element_errors();
    test_syntax_offsets();
    test_strings();
    test_numbers();
    test_kept_values();
    test_random_kept_values();
    test_values_lent_once();
    test_values_bound();
    test_rows_are_one_span();
    test_row_span_errors();
    test_span_budget();
    test_tree_budget();
    test_kserve_nan();
    test_kserve_rows_for_a_list();
    test_differential();
    return check_summary("test_json_fastpath");
}
