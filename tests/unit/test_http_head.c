/* Unit tests for the request heads the Unix socket's acceptor parses itself
 * (server/http/http_head.c): a whole head split into method, path, query, version and fields;
 * the query's pairs decoded as libmicrohttpd decodes them; 0 while a head is not yet whole; -1
 * for every head it does not take (bare LF, folded lines, bad names, control bytes, NUL,
 * anything but HTTP/1.1, odd targets, too many fields or pairs, too long). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/http/http_head.h"
#include "tests/unit/check.h"

/* The head is big (two 8 KiB buffers): one, static, for every test. */
static cr_head h;

static int parse(const char *s)
{
    return cr_head_parse(s, strlen(s), &h);
}

static int str_is(const char *got, const char *want)
{
    return got && strcmp(got, want) == 0;
}

static void test_whole_head(void)
{
    const char *head = "POST /v1/gemm?dtype=float64&alpha=2 HTTP/1.1\r\n"
                       "Host: crunchd\r\n"
                       "Content-Type: \t multipart/form-data; boundary=x \t \r\n"
                       "X-Dup: one\r\n"
                       "x-dup:two\r\n"
                       "Empty:\r\n"
                       "Blank: \t  \r\n"
                       "Inner: a \t b\r\n"
                       "Obs-Text: caf\xc3\xa9\r\n"
                       "\r\n";
    const char *body = "BODY\r\n\r\nmore";
    char wire[1024];
    snprintf(wire, sizeof wire, "%s%s", head, body);
    CHECK(cr_head_parse(wire, strlen(wire), &h) == 1);
    CHECK_MSG(h.len == strlen(head), "len %zu, the head is %zu bytes", h.len, strlen(head));
    CHECK(str_is(h.method, "POST"));
    CHECK(str_is(h.path, "/v1/gemm"));
    CHECK(str_is(h.query, "dtype=float64&alpha=2"));
    CHECK(str_is(h.version, "HTTP/1.1"));
    CHECK_MSG(h.nfields == 8, "nfields %d", h.nfields);
    CHECK(str_is(h.fields[0].name, "Host") && str_is(h.fields[0].value, "crunchd"));
    CHECK(str_is(h.fields[3].name, "x-dup") && str_is(h.fields[3].value, "two"));
    /* values trimmed of spaces and tabs on both sides, inner ones kept */
    CHECK(str_is(cr_head_get(&h, "Content-Type"), "multipart/form-data; boundary=x"));
    CHECK(str_is(cr_head_get(&h, "Empty"), ""));
    CHECK(str_is(cr_head_get(&h, "Blank"), ""));
    CHECK(str_is(cr_head_get(&h, "Inner"), "a \t b"));
    CHECK(str_is(cr_head_get(&h, "Obs-Text"), "caf\xc3\xa9"));
    /* case-insensitive lookup; the first of a repeated field; its count */
    CHECK(str_is(cr_head_get(&h, "content-TYPE"), "multipart/form-data; boundary=x"));
    CHECK(str_is(cr_head_get(&h, "HOST"), "crunchd"));
    CHECK(str_is(cr_head_get(&h, "x-dup"), "one"));
    CHECK(str_is(cr_head_get(&h, "X-DUP"), "one"));
    CHECK(cr_head_count(&h, "X-Dup") == 2);
    CHECK(cr_head_count(&h, "host") == 1);
    CHECK(cr_head_count(&h, "Content-Length") == 0);
    CHECK(cr_head_get(&h, "Content-Length") == NULL);
    CHECK(cr_head_get(&h, "X-Du") == NULL && cr_head_get(&h, "X-Dupe") == NULL);
    CHECK(h.nargs == 2);
    CHECK(str_is(h.args[0].name, "dtype") && str_is(h.args[0].value, "float64"));
    CHECK(str_is(h.args[1].name, "alpha") && str_is(h.args[1].value, "2"));

    /* no query: "" and no pairs; a bare '?' too; only the first '?' splits */
    CHECK(parse("GET / HTTP/1.1\r\n\r\n") == 1);
    CHECK(str_is(h.method, "GET") && str_is(h.path, "/") && str_is(h.query, "") && h.nargs == 0);
    CHECK(h.nfields == 0 && h.len == 18);
    CHECK(parse("GET /x? HTTP/1.1\r\nHost: a\r\n\r\n") == 1);
    CHECK(str_is(h.path, "/x") && str_is(h.query, "") && h.nargs == 0);
    CHECK(parse("GET /x?a=1?b HTTP/1.1\r\n\r\n") == 1);
    CHECK(str_is(h.path, "/x") && str_is(h.query, "a=1?b"));
    CHECK(h.nargs == 1 && str_is(h.args[0].name, "a") && str_is(h.args[0].value, "1?b"));
    /* any token is a method */
    CHECK(parse("M-SEARCH! /x HTTP/1.1\r\n\r\n") == 1 && str_is(h.method, "M-SEARCH!"));

    /* a second head into the same struct: nothing of the first one is left */
    CHECK(parse("GET /y HTTP/1.1\r\nA: 1\r\n\r\n") == 1);
    CHECK(h.nfields == 1 && h.nargs == 0 && cr_head_get(&h, "Host") == NULL && cr_head_count(&h, "X-Dup") == 0);
    CHECK(str_is(cr_head_get(&h, "a"), "1"));
}

static void test_args(void)
{
    CHECK(parse("GET /q?a=1+2&b=%41%2Bc&&flag&c=&%41%3Db=x%3d%26y&&& HTTP/1.1\r\n\r\n") == 1);
    /* the query itself stays as sent */
    CHECK(str_is(h.query, "a=1+2&b=%41%2Bc&&flag&c=&%41%3Db=x%3d%26y&&&"));
    CHECK_MSG(h.nargs == 5, "nargs %d", h.nargs);
    CHECK(str_is(h.args[0].name, "a") && str_is(h.args[0].value, "1 2"));      /* '+' a space */
    CHECK(str_is(h.args[1].name, "b") && str_is(h.args[1].value, "A+c"));      /* %XX a byte, %2B a '+' */
    CHECK(str_is(h.args[2].name, "flag") && h.args[2].value == NULL);          /* a bare key */
    CHECK(str_is(h.args[3].name, "c") && str_is(h.args[3].value, ""));         /* key= */
    /* split at the first '=' before decoding: escaped '=' and '&' are data */
    CHECK(str_is(h.args[4].name, "A=b") && str_is(h.args[4].value, "x=&y"));
    /* the path is not decoded */
    CHECK(parse("GET /a%20b+c HTTP/1.1\r\n\r\n") == 1 && str_is(h.path, "/a%20b+c"));
    /* a pair with an empty key is still a pair; only empty pairs are skipped */
    CHECK(parse("GET /q?=v&&a=1&& HTTP/1.1\r\n\r\n") == 1);
    CHECK(h.nargs == 2 && str_is(h.args[0].name, "") && str_is(h.args[0].value, "v"));
    CHECK(str_is(h.args[1].name, "a") && str_is(h.args[1].value, "1"));
    CHECK(parse("GET /q?&&& HTTP/1.1\r\n\r\n") == 1 && h.nargs == 0);
    CHECK(parse("GET /q?%zz=%4 HTTP/1.1\r\n\r\n") == 1 && h.nargs == 1);
}

/* "GET /q?k0=0&k1=1... HTTP/1.1\r\n\r\n" with n pairs (and a few empty ones, which do not count). */
static int parse_pairs(int n)
{
    static char s[CR_HEAD_MAX];
    int at = snprintf(s, sizeof s, "GET /q?&");
    for (int i = 0; i < n; i++)
        at += snprintf(s + at, sizeof s - (size_t)at, "%sk%d=%d&", i % 8 ? "" : "&", i, i);
    snprintf(s + at, sizeof s - (size_t)at, " HTTP/1.1\r\n\r\n");
    return parse(s);
}

/* A head with n fields "F<i>: <i>". */
static int parse_fields(int n)
{
    static char s[CR_HEAD_MAX];
    int at = snprintf(s, sizeof s, "POST /v1/ata HTTP/1.1\r\n");
    for (int i = 0; i < n; i++)
        at += snprintf(s + at, sizeof s - (size_t)at, "F%d: %d\r\n", i, i);
    snprintf(s + at, sizeof s - (size_t)at, "\r\n");
    return parse(s);
}

static void test_limits(void)
{
    CHECK(parse_fields(CR_HEAD_FIELDS) == 1 && h.nfields == CR_HEAD_FIELDS);
    char last[16];
    snprintf(last, sizeof last, "f%d", CR_HEAD_FIELDS - 1);
    CHECK(h.nfields == CR_HEAD_FIELDS && str_is(cr_head_get(&h, last), last + 1));
    CHECK(parse_fields(CR_HEAD_FIELDS + 1) == -1);
    CHECK(parse_pairs(CR_HEAD_ARGS) == 1 && h.nargs == CR_HEAD_ARGS);
    CHECK(h.nargs == CR_HEAD_ARGS && str_is(h.args[CR_HEAD_ARGS - 1].value, "31"));
    CHECK(parse_pairs(CR_HEAD_ARGS + 1) == -1);

    /* A head of exactly CR_HEAD_MAX bytes, final CRLF CRLF included, is taken; one byte more is not. */
    static char big[CR_HEAD_MAX + 64];
    const char *line = "GET / HTTP/1.1\r\nX: ";
    size_t pre = strlen(line);
    memcpy(big, line, pre);
    memset(big + pre, 'v', CR_HEAD_MAX - pre - 4);
    memcpy(big + CR_HEAD_MAX - 4, "\r\n\r\nbody", 8);
    CHECK(cr_head_parse(big, CR_HEAD_MAX + 4, &h) == 1);
    CHECK_MSG(h.len == CR_HEAD_MAX, "len %zu", h.len);
    const char *x = cr_head_get(&h, "x");
    CHECK(x && strlen(x) == CR_HEAD_MAX - pre - 4);
    CHECK(cr_head_parse(big, CR_HEAD_MAX, &h) == 1 && h.len == CR_HEAD_MAX);
    memset(big + pre, 'v', CR_HEAD_MAX - pre - 3);
    memcpy(big + CR_HEAD_MAX - 3, "\r\n\r\nbody", 8);
    CHECK(cr_head_parse(big, CR_HEAD_MAX + 5, &h) == -1);
    CHECK(cr_head_parse(big, CR_HEAD_MAX, &h) == -1); /* CR_HEAD_MAX bytes, no blank line in them */
    CHECK(cr_head_parse(big, CR_HEAD_MAX - 1, &h) == 0); /* fewer: it may still come */
}

static void test_incomplete(void)
{
    const char *whole = "POST /v1/gemm HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n";
    size_t n = strlen(whole);
    for (size_t k = 0; k < n; k++) /* every proper prefix: not yet whole */
        CHECK_MSG(cr_head_parse(whole, k, &h) == 0, "a prefix of %zu bytes did not give 0", k);
    CHECK(cr_head_parse(whole, n, &h) == 1 && h.len == n);
    CHECK(parse("POST /v1/gemm HTTP/1.1\r\nHost: a\r\n") == 0);
    CHECK(parse("POST /v1/gemm HTTP/1.1\r\nHost: a\r\n\r") == 0);
    CHECK(parse("POST /v1/gemm HTTP/1.1\r\nHost: a\r\n\n\r\n") == -1); /* a bare LF: never CRLF CRLF */
    CHECK(cr_head_parse("", 0, &h) == 0);
    /* long, still under CR_HEAD_MAX, no blank line */
    static char s[CR_HEAD_MAX];
    memset(s, 'a', sizeof s);
    memcpy(s, "GET / HTTP/1.1\r\nX: ", 19);
    CHECK(cr_head_parse(s, CR_HEAD_MAX - 1, &h) == 0);
    CHECK(cr_head_parse(s, CR_HEAD_MAX, &h) == -1);
}

static void test_refused(void)
{
    const char *bad[] = {
        /* bare LF or CR line ends */
        "GET / HTTP/1.1\nHost: a\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\nX: b\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\n\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n",
        /* folded lines */
        "GET / HTTP/1.1\r\nX-A: 1\r\n 2\r\n\r\n",
        "GET / HTTP/1.1\r\nX-A: 1\r\n\t2\r\n\r\n",
        " GET / HTTP/1.1\r\n\r\n",
        /* field names: a space, no colon, empty, not a token */
        "GET / HTTP/1.1\r\nX A: 1\r\n\r\n",
        "GET / HTTP/1.1\r\nX-A : 1\r\n\r\n",
        "GET / HTTP/1.1\r\nXA\r\n\r\n",
        "GET / HTTP/1.1\r\nXA 1\r\n\r\n",
        "GET / HTTP/1.1\r\n: v\r\n\r\n",
        "GET / HTTP/1.1\r\nX(A): 1\r\n\r\n",
        "GET / HTTP/1.1\r\nX\xc3\xa9: 1\r\n\r\n",
        /* control bytes in a value */
        "GET / HTTP/1.1\r\nX: a\x01" "b\r\n\r\n",
        "GET / HTTP/1.1\r\nX: a\x1b" "b\r\n\r\n",
        "GET / HTTP/1.1\r\nX: a\x7f\r\n\r\n",
        "GET / HTTP/1.1\r\nX: \x1f\r\n\r\n",
        /* versions but HTTP/1.1 */
        "GET / HTTP/1.0\r\n\r\n",
        "GET / HTTP/2\r\n\r\n",
        "GET / http/1.1\r\n\r\n",
        "GET / HTTP/1.1 \r\n\r\n",
        "GET / HTTP/1.10\r\n\r\n",
        "GET /\r\n\r\n",
        /* targets */
        "GET * HTTP/1.1\r\n\r\n",
        "GET http://a/ HTTP/1.1\r\n\r\n",
        "GET a/b HTTP/1.1\r\n\r\n",
        "GET /a b HTTP/1.1\r\n\r\n",
        "GET /a\tb HTTP/1.1\r\n\r\n",
        "GET /a\x01" "b HTTP/1.1\r\n\r\n",
        "GET /a\x7f HTTP/1.1\r\n\r\n",
        "GET /caf\xc3\xa9 HTTP/1.1\r\n\r\n",
        "GET  / HTTP/1.1\r\n\r\n",
        "GET /x?a b HTTP/1.1\r\n\r\n",
        /* methods */
        "/ HTTP/1.1\r\n\r\n",
        "G(T / HTTP/1.1\r\n\r\n",
        "GET\t/ HTTP/1.1\r\n\r\n",
        "\r\n\r\n",
        NULL,
    };
    for (int i = 0; bad[i]; i++)
        CHECK_MSG(parse(bad[i]) == -1, "bad head %d was taken: %s", i, bad[i]);

    /* a NUL byte anywhere in the head; after it (in the body) it does not matter */
    const char nul_value[] = "GET / HTTP/1.1\r\nX: a\0b\r\n\r\n";
    const char nul_line[] = "GET /\0 HTTP/1.1\r\n\r\n";
    const char nul_body[] = "GET / HTTP/1.1\r\nX: ab\r\n\r\n\0body";
    CHECK(cr_head_parse(nul_value, sizeof nul_value - 1, &h) == -1);
    CHECK(cr_head_parse(nul_line, sizeof nul_line - 1, &h) == -1);
    CHECK(cr_head_parse(nul_body, sizeof nul_body - 1, &h) == 1 && h.len == sizeof nul_body - 6);

    /* the same heads, well-formed, are taken: the refusals above are for the one flaw each */
    const char *good[] = {
        "GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n\r\n",
        "GET / HTTP/1.1\r\nX-A: 1 2\r\n\r\n",
        "GET / HTTP/1.1\r\nX-A: 1\t2\r\n\r\n",
        "GET / HTTP/1.1\r\nXA:1\r\n\r\n",
        "GET / HTTP/1.1\r\nX!#$%&'*+-.^_`|~: 1\r\n\r\n",
        "GET /a/b.c-d_e~f!$&'()*+,;=:@ HTTP/1.1\r\n\r\n",
        NULL,
    };
    for (int i = 0; good[i]; i++)
        CHECK_MSG(parse(good[i]) == 1, "good head %d was refused: %s", i, good[i]);
}

/* A copy keeps its own strings when the original is parsed again (the acceptor's scratch head
 * is reused for the next connection while a worker serves the copy). */
static void test_copy(void)
{
    static cr_head copy;
    const char *a = "POST /v1/gemm?alpha=2&kernel=cublas HTTP/1.1\r\nHost: a\r\nContent-Type: x/y\r\n\r\n";
    const char *b = "GET /healthz?zz=9 HTTP/1.1\r\nHost: bbbbbbbb\r\nAccept: q\r\n\r\n";
    CHECK(cr_head_parse(a, strlen(a), &h) == 1);
    cr_head_copy(&copy, &h);
    CHECK(cr_head_parse(b, strlen(b), &h) == 1);
    CHECK(strcmp(copy.method, "POST") == 0 && strcmp(copy.path, "/v1/gemm") == 0);
    CHECK(strcmp(copy.query, "alpha=2&kernel=cublas") == 0 && strcmp(copy.version, "HTTP/1.1") == 0);
    CHECK(cr_head_get(&copy, "Content-Type") && strcmp(cr_head_get(&copy, "Content-Type"), "x/y") == 0);
    CHECK(cr_head_get(&copy, "Host") && strcmp(cr_head_get(&copy, "Host"), "a") == 0);
    CHECK(copy.nargs == 2 && strcmp(copy.args[1].name, "kernel") == 0 && strcmp(copy.args[1].value, "cublas") == 0);
    CHECK(copy.method >= copy.buf && copy.method < copy.buf + sizeof copy.buf);
    const char *c = "POST /v1/ata HTTP/1.1\r\nHost: c\r\n\r\n"; /* no query: "" stays a constant */
    CHECK(cr_head_parse(c, strlen(c), &h) == 1);
    cr_head_copy(&copy, &h);
    CHECK(strcmp(copy.query, "") == 0 && copy.nargs == 0);
}

int main(void)
{
    test_copy();
    test_whole_head();
    test_args();
    test_limits();
    test_incomplete();
    test_refused();
    return check_summary("http_head");
}
