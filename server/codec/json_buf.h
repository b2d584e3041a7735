/* JSON text built in a growable buffer: escaped strings, fast numbers (numfmt.c), raw bytes.
 * After a failed allocation every append is a no-op and cr_jbuf_finish says so once; the
 * encoders write their documents without checking each step. */
#ifndef CRUNCHD_JSON_BUF_H
#define CRUNCHD_JSON_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

typedef struct {
    char *p;
    size_t len, cap;
    bool failed;
} cr_jbuf;

/* Room for extra more bytes (and a NUL); false after any failure. */
bool cr_jbuf_reserve(cr_jbuf *b, size_t extra);
void cr_jbuf_put(cr_jbuf *b, const void *s, size_t n);
void cr_jbuf_lit(cr_jbuf *b, const char *s);
/* A JSON string; bytes that are not UTF-8 become U+FFFD so the text always parses. */
void cr_jbuf_string(cr_jbuf *b, const char *s);
/* "name": with the comma that separates it from a previous member. */
void cr_jbuf_key(cr_jbuf *b, const char *name, bool first);
void cr_jbuf_f64(cr_jbuf *b, double v);
void cr_jbuf_f32(cr_jbuf *b, float v);
void cr_jbuf_u64(cr_jbuf *b, uint64_t v);
/* [v0,v1,...]: n numbers of dt (float32, uint64, else float64), room reserved for a block of
 * them at a time. */
void cr_jbuf_numbers(cr_jbuf *b, const void *data, uint64_t n, cr_dtype dt);
/* Hands the text over (NUL-terminated, *len without the NUL), or frees it all after a failure
 * and returns NULL. */
char *cr_jbuf_finish(cr_jbuf *b, size_t *len);

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 when invalid: JSON strings we
 * write must be valid UTF-8 whatever the client sent. */
size_t cr_utf8_len(const unsigned char *s, size_t n);

#endif
