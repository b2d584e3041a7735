/* The allowed origins; see cors.h. */
#include "server/http/cors.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* scheme://host[:port], nothing after: what a browser sends in Origin. */
static bool origin_well_formed(const char *o)
{
    const char *rest = strncasecmp(o, "https://", 8) == 0 ? o + 8 : strncasecmp(o, "http://", 7) == 0 ? o + 7 : NULL;
    if (!rest || !*rest)
        return false;
    for (const char *p = rest; *p; p++)
        if (*p == '/' || *p == '?' || *p == '#' || *p == '@' || *p == ',' || (unsigned char)*p <= ' ' ||
            (unsigned char)*p >= 0x7f)
            return false;
    return true;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    return s;
}

int cr_cors_load(cr_cors *c, const char *list, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    snprintf(c->list, sizeof c->list, "%s", list ? list : "");
    for (char *save = NULL, *tok = strtok_r(c->list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *o = trim(tok);
        size_t n = strlen(o);
        if (n > 1 && o[n - 1] == '/') /* "https://app.example/" as people write it */
            o[--n] = '\0';
        if (!*o)
            continue;
        if (strcmp(o, "*") == 0) {
            c->any = true;
        } else if (!origin_well_formed(o)) {
            snprintf(err, errlen, "--cors-origin: '%.100s' is not an origin (scheme://host[:port], or *)", o);
            return -1;
        } else if (c->n == CR_CORS_MAX_ORIGINS) {
            snprintf(err, errlen, "--cors-origin: more than %d origins", CR_CORS_MAX_ORIGINS);
            return -1;
        } else {
            c->origins[c->n++] = o;
        }
    }
    c->enabled = c->any || c->n > 0;
    return 0;
}

bool cr_cors_allows(const cr_cors *c, const char *origin)
{
    if (!c->enabled || !origin || !*origin)
        return false;
    if (c->any)
        return true;
    /* Scheme and host are case-insensitive; browsers send them in lower case anyway. */
    for (int i = 0; i < c->n; i++)
        if (strcasecmp(c->origins[i], origin) == 0)
            return true;
    return false;
}
