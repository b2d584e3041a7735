/* N-dimensional JSON arrays; see json_array.h. The innermost two levels of a nested list are what
 * the fast path keeps as spans (json_fastarray.h: a flat list, or a list of rows); the levels above
 * them are ordinary cJSON lists whose elements are such spans, so a stack of 100,000 small matrices
 * costs a span each, not a node per number. */
#include "server/codec/json_array.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define MAX_EXACT 9007199254740992.0 /* 2^53 */

static int check_count(cr_jarray *a, const cr_limits *lim, cr_error *err)
{
    uint64_t n = cr_shape_count(&a->shape);
    char text[160];
    if (n > lim->max_elements) {
        cr_shape_format(&a->shape, text, sizeof text);
        return cr_fail(err, 413, "too_large", a->name, "%s has shape %s, over the limit of %llu elements per array",
                       a->name, text, (unsigned long long)lim->max_elements);
    }
    return 0;
}

/* ---- {"shape": [...], "data": [...]} ---------------------------------------------------------- */

static int read_shape(const cr_jfast *fast, const cJSON *shape, const char *name, cr_shape *out, cr_error *err)
{
    char field[64];
    snprintf(field, sizeof field, "%s%sshape", name, name[0] ? "." : ""); /* "" names the fields themselves */
    int64_t n = cJSON_IsArray(shape) ? cr_jfast_size(fast, shape) : -1; /* a long list is a span */
    if (n < 0 || n > CR_RANK_MAX)
        return cr_fail(err, 400, "invalid_field", field, "%s must be a list of 0 to %d dimensions", field,
                       CR_RANK_MAX);
    out->rank = (int)n;
    int d = 0;
    for (const cJSON *e = shape->child; e; e = e->next, d++) {
        double v = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (!isfinite(v) || v != floor(v) || v < 0)
            return cr_fail(err, 400, "invalid_field", field, "%s[%d] must be an integer >= 0", field, d);
        if (v > MAX_EXACT)
            return cr_fail(err, 413, "too_large", field, "%s[%d] = %g is over any size limit", field, d, v);
        out->dims[d] = (int64_t)v;
    }
    return 0;
}

static int measure_deep(cr_jarray *a, const cJSON *node, const cr_limits *lim, cr_error *err);

static int measure_shaped(const cr_jfast *fast, const cJSON *obj, const char *name, const cr_limits *lim,
                          cr_jarray *a, cr_error *err)
{
    char field[64];
    for (const cJSON *f = obj->child; f; f = f->next)
        if (strcmp(f->string, "shape") && strcmp(f->string, "data")) {
            snprintf(field, sizeof field, "%s.%s", name, f->string);
            return cr_fail(err, 400, "invalid_field", field, "unknown field \"%s\" in %s (expected shape, data)",
                           f->string, name);
        }
    return cr_jarray_measure_shaped(fast, cJSON_GetObjectItemCaseSensitive(obj, "shape"),
                                    cJSON_GetObjectItemCaseSensitive(obj, "data"), name, lim, a, err);
}

int cr_jarray_measure_shaped(const cr_jfast *fast, const cJSON *shape, const cJSON *data, const char *name,
                             const cr_limits *lim, cr_jarray *a, cr_error *err)
{
    char field[64];
    memset(a, 0, sizeof *a);
    a->name = name;
    a->fast = fast;
    snprintf(field, sizeof field, "%s%sdata", name, name[0] ? "." : "");
    if (!data)
        return cr_fail(err, 400, "missing_field", field, "%s is required", field);
    if (read_shape(fast, shape, name, &a->shape, err) || check_count(a, lim, err))
        return -1;
    const cr_jspan *s = cr_jfast_find(fast, data);
    bool flat = s ? s->rows == 0 : cJSON_IsArray(data) && (!data->child || !cJSON_IsArray(data->child));
    if (!flat) { /* nested data: it must have the declared shape itself */
        cr_jarray inner = {.name = field, .fast = fast};
        cr_shape want = a->shape;
        char ws[160], gs[160];
        if (cr_jarray_measure(fast, data, field, lim, &inner, err))
            return -1;
        if (inner.shape.rank != want.rank || memcmp(inner.shape.dims, want.dims, sizeof want.dims[0] * (size_t)want.rank)) {
            cr_shape_format(&want, ws, sizeof ws);
            cr_shape_format(&inner.shape, gs, sizeof gs);
            return cr_fail(err, 400, "invalid_field", field, "%s has shape %s but %s.shape says %s", field, gs, name, ws);
        }
        inner.name = name;
        *a = inner;
        return 0;
    }
    int64_t n = cr_jlist_count_in(fast, data, field, err);
    if (n < 0)
        return -1;
    if ((uint64_t)n != cr_shape_count(&a->shape)) {
        char ws[160];
        cr_shape_format(&a->shape, ws, sizeof ws);
        return cr_fail(err, 400, "invalid_field", field, "%s has %lld numbers but shape %s makes %llu", field,
                       (long long)n, ws, (unsigned long long)cr_shape_count(&a->shape));
    }
    a->form = CR_JA_FLAT;
    a->data = data;
    a->in_data = true;
    return 0;
}

/* ---- nested lists ----------------------------------------------------------------------------- */

/* The shape the first elements give, level by level, down to a span or a number. */
static int first_shape(const cr_jfast *f, const cJSON *node, const char *name, cr_shape *s, cr_error *err)
{
    s->rank = 0;
    for (const cJSON *cur = node;;) {
        const cr_jspan *sp = cr_jfast_find(f, cur);
        if (s->rank + (sp && sp->rows ? 2 : 1) > CR_RANK_MAX)
            return cr_fail(err, 400, "invalid_field", name, "%s is nested deeper than %d levels", name, CR_RANK_MAX);
        if (sp) {
            if (sp->rows) {
                s->dims[s->rank++] = sp->rows;
                s->dims[s->rank++] = sp->cols;
            } else {
                s->dims[s->rank++] = sp->count;
            }
            return 0;
        }
        if (!cJSON_IsArray(cur))
            return 0; /* a number (or not): the level above ends here; fill checks the elements */
        int64_t n = cr_jfast_size(f, cur);
        if (n == 0)
            return cr_fail(err, 400, "invalid_field", name, "%s holds an empty list", name);
        s->dims[s->rank++] = n;
        cur = cur->child;
        if (!cJSON_IsArray(cur) && !cr_jfast_find(f, cur))
            return 0;
    }
}

/* node has shape dims[d..rank) (its index path in `at`, for messages). */
static int check_level(const cr_jarray *a, const cJSON *node, int d, char *at, size_t cap, cr_error *err)
{
    const cr_shape *s = &a->shape;
    size_t len = strlen(at);
    const cr_jspan *sp = cr_jfast_find(a->fast, node);
    int left = s->rank - d;
    bool ok;
    if (sp)
        ok = sp->rows ? left == 2 && sp->rows == s->dims[d] && sp->cols == s->dims[d + 1] && sp->odd_row < 0
                      : left == 1 && sp->count == s->dims[d];
    else
        ok = cJSON_IsArray(node) && cr_jfast_size(a->fast, node) == s->dims[d];
    if (!ok) {
        char want[160];
        cr_shape sub = {.rank = left};
        memcpy(sub.dims, s->dims + d, sizeof sub.dims[0] * (size_t)left);
        cr_shape_format(&sub, want, sizeof want);
        return cr_fail(err, 400, "invalid_field", a->name, "%s%s is not a list of shape %s (what the first elements "
                       "make it): nested lists must be equally long at every level", a->name, at, want);
    }
    if (sp || left == 1)
        return 0;
    int64_t i = 0;
    for (const cJSON *e = node->child; e; e = e->next, i++) {
        snprintf(at + len, cap - len, "[%lld]", (long long)i);
        if (check_level(a, e, d + 1, at, cap, err))
            return -1;
    }
    at[len] = '\0';
    return 0;
}

static int measure_deep(cr_jarray *a, const cJSON *node, const cr_limits *lim, cr_error *err)
{
    char at[128] = "";
    a->form = CR_JA_DEEP;
    a->data = node;
    if (first_shape(a->fast, node, a->name, &a->shape, err) || check_count(a, lim, err))
        return -1;
    return check_level(a, node, 0, at, sizeof at, err);
}

/* Whether node is a list of lists of lists (rank >= 3), which a matrix's nested form is not. */
static bool deeper_than_matrix(const cr_jfast *f, const cJSON *node)
{
    const cr_jspan *s = cr_jfast_find(f, node);
    if (s || !cJSON_IsArray(node) || !node->child)
        return false;
    const cJSON *row = node->child;
    const cr_jspan *rs = cr_jfast_find(f, row);
    return rs ? rs->rows > 0 : cJSON_IsArray(row) && row->child && (cJSON_IsArray(row->child) || cr_jfast_find(f, row->child));
}

/* A list of numbers (or of nothing: an empty vector, which only a histogram takes). */
static bool flat_list(const cr_jfast *f, const cJSON *node)
{
    const cr_jspan *s = cr_jfast_find(f, node);
    return s ? s->rows == 0 : cJSON_IsArray(node) && (!node->child || (!cJSON_IsArray(node->child) &&
                                                                       !cr_jfast_find(f, node->child)));
}

int cr_jarray_measure(const cr_jfast *fast, const cJSON *node, const char *name, const cr_limits *lim,
                      cr_jarray *out, cr_error *err)
{
    memset(out, 0, sizeof *out);
    out->name = name;
    out->fast = fast;
    if (cJSON_IsObject(node) && cJSON_GetObjectItemCaseSensitive(node, "shape"))
        return measure_shaped(fast, node, name, lim, out, err);
    if (cJSON_IsArray(node) && deeper_than_matrix(fast, node))
        return measure_deep(out, node, lim, err);
    if (flat_list(fast, node)) {
        int64_t n = cr_jlist_count_in(fast, node, name, err);
        out->form = CR_JA_FLAT;
        out->data = node;
        out->shape.rank = 1;
        out->shape.dims[0] = n;
        return n < 0 ? -1 : check_count(out, lim, err);
    }
    out->form = CR_JA_MATRIX;
    if (cr_jmatrix_measure_in(fast, node, name, lim, &out->m, err))
        return -1;
    out->shape = cr_shape_2d(out->m.rows, out->m.cols);
    return 0;
}

/* ---- filling ---------------------------------------------------------------------------------- */

/* node, of shape dims[d..rank), into dst from element `at` on. */
static int fill_level(const cr_jarray *a, const cJSON *node, int d, cr_dtype dt, void *dst, int64_t at,
                      char *path, size_t cap, cr_error *err)
{
    const cr_shape *s = &a->shape;
    size_t len = strlen(path), es = cr_dtype_size(dt);
    int64_t inner = 1;
    for (int k = d + 1; k < s->rank; k++)
        inner *= s->dims[k];
    const cr_jspan *sp = cr_jfast_find(a->fast, node);
    char *to = (char *)dst + (size_t)at * es;
    if (sp && sp->rows)
        return cr_jrows_fill_in(a->fast, sp, path, dt, to, err);
    if (s->rank - d == 1)
        return cr_jlist_fill_in(a->fast, node, path, s->dims[d], dt, to, err);
    int64_t i = 0;
    for (const cJSON *e = node->child; e; e = e->next, i++) {
        snprintf(path + len, cap - len, "[%lld]", (long long)i);
        if (fill_level(a, e, d + 1, dt, dst, at + i * inner, path, cap, err))
            return -1;
    }
    path[len] = '\0';
    return 0;
}

int cr_jarray_fill(const cr_jarray *a, cr_dtype dt, void *dst, cr_error *err)
{
    char path[128];
    switch (a->form) {
    case CR_JA_MATRIX:
        return cr_jmatrix_fill(&a->m, dt, dst, err);
    case CR_JA_FLAT:
        snprintf(path, sizeof path, "%s%s", a->name, !a->in_data ? "" : a->name[0] ? ".data" : "data");
        return cr_jlist_fill_in(a->fast, a->data, path, (int64_t)cr_shape_count(&a->shape), dt, dst, err);
    default:
        snprintf(path, sizeof path, "%s", a->name);
        return fill_level(a, a->data, 0, dt, dst, 0, path, sizeof path, err);
    }
}
