/* The .npy format (numpy's NEP 1): reading a header strictly, writing one for results.
 *
 * A file is: magic "\x93NUMPY", major, minor, header length (2 bytes little-endian in 1.0, 4 in
 * 2.0 and 3.0), then the header, a Python dict literal such as
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 * padded with spaces and ended by '\n', then the raw array bytes. The parser accepts exactly
 * that dict (keys in any order, each once) and refuses anything else, naming the part. */
#ifndef CRUNCHD_NPY_H
#define CRUNCHD_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"
#include "server/error.h"

#define CR_NPY_MAX_DIMS 32
#define CR_NPY_MAX_HEADER (64u << 10) /* the dict's length; numpy's own limit is 10000 by default */
#define CR_NPY_PREAMBLE_MAX 12        /* magic + version + 4-byte length */

typedef struct {
    int major, minor;
    cr_dtype dtype;
    bool fortran_order;
    int ndim;
    int64_t shape[CR_NPY_MAX_DIMS];
    uint64_t count;      /* product of shape (1 for rank 0) */
    uint64_t data_bytes; /* count * element size */
    size_t header_bytes; /* everything before the data: preamble + dict */
} cr_npy_header;

typedef enum { CR_NPY_OK = 0, CR_NPY_MORE = 1, CR_NPY_BAD = -1 } cr_npy_status;

/* Parses the header at the start of buf[0..len). CR_NPY_MORE: *need is how many bytes in total
 * it needs to decide (call again with at least that many). CR_NPY_BAD: err says why, with field
 * `part` (400 invalid_field; 413 too_large when the header or the shape is over a limit).
 * Shape products are overflow-checked here; limits on them are the caller's. */
cr_npy_status cr_npy_parse_header(const uint8_t *buf, size_t len, const char *part,
                                  cr_npy_header *out, size_t *need, cr_error *err);

/* The dict of a header alone (no preamble): for the parser's tests and fuzzing. */
int cr_npy_parse_dict(const char *s, size_t len, const char *part, cr_npy_header *out,
                      cr_error *err);

/* The numpy descr of a dtype ('<f4', '|u1', ...). */
const char *cr_npy_descr(cr_dtype dt);

/* Writes a version 1.0 header (C order) for an array of dt and shape into out, padded with
 * spaces so the data starts at a multiple of 64 bytes; returns its length, 0 when it does not
 * fit in cap (CR_NPY_WRITE_MAX is enough for any rank <= 8, every dimension up to 2^63). */
#define CR_NPY_WRITE_MAX 384
size_t cr_npy_write_header(char *out, size_t cap, cr_dtype dt, int ndim, const int64_t *shape);

#endif
