/* Answers compressed as they are sent (zlib's deflate): the encoder reads the answer's bytes
 * from where they already are (one buffer, or a .npy header and the job's output) and fills
 * whatever room the sender gives it, so a big answer is never held twice. */
#ifndef CRUNCHD_ANSWER_DEFLATE_H
#define CRUNCHD_ANSWER_DEFLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "server/codec/coding.h"

/* Answers smaller than this go as they are: the headers would cost more than the savings. */
#define CR_DEFLATE_MIN_BYTES 1024

typedef struct {
    const void *p;
    size_t n;
} cr_span;

typedef struct cr_deflater cr_deflater;

/* Whether answers of this Content-Type are worth compressing: JSON, text (metrics), YAML, .npy
 * and the raw tensors of KServe's binary extension (tritonclient asks for gzip on them). */
bool cr_deflate_worth_it(const char *content_type, size_t bytes);

/* An encoder of up to 2 spans (read in place: they must outlive it) in gzip or deflate (zlib
 * format) at level 1..9; NULL when out of memory. About 270 KiB of zlib state at level 1. */
cr_deflater *cr_deflater_new(cr_coding coding, int level, const cr_span *spans, int n);

/* Up to max compressed bytes into out: how many (> 0), 0 once everything was written, -1 on a
 * zlib error. */
ssize_t cr_deflater_read(cr_deflater *d, char *out, size_t max);

void cr_deflater_free(cr_deflater *d);

#endif
