/* /v1/tensors: resident tensors (server/engine/tensors.h) over HTTP.
 *   POST   /v1/tensors            a body -> 201, Location: /v1/tensors/{id}, its metadata
 *          .npy (application/x-npy), raw bytes (application/octet-stream, ?shape=4,8&dtype=float32;
 *          default: that many uint8), JSON {"shape"?, "data", "dtype"?, "name"?} (data flat with a
 *          shape, or nested lists) or {"shm": {...}, "shape", "dtype"?, "name"?} (read once from a
 *          registered region), gzip as everywhere; ?name= names a binary one. Big binary bodies are
 *          received straight into device memory, as big operands are (binary_decode.h's sinks).
 *   GET    /v1/tensors            the caller's, {"tensors": [...]}
 *   GET    /v1/tensors/{id}       metadata; with Accept: application/x-npy the data; ?data=1 JSON data
 *   DELETE /v1/tensors/{id}       removed at once (jobs using it keep it until they end)
 * {id} may be the tensor's name. Another client's tensor is a 404 to everyone but its owner. */
#include "server/http/tensor_routes.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/codec/json_array.h"
#include "server/codec/json_buf.h"
#include "server/codec/json_encode.h"
#include "server/codec/json_random.h"
#include "server/codec/json_shm.h"
#include "server/codec/npy.h"
#include "server/engine/owned.h"
#include "server/engine/tensors.h"
#include "server/http/respond.h"
#include "server/http/upload.h"

static void owner_of(const cr_conn *c, char *out, size_t n) { cr_peer_client(&c->peer, c->authenticated, out, n); }

static void put_info(cr_jbuf *b, const cr_tensor_info *i)
{
    cr_jbuf_tensor(b, i->id, i->name, &i->shape, i->dtype, i->bytes, i->device, i->expires_at);
}

static char *info_json(const cr_tensor_info *i, size_t *len)
{
    cr_jbuf b = {0};
    put_info(&b, i);
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}

/* 201 with Location and the tensor's metadata; the tensor is listed from here. */
static enum MHD_Result created(cr_conn *c, cr_tensor *t)
{
    cr_error err;
    if (cr_tensor_publish(t, &err) < 0) {
        cr_tensor_discard(t);
        return cr_send_error(c, &err);
    }
    cr_tensor_info i;
    cr_tensor_info_of(t, &i);
    size_t len = 0;
    char *body = info_json(&i, &len), location[64];
    struct MHD_Response *r = cr_json_response(c, body, len);
    if (!r)
        return MHD_NO;
    snprintf(location, sizeof location, "/v1/tensors/%s", i.id);
    MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, location);
    return cr_queue(c, 201, r);
}

/* ---- POST: a binary body ---------------------------------------------------------------------- */

static enum MHD_Result create_from_upload(cr_conn *c, const char *owner)
{
    cr_error err;
    cr_request req;
    cr_shape shape;
    cr_dtype dt;
    char name[129] = "";
    if (cr_upload_array(c, &req, &shape, &dt, &err) < 0)
        return cr_send_error(c, &err);
    const char *q = cr_query_value(c, "name");
    if (q)
        snprintf(name, sizeof name, "%s", q);
    int device = req.buf_on_device[CR_BUF_A] ? req.device : -1;
    void *data = req.bufs[CR_BUF_A];
    void (*release)(void *owner) = NULL;
    void *holder = cr_request_take_buf(&req, CR_BUF_A, &release);
    cr_request_free(&req);
    if (!holder)
        return cr_refuse(c, 503, "host_memory", "", "out of memory");
    cr_tensor *t = cr_tensor_adopt(owner, name, &shape, dt, device, data, release, holder, &err);
    return t ? created(c, t) : cr_send_error(c, &err);
}

/* ---- POST: a JSON body ------------------------------------------------------------------------ */

static const cr_dtype json_dtypes[] = {CR_DT_F32, CR_DT_F64, CR_DT_F16, CR_DT_BF16, CR_DT_U8};

static int json_dtype(const cJSON *root, cr_dtype *dt, cr_error *err)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, "dtype");
    *dt = CR_DT_F32;
    if (!n)
        return 0;
    for (size_t i = 0; cJSON_IsString(n) && i < sizeof json_dtypes / sizeof json_dtypes[0]; i++)
        if (strcmp(n->valuestring, cr_dtype_name(json_dtypes[i])) == 0)
            return *dt = json_dtypes[i], 0;
    return cr_fail(err, 400, "invalid_field", "dtype", "a JSON tensor's dtype is float32, float64, float16, bfloat16 "
                   "or uint8 (other dtypes: send .npy)");
}

static int json_name(const cJSON *root, const char **name, cr_error *err)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(root, "name");
    *name = NULL;
    if (!n)
        return 0;
    if (!cJSON_IsString(n))
        return cr_fail(err, 400, "invalid_field", "name", "name must be a string");
    *name = n->valuestring;
    return cr_tensor_check_name(*name, "name", err);
}

/* The three bodies: numbers, a registered region's bytes, generated numbers. */
typedef enum { BODY_NUMBERS, BODY_SHM, BODY_RANDOM } body_form;

static body_form form_of(const cJSON *root)
{
    return cJSON_GetObjectItemCaseSensitive(root, "shm") ? BODY_SHM
           : cJSON_GetObjectItemCaseSensitive(root, "random") ? BODY_RANDOM : BODY_NUMBERS;
}

static int check_members(const cJSON *root, body_form form, cr_error *err)
{
    static const char *const numbers[] = {"shape", "data", "dtype", "name", NULL};
    static const char *const region[] = {"shm", "shape", "dtype", "name", NULL};
    static const char *const generated[] = {"random", "dtype", "name", NULL};
    static const char *const *const allowed_of[] = {numbers, region, generated};
    static const char *const names[] = {"shape, data, dtype, name", "shm, shape, dtype, name", "random, dtype, name"};
    const char *const *allowed = allowed_of[form];
    for (const cJSON *f = root->child; f; f = f->next) {
        int i = 0;
        while (allowed[i] && strcmp(allowed[i], f->string))
            i++;
        if (!allowed[i])
            return cr_fail(err, 400, "invalid_field", f->string, "unknown field \"%.64s\" (%s)", f->string,
                           names[form]);
    }
    return 0;
}

/* The numbers into a new tensor: through host memory of the dtype, then to the tensor's memory. */
static cr_tensor *from_numbers(const cJSON *root, const cr_jfast *fast, const char *owner, const char *name,
                               const cr_limits *lim, cr_dtype dt, cr_error *err)
{
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(root, "shape"), *data = cJSON_GetObjectItemCaseSensitive(root, "data");
    cr_jarray a;
    if (!data)
        return cr_fail(err, 400, "missing_field", "data", "data is required (or shm)"), NULL;
    int rc = shape ? cr_jarray_measure_shaped(fast, shape, data, "", lim, &a, err)
                   : cr_jarray_measure(fast, data, "data", lim, &a, err);
    if (rc)
        return NULL;
    cr_tensor *t = cr_tensor_new(owner, name, &a.shape, dt, -1, err);
    size_t bytes = t ? (size_t)cr_tensor_bytes(t) : 0;
    void *host = t && cr_tensor_device(t) >= 0 ? malloc(bytes + 1) : NULL;
    void *dst = t && cr_tensor_device(t) < 0 ? cr_tensor_data(t) : host;
    if (t && !dst)
        cr_fail(err, 503, "host_memory", "", "out of memory");
    if (!dst || cr_jarray_fill(&a, dt, dst, err) || (host && cr_tensor_write(t, 0, host, bytes, err))) {
        free(host);
        cr_tensor_discard(t);
        return NULL;
    }
    free(host);
    return t;
}

/* Bytes of a registered region, copied once into a new tensor (the region may go after). */
static cr_tensor *from_region(const cJSON *root, const char *owner, const char *name, const cr_limits *lim,
                              cr_dtype dt, cr_error *err)
{
    cJSON *op = cJSON_Duplicate(root, 1); /* small: a shm operand has no numbers */
    cr_jshm_operand s;
    cr_request req = {0};
    cr_tensor *t = NULL;
    if (!op) {
        cr_fail(err, 503, "host_memory", "", "out of memory");
        return NULL;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(op, "name");
    void *p = cr_jshm_measure(op, "shm", 0, lim, &s, err) ? NULL : cr_jshm_bind(&req, CR_BUF_A, &s, dt, "shm", err);
    if (p) {
        cr_shape shape = {.rank = s.rank};
        memcpy(shape.dims, s.shape, sizeof shape.dims[0] * (size_t)s.rank);
        if ((t = cr_tensor_new(owner, name, &shape, dt, -1, err)) &&
            cr_tensor_write(t, 0, p, (size_t)cr_tensor_bytes(t), err) < 0) {
            cr_tensor_discard(t);
            t = NULL;
        }
    }
    cr_request_free(&req);
    cJSON_Delete(op);
    return t;
}

/* {"random": {"shape", "dist", "seed"}}: made where the tensor lives (on the device on cuda), as
 * a generated operand is, so the same seed gives the same tensor as the same operand. */
static cr_tensor *from_random(const cJSON *root, const cr_jfast *fast, const char *owner, const char *name,
                              const cr_limits *lim, cr_dtype dt, cr_error *err)
{
    cJSON *op = cJSON_CreateObject();
    cr_jrandom spec;
    cr_tensor *t = NULL;
    if (!op || !cJSON_AddItemReferenceToObject(op, "random", cJSON_GetObjectItemCaseSensitive(root, "random"))) {
        cJSON_Delete(op);
        return cr_fail(err, 503, "host_memory", "", "out of memory"), NULL;
    }
    if (cr_jrandom_measure(fast, op, "", lim, &spec, err) == 0 &&
        (t = cr_tensor_new(owner, name, &spec.shape, dt, -1, err)) &&
        cr_jrandom_make(&spec, dt, cr_tensor_device(t), cr_tensor_data(t), "random", err) < 0) {
        cr_tensor_discard(t);
        t = NULL;
    }
    cJSON_Delete(op);
    return t;
}

static enum MHD_Result create_from_json(cr_conn *c, const char *owner)
{
    cr_error err;
    cr_jfast fast = {0};
    cr_limits lim = cr_request_limits(c->h->deps.cfg);
    if (cr_request_decode_charge(c->len, &err) < 0)
        return cr_send_error(c, &err);
    cJSON *root = cr_json_parse_document(c->body ? c->body : "", c->len, &fast, "the request body", NULL, &err);
    cr_tensor *t = NULL;
    const char *name = NULL;
    cr_dtype dt;
    if (root && !cJSON_IsObject(root))
        cr_fail(&err, 400, "invalid_json", "", "the body must be a JSON object");
    else if (root) {
        body_form form = form_of(root);
        if (!check_members(root, form, &err) && !json_name(root, &name, &err) && !json_dtype(root, &dt, &err))
            t = form == BODY_SHM      ? from_region(root, owner, name, &lim, dt, &err)
                : form == BODY_RANDOM ? from_random(root, &fast, owner, name, &lim, dt, &err)
                                      : from_numbers(root, &fast, owner, name, &lim, dt, &err);
    }
    cJSON_Delete(root);
    cr_jfast_free(&fast);
    cr_request_decode_release(c->len);
    return t ? created(c, t) : cr_send_error(c, &err);
}

enum MHD_Result cr_route_tensor_create(cr_conn *c)
{
    char owner[CR_OWNER_MAX];
    owner_of(c, owner, sizeof owner);
    return c->upload ? create_from_upload(c, owner) : create_from_json(c, owner);
}

/* ---- GET, DELETE ------------------------------------------------------------------------------ */

enum MHD_Result cr_route_tensor_list(cr_conn *c)
{
    char owner[CR_OWNER_MAX];
    owner_of(c, owner, sizeof owner);
    cr_tensor_info *list;
    size_t n;
    if (cr_tensor_list(owner, &list, &n) < 0)
        return cr_refuse(c, 503, "host_memory", "", "out of memory");
    cr_jbuf b = {0};
    cr_jbuf_lit(&b, "{\"tensors\":[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            cr_jbuf_put(&b, ",", 1);
        put_info(&b, &list[i]);
    }
    cr_jbuf_lit(&b, "]}");
    free(list);
    if (b.failed) {
        free(b.p);
        return cr_refuse(c, 503, "host_memory", "", "out of memory");
    }
    return cr_send(c, 200, "application/json", b.p, b.len);
}

/* {id} of the path: an id or a name (no '/' in either). */
static void path_ref(const cr_conn *c, char *out, size_t n)
{
    size_t k = strcspn(c->id, "/");
    snprintf(out, n, "%.*s", (int)(k < n - 1 ? k : n - 1), c->id);
}

/* A .npy answer of a tensor: its header, and its bytes read from its device once (host memory: sent
 * from where they are); the tensor is held until the answer has gone. */
typedef struct {
    cr_tensor *t;
    void *host;
    char header[CR_NPY_WRITE_MAX];
} npy_download;

static void download_done(void *cls)
{
    npy_download *d = cls;
    cr_tensor_release(d->t);
    free(d->host);
    free(d);
}

static enum MHD_Result send_npy(cr_conn *c, cr_tensor *t)
{
    cr_error err;
    size_t bytes = (size_t)cr_tensor_bytes(t);
    bool on_device = cr_tensor_device(t) >= 0;
    npy_download *d = calloc(1, sizeof *d);
    if (!d || (on_device && !(d->host = malloc(bytes + 1)))) {
        free(d);
        cr_tensor_release(t);
        return cr_refuse(c, 503, "host_memory", "", "out of memory");
    }
    d->t = t;
    if (on_device && cr_tensor_read(t, d->host, &err) < 0) {
        download_done(d);
        return cr_send_error(c, &err);
    }
    const cr_shape *s = cr_tensor_shape(t);
    size_t hl = cr_npy_write_header(d->header, sizeof d->header, cr_tensor_dtype(t), s->rank, s->dims);
    cr_span spans[2] = {{d->header, hl}, {on_device ? d->host : cr_tensor_data(t), bytes}};
    return cr_send_spans(c, 200, "application/x-npy", spans, 2, download_done, d);
}

static bool wants_npy(cr_conn *c)
{
    const char *accept = cr_header(c, MHD_HTTP_HEADER_ACCEPT);
    return accept && strcasestr(accept, "application/x-npy") != NULL;
}

/* ?data=1: the metadata and the numbers, as a /v1 answer writes a result. */
static enum MHD_Result send_json_data(cr_conn *c, cr_tensor *t)
{
    cr_error err;
    size_t bytes = (size_t)cr_tensor_bytes(t);
    void *host = cr_tensor_device(t) >= 0 ? malloc(bytes + 1) : NULL;
    const void *data = host ? host : cr_tensor_data(t);
    if (cr_tensor_device(t) >= 0 && (!host || cr_tensor_read(t, host, &err) < 0)) {
        free(host);
        cr_tensor_release(t);
        return host ? cr_send_error(c, &err) : cr_refuse(c, 503, "host_memory", "", "out of memory");
    }
    cr_tensor_info i;
    cr_tensor_info_of(t, &i);
    cr_jbuf b = {0};
    put_info(&b, &i);
    b.len--; /* reopen the object */
    cr_jbuf_lit(&b, ",\"data\":");
    cr_jbuf_numbers(&b, data, cr_shape_count(&i.shape), i.dtype);
    cr_jbuf_put(&b, "}", 1);
    free(host);
    cr_tensor_release(t);
    if (b.failed) {
        free(b.p);
        return cr_refuse(c, 503, "host_memory", "", "out of memory");
    }
    return cr_send(c, 200, "application/json", b.p, b.len);
}

enum MHD_Result cr_route_tensor_get(cr_conn *c)
{
    char owner[CR_OWNER_MAX], ref[160];
    cr_error err;
    owner_of(c, owner, sizeof owner);
    path_ref(c, ref, sizeof ref);
    const char *data = cr_query_value(c, "data");
    bool json_data = data && (strcmp(data, "1") == 0 || strcmp(data, "true") == 0);
    if (wants_npy(c) || json_data) {
        cr_tensor *t = cr_tensor_acquire(owner, ref, "id", &err);
        if (!t)
            return cr_send_error(c, &err);
        return json_data && !wants_npy(c) ? send_json_data(c, t) : send_npy(c, t);
    }
    cr_tensor_info i;
    if (cr_tensor_describe(owner, ref, "id", &i, &err) < 0)
        return cr_send_error(c, &err);
    size_t len = 0;
    char *body = info_json(&i, &len);
    return cr_send(c, 200, "application/json", body, len);
}

enum MHD_Result cr_route_tensor_delete(cr_conn *c)
{
    char owner[CR_OWNER_MAX], ref[160];
    cr_error err;
    cr_tensor_info i;
    owner_of(c, owner, sizeof owner);
    path_ref(c, ref, sizeof ref);
    if (cr_tensor_delete(owner, ref, &i, &err) < 0)
        return cr_send_error(c, &err);
    i.expires_at = 0;
    size_t len = 0;
    char *body = info_json(&i, &len);
    return cr_send(c, 200, "application/json", body, len);
}
