/* Query-string parameters of binary requests; see query_params.h. */
#include "server/codec/query.h"

#include "kernels/hist_range.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OPS_GEMM (1u << CR_OP_GEMM)
#define OPS_ATA (1u << CR_OP_ATA)
#define OPS_HIST (1u << CR_OP_HISTOGRAM)
#define OPS_ALL (OPS_GEMM | OPS_ATA | OPS_HIST)
#define OPS_TENSOR (1u << CR_OP_COUNT) /* POST /v1/tensors */

typedef int (*setter)(cr_params *p, const char *name, const char *v, const cr_limits *lim,
                      cr_error *err);

static int bad_value(cr_error *err, const char *name, const char *want, const char *v)
{
    return cr_fail(err, 400, "invalid_parameter", name, "query parameter %s must be %s, got \"%.40s\"",
                   name, want, v ? v : "");
}

static int parse_double(const char *name, const char *v, double *out, cr_error *err)
{
    char *end = NULL;
    if (!v || !*v || *v == ' ')
        return bad_value(err, name, "a number", v);
    errno = 0;
    double d = strtod(v, &end);
    if (*end)
        return bad_value(err, name, "a number", v);
    if (!isfinite(d))
        return cr_fail(err, 400, "invalid_parameter", name, "query parameter %s is not a finite "
                       "number", name);
    *out = d;
    return 0;
}

/* A decimal integer in [lo, hi]; over hi is a limit (413) when over_is_limit. */
static int parse_int(const char *name, const char *v, int64_t lo, int64_t hi, bool over_is_limit,
                     int64_t *out, cr_error *err)
{
    char *end = NULL;
    if (!v || *v < '0' || *v > '9')
        return bad_value(err, name, "a non-negative integer", v);
    errno = 0;
    unsigned long long u = strtoull(v, &end, 10);
    if (*end)
        return bad_value(err, name, "an integer", v);
    if (u < (unsigned long long)lo)
        return cr_fail(err, 400, "invalid_parameter", name, "query parameter %s must be >= %lld",
                       name, (long long)lo);
    if (errno == ERANGE || u > (unsigned long long)hi)
        return over_is_limit
                   ? cr_fail(err, 413, "too_large", name, "%s = %.40s is over the limit of %lld",
                             name, v, (long long)hi)
                   : cr_fail(err, 400, "invalid_parameter", name,
                             "query parameter %s must be <= %lld", name, (long long)hi);
    *out = (int64_t)u;
    return 0;
}

/* true/false, 1/0; a bare key (?trans_a) means true. */
static int parse_bool(const char *name, const char *v, bool *out, cr_error *err)
{
    if (!v || !*v || strcmp(v, "true") == 0 || strcmp(v, "1") == 0)
        return *out = true, 0;
    if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0)
        return *out = false, 0;
    return bad_value(err, name, "true or false", v);
}

static int set_op(cr_params *p, const char *name, const char *v, const cr_limits *lim, cr_error *err)
{
    (void)lim;
    for (int i = 0; i < CR_OP_COUNT; i++)
        if (v && strcmp(v, cr_op_name((cr_op)i)) == 0) {
            if (p->op != CR_OP_COUNT && p->op != (cr_op)i)
                return cr_fail(err, 400, "invalid_parameter", name,
                               "op=%s does not match this route (/v1/%s)", v, cr_op_name(p->op));
            p->op = (cr_op)i;
            return 0;
        }
    return bad_value(err, name, "gemm, ata or histogram", v);
}

static int set_kernel(cr_params *p, const char *name, const char *v, const cr_limits *lim,
                      cr_error *err)
{
    (void)lim;
    if (cr_kernel_choice_parse(v, &p->kernel) != 0)
        return bad_value(err, name, "a kernel name (a-z, 0-9, '-'), \"auto\" or \"all\"", v);
    return 0;
}

static int set_alpha(cr_params *p, const char *name, const char *v, const cr_limits *lim, cr_error *err)
{
    (void)lim;
    return parse_double(name, v, &p->alpha, err);
}

static int set_beta(cr_params *p, const char *name, const char *v, const cr_limits *lim, cr_error *err)
{
    (void)lim;
    return parse_double(name, v, &p->beta, err);
}

static int set_trans_a(cr_params *p, const char *name, const char *v, const cr_limits *lim,
                       cr_error *err)
{
    (void)lim;
    return parse_bool(name, v, &p->trans_a, err);
}

static int set_trans_b(cr_params *p, const char *name, const char *v, const cr_limits *lim,
                       cr_error *err)
{
    (void)lim;
    return parse_bool(name, v, &p->trans_b, err);
}

static int set_precision(cr_params *p, const char *name, const char *v, const cr_limits *lim,
                         cr_error *err)
{
    (void)lim;
    if (v && strcmp(v, "fp32") == 0)
        return p->tf32_asked = false, 0;
    if (v && strcmp(v, "tf32") == 0)
        return p->tf32_asked = true, 0;
    return bad_value(err, name, "fp32 or tf32", v);
}

/* The only dtype a query names: the one numpy cannot write into a .npy header. Every other dtype
 * is the header's, so there is nothing to disagree. */
static int set_dtype(cr_params *p, const char *name, const char *v, const cr_limits *lim, cr_error *err)
{
    (void)lim;
    if (v && strcmp(v, "bfloat16") == 0)
        return p->bf16 = true, 0;
    return cr_fail(err, 400, "invalid_parameter", name,
                   "query parameter dtype can only be bfloat16 (2-byte parts read as bfloat16 bits); "
                   "any other dtype is the .npy header's, got \"%.40s\"", v ? v : "");
}

static int set_timeout(cr_params *p, const char *name, const char *v, const cr_limits *lim,
                       cr_error *err)
{
    (void)lim;
    return parse_int(name, v, 1, CR_TIMEOUT_MS_MAX, false, &p->timeout_ms, err);
}

static int set_bins(cr_params *p, const char *name, const char *v, const cr_limits *lim, cr_error *err)
{
    int64_t b = 0;
    if (parse_int(name, v, 1, lim->max_bins, true, &b, err))
        return -1;
    p->bins = (int32_t)b;
    return 0;
}

static int set_range(cr_params *p, const char *name, const char *v, const cr_limits *lim,
                     cr_error *err)
{
    (void)lim;
    const char *comma = v ? strchr(v, ',') : NULL;
    char lo[64];
    if (!comma || (size_t)(comma - v) >= sizeof lo)
        return bad_value(err, name, "lo,hi", v);
    memcpy(lo, v, (size_t)(comma - v));
    lo[comma - v] = '\0';
    if (parse_double(name, lo, &p->lo, err) || parse_double(name, comma + 1, &p->hi, err))
        return -1;
    p->has_lo = p->has_hi = true;
    return 0;
}

static int set_range_lo(cr_params *p, const char *name, const char *v, const cr_limits *lim,
                        cr_error *err)
{
    (void)lim;
    p->has_lo = true;
    return parse_double(name, v, &p->lo, err);
}

static int set_range_hi(cr_params *p, const char *name, const char *v, const cr_limits *lim,
                        cr_error *err)
{
    (void)lim;
    p->has_hi = true;
    return parse_double(name, v, &p->hi, err);
}

/* A tensor's id or name: what the table will say of it is its business; here only its length. */
static int set_ref(char *out, size_t cap, const char *name, const char *v, cr_error *err)
{
    if (!v || !*v || strlen(v) >= cap)
        return bad_value(err, name, "a tensor's id or name (1 to 128 characters)", v);
    snprintf(out, cap, "%s", v);
    return 0;
}

static int set_tensor_a(cr_params *p, const char *name, const char *v, const cr_limits *lim, cr_error *err)
{
    (void)lim;
    return set_ref(p->tensor[0], sizeof p->tensor[0], name, v, err);
}

static int set_tensor_b(cr_params *p, const char *name, const char *v, const cr_limits *lim, cr_error *err)
{
    (void)lim;
    return set_ref(p->tensor[1], sizeof p->tensor[1], name, v, err);
}

static int set_tensor_c(cr_params *p, const char *name, const char *v, const cr_limits *lim, cr_error *err)
{
    (void)lim;
    return set_ref(p->tensor[2], sizeof p->tensor[2], name, v, err);
}

static int set_output(cr_params *p, const char *name, const char *v, const cr_limits *lim, cr_error *err)
{
    (void)lim;
    if (!v || strcmp(v, "tensor") != 0)
        return bad_value(err, name, "tensor (keep the result as a resident tensor)", v);
    p->output_tensor = true;
    return 0;
}

static int set_output_name(cr_params *p, const char *name, const char *v, const cr_limits *lim, cr_error *err)
{
    (void)lim;
    return set_ref(p->output_name, sizeof p->output_name, name, v, err);
}

static int set_output_into(cr_params *p, const char *name, const char *v, const cr_limits *lim, cr_error *err)
{
    (void)lim;
    return set_ref(p->output_into, sizeof p->output_into, name, v, err);
}

static int set_name(cr_params *p, const char *name, const char *v, const cr_limits *lim, cr_error *err)
{
    (void)lim;
    return set_ref(p->name, sizeof p->name, name, v, err);
}

/* "4,8,3": a raw body's shape (up to 8 dimensions; "" a scalar). */
static int set_shape(cr_params *p, const char *name, const char *v, const cr_limits *lim, cr_error *err)
{
    (void)lim;
    p->has_shape = true;
    p->shape_rank = 0;
    for (const char *s = v ? v : ""; *s;) {
        char *end = NULL;
        if (p->shape_rank == 8 || *s < '0' || *s > '9')
            return bad_value(err, name, "up to 8 dimensions separated by commas (4,8,3)", v);
        errno = 0;
        unsigned long long d = strtoull(s, &end, 10);
        if (errno == ERANGE || d > (1ull << 53))
            return cr_fail(err, 413, "too_large", name, "query parameter %s: a dimension is over any limit", name);
        p->shape[p->shape_rank++] = (int64_t)d;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return bad_value(err, name, "up to 8 dimensions separated by commas (4,8,3)", v);
    }
    return 0;
}

static int set_raw_dtype(cr_params *p, const char *name, const char *v, const cr_limits *lim, cr_error *err)
{
    (void)lim;
    for (int d = 0; d < CR_DT_COUNT; d++)
        if (v && strcmp(v, cr_dtype_name((cr_dtype)d)) == 0) {
            p->raw_dtype = (cr_dtype)d;
            p->bf16 = d == CR_DT_BF16;
            return 0;
        }
    return bad_value(err, name, "a dtype (float32, float64, float16, bfloat16, uint8, int32, ...)", v);
}

static int set_any_dtype(cr_params *p, const char *name, const char *v, const cr_limits *lim, cr_error *err)
{
    return p->tensor_upload ? set_raw_dtype(p, name, v, lim, err) : set_dtype(p, name, v, lim, err);
}

static const struct {
    const char *name;
    unsigned ops;
    setter set;
} params[] = {
    {"op", OPS_ALL, set_op},
    {"kernel", OPS_ALL, set_kernel},
    {"timeout_ms", OPS_ALL, set_timeout},
    {"alpha", OPS_GEMM, set_alpha},
    {"beta", OPS_GEMM, set_beta},
    {"trans_a", OPS_GEMM, set_trans_a},
    {"trans_b", OPS_GEMM, set_trans_b},
    {"precision", OPS_GEMM, set_precision},
    {"dtype", OPS_GEMM | OPS_TENSOR, set_any_dtype},
    {"bins", OPS_HIST, set_bins},
    {"range", OPS_HIST, set_range},
    {"range_lo", OPS_HIST, set_range_lo},
    {"range_hi", OPS_HIST, set_range_hi},
    {"tensor_a", OPS_GEMM | OPS_ATA, set_tensor_a},
    {"tensor_b", OPS_GEMM, set_tensor_b},
    {"tensor_c", OPS_GEMM, set_tensor_c},
    {"tensor_data", OPS_HIST, set_tensor_a},
    {"output", OPS_ALL, set_output},
    {"output_name", OPS_ALL, set_output_name},
    {"output_into", OPS_ALL, set_output_into},
    {"name", OPS_TENSOR, set_name},
    {"shape", OPS_TENSOR, set_shape},
};
#define N_PARAMS (sizeof params / sizeof params[0])
_Static_assert(sizeof params / sizeof params[0] <= 32, "cr_params.seen holds one bit per parameter");

void cr_params_init(cr_params *p, cr_op route_op)
{
    memset(p, 0, sizeof *p);
    p->op = route_op;
    p->kernel = cr_kernel_choice_auto();
    p->alpha = 1.0;
    p->raw_dtype = CR_DT_U8;
}

void cr_params_init_tensor(cr_params *p)
{
    cr_params_init(p, CR_OP_COUNT);
    p->tensor_upload = true;
}

int cr_params_set(cr_params *p, const char *key, const char *value, const cr_limits *lim,
                  cr_error *err)
{
    for (size_t i = 0; i < N_PARAMS; i++) {
        if (strcmp(key, params[i].name) != 0)
            continue;
        if (p->seen & (1u << i))
            return cr_fail(err, 400, "invalid_parameter", key,
                           "query parameter %s appears twice", key);
        p->seen |= 1u << i;
        return params[i].set(p, key, value, lim, err);
    }
    return cr_fail(err, 400, "invalid_parameter", key, "unknown query parameter \"%.40s\"", key);
}

static bool was_seen(const cr_params *p, const char *name)
{
    for (size_t i = 0; i < N_PARAMS; i++)
        if (strcmp(params[i].name, name) == 0)
            return (p->seen & (1u << i)) != 0;
    return false;
}

static int finish_tensor_upload(const cr_params *p, cr_error *err)
{
    for (size_t i = 0; i < N_PARAMS; i++)
        if ((p->seen & (1u << i)) && !(params[i].ops & OPS_TENSOR))
            return cr_fail(err, 400, "invalid_parameter", params[i].name,
                           "query parameter %s is not one of POST /v1/tensors (name, shape, dtype)", params[i].name);
    return 0;
}

int cr_params_finish(cr_params *p, cr_error *err)
{
    if (p->tensor_upload)
        return finish_tensor_upload(p, err);
    if (p->op == CR_OP_COUNT)
        return cr_fail(err, 400, "invalid_parameter", "op",
                       "op is required on /v1/jobs for a binary body: ?op=gemm|ata|histogram");
    if (p->output_name[0] && !p->output_tensor)
        return cr_fail(err, 400, "invalid_parameter", "output_name", "output_name names a kept result: give output=tensor");
    if (p->output_into[0] && p->output_tensor)
        return cr_fail(err, 400, "invalid_parameter", "output_into", "output=tensor keeps a new tensor, output_into "
                       "writes into an existing one: one of the two");
    if (was_seen(p, "dtype") && p->op != CR_OP_GEMM)
        return cr_fail(err, 400, "invalid_parameter", "dtype",
                       "dtype is not a parameter of %s requests: it is the .npy header's "
                       "(raw octet-stream bodies are uint8)", cr_op_name(p->op));
    for (size_t i = 0; i < N_PARAMS; i++)
        if ((p->seen & (1u << i)) && !(params[i].ops & (1u << p->op)))
            return cr_fail(err, 400, "invalid_parameter", params[i].name,
                           "query parameter %s does not apply to %s", params[i].name,
                           cr_op_name(p->op));
    if (p->has_lo != p->has_hi)
        return cr_fail(err, 400, "invalid_parameter", p->has_lo ? "range_hi" : "range_lo",
                       "range_lo and range_hi go together");
    if (was_seen(p, "range") && (was_seen(p, "range_lo") || was_seen(p, "range_hi")))
        return cr_fail(err, 400, "invalid_parameter", "range",
                       "give range=lo,hi or range_lo/range_hi, not both");
    if (p->has_lo) {
        double lo = p->lo, hi = p->hi;
        /* widened in place; float32's own check waits for the .npy header's dtype */
        cr_range_status st = cr_hist_range_fix(&p->lo, &p->hi, CR_DT_F64);
        if (st != CR_RANGE_OK) {
            char why[160];
            cr_hist_range_explain(st, lo, hi, why, sizeof why);
            return cr_fail(err, 400, "invalid_parameter", "range", "%s", why);
        }
        p->has_range = true;
    }
    return 0;
}

static int hex(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                       : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Percent-decodes s[0..n) into out (cap bytes, NUL-terminated); '+' is a space. */
static int url_decode(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '%' && i + 2 < n && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
            ch = (char)(hex(s[i + 1]) * 16 + hex(s[i + 2]));
            i += 2;
        } else if (ch == '+') {
            ch = ' ';
        }
        if (ch == '\0' || o + 1 >= cap)
            return -1;
        out[o++] = ch;
    }
    out[o] = '\0';
    return 0;
}

int cr_request_params_from_query(const char *query, size_t len, cr_op route_op,
                                 const cr_limits *lim, cr_params *out, cr_error *err)
{
    cr_params_init(out, route_op);
    size_t at = 0;
    while (at < len) {
        size_t end = at;
        while (end < len && query[end] != '&')
            end++;
        if (end > at) {
            char key[64], value[256];
            size_t eq = at;
            while (eq < end && query[eq] != '=')
                eq++;
            if (url_decode(query + at, eq - at, key, sizeof key) != 0)
                return cr_fail(err, 400, "invalid_parameter", "", "a query parameter's name is "
                               "too long or not text");
            bool bare = eq == end;
            if (!bare && url_decode(query + eq + 1, end - eq - 1, value, sizeof value) != 0)
                return cr_fail(err, 400, "invalid_parameter", key, "query parameter %s: value "
                               "too long or not text", key);
            if (cr_params_set(out, key, bare ? NULL : value, lim, err))
                return -1;
        }
        at = end + 1;
    }
    return cr_params_finish(out, err);
}
