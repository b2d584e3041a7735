/* Numeric arrays outside cJSON, and the bound on cJSON's memory; see json_fastarray.h. */
#include "server/codec/json_fastarray.h"

#include <float.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* cJSON 1.7 reads a number through a 64-byte buffer: longer tokens it would split, so they are
 * left to it. */
#define MAX_TOKEN 63

/* What one span costs: itself and its entry in by_node. */
#define SPAN_COST (sizeof(cr_jspan) + sizeof(cr_jspan *))

static bool enabled = true;

void cr_jfast_set_enabled(bool on) { enabled = on; }

/* JSON's whitespace. cJSON skips every byte <= ' ', but the decoders then refuse the other
 * control characters in the text cJSON read (cr_json_stray_control): inside a span one would
 * escape that check. */
static bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static size_t skip_space(const char *body, size_t len, size_t at)
{
    while (at < len && is_space((unsigned char)body[at]))
        at++;
    return at;
}

static double to_double(bool neg, uint64_t m, int digits, int exp10, const char *s, size_t n);

static const double pow10_exact[23] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* How many of the 8 bytes of x (the first in the low byte) are digits before the first that is
 * not. A byte below '0' borrows and one above '9' carries into the bytes after it only, so the
 * first flagged byte is exact. */
static int leading_digits(uint64_t x)
{
    uint64_t bad = ((x - 0x3030303030303030ull) | (x + 0x4646464646464646ull)) & 0x8080808080808080ull;
    return bad ? __builtin_ctzll(bad) >> 3 : 8;
}

/* The value of the first n (1..8) digits of x: shifted so that they end at the high byte, the
 * bytes below them read as leading zeros; then pairs, quads and the eight combined by three
 * multiplications instead of a multiply-add per digit. */
static uint64_t digits_value(uint64_t x, int n)
{
    x = n < 8 ? x << (8 * (8 - n)) : x;
    x = (x & 0x0F0F0F0F0F0F0F0Full) * 2561 >> 8;
    x = (x & 0x00FF00FF00FF00FFull) * 6553601 >> 16;
    return (x & 0x0000FFFF0000FFFFull) * 42949672960001ull >> 32;
}

static const uint64_t pow10_small[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};

/* The common spellings, -?d{1,7}(.d{1,7})? with no exponent, converted without a loop per digit:
 * measured data as JSON is mostly this. The value is the one to_double's exact branch gives
 * (m below 10^14, one division by an exact power of ten), so the bits cannot differ from the
 * general path's. Returns the token's length, 0 for any other spelling (the general path reads
 * it). Needs 24 readable bytes at s. */
static size_t short_number(const char *s, double *v)
{
    uint64_t x, y;
    const char *p = s + (*s == '-');
    memcpy(&x, p, 8);
    int ni = leading_digits(x);
    if (ni == 0 || ni == 8)
        return 0;
    uint64_t m = digits_value(x, ni);
    int nf = 0;
    p += ni;
    if (*p == '.') {
        memcpy(&y, p + 1, 8);
        nf = leading_digits(y);
        if (nf == 0 || nf == 8)
            return 0;
        m = m * pow10_small[nf] + digits_value(y, nf);
        p += 1 + nf;
    }
    if (*p == 'e' || *p == 'E')
        return 0;
    double d = (double)m;
    d = nf ? d / pow10_exact[nf] : d;
    *v = *s == '-' ? -d : d;
    return (size_t)(p - s);
}
#else
static size_t short_number(const char *s, double *v)
{
    (void)s, (void)v;
    return 0;
}
#endif

/* -?(d+(.d*)?|.d+)([eE][+-]?d+)? starting with '-' or a digit: what cJSON takes for a number
 * and strtod consumes whole, so cJSON's value is strtod's ("-.5" included, ".5" not). Returns
 * the token's length and, when convert, its value in *v; 0 when not one. The digits are gathered
 * as cr_jfast_next gathers them: the value is the same bits. (cr_jfast_next keeps its own
 * loops, without the bound checks: reading big bodies' text through this one measured 25%
 * slower.) Always inlined so that each caller's constant `convert` leaves either a bare syntax
 * check or the fused conversion; with it, the common short spellings go through short_number. */
static inline __attribute__((always_inline)) size_t scan_number(const char *s, const char *end,
                                                                  bool convert, double *v)
{
    if (convert && end - s >= 24) {
        size_t n = short_number(s, v);
        if (n)
            return n;
    }
    const char *p = s;
    bool neg = p < end && *p == '-';
    p += neg;
    uint64_t m = 0;
    int digits = 0, exp10 = 0;
    const char *d = p;
    for (; p < end && is_digit((unsigned char)*p); p++) {
        if (!convert)
            continue;
        if (digits < 19)
            m = m * 10 + (uint64_t)(*p - '0');
        else
            exp10++;
        digits += digits || *p != '0';
    }
    bool int_digits = p > d, frac_digits = false;
    if (!int_digits && !neg)
        return 0;
    if (p < end && *p == '.') {
        const char *f = ++p;
        for (; p < end && is_digit((unsigned char)*p); p++) {
            if (!convert)
                continue;
            if (digits < 19) {
                m = m * 10 + (uint64_t)(*p - '0');
                exp10--;
            }
            digits += digits || *p != '0';
        }
        frac_digits = p > f;
    }
    if (!int_digits && !frac_digits)
        return 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        bool eneg = p < end && *p == '-';
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        const char *x = p;
        int e = 0;
        for (; p < end && is_digit((unsigned char)*p); p++)
            e = convert && e < 10000 ? e * 10 + (*p - '0') : e;
        if (p == x)
            return 0;
        exp10 += eneg ? -e : e;
    }
    size_t n = (size_t)(p - s);
    if (n > MAX_TOKEN)
        return 0;
    if (convert)
        *v = to_double(neg, m, digits, exp10, s, n);
    return n;
}

/* This thread's values array (CR_JFAST_VALUES_MAX doubles), made on its first scan and kept
 * until the thread ends: a request's numbers go into it without an allocation, growth or copy.
 * Lent to one scan at a time; a second scan while it is out reads its numbers from text. */
static pthread_key_t values_key;
static pthread_once_t values_once = PTHREAD_ONCE_INIT;
static bool values_key_ok;
static _Thread_local bool values_lent;

static void values_key_make(void) { values_key_ok = pthread_key_create(&values_key, free) == 0; }

static double *borrow_values(void)
{
    if (values_lent || pthread_once(&values_once, values_key_make) != 0 || !values_key_ok)
        return NULL;
    double *v = pthread_getspecific(values_key);
    if (!v) {
        v = malloc(CR_JFAST_VALUES_MAX * sizeof *v);
        if (!v || pthread_setspecific(values_key, v) != 0) {
            free(v);
            return NULL;
        }
    }
    values_lent = true;
    return v;
}

/* Keeps a span's number for the decoder while the array has room; past it the rest of the body
 * is read from its text (values_full), which is never an error. */
static void keep_value(cr_jfast *f, double v)
{
    if (f->n_values == f->values_cap) {
        f->values_full = true;
        return;
    }
    f->values[f->n_values++] = v;
}

/* If body[open] starts a list of plain numbers (maybe empty), its length and the offset of its
 * ']'; -1 otherwise. */
static int64_t number_list(cr_jfast *f, const char *body, size_t len, size_t open, size_t *close)
{
    size_t at = skip_space(body, len, open + 1);
    int64_t count = 0;
    if (at < len && body[at] == ']') {
        *close = at;
        return 0;
    }
    for (;;) {
        double v;
        /* past the values' bound only the syntax is checked: the decoder reads the text */
        size_t n = f->values_full ? scan_number(body + at, body + len, false, NULL)
                                  : scan_number(body + at, body + len, true, &v);
        if (!n)
            return -1;
        if (!f->values_full)
            keep_value(f, v);
        count++;
        at = skip_space(body, len, at + n);
        if (at >= len)
            return -1;
        if (body[at] == ']') {
            *close = at;
            return count;
        }
        if (body[at] != ',')
            return -1;
        at = skip_space(body, len, at + 1);
    }
}

/* If body[open] starts a list of number lists (rows), fills s's rows, count, cols, odd row and
 * close; -1 otherwise. */
static int row_lists(cr_jfast *f, const char *body, size_t len, size_t open, cr_jspan *s)
{
    size_t at = open + 1;
    s->rows = s->count = 0;
    s->odd_row = -1;
    for (;;) {
        at = skip_space(body, len, at);
        size_t close = 0;
        int64_t n = at < len && body[at] == '[' ? number_list(f, body, len, at, &close) : -1;
        if (n < 0)
            return -1;
        if (s->rows == 0)
            s->cols = n;
        else if (n != s->cols && s->odd_row < 0) {
            s->odd_row = s->rows;
            s->odd_len = n;
        }
        s->rows++;
        s->count += n;
        at = skip_space(body, len, close + 1);
        if (at >= len)
            return -1;
        if (body[at] == ']') {
            s->close = at;
            return 0;
        }
        if (body[at++] != ',')
            return -1;
    }
}

/* Whether body[open] starts a span: a flat list or a list of rows, of CR_JFAST_MIN values. */
static bool find_span(cr_jfast *f, const char *body, size_t len, size_t open, cr_jspan *s)
{
    size_t mark = f->n_values;
    int64_t n = number_list(f, body, len, open, &s->close);
    if (n >= 0) {
        s->count = n;
        return n >= CR_JFAST_MIN;
    }
    f->n_values = mark;
    return row_lists(f, body, len, open, s) == 0 && s->rows + s->count >= CR_JFAST_MIN;
}

/* Keeps s; 1 when the spans' budget is spent (the array stays with cJSON), -1 out of memory. */
static int add_span(cr_jfast *f, size_t *cap, size_t budget, const cr_jspan *s)
{
    if (f->n_spans == *cap) {
        size_t grown = *cap ? *cap * 2 : 16;
        if (grown > budget / SPAN_COST)
            grown = budget / SPAN_COST;
        if (grown <= *cap)
            return 1;
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
    f->body = f->text = body;
    f->len = f->text_len = len;
    f->values = borrow_values();
    f->values_cap = f->values ? CR_JFAST_VALUES_MAX : 0;
    f->values_full = !f->values;
    size_t cap = 0, at = 0, budget = CR_JFAST_BUDGET_MIN + len / 4;
    uint64_t ordinal = 0;
    /* The next '[' and '"' at or after `at`, each searched again only once passed, so the scan
     * stays linear however many brackets and strings alternate. */
    size_t bracket = 0, quote = 0;
    bool bracket_known = false, quote_known = false;
    while (enabled && at < len) {
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
        cr_jspan s = {.open = bracket, .odd_row = -1, .ordinal = ordinal++};
        size_t mark = f->n_values;
        bool found = find_span(f, body, len, bracket, &s);
        /* a span whose numbers did not all fit is read from its text, as one never kept */
        s.values_at = found && !f->values_full ? (int64_t)mark : -1;
        int kept = found ? add_span(f, &cap, budget, &s) : 1;
        if (kept != 0 || s.values_at < 0)
            f->n_values = mark;
        if (kept < 0)
            return cr_jfast_free(f), -1;
        at = kept == 0 ? s.close + 1 : bracket + 1;
    }
    if (f->n_spans && build_skeleton(f))
        return cr_jfast_free(f), -1;
    if (f->skeleton) {
        f->text = f->skeleton;
        f->text_len = f->skel_len;
    }
    return 0;
}

/* ---- cJSON's budget ----------------------------------------------------------------------- */

/* cJSON allocates through counted_malloc, installed before main (while no thread can be using
 * cJSON); during cr_jfast_parse this thread's allocations draw on *parse_left. Frees are not
 * credited: a parse frees nothing until it fails. */
static _Thread_local size_t *parse_left;
static _Thread_local bool parse_over;

static void *counted_malloc(size_t n)
{
    size_t *left = parse_left;
    if (left) {
        size_t cost = n + 2 * sizeof(size_t); /* malloc's header and rounding, about */
        if (cost > *left) {
            parse_over = true;
            return NULL;
        }
        *left -= cost;
    }
    return malloc(n);
}

__attribute__((constructor)) static void count_cjson_allocations(void)
{
    cJSON_Hooks hooks = {counted_malloc, free};
    cJSON_InitHooks(&hooks);
}

static size_t tree_budget(const cr_jfast *f) { return CR_JFAST_BUDGET_MIN + f->len / 2; }

cJSON *cr_jfast_parse(const cr_jfast *f, const char **end, bool *over_budget)
{
    size_t left = tree_budget(f);
    parse_left = &left;
    parse_over = false;
    cJSON *root = cJSON_ParseWithLengthOpts(f->text, f->text_len, end, 0);
    parse_left = NULL;
    *over_budget = !root && parse_over;
    return root;
}

/* The key of the root object's member that text[at] is in, as written (escapes and all); ""
 * when none. */
static void member_at(const char *text, size_t at, char *name, size_t cap)
{
    int depth = 0;
    size_t key = 0, key_len = 0;
    name[0] = '\0';
    for (size_t i = 0; i < at; i++) {
        char c = text[i];
        if (c == '"') {
            size_t past = skip_string(text, at, i);
            if (depth == 1 && past < at) {
                key = i + 1;
                key_len = past - i - 2;
            }
            i = past - 1;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            depth--;
        } else if (c == ':' && depth == 1) { /* the last string at depth 1 was its key */
            size_t n = key_len < cap - 1 ? key_len : cap - 1;
            memcpy(name, text + key, n);
            name[n] = '\0';
        }
    }
}

int cr_jfast_fail_budget(const cr_jfast *f, size_t at, cr_error *err)
{
    char name[sizeof err->field];
    member_at(f->text, at, name, sizeof name);
    return cr_fail(err, 413, "too_large", name,
                   "the JSON body's values outside numeric lists need over %zu KiB of parse tree "
                   "(stopped at byte %zu%s%s); send numbers as lists or lists of rows of numbers",
                   tree_budget(f) >> 10, cr_jfast_body_offset(f, at), name[0] ? ", in " : "",
                   name);
}

/* ---- spans and nodes ---------------------------------------------------------------------- */

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

int64_t cr_jfast_size(const cr_jfast *f, const cJSON *node)
{
    const cr_jspan *s = cr_jfast_find(f, node);
    if (s)
        return s->rows ? s->rows : s->count;
    int64_t n = 0;
    for (const cJSON *e = node ? node->child : NULL; e; e = e->next)
        n++;
    return n;
}

/* Whether text[at] (a '[') stands where cJSON wants an object's key: inside an object, after
 * its '{' or a ','. */
static bool key_position(const char *text, size_t at)
{
    char open[1024]; /* cJSON refuses deeper nesting before it gets here */
    size_t depth = 0;
    char last = 0;   /* the last byte before `at` that is not whitespace to cJSON */
    for (size_t i = 0; i < at; i++) {
        char c = text[i];
        if (c == '"') {
            i = skip_string(text, at, i) - 1;
        } else if (c == '{' || c == '[') {
            if (depth == sizeof open)
                return false;
            open[depth++] = c;
        } else if ((c == '}' || c == ']') && depth) {
            depth--;
        }
        if ((unsigned char)c > ' ')
            last = c;
    }
    return depth && open[depth - 1] == '{' && (last == '{' || last == ',');
}

size_t cr_jfast_body_offset(const cr_jfast *f, size_t skel_at)
{
    size_t shift = 0;
    for (size_t i = 0; i < f->n_spans && skel_at > f->spans[i].skel_at; i++) {
        const cr_jspan *s = &f->spans[i];
        /* cJSON stops just past a span's '[' where a key was due (in the body: the span's first
         * byte), or reports the text's last byte when the text ends right after the span (in
         * the body: its ']') */
        if (skel_at == s->skel_at + 1)
            return s->skel_at + 2 < f->text_len || key_position(f->text, s->skel_at)
                       ? s->open + 1
                       : s->close;
        shift += s->close - s->open - 1;
    }
    return skel_at + shift;
}

void cr_jfast_free(cr_jfast *f)
{
    free(f->spans);
    free(f->by_node);
    free(f->skeleton);
    if (f->values)
        values_lent = false; /* the thread's array, back for its next scan */
    memset(f, 0, sizeof *f);
}

/* ---- numbers ------------------------------------------------------------------------------ */

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
    if (digits <= 15 && *p != '.' && *p != 'e' && *p != 'E') { /* an integer: exact as it is */
        *pp = p;
        return neg ? -(double)m : (double)m;
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
    return to_double(neg, m, digits, exp10, start, (size_t)(p - start));
}

/* The value of the token s[0..n) from its gathered digits: m (the first 19 significant ones),
 * their count and the power of ten that scales m. */
static double to_double(bool neg, uint64_t m, int digits, int exp10, const char *s, size_t n)
{
    if (digits <= 19 && m <= (1ull << 53) && exp10 >= -22 && exp10 <= 22) {
        double v = (double)m;
        v = exp10 < 0 ? v / pow10_exact[-exp10] : v * pow10_exact[exp10];
        return neg ? -v : v;
    }
    double v;
    if (digits <= 19 && extended_path(m, exp10, &v))
        return neg ? -v : v;
    return slow_path(s, n);
}

cr_jnums cr_jspan_numbers(const cr_jfast *f, const cr_jspan *s)
{
    if (s->values_at >= 0)
        return (cr_jnums){.values = f->values + s->values_at};
    return (cr_jnums){.text = f->body + s->open + 1};
}
