/* Decoding numeric arrays out of a parsed JSON request: matrices in either form
 * ({"rows","cols","data"} or a list of rows) and flat number lists, converted on the fly into
 * one buffer of the request's dtype. Measuring is separate from filling so that every size can
 * be checked against the limits before any memory is spent on it. Private to the JSON decoder. */
#ifndef CRUNCHD_JSON_MATRIX_H
#define CRUNCHD_JSON_MATRIX_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "server/codec/json_fastarray.h"
#include "server/request.h"

/* Where a matrix's numbers are: one flat list (dict form) or a list of row lists (nested). */
typedef struct {
    const char *name;     /* the field, for errors: "a" */
    int64_t rows, cols;
    const cJSON *data;    /* dict form: the "data" list; nested form: the outer list */
    int nested;
    const cr_jfast *fast;  /* the body's numeric spans (NULL: none): arrays cJSON never saw */
} cr_jmatrix;

/* Validates the matrix's form and declared shape, checks rows*cols against lim->max_elements
 * (413 too_large before anything is allocated) and that the data length matches. */
int cr_jmatrix_measure(const cJSON *node, const char *name, const cr_limits *lim,
                       cr_jmatrix *out, cr_error *err);

/* The same, where the document's long numeric arrays went through the fast path (fast). */
int cr_jmatrix_measure_in(const cr_jfast *fast, const cJSON *node, const char *name,
                          const cr_limits *lim, cr_jmatrix *out, cr_error *err);

/* Converts every element into dst (rows*cols elements of dt, F32 or F64), row-major. */
int cr_jmatrix_fill(const cr_jmatrix *m, cr_dtype dt, void *dst, cr_error *err);

/* Number of elements of a flat number list, or -1 (invalid_field `path`) when not a list. */
int64_t cr_jlist_count(const cJSON *node, const char *path, cr_error *err);

/* Converts a flat list of count numbers into dst (F32, F64, or U8 with integers 0..255);
 * errors name the element as "<path>[i]". */
int cr_jlist_fill(const cJSON *list, const char *path, int64_t count, cr_dtype dt, void *dst,
                  cr_error *err);

/* The same two, for a document scanned by cr_jfast_scan (fast may be NULL). */
int64_t cr_jlist_count_in(const cr_jfast *fast, const cJSON *node, const char *path, cr_error *err);
int cr_jlist_fill_in(const cr_jfast *fast, const cJSON *list, const char *path, int64_t count,
                     cr_dtype dt, void *dst, cr_error *err);

/* A list of rows held by a span (s->rows > 0, every row s->cols long: measured) into dst,
 * row-major; errors name the element as "<prefix>[i][j]". */
int cr_jrows_fill_in(const cr_jfast *f, const cr_jspan *s, const char *prefix, cr_dtype dt,
                     void *dst, cr_error *err);

/* The JSON type of a node in words, for messages ("a string", "null", ...). */
const char *cr_json_type_name(const cJSON *node);

/* Where JSON text holds a control character JSON forbids (raw, or "\u0000" in a string, which
 * cJSON would let through and C strings would cut short); NULL when none. */
const char *cr_json_stray_control(const char *s, size_t n);

/* body[0..len) as one JSON document through the fast path (cr_jfast_scan, then cJSON on what is
 * left): NULL with a 400 invalid_json naming the byte (or 413/503) when it is empty, not JSON,
 * holds a stray control character or has bytes after the value. `what` names the document in
 * messages ("the request body"); trailing_hint (or NULL) is added to the trailing-bytes one. */
cJSON *cr_json_parse_document(const char *body, size_t len, cr_jfast *fast, const char *what,
                              const char *trailing_hint, cr_error *err);

#endif
