/* libFuzzer harness for the request heads the Unix socket's acceptor parses itself
 * (server/http/http_head.c, cr_head_parse). Why: every connection's first bytes on --unix-socket
 * go through it straight from the peer, before libmicrohttpd or any other check sees them, and
 * its verdict decides who serves the request (direct.c or libmicrohttpd). It copies up to
 * CR_HEAD_MAX bytes into fixed buffers, splits them in place and unescapes the query into a
 * second buffer: the sanitizers watch those copies.
 *
 * Each input is parsed whole, then again as a prefix of itself cut where its last byte says (the
 * acceptor peeks at whatever has arrived so far). The oracle, abort() on a violation:
 *  - the result is -1, 0 or 1, and 0 only for fewer than CR_HEAD_MAX bytes;
 *  - a whole head (1) keeps the promises direct.c relies on: len <= the input and CR_HEAD_MAX,
 *    ending in CRLF CRLF, no NUL before it; method, path, query and version set, the path
 *    starting with '/' (visible ASCII, no '?'), the version HTTP/1.1; at most CR_HEAD_FIELDS
 *    fields and CR_HEAD_ARGS query pairs; every field name non-empty (no space, tab or colon),
 *    its value trimmed and free of control bytes, and cr_head_get of its name the value of the
 *    first field of that name in any case, cr_head_count at least 1 (2 for a repeat);
 *  - the prefix agrees with the whole input: the first blank line decides, so a head whole in
 *    the prefix is the same head (same len), a refused prefix means a refused input, a head
 *    whose blank line was cut off is 0 (not yet whole), and an input still waiting (0) has no
 *    prefix that is anything else. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/http/http_head.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static cr_head head; /* 16 KiB: not on the stack */

/* A trimmed field value: visible ASCII, inner spaces and tabs, obs-text; no control byte. */
static int value_ok(const char *v)
{
    size_t n = strlen(v);
    if (n && (v[0] == ' ' || v[0] == '\t' || v[n - 1] == ' ' || v[n - 1] == '\t'))
        return 0;
    for (const unsigned char *p = (const unsigned char *)v; *p; p++)
        if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
            return 0;
    return 1;
}

static void check_whole(const char *data, size_t n, const cr_head *h)
{
    if (h->len < 4 || h->len > n || h->len > CR_HEAD_MAX || memcmp(data + h->len - 4, "\r\n\r\n", 4) != 0 ||
        memchr(data, '\0', h->len))
        abort();
    if (!h->method || !h->path || !h->query || !h->version || !h->method[0] || h->path[0] != '/' ||
        strcmp(h->version, "HTTP/1.1") != 0)
        abort();
    for (const unsigned char *p = (const unsigned char *)h->path; *p; p++)
        if (*p <= 0x20 || *p >= 0x7f || *p == '?')
            abort();
    if (h->nfields < 0 || h->nfields > CR_HEAD_FIELDS || h->nargs < 0 || h->nargs > CR_HEAD_ARGS)
        abort();
    for (int i = 0; i < h->nfields; i++) {
        const cr_head_pair *f = &h->fields[i];
        if (!f->name || !f->value || !f->name[0] || strpbrk(f->name, " \t:") || !value_ok(f->value))
            abort();
        int first = 0; /* cr_head_get gives the first of the same name, any case */
        while (strcasecmp(h->fields[first].name, f->name) != 0)
            first++;
        if (cr_head_get(h, f->name) != h->fields[first].value || cr_head_count(h, f->name) < 1 ||
            (first < i && cr_head_count(h, f->name) < 2))
            abort();
    }
    for (int i = 0; i < h->nargs; i++)
        if (!h->args[i].name)
            abort();
}

static int parse_checked(const char *data, size_t n)
{
    int rc = cr_head_parse(data, n, &head);
    if (rc < -1 || rc > 1 || (rc == 0 && n >= CR_HEAD_MAX))
        abort();
    if (rc == 1)
        check_whole(data, n, &head);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *d = (const char *)data;
    int rc = parse_checked(d, size);
    if (size == 0)
        return 0;
    size_t whole = rc == 1 ? head.len : 0;
    /* The same bytes, fewer of them: the first blank line decides, so a shorter read agrees. */
    size_t cut = (size_t)data[size - 1] * size / 256;
    int rc_cut = parse_checked(d, cut);
    if ((rc_cut == 1 && (rc != 1 || head.len != whole)) || /* whole on fewer bytes: the same head */
        (rc_cut == -1 && rc != -1) ||                      /* refused on fewer: refused on more */
        (rc == 1 && cut >= whole && rc_cut != 1) ||        /* its blank line was in: whole */
        (rc == 1 && cut < whole && rc_cut != 0) ||         /* it was not: not yet whole */
        (rc == 0 && rc_cut != 0))
        abort();
    return 0;
}
