/* Content-Encoding and Accept-Encoding; see coding.h. */
#include "server/codec/coding.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *cr_coding_name(cr_coding c)
{
    return c == CR_CODING_GZIP ? "gzip" : c == CR_CODING_DEFLATE ? "deflate" : "identity";
}

static bool is_space(char ch) { return ch == ' ' || ch == '\t'; }

/* [s, s+n) with the spaces around it cut off. */
static void trim(const char **s, size_t *n)
{
    while (*n && is_space(**s))
        (*s)++, (*n)--;
    while (*n && is_space((*s)[*n - 1]))
        (*n)--;
}

static bool token_is(const char *s, size_t n, const char *name)
{
    return n == strlen(name) && strncasecmp(s, name, n) == 0;
}

int cr_coding_from_content_encoding(const char *value, cr_coding *out, cr_error *err)
{
    const char *s = value ? value : "";
    size_t n = strlen(s);
    trim(&s, &n);
    if (n == 0 || token_is(s, n, "identity"))
        return *out = CR_CODING_IDENTITY, 0;
    if (token_is(s, n, "gzip") || token_is(s, n, "x-gzip"))
        return *out = CR_CODING_GZIP, 0;
    if (token_is(s, n, "deflate"))
        return *out = CR_CODING_DEFLATE, 0;
    return cr_fail(err, 415, "unsupported_media_type", "Content-Encoding",
                   "Content-Encoding \"%.40s\" is not supported: send the body as it is, or with "
                   "one coding, gzip or deflate", s);
}

/* The q of one Accept-Encoding member's parameters ("; q=0.5"): 1 when absent, 0 when
 * malformed (a member we cannot read is not a permission). */
static double member_q(const char *params, size_t n)
{
    while (n) {
        size_t k = 0;
        while (k < n && params[k] != ';')
            k++;
        const char *p = params;
        size_t m = k;
        trim(&p, &m);
        if (m >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
            char num[16];
            size_t len = m - 2 < sizeof num - 1 ? m - 2 : sizeof num - 1;
            memcpy(num, p + 2, len);
            num[len] = '\0';
            char *end = NULL;
            double q = strtod(num, &end);
            return end != num && *end == '\0' && q >= 0 && q <= 1 ? q : 0;
        }
        params += k < n ? k + 1 : k;
        n -= k < n ? k + 1 : k;
    }
    return 1;
}

cr_coding cr_coding_negotiate(const char *accept)
{
    double gzip = -1, deflate = -1, star = -1; /* -1: not named */
    const char *s = accept ? accept : "";
    while (*s) {
        size_t len = strcspn(s, ",");
        const char *m = s;
        size_t name_len = strcspn(m, ";");
        if (name_len > len)
            name_len = len;
        double q = member_q(m + name_len, len - name_len);
        trim(&m, &name_len);
        if (token_is(m, name_len, "gzip") || token_is(m, name_len, "x-gzip"))
            gzip = q;
        else if (token_is(m, name_len, "deflate"))
            deflate = q;
        else if (token_is(m, name_len, "*"))
            star = q;
        s += len;
        s += *s == ',';
    }
    gzip = gzip >= 0 ? gzip : star > 0 ? star : 0;
    deflate = deflate >= 0 ? deflate : star > 0 ? star : 0;
    if (gzip > 0 && gzip >= deflate)
        return CR_CODING_GZIP;
    return deflate > 0 ? CR_CODING_DEFLATE : CR_CODING_IDENTITY;
}
