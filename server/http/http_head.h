/* A request's head (request line and header fields) parsed from bytes we read ourselves: the
 * Unix socket's acceptor peeks at each connection's first request to decide who serves it
 * (acceptor.c). Strict on purpose: a head it does not fully understand is not an error here,
 * only "not ours", and libmicrohttpd gets the connection and answers it as it always does. */
#ifndef CRUNCHD_HTTP_HTTP_HEAD_H
#define CRUNCHD_HTTP_HTTP_HEAD_H

#include <stddef.h>

#define CR_HEAD_MAX 8192   /* bytes, final CRLF CRLF included */
#define CR_HEAD_FIELDS 64
#define CR_HEAD_ARGS 32

typedef struct {
    const char *name, *value;
} cr_head_pair;

typedef struct {
    char buf[CR_HEAD_MAX + 1];       /* the head, split in place into NUL-terminated strings */
    char args_buf[CR_HEAD_MAX + 1];  /* the query string, split and unescaped */
    size_t len;                      /* the head's bytes on the wire */
    const char *method, *path, *query, *version; /* query: after '?', "" when none */
    cr_head_pair fields[CR_HEAD_FIELDS];
    int nfields;
    cr_head_pair args[CR_HEAD_ARGS]; /* the query's key=value pairs, as libmicrohttpd decodes
                                        them ('+' is a space, %XX a byte); value NULL for "key" */
    int nargs;
} cr_head;

/* 1: data starts with a whole head, parsed into out (out->len bytes of data); 0: not yet whole
 * (fewer than CR_HEAD_MAX bytes and no blank line yet); -1: not a head we take (malformed, longer
 * than CR_HEAD_MAX, more than CR_HEAD_FIELDS fields or CR_HEAD_ARGS query pairs, folded lines,
 * bare LF, control bytes, anything but HTTP/1.1). */
int cr_head_parse(const char *data, size_t n, cr_head *out);

/* The value of field name (case-insensitive), NULL when absent; the first when repeated. */
const char *cr_head_get(const cr_head *h, const char *name);
/* How many times field name occurs. */
int cr_head_count(const cr_head *h, const char *name);
/* A copy of from that points into its own buffers (a plain struct copy would point into
 * from's). */
void cr_head_copy(cr_head *to, const cr_head *from);

#endif
