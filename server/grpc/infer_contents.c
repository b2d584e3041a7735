/* Typed contents as raw bytes; see infer_contents.h. */
#include "server/grpc/infer_contents.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "raw tensor bytes are little-endian; these arrays are used as they are"
#endif

/* Which field carries which datatypes, and the element size it becomes. */
typedef enum { F_BOOL, F_INT, F_INT64, F_UINT, F_UINT64, F_FP32, F_FP64, F_BYTES, F_COUNT } field;

static const char *const field_names[F_COUNT] = {"bool_contents", "int_contents", "int64_contents",
                                                 "uint_contents", "uint64_contents", "fp32_contents",
                                                 "fp64_contents", "bytes_contents"};

static const struct {
    const char *dt;
    field f;
    size_t size;
    int64_t lo, hi; /* the range of the narrowed ones */
} types[] = {
    {"INT8", F_INT, 1, INT8_MIN, INT8_MAX},     {"INT16", F_INT, 2, INT16_MIN, INT16_MAX},
    {"INT32", F_INT, 4, 0, 0},                  {"INT64", F_INT64, 8, 0, 0},
    {"UINT8", F_UINT, 1, 0, UINT8_MAX},         {"UINT16", F_UINT, 2, 0, UINT16_MAX},
    {"UINT32", F_UINT, 4, 0, 0},                {"UINT64", F_UINT64, 8, 0, 0},
    {"FP32", F_FP32, 4, 0, 0},                  {"FP64", F_FP64, 8, 0, 0},
};

static size_t count_of(const Inference__InferTensorContents *t, field f)
{
    const size_t n[F_COUNT] = {t->n_bool_contents, t->n_int_contents,  t->n_int64_contents, t->n_uint_contents,
                               t->n_uint64_contents, t->n_fp32_contents, t->n_fp64_contents, t->n_bytes_contents};
    return n[f];
}

static const void *values_of(const Inference__InferTensorContents *t, field f)
{
    const void *p[F_COUNT] = {t->bool_contents,   t->int_contents,  t->int64_contents, t->uint_contents,
                              t->uint64_contents, t->fp32_contents, t->fp64_contents,  t->bytes_contents};
    return p[f];
}

/* int32/uint32 values into size-byte elements, each in [lo, hi]. */
static int narrow(const void *src, size_t n, bool is_signed, size_t size, int64_t lo, int64_t hi, const char *dt,
                  const char *input, void **owned, cr_error *err)
{
    uint8_t *out = malloc(n * size + 1);
    if (!out)
        return cr_fail(err, 503, "host_memory", "", "out of memory");
    for (size_t i = 0; i < n; i++) {
        int64_t v = is_signed ? ((const int32_t *)src)[i] : (int64_t)((const uint32_t *)src)[i];
        if (v < lo || v > hi) {
            free(out);
            return cr_fail(err, 400, "invalid_field", input, "input %s: contents value %zu (%lld) is out of %s's range",
                           input, i, (long long)v, dt);
        }
        memcpy(out + i * size, &v, size); /* the low bytes: little-endian */
    }
    *owned = out;
    return 0;
}

int cr_grpc_contents_bytes(const Inference__InferTensorContents *t, const char *dt, const char *input,
                           const void **bytes, size_t *len, void **owned, cr_error *err)
{
    *owned = NULL;
    size_t k = 0;
    while (k < sizeof types / sizeof types[0] && strcmp(types[k].dt, dt) != 0)
        k++;
    if (k == sizeof types / sizeof types[0])
        return cr_fail(err, 400, "invalid_field", input, "input %s: %s values have no contents field; send them in "
                       "raw_input_contents", input, dt);
    field f = types[k].f;
    for (int g = 0; g < F_COUNT; g++)
        if ((field)g != f && count_of(t, (field)g))
            return cr_fail(err, 400, "invalid_field", input, "input %s is %s: its values go in %s, not %s", input, dt,
                           field_names[f], field_names[g]);
    size_t n = count_of(t, f), size = types[k].size;
    *len = n * size;
    if (types[k].hi == 0) { /* the array is the bytes */
        *bytes = values_of(t, f);
        return 0;
    }
    if (narrow(values_of(t, f), n, f == F_INT, size, types[k].lo, types[k].hi, dt, input, owned, err) < 0)
        return -1;
    *bytes = *owned;
    return 0;
}
