/* Bearer-token authentication; see auth.h. */
#include "server/http/auth.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

int cr_auth_load(cr_auth *a, const char *path, bool protect_metrics, char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    if (!path || !path[0])
        return 0;
    int rc = -1;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "--auth-token-file %s: %s", path, strerror(errno));
        return -1;
    }
    size_t n = fread(a->token, 1, sizeof a->token, f);
    if (ferror(f)) {
        snprintf(err, errlen, "--auth-token-file %s: read error", path);
        goto cleanup;
    }
    if (n == sizeof a->token) {
        snprintf(err, errlen, "--auth-token-file %s: longer than %d bytes", path, CR_AUTH_TOKEN_MAX - 1);
        goto cleanup;
    }
    while (n && (a->token[n - 1] == '\n' || a->token[n - 1] == '\r'))
        n--; /* `echo secret > file` adds a newline nobody means to send */
    if (n == 0) {
        snprintf(err, errlen, "--auth-token-file %s: empty token", path);
        goto cleanup;
    }
    if (memchr(a->token, '\0', n)) {
        snprintf(err, errlen, "--auth-token-file %s: the token holds a NUL byte", path);
        goto cleanup;
    }
    a->token[n] = '\0';
    a->len = n;
    a->enabled = true;
    a->protect_metrics = protect_metrics;
    rc = 0;
cleanup:
    fclose(f);
    if (rc < 0)
        cr_auth_clear(a);
    return rc;
}

bool cr_auth_exempt(const cr_auth *a, const char *path)
{
    if (!a->enabled || strcmp(path, "/healthz") == 0 || strcmp(path, "/readyz") == 0 ||
        strncmp(path, "/v2/health/", 11) == 0) /* probes carry no credentials, in either protocol */
        return true;
    return strcmp(path, "/metrics") == 0 && !a->protect_metrics;
}

bool cr_auth_equal(const char *a, size_t alen, const char *b, size_t blen)
{
    /* No early exit and no branch on the bytes: differences are OR-ed into one accumulator.
     * Past the end of the shorter string we compare against 0 and the length check fails. */
    size_t n = alen > blen ? alen : blen;
    volatile unsigned char diff = (unsigned char)(alen != blen);
    for (size_t i = 0; i < n; i++) {
        unsigned char x = i < alen ? (unsigned char)a[i] : 0;
        unsigned char y = i < blen ? (unsigned char)b[i] : 0;
        diff |= (unsigned char)(x ^ y);
    }
    return diff == 0;
}

bool cr_auth_check(const cr_auth *a, const char *authorization)
{
    static const char scheme[] = "Bearer ";
    if (!a->enabled)
        return true;
    if (!authorization || strncasecmp(authorization, scheme, sizeof scheme - 1) != 0)
        return false;
    const char *given = authorization + sizeof scheme - 1;
    while (*given == ' ')
        given++;
    return cr_auth_equal(given, strlen(given), a->token, a->len);
}

void cr_auth_clear(cr_auth *a)
{
    volatile char *p = a->token;
    for (size_t i = 0; i < sizeof a->token; i++)
        p[i] = 0;
    a->len = 0;
    a->enabled = false;
}
