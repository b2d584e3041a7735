/* Numeric arrays of a JSON request: shape checks first, then one conversion pass per array. */
#include "server/codec/json_matrix.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/half.h"

/* Identifies one element for messages: "a.data[7]" (flat) or "a[2][3]" (nested, j >= 0). */
typedef struct {
    const char *prefix;
    int64_t i, j;
} elem_path;

static const char *path_text(const elem_path *p, char *buf, size_t cap)
{
    if (p->j >= 0)
        snprintf(buf, cap, "%s[%lld][%lld]", p->prefix, (long long)p->i, (long long)p->j);
    else
        snprintf(buf, cap, "%s[%lld]", p->prefix, (long long)p->i);
    return buf;
}

const char *cr_json_type_name(const cJSON *n)
{
    if (!n)
        return "nothing";
    if (cJSON_IsNumber(n))
        return "a number";
    if (cJSON_IsString(n))
        return "a string";
    if (cJSON_IsBool(n))
        return "a boolean";
    if (cJSON_IsNull(n))
        return "null";
    if (cJSON_IsArray(n))
        return "a list";
    if (cJSON_IsObject(n))
        return "an object";
    return "an unknown value";
}

/* One number into dst[at]: finiteness and (for U8) range checked. */
static int put_value(double v, cr_dtype dt, void *dst, int64_t at, const elem_path *p,
                     cr_error *err)
{
    char where[96];
    if (!isfinite(v))
        return cr_fail(err, 400, "non_finite", path_text(p, where, sizeof where),
                       "%s is not a finite number", where);
    switch (dt) {
    case CR_DT_F32: {
        float f = (float)v;
        if (!isfinite(f))
            return cr_fail(err, 400, "non_finite", path_text(p, where, sizeof where),
                           "%s = %g does not fit float32", where, v);
        ((float *)dst)[at] = f;
        return 0;
    }
    case CR_DT_F64:
        ((double *)dst)[at] = v;
        return 0;
    case CR_DT_F16:
    case CR_DT_BF16: { /* rounded once from the double, as numpy rounds a Python float */
        uint16_t h = cr_half_from_double(dt, v);
        if (!isfinite(cr_half_to_float(dt, h)))
            return cr_fail(err, 400, "non_finite", path_text(p, where, sizeof where),
                           "%s = %g does not fit %s (largest %g)", where, v, cr_dtype_name(dt), cr_half_max(dt));
        ((uint16_t *)dst)[at] = h;
        return 0;
    }
    case CR_DT_U8:
        if (!(v >= 0 && v <= 255 && v == floor(v)))
            return cr_fail(err, 400, "invalid_field", path_text(p, where, sizeof where),
                           "%s = %g is not a uint8 (an integer 0..255)", where, v);
        ((uint8_t *)dst)[at] = (uint8_t)v;
        return 0;
    default:
        return cr_fail(err, 500, "internal", "dtype", "unexpected dtype %s for JSON numbers",
                       cr_dtype_name(dt));
    }
}

/* One element into dst[at]: a number, then as put_value. */
static int put_element(const cJSON *e, cr_dtype dt, void *dst, int64_t at, const elem_path *p,
                       cr_error *err)
{
    char where[96];
    if (!cJSON_IsNumber(e))
        return cr_fail(err, 400, "invalid_field", path_text(p, where, sizeof where),
                       "%s must be a number, got %s", where, cr_json_type_name(e));
    return put_value(e->valuedouble, dt, dst, at, p, err);
}

/* n numbers of a span from *q into dst[at..], *q left past the last; *index (p->i or p->j)
 * names the element in an error. One loop per dtype: this is the hot path of JSON requests. */
static int put_numbers(cr_jnums *q, int64_t n, cr_dtype dt, void *dst, int64_t at,
                       elem_path *p, int64_t *index, cr_error *err)
{
    if (dt == CR_DT_F32) {
        float *d = (float *)dst + at;
        for (int64_t k = 0; k < n; k++) {
            double v = cr_jnums_next(q);
            float x = (float)v;
            if (!isfinite(x)) /* also catches a non-finite v */
                return *index = k, put_value(v, dt, dst, at + k, p, err);
            d[k] = x;
        }
        return 0;
    }
    if (dt == CR_DT_U8) { /* histogram data: exact integers 0..255, or put_value's error */
        uint8_t *d = (uint8_t *)dst + at;
        for (int64_t k = 0; k < n; k++) {
            double v = cr_jnums_next(q);
            if (!(v >= 0 && v <= 255 && v == (double)(int)v))
                return *index = k, put_value(v, dt, dst, at + k, p, err);
            d[k] = (uint8_t)v;
        }
        return 0;
    }
    if (dt == CR_DT_F64) {
        double *d = (double *)dst + at;
        for (int64_t k = 0; k < n; k++) {
            double v = cr_jnums_next(q);
            if (!isfinite(v))
                return *index = k, put_value(v, dt, dst, at + k, p, err);
            d[k] = v;
        }
        return 0;
    }
    for (int64_t k = 0; k < n; k++) {
        *index = k;
        if (put_value(cr_jnums_next(q), dt, dst, at + k, p, err) != 0)
            return -1;
    }
    return 0;
}

/* A flat span's numbers into dst[at..]. */
static int put_span(const cr_jfast *f, const cr_jspan *s, cr_dtype dt, void *dst, int64_t at,
                    elem_path *p, int64_t *index, cr_error *err)
{
    cr_jnums q = cr_jspan_numbers(f, s);
    return put_numbers(&q, s->count, dt, dst, at, p, index, err);
}

int cr_jrows_fill_in(const cr_jfast *f, const cr_jspan *s, const char *prefix, cr_dtype dt,
                     void *dst, cr_error *err)
{
    elem_path p = {prefix, 0, 0};
    if (s->odd_row >= 0) /* the shape check refuses these first: a bug */
        return cr_fail(err, 500, "internal", prefix, "%s has rows of unequal length", prefix);
    cr_jnums q = cr_jspan_numbers(f, s);
    for (; p.i < s->rows; p.i++) {
        cr_jnums_row(&q);
        if (put_numbers(&q, s->cols, dt, dst, p.i * s->cols, &p, &p.j, err) != 0)
            return -1;
    }
    return 0;
}

/* Element 0 of a list of rows where a number was wanted: what put_element says of a list. */
static int row_not_number(const elem_path *p, cr_error *err)
{
    char where[96];
    return cr_fail(err, 400, "invalid_field", path_text(p, where, sizeof where),
                   "%s must be a number, got a list", where);
}

int64_t cr_jlist_count(const cJSON *node, const char *path, cr_error *err)
{
    return cr_jlist_count_in(NULL, node, path, err);
}

int cr_jlist_fill(const cJSON *list, const char *path, int64_t count, cr_dtype dt, void *dst,
                  cr_error *err)
{
    return cr_jlist_fill_in(NULL, list, path, count, dt, dst, err);
}

int64_t cr_jlist_count_in(const cr_jfast *fast, const cJSON *node, const char *path, cr_error *err)
{
    const cr_jspan *s = cr_jfast_find(fast, node);
    if (s)
        return s->rows ? s->rows : s->count;
    if (!cJSON_IsArray(node))
        return cr_fail(err, 400, "invalid_field", path, "%s must be a list of numbers, got %s",
                       path, cr_json_type_name(node));
    int64_t n = 0;
    for (const cJSON *e = node->child; e; e = e->next)
        n++;
    return n;
}

int cr_jlist_fill_in(const cr_jfast *fast, const cJSON *list, const char *path, int64_t count,
                     cr_dtype dt, void *dst, cr_error *err)
{
    elem_path p = {path, 0, -1};
    const cr_jspan *s = cr_jfast_find(fast, list);
    if (s) {
        if ((s->rows ? s->rows : s->count) != count) /* measured from the same span: a bug */
            return cr_fail(err, 500, "internal", path, "%s changed length while decoding", path);
        return s->rows ? row_not_number(&p, err) : put_span(fast, s, dt, dst, 0, &p, &p.i, err);
    }
    const cJSON *e = list->child;
    for (; e && p.i < count; e = e->next, p.i++)
        if (put_element(e, dt, dst, p.i, &p, err) != 0)
            return -1;
    if (e || p.i != count) /* the list changed length since it was measured: a bug */
        return cr_fail(err, 500, "internal", path, "%s changed length while decoding", path);
    return 0;
}

/* rows / cols of the dict form: integers >= 1; absurdly large ones are a size problem. */
static int read_dim(const cJSON *obj, const char *name, const char *key, int64_t *out,
                    cr_error *err)
{
    char field[64];
    snprintf(field, sizeof field, "%s.%s", name, key);
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!n)
        return cr_fail(err, 400, "missing_field", field, "%s is required", field);
    if (!cJSON_IsNumber(n))
        return cr_fail(err, 400, "invalid_field", field, "%s must be an integer, got %s", field,
                       cr_json_type_name(n));
    double v = n->valuedouble;
    if (!isfinite(v))
        return cr_fail(err, 400, "non_finite", field, "%s is not a finite number", field);
    if (v != floor(v) || v < 1)
        return cr_fail(err, 400, "invalid_field", field, "%s must be an integer >= 1, got %g",
                       field, v);
    if (v > 9007199254740992.0) /* 2^53: past any limit, and past exact integers */
        return cr_fail(err, 413, "too_large", name, "%s = %g is over any size limit", field, v);
    *out = (int64_t)v;
    return 0;
}

static int check_elements(const cr_jmatrix *m, const cr_limits *lim, cr_error *err)
{
    uint64_t n;
    if (__builtin_mul_overflow((uint64_t)m->rows, (uint64_t)m->cols, &n) || n > lim->max_elements)
        return cr_fail(err, 413, "too_large", m->name,
                       "%s is %lld x %lld, over the limit of %llu elements per array", m->name,
                       (long long)m->rows, (long long)m->cols,
                       (unsigned long long)lim->max_elements);
    return 0;
}

/* The dict form's members: rows, cols and data, each once (cJSON would quietly read the first
 * of two, so {"rows": 2, "rows": 3} is refused rather than guessed at). */
static int check_dict_members(const cJSON *obj, const char *name, cr_error *err)
{
    static const char *const known[] = {"rows", "cols", "data"};
    char field[64];
    unsigned seen = 0;
    for (const cJSON *f = obj->child; f; f = f->next) {
        unsigned k = 0;
        while (k < 3 && strcmp(f->string, known[k]) != 0)
            k++;
        snprintf(field, sizeof field, "%s.%s", name, f->string);
        if (k == 3)
            return cr_fail(err, 400, "invalid_field", field,
                           "unknown field \"%s\" in matrix %s (expected rows, cols, data)",
                           f->string, name);
        if (seen & (1u << k))
            return cr_fail(err, 400, "invalid_field", field,
                           "field \"%s\" appears twice in matrix %s", f->string, name);
        seen |= 1u << k;
    }
    return 0;
}

static int measure_dict(const cJSON *obj, const char *name, const cr_limits *lim, cr_jmatrix *m,
                        cr_error *err)
{
    char field[64];
    if (check_dict_members(obj, name, err))
        return -1;
    if (read_dim(obj, name, "rows", &m->rows, err) || read_dim(obj, name, "cols", &m->cols, err))
        return -1;
    if (check_elements(m, lim, err))
        return -1;
    snprintf(field, sizeof field, "%s.data", name);
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(obj, "data");
    if (!data)
        return cr_fail(err, 400, "missing_field", field, "%s is required", field);
    int64_t count = cr_jlist_count_in(m->fast, data, field, err);
    if (count < 0)
        return -1;
    if (count != m->rows * m->cols)
        return cr_fail(err, 400, "invalid_field", field,
                       "%s has %lld numbers, but rows x cols = %lld x %lld = %lld", field,
                       (long long)count, (long long)m->rows, (long long)m->cols,
                       (long long)(m->rows * m->cols));
    m->data = data;
    m->nested = 0;
    return 0;
}

/* The nested form as a span: the same checks, in the same order, from what the scan kept (row 0's
 * length, the first row of another). */
static int measure_span_rows(const cr_jspan *s, const char *name, const cr_limits *lim,
                             cr_jmatrix *m, cr_error *err)
{
    char field[64];
    if (!s->rows)
        return cr_fail(err, 400, "invalid_field", name,
                       "%s must be a 2-D list of rows (or {\"rows\",\"cols\",\"data\"}); "
                       "a 1-D list is not a matrix", name);
    int64_t bad = s->cols == 0 ? 0 : s->odd_row, len = s->cols == 0 ? 0 : s->odd_len;
    snprintf(field, sizeof field, "%s[%lld]", name, (long long)bad);
    if (bad >= 0 && len == 0)
        return cr_fail(err, 400, "invalid_field", field, "%s is an empty row", field);
    if (bad >= 0)
        return cr_fail(err, 400, "invalid_field", field,
                       "%s has %lld numbers but %s[0] has %lld: rows must be equally long",
                       field, (long long)len, name, (long long)s->cols);
    m->rows = s->rows;
    m->cols = s->cols;
    m->nested = 1;
    return check_elements(m, lim, err);
}

static int measure_nested(const cJSON *list, const char *name, const cr_limits *lim,
                          cr_jmatrix *m, cr_error *err)
{
    char field[64];
    const cr_jspan *s = cr_jfast_find(m->fast, list);
    m->data = list;
    if (s)
        return measure_span_rows(s, name, lim, m, err);
    const cJSON *first = list->child;
    if (!first)
        return cr_fail(err, 400, "invalid_field", name, "%s is an empty list; a matrix needs rows",
                       name);
    if (!cJSON_IsArray(first))
        return cr_fail(err, 400, "invalid_field", name,
                       "%s must be a 2-D list of rows (or {\"rows\",\"cols\",\"data\"}); "
                       "a 1-D list is not a matrix", name);
    int64_t rows = 0, cols = -1;
    for (const cJSON *row = first; row; row = row->next, rows++) {
        snprintf(field, sizeof field, "%s[%lld]", name, (long long)rows);
        int64_t n = cr_jlist_count_in(m->fast, row, field, err);
        if (n < 0)
            return -1;
        if (n == 0)
            return cr_fail(err, 400, "invalid_field", field, "%s is an empty row", field);
        if (cols >= 0 && n != cols)
            return cr_fail(err, 400, "invalid_field", field,
                           "%s has %lld numbers but %s[0] has %lld: rows must be equally long",
                           field, (long long)n, name, (long long)cols);
        cols = n;
    }
    m->rows = rows;
    m->cols = cols;
    m->data = list;
    m->nested = 1;
    return check_elements(m, lim, err);
}

int cr_jmatrix_measure(const cJSON *node, const char *name, const cr_limits *lim,
                       cr_jmatrix *out, cr_error *err)
{
    return cr_jmatrix_measure_in(NULL, node, name, lim, out, err);
}

int cr_jmatrix_measure_in(const cr_jfast *fast, const cJSON *node, const char *name,
                          const cr_limits *lim, cr_jmatrix *out, cr_error *err)
{
    memset(out, 0, sizeof *out);
    out->name = name;
    out->fast = fast;
    if (cJSON_IsObject(node))
        return measure_dict(node, name, lim, out, err);
    if (cJSON_IsArray(node))
        return measure_nested(node, name, lim, out, err);
    return cr_fail(err, 400, "invalid_field", name,
                   "%s must be a matrix: {\"rows\",\"cols\",\"data\"} or a list of rows, got %s",
                   name, cr_json_type_name(node));
}

int cr_jmatrix_fill(const cr_jmatrix *m, cr_dtype dt, void *dst, cr_error *err)
{
    char field[64];
    if (!m->nested) {
        snprintf(field, sizeof field, "%s.data", m->name);
        return cr_jlist_fill_in(m->fast, m->data, field, m->rows * m->cols, dt, dst, err);
    }
    const cr_jspan *rows = cr_jfast_find(m->fast, m->data);
    if (rows)
        return cr_jrows_fill_in(m->fast, rows, m->name, dt, dst, err);
    elem_path p = {m->name, 0, 0};
    int64_t at = 0;
    for (const cJSON *row = m->data->child; row; row = row->next, p.i++) {
        p.j = 0;
        const cr_jspan *s = cr_jfast_find(m->fast, row);
        if (s && s->rows) /* a row that is a list of lists */
            return row_not_number(&p, err);
        if (s) {
            if (at + s->count > m->rows * m->cols)
                break; /* the shape check below reports it */
            if (put_span(m->fast, s, dt, dst, at, &p, &p.j, err) != 0)
                return -1;
            at += s->count;
            continue;
        }
        for (const cJSON *e = row->child; e; e = e->next, p.j++, at++)
            if (put_element(e, dt, dst, at, &p, err) != 0)
                return -1;
    }
    if (at != m->rows * m->cols)
        return cr_fail(err, 500, "internal", m->name, "%s changed shape while decoding", m->name);
    return 0;
}
