/* Request bodies in gzip or deflate, decoded as they arrive (zlib's inflate): each chunk of the
 * wire is turned into decoded pieces of at most CR_INFLATE_PIECE bytes, handed to a sink that
 * counts them against the limits before anything grows. A stream that decodes to more than the
 * sink allows is stopped there: a decompression bomb costs the sink's limit, not its size. */
#ifndef CRUNCHD_BODY_INFLATE_H
#define CRUNCHD_BODY_INFLATE_H

#include <stddef.h>
#include <stdint.h>

#include "server/codec/coding.h"

#define CR_INFLATE_PIECE (64 * 1024)

/* Takes n decoded bytes; 0 to go on, nonzero to stop decoding (the feed returns 1). */
typedef int (*cr_inflate_sink)(void *cls, const char *data, size_t n);

typedef struct cr_inflater cr_inflater;

/* A decoder for gzip or deflate (zlib format); NULL when out of memory. About 110 KiB: zlib's
 * state and window, and one piece of output. */
cr_inflater *cr_inflater_new(cr_coding coding);

/* Decodes in[0, n) into the sink. 0 when all of it was used; 1 when the sink stopped it; -1
 * with err (400 invalid_encoding naming Content-Encoding, the byte where it went wrong) when
 * the data is not a valid stream of the coding. gzip may hold several members one after the
 * other (RFC 1952 §2.2, what `cat a.gz b.gz` makes); deflate has one stream, nothing after it. */
int cr_inflater_feed(cr_inflater *z, const void *in, size_t n, cr_inflate_sink sink, void *cls,
                     cr_error *err);

/* The body ended: -1 with err (400 invalid_encoding) unless its stream ended with it. */
int cr_inflater_finish(const cr_inflater *z, cr_error *err);

/* Bytes of the coded body used so far, and what they decoded to. */
uint64_t cr_inflater_in(const cr_inflater *z);
uint64_t cr_inflater_out(const cr_inflater *z);

void cr_inflater_free(cr_inflater *z);

#endif
