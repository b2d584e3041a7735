/* Request heads; see http_head.h. */
#include "server/http/http_head.h"

#include <microhttpd.h>
#include <string.h>
#include <strings.h>

/* RFC 9110's tchar: what a method or a field name is made of. */
static int is_tchar(unsigned char ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

/* A field value's or a target's bytes: visible ASCII, space, tab, and obs-text (0x80 and up). */
static int is_value_char(unsigned char ch)
{
    return ch == '\t' || ch >= 0x20 ? ch != 0x7f : 0;
}

static const char *find_blank_line(const char *data, size_t n)
{
    for (size_t i = 0; i + 3 < n; i++)
        if (data[i] == '\r' && data[i + 1] == '\n' && data[i + 2] == '\r' && data[i + 3] == '\n')
            return data + i;
    return NULL;
}

static int has_bare_lf(const char *data, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (data[i] == '\n' && (i == 0 || data[i - 1] != '\r'))
            return 1;
    return 0;
}

static int parse_token(char **at, const char **out, char stop)
{
    char *s = *at, *p = s;
    while (is_tchar((unsigned char)*p))
        p++;
    if (p == s || *p != stop)
        return -1;
    *p = '\0';
    *out = s;
    *at = p + 1;
    return 0;
}

static int parse_request_line(cr_head *h, char *line)
{
    char *at = line;
    if (parse_token(&at, &h->method, ' ') < 0)
        return -1;
    char *target = at, *sp = strchr(at, ' ');
    if (!sp || *target != '/')
        return -1;
    *sp = '\0';
    for (const char *p = target; *p; p++)
        if (*p == ' ' || *p == '\t' || !is_value_char((unsigned char)*p) || (unsigned char)*p >= 0x80)
            return -1;
    h->version = sp + 1;
    if (strcmp(h->version, "HTTP/1.1") != 0)
        return -1;
    char *q = strchr(target, '?');
    h->query = q ? q + 1 : "";
    if (q)
        *q = '\0';
    h->path = target;
    return 0;
}

static int parse_field(cr_head *h, char *line)
{
    if (h->nfields == CR_HEAD_FIELDS)
        return -1;
    cr_head_pair *f = &h->fields[h->nfields];
    char *at = line;
    if (parse_token(&at, &f->name, ':') < 0) /* also refuses a folded line (leading space) */
        return -1;
    while (*at == ' ' || *at == '\t')
        at++;
    char *end = at + strlen(at);
    for (const char *p = at; p < end; p++)
        if (!is_value_char((unsigned char)*p))
            return -1;
    while (end > at && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    *end = '\0';
    f->value = at;
    h->nfields++;
    return 0;
}

/* A query key or value as libmicrohttpd decodes it: '+' a space, %XX a byte. */
static void unescape(char *s)
{
    for (char *p = s; *p; p++)
        *p = *p == '+' ? ' ' : *p;
    MHD_http_unescape(s);
}

/* key=value&key2&... as libmicrohttpd hands them to handlers: '+' a space, %XX decoded. */
static int parse_args(cr_head *h)
{
    size_t n = strlen(h->query);
    memcpy(h->args_buf, h->query, n + 1);
    char *at = h->args_buf;
    while (*at) {
        char *amp = strchr(at, '&');
        if (amp)
            *amp = '\0';
        if (*at) {
            if (h->nargs == CR_HEAD_ARGS)
                return -1;
            char *eq = strchr(at, '=');
            if (eq)
                *eq = '\0';
            unescape(at);
            if (eq)
                unescape(eq + 1);
            h->args[h->nargs++] = (cr_head_pair){at, eq ? eq + 1 : NULL};
        }
        if (!amp)
            break;
        at = amp + 1;
    }
    return 0;
}

int cr_head_parse(const char *data, size_t n, cr_head *out)
{
    size_t span = n < CR_HEAD_MAX ? n : CR_HEAD_MAX;
    const char *blank = find_blank_line(data, span);
    if (!blank) /* a bare LF will never end in CRLF CRLF: not ours, at once */
        return n >= CR_HEAD_MAX || has_bare_lf(data, span) ? -1 : 0;
    size_t text = (size_t)(blank - data);
    if (memchr(data, '\0', text))
        return -1;
    memcpy(out->buf, data, text);
    out->buf[text] = '\0';
    out->nfields = out->nargs = 0;
    out->len = text + 4;
    char *line = out->buf, *next;
    for (int first = 1; line; line = next, first = 0) {
        char *cr = strstr(line, "\r\n");
        next = cr ? cr + 2 : NULL;
        if (cr) /* a bare CR or LF left in a line fails the token and value checks */
            *cr = '\0';
        if (first ? parse_request_line(out, line) < 0 : parse_field(out, line) < 0)
            return -1;
    }
    return parse_args(out) < 0 ? -1 : 1;
}

const char *cr_head_get(const cr_head *h, const char *name)
{
    for (int i = 0; i < h->nfields; i++)
        if (strcasecmp(h->fields[i].name, name) == 0)
            return h->fields[i].value;
    return NULL;
}

int cr_head_count(const cr_head *h, const char *name)
{
    int n = 0;
    for (int i = 0; i < h->nfields; i++)
        n += strcasecmp(h->fields[i].name, name) == 0;
    return n;
}

/* p, a pointer into from's buffers, as the same place in to's. */
static const char *rebase(const char *p, const cr_head *from, cr_head *to)
{
    if (!p)
        return NULL;
    if (p >= from->buf && p < from->buf + sizeof from->buf)
        return to->buf + (p - from->buf);
    if (p >= from->args_buf && p < from->args_buf + sizeof from->args_buf)
        return to->args_buf + (p - from->args_buf);
    return p; /* a constant ("" for no query) */
}

void cr_head_copy(cr_head *to, const cr_head *from)
{
    memcpy(to, from, sizeof *to);
    to->method = rebase(from->method, from, to);
    to->path = rebase(from->path, from, to);
    to->query = rebase(from->query, from, to);
    to->version = rebase(from->version, from, to);
    for (int i = 0; i < from->nfields; i++)
        to->fields[i] = (cr_head_pair){rebase(from->fields[i].name, from, to), rebase(from->fields[i].value, from, to)};
    for (int i = 0; i < from->nargs; i++)
        to->args[i] = (cr_head_pair){rebase(from->args[i].name, from, to), rebase(from->args[i].value, from, to)};
}
