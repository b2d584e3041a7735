/* The error model of the API: every failure becomes one of these, then one JSON body
 * {"error": {"code", "message", "field"}} with its HTTP status. */
#ifndef CRUNCHD_ERROR_H
#define CRUNCHD_ERROR_H

#include <stdarg.h>

typedef struct {
    int http;          /* 400, 404, 413, 415, 422, 503, 507, ... */
    char code[32];     /* machine-readable: "invalid_json", "missing_field", "shape_mismatch", ... */
    char field[64];    /* the offending field ("a.data[3]", "b", "bins"); empty when none */
    char message[256]; /* for a human */
} cr_error;

/* Fills err and returns -1, so decoders can `return cr_fail(err, 400, ...)`. */
int cr_fail(cr_error *err, int http, const char *code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#endif
