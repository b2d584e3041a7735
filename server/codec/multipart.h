/* multipart/form-data bodies (RFC 7578 over RFC 2046), parsed as they stream in.
 *
 * Why ours and not libmicrohttpd's post processor: that one copies every byte of a part through
 * its own buffer (allocated and zeroed per request, 64 KiB here) and examines it there; this one
 * finds the delimiter with memmem in the bytes as they arrive and hands the caller pointers into
 * them, so a part's bytes are copied once, into their array. No allocation: the state, the
 * boundary and a part's headers live in the struct.
 *
 * The grammar taken: an optional preamble, then "--boundary" parts, each "CRLF headers CRLF CRLF
 * data" and ended by "CRLF--boundary" (whitespace may follow a delimiter before its CRLF), then
 * "--" and an ignored epilogue. A part's Content-Disposition gives its name (and filename);
 * other part headers are ignored. Errors name what is wrong; a body cut short is an error at
 * cr_multipart_finish. */
#ifndef CRUNCHD_MULTIPART_H
#define CRUNCHD_MULTIPART_H

#include <stdbool.h>
#include <stddef.h>

#define CR_MP_BOUNDARY_MAX 70       /* RFC 2046 */
#define CR_MP_DELIM_MAX (CR_MP_BOUNDARY_MAX + 4) /* CRLF "--" boundary */
#define CR_MP_HEADERS_MAX 4096      /* a part's header block */
#define CR_MP_NAME_MAX 128

typedef struct {
    /* A part starts (its headers read): nonzero refuses it and stops the parse. */
    int (*part)(void *cls, const char *name, const char *filename);
    /* The next bytes of the current part, in order: nonzero stops the parse. */
    int (*data)(void *cls, const char *bytes, size_t n);
    void *cls;
} cr_mp_sink;

typedef struct {
    cr_mp_sink sink;
    int state;
    char delim[CR_MP_DELIM_MAX]; /* CRLF "--" boundary */
    size_t delim_len;
    size_t matched;              /* bytes of delim seen so far (held back, not yet data) */
    char head[CR_MP_HEADERS_MAX];
    size_t head_len;
    int parts;
    char why[160];               /* what is wrong, once cr_multipart_feed or _finish fails */
} cr_multipart;

/* Starts a parse of a body of this Content-Type; -1 (why says) when it is not multipart with a
 * usable boundary parameter. */
int cr_multipart_init(cr_multipart *m, const char *content_type, cr_mp_sink sink);

/* The next n bytes of the body. -1 when the body is malformed (why says) or a sink refused
 * (why is empty: the sink knows). */
int cr_multipart_feed(cr_multipart *m, const char *bytes, size_t n);

/* The body has ended: -1 (why says) unless the closing delimiter was seen. */
int cr_multipart_finish(cr_multipart *m);

#endif
