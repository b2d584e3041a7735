/* .npy headers; see npy.h. The dict is parsed by hand, as the small Python literal it is: a
 * general literal evaluator would accept far more than numpy ever writes, and everything more
 * is a way to confuse the sizes the daemon allocates from. */
#include "server/codec/npy.h"

#include <stdio.h>
#include <string.h>

static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* ---- a cursor over the dict text -------------------------------------------------------- */

typedef struct {
    const char *s;
    size_t len, at;
    const char *part;
    cr_error *err;
} cursor;

static int bad(cursor *c, const char *what)
{
    return cr_fail(c->err, 400, "invalid_field", c->part,
                   "%s: the .npy header is not the dict numpy writes: %s (at header byte %zu)",
                   c->part, what, c->at);
}

static void skip_space(cursor *c)
{
    while (c->at < c->len && (c->s[c->at] == ' ' || c->s[c->at] == '\t' || c->s[c->at] == '\n' ||
                              c->s[c->at] == '\r'))
        c->at++;
}

/* Skips spaces, then consumes ch if it is next. */
static bool eat(cursor *c, char ch)
{
    skip_space(c);
    if (c->at < c->len && c->s[c->at] == ch) {
        c->at++;
        return true;
    }
    return false;
}

/* A quoted string without escapes, into out (NUL-terminated). */
static int read_string(cursor *c, char *out, size_t cap)
{
    skip_space(c);
    if (c->at >= c->len || (c->s[c->at] != '\'' && c->s[c->at] != '"'))
        return bad(c, "expected a quoted string");
    char q = c->s[c->at++];
    size_t n = 0;
    while (c->at < c->len && c->s[c->at] != q) {
        char ch = c->s[c->at];
        if (ch == '\\' || ch < 0x20 || ch > 0x7e)
            return bad(c, "escapes and non-ASCII characters are not expected in the header");
        if (n + 1 >= cap)
            return bad(c, "string too long");
        out[n++] = ch;
        c->at++;
    }
    if (c->at >= c->len)
        return bad(c, "unterminated string");
    c->at++;
    out[n] = '\0';
    return 0;
}

static bool word_next(cursor *c, const char *w)
{
    size_t n = strlen(w);
    return c->len - c->at >= n && memcmp(c->s + c->at, w, n) == 0;
}

static int read_bool(cursor *c, bool *out)
{
    skip_space(c);
    if (word_next(c, "True"))
        return c->at += 4, *out = true, 0;
    if (word_next(c, "False"))
        return c->at += 5, *out = false, 0;
    return bad(c, "fortran_order must be True or False");
}

/* A non-negative decimal integer as Python writes it: no sign, no leading zeros. */
static int read_dim(cursor *c, int64_t *out)
{
    skip_space(c);
    size_t start = c->at;
    uint64_t v = 0;
    while (c->at < c->len && c->s[c->at] >= '0' && c->s[c->at] <= '9') {
        if (v > (uint64_t)(INT64_MAX - 9) / 10)
            return cr_fail(c->err, 413, "too_large", c->part,
                           "%s: a dimension in the .npy shape is absurdly large", c->part);
        v = v * 10 + (uint64_t)(c->s[c->at++] - '0');
    }
    if (c->at == start)
        return bad(c, "shape must be a tuple of non-negative integers");
    if (c->s[start] == '0' && c->at - start > 1)
        return bad(c, "leading zeros in a dimension");
    *out = (int64_t)v;
    return 0;
}

/* "(3, 4)", "(5,)", "()": a single element needs its comma, or Python reads an int. */
static int read_shape(cursor *c, cr_npy_header *h)
{
    if (!eat(c, '('))
        return bad(c, "shape must be a tuple");
    h->ndim = 0;
    if (eat(c, ')'))
        return 0;
    for (;;) {
        if (h->ndim == CR_NPY_MAX_DIMS)
            return bad(c, "more than 32 dimensions");
        if (read_dim(c, &h->shape[h->ndim]))
            return -1;
        h->ndim++;
        bool comma = eat(c, ',');
        if (eat(c, ')')) {
            if (h->ndim == 1 && !comma)
                return bad(c, "a 1-element shape is written (n,)");
            return 0;
        }
        if (!comma)
            return bad(c, "expected ',' or ')' in the shape");
    }
}

/* ---- dtypes ------------------------------------------------------------------------------ */

static const struct {
    char kind;
    int size;
    cr_dtype dt;
} kinds[] = {
    {'f', 4, CR_DT_F32}, {'f', 8, CR_DT_F64}, {'u', 1, CR_DT_U8},  {'i', 1, CR_DT_I8},
    {'u', 2, CR_DT_U16}, {'i', 2, CR_DT_I16}, {'u', 4, CR_DT_U32}, {'i', 4, CR_DT_I32},
    {'u', 8, CR_DT_U64}, {'i', 8, CR_DT_I64}, {'f', 2, CR_DT_F16},
};

/* '<f4', '=i8', '|u1': little-endian (or byte-sized) numbers of the kinds above only. */
static int parse_descr(cursor *c, const char *d, cr_dtype *out)
{
    const char *part = c->part;
    if (!d[0] || !d[1])
        return bad(c, "descr is too short");
    char order = d[0], kind = d[1];
    if (kind == 'O')
        return cr_fail(c->err, 400, "invalid_field", part,
                       "%s: object arrays ('%s') are refused; send numbers", part, d);
    int size = 0;
    for (const char *p = d + 2; *p; p++) {
        if (*p < '0' || *p > '9' || size > 100)
            return cr_fail(c->err, 400, "invalid_field", part,
                           "%s: unsupported .npy dtype '%s'", part, d);
        size = size * 10 + (*p - '0');
    }
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (kinds[i].kind != kind || kinds[i].size != size)
            continue;
        bool byte_sized = size == 1;
        if (order == '>' && !byte_sized)
            return cr_fail(c->err, 400, "invalid_field", part,
                           "%s: big-endian data ('%s') is refused; send little-endian "
                           "(numpy: a.astype(a.dtype.newbyteorder('<')))", part, d);
        if (order == '<' || order == '=' || (byte_sized && (order == '|' || order == '>'))) {
            *out = kinds[i].dt;
            return 0;
        }
        break;
    }
    return cr_fail(c->err, 400, "invalid_field", part,
                   "%s: unsupported .npy dtype '%s' (float16, float32, float64 and integer "
                   "types, little-endian)", part, d);
}

/* ---- the dict ------------------------------------------------------------------------------ */

enum { KEY_DESCR = 1, KEY_FORTRAN = 2, KEY_SHAPE = 4, KEY_ALL = 7 };

static int read_entry(cursor *c, cr_npy_header *h, unsigned *seen)
{
    char key[32], descr[32];
    if (read_string(c, key, sizeof key))
        return -1;
    if (!eat(c, ':'))
        return bad(c, "expected ':' after a key");
    unsigned k = strcmp(key, "descr") == 0           ? KEY_DESCR
                 : strcmp(key, "fortran_order") == 0 ? KEY_FORTRAN
                 : strcmp(key, "shape") == 0         ? KEY_SHAPE
                                                     : 0;
    if (!k)
        return bad(c, "unknown key (expected descr, fortran_order, shape)");
    if (*seen & k)
        return bad(c, "a key appears twice");
    *seen |= k;
    if (k == KEY_FORTRAN)
        return read_bool(c, &h->fortran_order);
    if (k == KEY_SHAPE)
        return read_shape(c, h);
    skip_space(c);
    if (c->at < c->len && (c->s[c->at] == '[' || c->s[c->at] == '('))
        return cr_fail(c->err, 400, "invalid_field", c->part,
                       "%s: structured .npy dtypes are refused; send a plain numeric array",
                       c->part);
    return read_string(c, descr, sizeof descr) ? -1 : parse_descr(c, descr, &h->dtype);
}

/* count and data bytes from the shape, overflow-checked. */
static int size_of(cursor *c, cr_npy_header *h)
{
    uint64_t n = 1;
    for (int i = 0; i < h->ndim; i++)
        if (__builtin_mul_overflow(n, (uint64_t)h->shape[i], &n))
            return cr_fail(c->err, 413, "too_large", c->part,
                           "%s: the .npy shape's element count overflows", c->part);
    if (__builtin_mul_overflow(n, (uint64_t)cr_dtype_size(h->dtype), &h->data_bytes))
        return cr_fail(c->err, 413, "too_large", c->part, "%s: the .npy data size overflows",
                       c->part);
    h->count = n;
    return 0;
}

int cr_npy_parse_dict(const char *s, size_t len, const char *part, cr_npy_header *out,
                      cr_error *err)
{
    cursor c = {s, len, 0, part, err};
    unsigned seen = 0;
    out->fortran_order = false;
    out->ndim = 0;
    if (!eat(&c, '{'))
        return bad(&c, "expected '{'");
    while (!eat(&c, '}')) {
        if (read_entry(&c, out, &seen))
            return -1;
        if (!eat(&c, ',')) {
            if (!eat(&c, '}'))
                return bad(&c, "expected ',' or '}'");
            break;
        }
    }
    if (seen != KEY_ALL)
        return bad(&c, "descr, fortran_order and shape are all required");
    skip_space(&c);
    if (c.at != c.len)
        return bad(&c, "text after the dict");
    return size_of(&c, out);
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

cr_npy_status cr_npy_parse_header(const uint8_t *buf, size_t len, const char *part,
                                  cr_npy_header *out, size_t *need, cr_error *err)
{
    memset(out, 0, sizeof *out);
    if (len < 8)
        return *need = 8, CR_NPY_MORE;
    if (memcmp(buf, magic, sizeof magic) != 0)
        return cr_fail(err, 400, "invalid_field", part,
                       "%s is not a .npy array (no \\x93NUMPY magic; numpy.save writes one)", part),
               CR_NPY_BAD;
    out->major = buf[6];
    out->minor = buf[7];
    if (out->major < 1 || out->major > 3 || out->minor != 0)
        return cr_fail(err, 400, "invalid_field", part,
                       "%s: .npy format version %d.%d is not 1.0, 2.0 or 3.0", part, out->major,
                       out->minor),
               CR_NPY_BAD;
    size_t pre = out->major == 1 ? 10 : 12;
    if (len < pre)
        return *need = pre, CR_NPY_MORE;
    uint32_t hlen = out->major == 1 ? (uint32_t)buf[8] | (uint32_t)buf[9] << 8 : le32(buf + 8);
    if (hlen > CR_NPY_MAX_HEADER)
        return cr_fail(err, 413, "too_large", part,
                       "%s: the .npy header is %u bytes, over the limit of %u", part, hlen,
                       CR_NPY_MAX_HEADER),
               CR_NPY_BAD;
    if (len < pre + hlen)
        return *need = pre + hlen, CR_NPY_MORE;
    int major = out->major, minor = out->minor;
    if (cr_npy_parse_dict((const char *)buf + pre, hlen, part, out, err))
        return CR_NPY_BAD;
    out->major = major;
    out->minor = minor;
    out->header_bytes = pre + hlen;
    return CR_NPY_OK;
}

const char *cr_npy_descr(cr_dtype dt)
{
    static const char *const d[CR_DT_COUNT] = {
        [CR_DT_F32] = "<f4", [CR_DT_F64] = "<f8", [CR_DT_U8] = "|u1",  [CR_DT_I8] = "|i1",
        [CR_DT_U16] = "<u2", [CR_DT_I16] = "<i2", [CR_DT_U32] = "<u4", [CR_DT_I32] = "<i4",
        [CR_DT_I64] = "<i8", [CR_DT_U64] = "<u8", [CR_DT_F16] = "<f2",
        [CR_DT_BF16] = "<u2", /* numpy has no bfloat16: the bits, as uint16 (X-Crunchd-Dtype says) */
    };
    return (unsigned)dt < CR_DT_COUNT ? d[dt] : NULL;
}

size_t cr_npy_write_header(char *out, size_t cap, cr_dtype dt, int ndim, const int64_t *shape)
{
    char dict[CR_NPY_WRITE_MAX];
    const char *descr = cr_npy_descr(dt);
    if (!descr || ndim < 0)
        return 0;
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     descr);
    for (int i = 0; i < ndim && n > 0 && (size_t)n < sizeof dict; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%s%lld", i ? ", " : "",
                      (long long)shape[i]);
    if (n <= 0 || (size_t)n >= sizeof dict)
        return 0;
    n += snprintf(dict + n, sizeof dict - (size_t)n, "%s), }", ndim == 1 ? "," : "");
    size_t dict_len = (size_t)n + 1;                 /* with the final '\n' */
    size_t total = (10 + dict_len + 63) / 64 * 64;   /* data aligned to 64 bytes */
    if (total > cap || total - 10 > 65535)
        return 0;
    memcpy(out, magic, sizeof magic);
    out[6] = 1;
    out[7] = 0;
    out[8] = (char)((total - 10) & 0xff);
    out[9] = (char)((total - 10) >> 8);
    memcpy(out + 10, dict, (size_t)n);
    memset(out + 10 + n, ' ', total - 10 - (size_t)n - 1);
    out[total - 1] = '\n';
    return total;
}
