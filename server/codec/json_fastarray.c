/* Long numeric arrays outside cJSON; see json_fastarray.h. */
#include "server/codec/json_fastarray.h"

#include <float.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* cJSON 1.7 reads a number through a 64-byte buffer: longer tokens it would split, so they are
 * left to it. */
#define MAX_TOKEN 63

/* cJSON skips every byte <= ' ' as whitespace. */
static bool is_space(unsigned char c) { return c <= ' '; }

static bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* -?d+(.d*)?([eE][+-]?d+)? : what strtod consumes whole, so cJSON's value is strtod's. Returns
 * the token's length, 0 when not one. */
static size_t number_token(const char *s, const char *end)
{
    const char *p = s;
    if (p < end && *p == '-')
        p++;
    const char *d = p;
    while (p < end && is_digit((unsigned char)*p))
        p++;
    if (p == d)
        return 0;
    if (p < end && *p == '.') {
        p++;
        while (p < end && is_digit((unsigned char)*p))
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        const char *x = p;
        while (p < end && is_digit((unsigned char)*p))
            p++;
        if (p == x)
            return 0;
    }
    size_t n = (size_t)(p - s);
    return n <= MAX_TOKEN ? n : 0;
}

/* If body[open] starts an array of plain numbers, its element count and the offset of its ']';
 * -1 otherwise (including the empty array: nothing to gain). */
static int64_t number_array(const char *body, size_t len, size_t open, size_t *close)
{
    const char *p = body + open + 1, *end = body + len;
    int64_t count = 0;
    for (;;) {
        while (p < end && is_space((unsigned char)*p))
            p++;
        size_t n = number_token(p, end);
        if (!n)
            return -1;
        p += n;
        count++;
        while (p < end && is_space((unsigned char)*p))
            p++;
        if (p >= end)
            return -1;
        if (*p == ']') {
            *close = (size_t)(p - body);
            return count;
        }
        if (*p++ != ',')
            return -1;
    }
}

static int add_span(cr_jfast *f, size_t *cap, const cr_jspan *s)
{
    if (f->n_spans == *cap) {
        size_t grown = *cap ? *cap * 2 : 16;
        cr_jspan *p = realloc(f->spans, grown * sizeof *p);
        if (!p)
            return -1;
        f->spans = p;
        *cap = grown;
    }
    f->spans[f->n_spans++] = *s;
    return 0;
}

/* Past the string starting at body[at] (a '"'); len when unterminated. */
static size_t skip_string(const char *body, size_t len, size_t at)
{
    for (at++; at < len; at++) {
        if (body[at] == '\\')
            at++;
        else if (body[at] == '"')
            return at + 1;
    }
    return len;
}

static int build_skeleton(cr_jfast *f)
{
    size_t removed = 0;
    for (size_t i = 0; i < f->n_spans; i++)
        removed += f->spans[i].close - f->spans[i].open - 1;
    f->skel_len = f->len - removed;
    if (!(f->skeleton = malloc(f->skel_len ? f->skel_len : 1)))
        return -1;
    size_t from = 0, to = 0;
    for (size_t i = 0; i < f->n_spans; i++) {
        cr_jspan *s = &f->spans[i];
        memcpy(f->skeleton + to, f->body + from, s->open - from);
        to += s->open - from;
        s->skel_at = to;
        f->skeleton[to++] = '[';
        f->skeleton[to++] = ']';
        from = s->close + 1;
    }
    memcpy(f->skeleton + to, f->body + from, f->len - from);
    return 0;
}

int cr_jfast_scan(const char *body, size_t len, cr_jfast *f)
{
    memset(f, 0, sizeof *f);
    f->body = body;
    f->len = len;
    size_t cap = 0, at = 0;
    uint64_t ordinal = 0;
    /* The next '[' and '"' at or after `at`, each searched again only once passed, so the scan
     * stays linear however many brackets and strings alternate. */
    size_t bracket = 0, quote = 0;
    bool bracket_known = false, quote_known = false;
    while (at < len) {
        if (!bracket_known || bracket < at) {
            const char *q = memchr(body + at, '[', len - at);
            bracket = q ? (size_t)(q - body) : len;
            bracket_known = true;
        }
        if (bracket >= len)
            break;
        if (!quote_known || quote < at) {
            const char *q = memchr(body + at, '"', len - at);
            quote = q ? (size_t)(q - body) : len;
            quote_known = true;
        }
        if (quote < bracket) { /* a '[' inside a string is text */
            at = skip_string(body, len, quote);
            continue;
        }
        size_t open = bracket, close = 0;
        int64_t count = number_array(body, len, open, &close);
        if (count >= CR_JFAST_MIN) {
            cr_jspan s = {open, close, 0, count, ordinal, NULL};
            if (add_span(f, &cap, &s))
                return cr_jfast_free(f), -1;
            at = close + 1;
        } else {
            at = open + 1;
        }
        ordinal++;
    }
    if (f->n_spans && build_skeleton(f))
        return cr_jfast_free(f), -1;
    return 0;
}

/* Arrays of the parsed skeleton in document order: the k-th is the k-th '['. */
static void bind_walk(cr_jfast *f, const cJSON *n, uint64_t *ordinal, size_t *next)
{
    for (; n; n = n->next) {
        if (cJSON_IsArray(n)) {
            if (*next < f->n_spans && f->spans[*next].ordinal == *ordinal)
                f->spans[(*next)++].node = n;
            (*ordinal)++;
        }
        if (n->child)
            bind_walk(f, n->child, ordinal, next);
    }
}

static int by_node(const void *x, const void *y)
{
    uintptr_t a = (uintptr_t)(*(const cr_jspan *const *)x)->node;
    uintptr_t b = (uintptr_t)(*(const cr_jspan *const *)y)->node;
    return a < b ? -1 : a > b;
}

int cr_jfast_bind(cr_jfast *f, const cJSON *root)
{
    uint64_t ordinal = 0;
    size_t next = 0;
    if (!f->n_spans)
        return 0;
    bind_walk(f, root, &ordinal, &next);
    if (!(f->by_node = malloc(f->n_spans * sizeof *f->by_node)))
        return -1;
    for (size_t i = 0; i < f->n_spans; i++)
        f->by_node[i] = &f->spans[i];
    qsort(f->by_node, f->n_spans, sizeof *f->by_node, by_node);
    return 0;
}

const cr_jspan *cr_jfast_find(const cr_jfast *f, const cJSON *node)
{
    if (!f || !f->by_node || !cJSON_IsArray(node) || node->child)
        return NULL;
    size_t lo = 0, hi = f->n_spans;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const cJSON *m = f->by_node[mid]->node;
        if (m == node)
            return f->by_node[mid];
        if ((uintptr_t)m < (uintptr_t)node)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

size_t cr_jfast_body_offset(const cr_jfast *f, size_t skel_at)
{
    size_t shift = 0;
    for (size_t i = 0; i < f->n_spans && skel_at > f->spans[i].skel_at; i++) {
        if (skel_at == f->spans[i].skel_at + 1)
            return f->spans[i].close; /* at its ']' */
        shift += f->spans[i].close - f->spans[i].open - 1;
    }
    return skel_at + shift;
}

void cr_jfast_free(cr_jfast *f)
{
    free(f->spans);
    free(f->by_node);
    free(f->skeleton);
    memset(f, 0, sizeof *f);
}

/* ---- numbers ------------------------------------------------------------------------------ */

static const double pow10_exact[23] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

#if LDBL_MANT_DIG == 64
/* Exact in x87 extended precision (5^27 < 2^63). */
static const long double pow10_ext[28] = {
    1e0L,  1e1L,  1e2L,  1e3L,  1e4L,  1e5L,  1e6L,  1e7L,  1e8L,  1e9L,
    1e10L, 1e11L, 1e12L, 1e13L, 1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L,
    1e20L, 1e21L, 1e22L, 1e23L, 1e24L, 1e25L, 1e26L, 1e27L,
};

/* 16..19-digit mantissas (Python's float repr has 17): one correctly rounded extended
 * operation, 11 bits more than a double holds. Rounding that to double is right unless it sits
 * within one unit of the halfway point between two doubles, where the exact value could be on
 * the other side: then 0, and strtod decides. */
static int extended_path(uint64_t m, int exp10, double *out)
{
    if (exp10 < -27 || exp10 > 27)
        return 0;
    long double x = (long double)m;
    x = exp10 < 0 ? x / pow10_ext[-exp10] : x * pow10_ext[exp10];
    union {
        long double ld;
        struct {
            uint64_t mantissa;
            uint16_t sign_exp;
        } bits;
    } u = {x};
    unsigned low = (unsigned)(u.bits.mantissa & 0x7ff);
    if (low >= 0x3ff && low <= 0x401)
        return 0;
    *out = (double)x;
    return 1;
}
#else
static int extended_path(uint64_t m, int exp10, double *out)
{
    (void)m, (void)exp10, (void)out;
    return 0;
}
#endif

/* strtod on a token that is not NUL-terminated in the body. */
static double slow_path(const char *s, size_t n)
{
    char buf[MAX_TOKEN + 1];
    memcpy(buf, s, n);
    buf[n] = '\0';
    return strtod(buf, NULL);
}

/* Clinger's fast path: a mantissa below 2^53 and a power of ten below 1e23 are both exact
 * doubles, so one multiplication or division rounds correctly, as strtod does. */
double cr_jfast_next(const char **pp)
{
    const char *p = *pp;
    while (is_space((unsigned char)*p) || *p == ',')
        p++;
    const char *start = p;
    bool neg = *p == '-';
    p += neg;
    uint64_t m = 0;
    int digits = 0, exp10 = 0;
    while (is_digit((unsigned char)*p)) {
        if (digits < 19)
            m = m * 10 + (uint64_t)(*p - '0');
        else
            exp10++;
        digits += digits || *p != '0';
        p++;
    }
    if (*p == '.') {
        p++;
        while (is_digit((unsigned char)*p)) {
            if (digits < 19) {
                m = m * 10 + (uint64_t)(*p - '0');
                exp10--;
            }
            digits += digits || *p != '0';
            p++;
        }
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        bool eneg = *p == '-';
        p += *p == '-' || *p == '+';
        int e = 0;
        while (is_digit((unsigned char)*p)) {
            e = e < 10000 ? e * 10 + (*p - '0') : e;
            p++;
        }
        exp10 += eneg ? -e : e;
    }
    *pp = p;
    if (digits <= 19 && m <= (1ull << 53) && exp10 >= -22 && exp10 <= 22) {
        double v = (double)m;
        v = exp10 < 0 ? v / pow10_exact[-exp10] : v * pow10_exact[exp10];
        return neg ? -v : v;
    }
    double v;
    if (digits <= 19 && extended_path(m, exp10, &v))
        return neg ? -v : v;
    return slow_path(start, (size_t)(p - start));
}
