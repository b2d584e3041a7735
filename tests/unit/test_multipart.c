/* server/codec/multipart.c: bodies fed whole and in every split, hand-made edge cases, and random
 * bodies whose parts are full of near-delimiters, each checked against the parts it was built
 * from. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/codec/multipart.h"
#include "tests/unit/check.h"

#define MAX_PARTS 8
#define MAX_DATA 4096

typedef struct {
    int n;
    char name[MAX_PARTS][CR_MP_NAME_MAX], filename[MAX_PARTS][CR_MP_NAME_MAX];
    char data[MAX_PARTS][MAX_DATA];
    size_t len[MAX_PARTS];
    int refuse_part;  /* refuse the part with this index (-1: none) */
    size_t refuse_at; /* refuse data once a part holds this much (0: never) */
} parts;

static int on_part(void *cls, const char *name, const char *filename)
{
    parts *p = cls;
    if (p->n == MAX_PARTS || p->n == p->refuse_part)
        return -1;
    snprintf(p->name[p->n], CR_MP_NAME_MAX, "%s", name);
    snprintf(p->filename[p->n], CR_MP_NAME_MAX, "%s", filename);
    p->len[p->n++] = 0;
    return 0;
}

static int on_data(void *cls, const char *bytes, size_t n)
{
    parts *p = cls;
    size_t *len = &p->len[p->n - 1];
    if (*len + n > MAX_DATA || (p->refuse_at && *len + n >= p->refuse_at))
        return -1;
    memcpy(p->data[p->n - 1] + *len, bytes, n);
    *len += n;
    return 0;
}

/* Parses body in pieces of at most `piece` bytes (0: whole, or random sizes from seed when
 * piece is SIZE_MAX); the result of feed/finish, parts in *out, the reason in why. */
static int parse(const char *ct, const char *body, size_t len, size_t piece, unsigned seed, parts *out,
                 char *why)
{
    cr_multipart m;
    memset(out, 0, sizeof *out);
    out->refuse_part = -1;
    int rc = cr_multipart_init(&m, ct, (cr_mp_sink){on_part, on_data, out});
    for (size_t at = 0; rc == 0 && at < len;) {
        size_t n = piece == 0 ? len : piece == SIZE_MAX ? 1 + (size_t)(rand_r(&seed) % 97) : piece;
        n = n < len - at ? n : len - at;
        rc = cr_multipart_feed(&m, body + at, n);
        at += n;
    }
    if (rc == 0)
        rc = cr_multipart_finish(&m);
    snprintf(why, 160, "%s", m.why);
    return rc;
}

static bool same(const parts *a, const parts *b)
{
    if (a->n != b->n)
        return false;
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->name[i], b->name[i]) || strcmp(a->filename[i], b->filename[i]) || a->len[i] != b->len[i] ||
            memcmp(a->data[i], b->data[i], a->len[i]))
            return false;
    return true;
}

#define CT "multipart/form-data; boundary=XyZ"

/* Every split into two pieces, and pieces of 1, 2, 3 and 7 bytes, give the whole parse. */
static void check_every_split(const char *ct, const char *body, size_t len, int want_rc, const char *what)
{
    parts whole, piece;
    char why[160];
    int rc = parse(ct, body, len, 0, 0, &whole, why);
    CHECK_MSG(rc == want_rc, "%s: whole body gave %d (%s)", what, rc, why);
    for (size_t k = 1; k <= 7; k += (k == 3 ? 4 : 1)) {
        int r = parse(ct, body, len, k, 0, &piece, why);
        CHECK_MSG(r == rc && (rc || same(&whole, &piece)), "%s: %zu-byte pieces differ", what, k);
    }
    for (size_t cut = 1; cut < len; cut++) {
        cr_multipart m;
        memset(&piece, 0, sizeof piece);
        piece.refuse_part = -1;
        int r = cr_multipart_init(&m, ct, (cr_mp_sink){on_part, on_data, &piece});
        if (r == 0)
            r = cr_multipart_feed(&m, body, cut);
        if (r == 0)
            r = cr_multipart_feed(&m, body + cut, len - cut);
        if (r == 0)
            r = cr_multipart_finish(&m);
        if (r != rc || (rc == 0 && !same(&whole, &piece))) {
            CHECK_MSG(0, "%s: split at %zu differs", what, cut);
            return;
        }
    }
    CHECK(1);
}

static void test_two_parts(void)
{
    static const char body[] = "--XyZ\r\n"
                               "Content-Disposition: form-data; name=\"a\"; filename=\"a.npy\"\r\n"
                               "Content-Type: application/octet-stream\r\n\r\n"
                               "A\r\n--XyY\r\n--Xy\r\r\n-\r\n"
                               "\r\n--XyZ  \r\n"
                               "content-disposition: FORM-DATA; filename=b.npy; name=b\r\n\r\n"
                               "\r\n\r\n--XyZ--\r\nepilogue \r\n--XyZ\r\n";
    parts p;
    char why[160];
    CHECK_MSG(parse(CT, body, sizeof body - 1, 0, 0, &p, why) == 0, "%s", why);
    CHECK(p.n == 2);
    CHECK(!strcmp(p.name[0], "a") && !strcmp(p.filename[0], "a.npy"));
    CHECK(p.len[0] == 20 && !memcmp(p.data[0], "A\r\n--XyY\r\n--Xy\r\r\n-\r\n", 20));
    CHECK(!strcmp(p.name[1], "b") && !strcmp(p.filename[1], "b.npy"));
    CHECK(p.len[1] == 2 && !memcmp(p.data[1], "\r\n", 2));
    check_every_split(CT, body, sizeof body - 1, 0, "two parts");
}

static void test_preamble_and_quoted_boundary(void)
{
    static const char body[] = "preamble --a b\r\n--a b\r\n"
                               "Content-Disposition: form-data; name=\"x\\\"y\"\r\n\r\n"
                               "data\r\n--a b--";
    parts p;
    char why[160];
    const char *ct = "Multipart/Form-Data ; charset=x; Boundary=\"a b\"";
    CHECK_MSG(parse(ct, body, sizeof body - 1, 0, 0, &p, why) == 0, "%s", why);
    CHECK(p.n == 1 && !strcmp(p.name[0], "x\"y") && p.len[0] == 4 && !memcmp(p.data[0], "data", 4));
    check_every_split(ct, body, sizeof body - 1, 0, "preamble");
}

static void test_empty_part_and_no_parts(void)
{
    static const char body[] = "--XyZ\r\nContent-Disposition: form-data; name=e\r\n\r\n\r\n--XyZ--";
    parts p;
    char why[160];
    CHECK(parse(CT, body, sizeof body - 1, 0, 0, &p, why) == 0 && p.n == 1 && p.len[0] == 0);
    static const char none[] = "--XyZ--\r\n";
    CHECK(parse(CT, none, sizeof none - 1, 0, 0, &p, why) == 0 && p.n == 0);
    CHECK(parse(CT, "", 0, 0, 0, &p, why) == -1 && strstr(why, "no part"));
}

/* Each body is refused, with a reason naming what is wrong. */
static void test_refusals(void)
{
    static const struct {
        const char *ct, *body, *why;
    } cases[] = {
        {"application/json", "", "not multipart"},
        {"multipart/form-data", "", "boundary"},
        {"multipart/form-data; boundary=", "", "boundary"},
        {"multipart/form-data; boundary=\"unterminated", "", "boundary"},
        {"multipart/form-data; boundary=a\rb", "", "boundary"},
        {"multipart/form-data; boundary=trailing ", "", "boundary"},
        {"multipart/form-data; boundary=12345678901234567890123456789012345678901234567890123456789012345678901",
         "", "boundary"},
        {CT, "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nabc", "ends early"},
        {CT, "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nabc\r\n--XyZ", "ends early"},
        {CT, "--XyZ\r\nContent-Disposition: form-data; name=a\r\n", "ends early"},
        {CT, "--XyZ\r\nContent-Type: x\r\n\r\nabc\r\n--XyZ--", "no Content-Disposition"},
        {CT, "--XyZ\r\nContent-Disposition: attachment; name=a\r\n\r\n\r\n--XyZ--", "form-data"},
        {CT, "--XyZ\r\nContent-Disposition: form-data; filename=a\r\n\r\n\r\n--XyZ--", "no name"},
        {CT, "--XyZ\r\nContent-Disposition: form-data; name=\"a\r\n\r\n\r\n--XyZ--", "unterminated"},
        {CT, "--XyZx\r\nContent-Disposition: form-data; name=a\r\n\r\n\r\n--XyZ--", "malformed"},
        {CT, "--XyZ-x", "malformed"},
        {CT, "--XyZ\rx", "malformed"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        parts p;
        char why[160];
        int rc = parse(cases[i].ct, cases[i].body, strlen(cases[i].body), 0, 0, &p, why);
        CHECK_MSG(rc == -1 && strstr(why, cases[i].why), "case %zu: rc %d, why '%s'", i, rc, why);
        if (cases[i].body[0])
            check_every_split(cases[i].ct, cases[i].body, strlen(cases[i].body), -1, cases[i].why);
    }
}

static void test_long_headers(void)
{
    char body[CR_MP_HEADERS_MAX + 200];
    int n = snprintf(body, sizeof body, "--XyZ\r\nContent-Disposition: form-data; name=a\r\nX: ");
    memset(body + n, 'x', CR_MP_HEADERS_MAX);
    memcpy(body + n + CR_MP_HEADERS_MAX, "\r\n\r\n\r\n--XyZ--", 14);
    parts p;
    char why[160];
    CHECK(parse(CT, body, (size_t)n + CR_MP_HEADERS_MAX + 14, 0, 0, &p, why) == -1 && strstr(why, "longer than"));
    CHECK(parse(CT, body, (size_t)n + CR_MP_HEADERS_MAX + 14, 5, 0, &p, why) == -1 && strstr(why, "longer than"));
    /* just under the limit is fine */
    size_t fill = CR_MP_HEADERS_MAX - 3 - (size_t)n + 7 - 4;
    memcpy(body + n + fill, "\r\n\r\n\r\n--XyZ--", 14);
    CHECK_MSG(parse(CT, body, (size_t)n + fill + 14, 0, 0, &p, why) == 0, "%s", why);
}

/* A sink's refusal stops the parse with no reason of the parser's own. */
static void test_sink_refusals(void)
{
    static const char body[] = "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\n0123456789\r\n--XyZ--";
    for (int part = 0; part < 2; part++) {
        cr_multipart m;
        parts p = {.refuse_part = part ? -1 : 0, .refuse_at = part ? 5 : 0};
        CHECK(cr_multipart_init(&m, CT, (cr_mp_sink){on_part, on_data, &p}) == 0);
        CHECK(cr_multipart_feed(&m, body, sizeof body - 1) == -1 && m.why[0] == '\0');
        CHECK(cr_multipart_feed(&m, "x", 1) == -1 && cr_multipart_finish(&m) == -1);
    }
}

/* Random parts of bytes drawn mostly from "\r\n-XyZ", with whole delimiters kept out. */
static void test_random_bodies(void)
{
    static const char alphabet[] = "\r\n-XyZ\r-\nZa";
    unsigned seed = 12345;
    char body[MAX_PARTS * (MAX_DATA + 200)];
    for (int round = 0; round < 3000; round++) {
        parts want = {.refuse_part = -1}, got;
        size_t len = 0;
        want.n = (int)(rand_r(&seed) % 4);
        if (rand_r(&seed) % 2)
            len += (size_t)snprintf(body, sizeof body, "pre\r\n--XyY\r\n");
        for (int i = 0; i < want.n; i++) {
            snprintf(want.name[i], CR_MP_NAME_MAX, "p%d", i);
            len += (size_t)snprintf(body + len, sizeof body - len,
                                    "%s--XyZ%s\r\nContent-Disposition: form-data; name=\"p%d\"\r\n\r\n",
                                    len ? "\r\n" : "", rand_r(&seed) % 3 ? "" : " \t", i);
            size_t n = (size_t)(rand_r(&seed) % 300);
            for (size_t k = 0; k < n; k++) {
                char c = rand_r(&seed) % 4 ? alphabet[rand_r(&seed) % (sizeof alphabet - 1)] : (char)rand_r(&seed);
                want.data[i][k] = c;
                /* no complete delimiter inside a part */
                if (k >= 6 && !memcmp(want.data[i] + k - 6, "\r\n--XyZ", 7))
                    want.data[i][k] = 'q';
            }
            want.len[i] = n;
            memcpy(body + len, want.data[i], n);
            len += n;
        }
        len += (size_t)snprintf(body + len, sizeof body - len, "%s--XyZ--%s", len ? "\r\n" : "",
                                rand_r(&seed) % 2 ? "\r\n\r\n--XyZ\r\nrest" : "");
        char why[160];
        int rc = parse(CT, body, len, SIZE_MAX, (unsigned)round, &got, why);
        if (rc != 0 || !same(&want, &got)) {
            CHECK_MSG(0, "random body %d (%zu bytes, %d parts): rc %d, %d parts, why '%s'", round, len, want.n, rc,
                      got.n, why);
            return;
        }
    }
    CHECK(1);
}

int main(void)
{
    test_two_parts();
    test_preamble_and_quoted_boundary();
    test_empty_part_and_no_parts();
    test_refusals();
    test_long_headers();
    test_sink_refusals();
    test_random_bodies();
    return check_summary("test_multipart");
}
