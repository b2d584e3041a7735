/* cr_fail: the one way an error is recorded, so every route fills cr_error the same way. */
#include "server/error.h"

#include <stdio.h>
#include <string.h>

/* Cuts a string truncated at `len` bytes back to a UTF-8 character boundary, so a message that
 * was too long never ends in half a character (the JSON encoder would have to mangle it). */
static void trim_partial_utf8(char *s, size_t len)
{
    size_t end = len;
    while (end > 0 && ((unsigned char)s[end - 1] & 0xC0) == 0x80)
        end--;
    if (end > 0 && ((unsigned char)s[end - 1] & 0x80)) {
        unsigned char lead = (unsigned char)s[end - 1];
        size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
        if (len - (end - 1) < need)
            len = end - 1;
    }
    s[len] = '\0';
}

static void copy_truncated(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    if (n < cap) {
        memcpy(dst, src ? src : "", n + 1);
        return;
    }
    memcpy(dst, src, cap - 1);
    trim_partial_utf8(dst, cap - 1);
}

int cr_fail(cr_error *err, int http, const char *code, const char *field, const char *fmt, ...)
{
    if (!err)
        return -1;
    err->http = http;
    copy_truncated(err->code, sizeof err->code, code);
    copy_truncated(err->field, sizeof err->field, field);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    if (n < 0)
        err->message[0] = '\0';
    else if ((size_t)n >= sizeof err->message)
        trim_partial_utf8(err->message, sizeof err->message - 1);
    return -1;
}
