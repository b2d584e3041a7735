/* JSON text in a growable buffer; see json_buf.h. */
#include "server/codec/json_buf.h"

#include <stdlib.h>
#include <string.h>

#include "server/codec/numfmt.h"

bool cr_jbuf_reserve(cr_jbuf *b, size_t extra)
{
    if (b->failed)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) {
        if (cap > SIZE_MAX / 2) {
            b->failed = true;
            return false;
        }
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

void cr_jbuf_put(cr_jbuf *b, const void *s, size_t n)
{
    if (!cr_jbuf_reserve(b, n))
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

void cr_jbuf_lit(cr_jbuf *b, const char *s) { cr_jbuf_put(b, s, strlen(s)); }

char *cr_jbuf_finish(cr_jbuf *b, size_t *len)
{
    if (!cr_jbuf_reserve(b, 0)) {
        free(b->p);
        if (len)
            *len = 0;
        return NULL;
    }
    b->p[b->len] = '\0';
    if (len)
        *len = b->len;
    return b->p;
}

size_t cr_utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t need;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        need = 2, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
        need = 3, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
        need = 4, min = 0x10000;
    else
        return 0;
    if (n < need)
        return 0;
    unsigned cp = c & (0x7F >> need);
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return need;
}

void cr_jbuf_string(cr_jbuf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)(s ? s : "");
    size_t n = strlen((const char *)u);
    cr_jbuf_put(b, "\"", 1);
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            cr_jbuf_put(b, esc, 2);
            i++;
        } else if (c < 0x20) {
            char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            const char *named = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : NULL;
            if (named)
                cr_jbuf_put(b, named, 2);
            else
                cr_jbuf_put(b, esc, 6);
            i++;
        } else {
            size_t k = cr_utf8_len(u + i, n - i);
            if (k == 0) {
                cr_jbuf_lit(b, "\\ufffd");
                i++;
            } else {
                cr_jbuf_put(b, (const char *)u + i, k);
                i += k;
            }
        }
    }
    cr_jbuf_put(b, "\"", 1);
}

void cr_jbuf_key(cr_jbuf *b, const char *name, bool first)
{
    if (!first)
        cr_jbuf_put(b, ",", 1);
    cr_jbuf_string(b, name);
    cr_jbuf_put(b, ":", 1);
}

void cr_jbuf_f64(cr_jbuf *b, double v)
{
    if (cr_jbuf_reserve(b, CR_NUMFMT_MAX))
        b->len += cr_fmt_f64(b->p + b->len, v);
}

void cr_jbuf_f32(cr_jbuf *b, float v)
{
    if (cr_jbuf_reserve(b, CR_NUMFMT_MAX))
        b->len += cr_fmt_f32(b->p + b->len, v);
}

/* Per value, the reserve and put calls around the formatting were 5-7% of a loaded daemon's
 * samples on 64x64 JSON GEMMs (H200 machine): one reserve per block instead, the text written
 * straight into it. */
void cr_jbuf_numbers(cr_jbuf *b, const void *data, uint64_t n, cr_dtype dt)
{
    enum { BLOCK = 256 };
    cr_jbuf_put(b, "[", 1);
    for (uint64_t i = 0; data && i < n;) {
        uint64_t k = n - i < BLOCK ? n - i : BLOCK, end = i + k;
        if (!cr_jbuf_reserve(b, k * (CR_NUMFMT_MAX + 1))) /* each: a comma and the number */
            return;
        char *w = b->p + b->len;
        for (; i < end; i++) {
            if (i)
                *w++ = ',';
            if (dt == CR_DT_F32)
                w += cr_fmt_f32(w, ((const float *)data)[i]);
            else if (dt == CR_DT_F16 || dt == CR_DT_BF16)
                w += cr_fmt_half(w, ((const uint16_t *)data)[i], dt);
            else if (dt == CR_DT_U64)
                w += cr_fmt_u64(w, ((const uint64_t *)data)[i]);
            else
                w += cr_fmt_f64(w, ((const double *)data)[i]);
        }
        b->len = (size_t)(w - b->p);
    }
    cr_jbuf_put(b, "]", 1);
}

void cr_jbuf_u64(cr_jbuf *b, uint64_t v)
{
    if (cr_jbuf_reserve(b, CR_NUMFMT_MAX))
        b->len += cr_fmt_u64(b->p + b->len, v);
}
