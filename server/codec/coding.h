/* HTTP content codings (RFC 9110 §8.4.1) the daemon reads and writes: gzip (RFC 1952) and
 * deflate, which HTTP defines as the zlib format (RFC 1950). Pure text and bytes, no HTTP
 * library: body_inflate.h decodes request bodies, answer_deflate.h encodes answers. */
#ifndef CRUNCHD_CODING_H
#define CRUNCHD_CODING_H

#include "server/error.h"

typedef enum { CR_CODING_IDENTITY, CR_CODING_GZIP, CR_CODING_DEFLATE } cr_coding;

/* "identity", "gzip" or "deflate": the token for Content-Encoding. */
const char *cr_coding_name(cr_coding c);

/* A request's Content-Encoding: absent or "identity" (none), "gzip" or "x-gzip", "deflate"
 * (case-insensitive, spaces around allowed). Anything else, a list of codings included, is a
 * 415 unsupported_media_type naming Content-Encoding: -1 with err. */
int cr_coding_from_content_encoding(const char *value, cr_coding *out, cr_error *err);

/* The coding to answer with for an Accept-Encoding value: gzip or deflate, whichever has the
 * higher q (gzip on a tie), "*" standing for both when they are not named; identity when the
 * header is absent or neither is acceptable (q=0). */
cr_coding cr_coding_negotiate(const char *accept_encoding);

#endif
