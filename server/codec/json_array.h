/* N-dimensional numeric arrays of a JSON request (stacks of matrices, vectors), in every form a
 * client may send one:
 *   {"rows": R, "cols": C, "data": [flat]}   a matrix (json_matrix.h)
 *   {"shape": [d0, d1, ...], "data": [flat]} any rank, row-major (C order)
 *   [[...], ...]                             nested lists of any depth: the depth is the rank
 *   [x, y, ...]                              a flat list: a vector (rank 1)
 * Measuring (shape and element count, against the limits) is separate from filling, as for
 * matrices: nothing is allocated before every size is known. Private to the JSON decoders. */
#ifndef CRUNCHD_JSON_ARRAY_H
#define CRUNCHD_JSON_ARRAY_H

#include <cjson/cJSON.h>

#include "server/codec/json_matrix.h"
#include "server/shape.h"

typedef struct {
    const char *name;
    cr_shape shape;
    enum { CR_JA_MATRIX, CR_JA_FLAT, CR_JA_DEEP } form;
    cr_jmatrix m;         /* CR_JA_MATRIX: the dict form or a 2-D list of rows */
    const cJSON *data;    /* CR_JA_FLAT: the flat list; CR_JA_DEEP: the outermost list */
    bool in_data;         /* the flat list is the "data" of {"shape", "data"} */
    const cr_jfast *fast;
} cr_jarray;

/* Reads node's form and shape; its elements against lim->max_elements (413 naming name). */
int cr_jarray_measure(const cr_jfast *fast, const cJSON *node, const char *name, const cr_limits *lim,
                      cr_jarray *out, cr_error *err);
/* The same from a shape node and a data node (the fields of a larger object: POST /v1/tensors). */
int cr_jarray_measure_shaped(const cr_jfast *fast, const cJSON *shape, const cJSON *data, const char *name,
                             const cr_limits *lim, cr_jarray *out, cr_error *err);
/* Every element into dst (as many as the shape's count, of dt), row-major. */
int cr_jarray_fill(const cr_jarray *a, cr_dtype dt, void *dst, cr_error *err);

#endif
