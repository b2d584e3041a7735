/* Base64 decoding; see base64.h. */
#include "server/codec/base64.h"

static int sextet(char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* One group of four characters, the last of which may end in one or two '='. */
static int group(const char *g, int last, unsigned char out[3])
{
    int pad = last ? (g[3] == '=') + (g[2] == '=' && g[3] == '=') : 0;
    unsigned v = 0;
    for (int i = 0; i < 4 - pad; i++) {
        int x = sextet(g[i]);
        if (x < 0)
            return -1;
        v = v << 6 | (unsigned)x;
    }
    v <<= 6 * pad;
    if ((pad == 1 && (v & 0xff)) || (pad == 2 && (v & 0xffff)))
        return -1; /* bits under the padding: not the canonical spelling of these bytes */
    out[0] = (unsigned char)(v >> 16);
    out[1] = (unsigned char)(v >> 8);
    out[2] = (unsigned char)v;
    return 3 - pad;
}

long cr_base64_decode(const char *s, size_t len, unsigned char *out, size_t cap)
{
    if (len % 4)
        return -1;
    size_t n = 0;
    for (size_t at = 0; at < len; at += 4) {
        unsigned char b[3];
        int k = group(s + at, at + 4 == len, b);
        if (k < 0 || n + (size_t)k > cap)
            return -1;
        for (int i = 0; i < k; i++)
            out[n++] = b[i];
    }
    return (long)n;
}
