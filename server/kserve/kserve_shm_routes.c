/* Triton's shared memory routes (server/kserve/kserve.h): system shared memory on the region
 * table of server/kserve/shm_region.h, CUDA shared memory (at the end) on cuda_shm_region.h's:
 *   GET  /v2/systemsharedmemory/status, /v2/systemsharedmemory/region/{name}/status
 *   POST /v2/systemsharedmemory/region/{name}/register  {"key", "offset", "byte_size"}
 *   POST /v2/systemsharedmemory/region/{name}/unregister, /v2/systemsharedmemory/unregister
 * Like every /v2 route they need the bearer token when --auth-token-file is set (listener.c):
 * a region is a window into the daemon's address space. A registration counts against its
 * client's cap (the token, else the peer's IP address or uid) and, over the Unix socket, lives
 * no longer than the registering process. */
#include "server/kserve/kserve.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/codec/base64.h"
#include "server/codec/json_matrix.h"
#include "server/http/peer.h"
#include "server/http/respond.h"
#include "server/kserve/cuda_shm_region.h"
#include "server/kserve/shm_region.h"

#define MAX_EXACT 9007199254740992.0 /* 2^53 */

/* The {name} of .../region/{name}/...: NULL for the routes of every region, or with a 400 sent
 * when it is longer than any registered name can be. */
static bool path_region(cr_conn *c, char *name, size_t cap, const char **out)
{
    *out = NULL;
    if (!c->id)
        return true;
    size_t n = strcspn(c->id, "/");
    if (n >= cap) {
        cr_refuse(c, 400, "invalid_field", "name", "a region name has at most %zu characters", cap - 1);
        return false;
    }
    memcpy(name, c->id, n);
    name[n] = '\0';
    *out = name;
    return true;
}

static cJSON *info_json(const cr_shm_info *in)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", in->name);
    cJSON_AddStringToObject(o, "key", in->key);
    cJSON_AddNumberToObject(o, "offset", (double)in->offset);
    cJSON_AddNumberToObject(o, "byte_size", (double)in->byte_size);
    return o;
}

/* Triton's status: a list of {name, key, offset, byte_size}, one entry for a named region. */
enum MHD_Result cr_kserve_shm_status(cr_conn *c)
{
    char buf[CR_SHM_NAME_MAX + 1];
    const char *name;
    if (!path_region(c, buf, sizeof buf, &name))
        return MHD_YES;
    cr_shm_info *list;
    size_t n;
    cr_error err;
    if (cr_shm_status(name, &list, &n, &err) != 0)
        return cr_send_error(c, &err);
    cJSON *doc = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(doc, info_json(&list[i]));
    free(list);
    return cr_send_cjson(c, 200, doc);
}

/* ---- register ------------------------------------------------------------------------------- */

static int body_count(const cJSON *doc, const char *field, bool required, uint64_t *out, cr_error *err)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(doc, field);
    *out = 0;
    if (!n)
        return required ? cr_fail(err, 400, "missing_field", field, "%s is required", field) : 0;
    if (!cJSON_IsNumber(n) || !(n->valuedouble >= 0) || n->valuedouble > MAX_EXACT ||
        n->valuedouble != (double)(uint64_t)n->valuedouble)
        return cr_fail(err, 400, "invalid_field", field, "%s must be an integer from 0 to 2^53", field);
    *out = (uint64_t)n->valuedouble;
    return 0;
}

/* One JSON value and nothing after it but white space. */
static cJSON *parse_whole(const char *body, size_t len)
{
    const char *end = NULL;
    cJSON *doc = len ? cJSON_ParseWithLengthOpts(body, len, &end, 0) : NULL;
    if (!doc)
        return NULL;
    size_t at = (size_t)(end - body); /* the body has no terminating NUL: bounded by len */
    while (at < len && (body[at] == ' ' || body[at] == '\t' || body[at] == '\r' || body[at] == '\n'))
        at++;
    if (at < len || cr_json_stray_control(body, len)) {
        cJSON_Delete(doc);
        return NULL;
    }
    return doc;
}

/* An unregister's body: none (Triton's C++ client sends none), or a JSON object, whose members
 * say nothing here; anything else is a 400 as for a registration. */
static int unregister_body(const cr_conn *c, cr_error *err)
{
    if (c->len == 0)
        return 0;
    cJSON *doc = parse_whole(c->body, c->len);
    bool ok = cJSON_IsObject(doc);
    cJSON_Delete(doc);
    return ok ? 0 : cr_fail(err, 400, "invalid_json", "", "an unregister's body must be empty or a JSON object");
}

/* {"key": "/name", "offset": N, "byte_size": N} and nothing else; offset may be left out (0).
 * The key points into the returned document (cr_shm_register judges it); NULL with err. */
static cJSON *parse_register(const char *body, size_t len, const char **key, uint64_t *offset,
                             uint64_t *byte_size, cr_error *err)
{
    cJSON *doc = parse_whole(body, len);
    if (!cJSON_IsObject(doc)) {
        cr_fail(err, 400, "invalid_json", "", "the body must be a JSON object {\"key\", \"offset\", \"byte_size\"}");
        goto fail;
    }
    for (const cJSON *f = doc->child; f; f = f->next)
        if (strcmp(f->string, "key") && strcmp(f->string, "offset") && strcmp(f->string, "byte_size")) {
            cr_fail(err, 400, "invalid_field", f->string, "unknown field \"%.64s\" (key, offset, byte_size)",
                    f->string);
            goto fail;
        }
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(doc, "key");
    if (!cJSON_IsString(k)) {
        cr_fail(err, 400, k ? "invalid_field" : "missing_field", "key",
                "key must be the name of a POSIX shared-memory object, a string \"/name\"");
        goto fail;
    }
    *key = k->valuestring;
    if (body_count(doc, "offset", false, offset, err) || body_count(doc, "byte_size", true, byte_size, err))
        goto fail;
    return doc;
fail:
    cJSON_Delete(doc);
    return NULL;
}

/* The client a registration counts against (--shm-client-max-mb), and the process to watch:
 * only a Unix socket peer's pid is known (SO_PEERCRED), and only its exit is a sure sign. */
static void owner_of(const cr_conn *c, cr_shm_owner *o)
{
    memset(o, 0, sizeof *o);
    cr_peer_client(&c->peer, c->authenticated, o->client, sizeof o->client);
    o->pid = c->peer.is_unix ? (int)c->peer.pid : 0;
}

enum MHD_Result cr_kserve_shm_register(cr_conn *c)
{
    cr_shm_owner owner;
    char buf[CR_SHM_NAME_MAX + 1];
    const char *name, *key;
    uint64_t offset, byte_size;
    cr_error err;
    if (!path_region(c, buf, sizeof buf, &name))
        return MHD_YES;
    cJSON *doc = parse_register(c->body ? c->body : "", c->len, &key, &offset, &byte_size, &err);
    owner_of(c, &owner);
    int rc = !doc ? -1
             : cr_cuda_shm_registered(name) /* one namespace for both kinds, as Triton's */
                 ? cr_fail(&err, 409, "already_exists", "name",
                           "'%s' is registered as a CUDA shared memory region (unregister it first)", name)
                 : cr_shm_register(name, key, offset, byte_size, &owner, &err);
    cJSON_Delete(doc);
    return rc ? cr_send_error(c, &err) : cr_send_cjson(c, 200, cJSON_CreateObject());
}

/* ---- unregister ----------------------------------------------------------------------------- */

enum MHD_Result cr_kserve_shm_unregister(cr_conn *c)
{
    char buf[CR_SHM_NAME_MAX + 1];
    const char *name;
    cr_error err;
    if (!path_region(c, buf, sizeof buf, &name))
        return MHD_YES;
    int rc = unregister_body(c, &err) ? -1 : name ? cr_shm_unregister(name, &err) : cr_shm_unregister_all(&err);
    return rc ? cr_send_error(c, &err) : cr_send_cjson(c, 200, cJSON_CreateObject());
}

/* ---- CUDA shared memory ----------------------------------------------------------------------
 *   GET  /v2/cudasharedmemory/status, /v2/cudasharedmemory/region/{name}/status
 *   POST /v2/cudasharedmemory/region/{name}/register
 *        {"raw_handle": {"b64": "<cudaIpcMemHandle_t, base64>"}, "device_id": N, "byte_size": N}
 *   POST /v2/cudasharedmemory/region/{name}/unregister, /v2/cudasharedmemory/unregister */

enum MHD_Result cr_kserve_cuda_shm_status(cr_conn *c)
{
    char buf[CR_SHM_NAME_MAX + 1];
    const char *name;
    if (!path_region(c, buf, sizeof buf, &name))
        return MHD_YES;
    cr_cuda_shm_info *list;
    size_t n;
    cr_error err;
    if (cr_cuda_shm_status(name, &list, &n, &err) != 0)
        return cr_send_error(c, &err);
    cJSON *doc = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", list[i].name);
        cJSON_AddNumberToObject(o, "device_id", list[i].device_id);
        cJSON_AddNumberToObject(o, "byte_size", (double)list[i].byte_size);
        cJSON_AddItemToArray(doc, o);
    }
    free(list);
    return cr_send_cjson(c, 200, doc);
}

#define IPC_HANDLE_MAX 128 /* a cudaIpcMemHandle_t is 64 bytes; room to say a longer one is wrong */

/* raw_handle: {"b64": "..."} holding the handle's bytes; *len of them into handle. */
static int parse_handle(const cJSON *doc, unsigned char *handle, size_t *len, cr_error *err)
{
    const cJSON *raw = cJSON_GetObjectItemCaseSensitive(doc, "raw_handle");
    const cJSON *b64 = cJSON_IsObject(raw) ? cJSON_GetObjectItemCaseSensitive(raw, "b64") : NULL;
    if (!cJSON_IsString(b64))
        return cr_fail(err, 400, raw ? "invalid_field" : "missing_field", "raw_handle",
                       "raw_handle must be {\"b64\": the cudaIpcMemHandle_t's bytes in base64}");
    long n = cr_base64_decode(b64->valuestring, strlen(b64->valuestring), handle, IPC_HANDLE_MAX);
    if (n < 0)
        return cr_fail(err, 400, "invalid_field", "raw_handle", "raw_handle.b64 is not base64 of a CUDA IPC handle");
    *len = (size_t)n;
    return 0;
}

static int parse_cuda_register(const char *body, size_t len, unsigned char *handle, size_t *handle_len,
                               int *device, uint64_t *byte_size, cr_error *err)
{
    cJSON *doc = parse_whole(body, len);
    int rc = -1;
    uint64_t dev = 0;
    if (!cJSON_IsObject(doc)) {
        cr_fail(err, 400, "invalid_json", "", "the body must be a JSON object {\"raw_handle\", \"device_id\", "
                "\"byte_size\"}");
        goto cleanup;
    }
    for (const cJSON *f = doc->child; f; f = f->next)
        if (strcmp(f->string, "raw_handle") && strcmp(f->string, "device_id") && strcmp(f->string, "byte_size")) {
            cr_fail(err, 400, "invalid_field", f->string,
                    "unknown field \"%.64s\" (raw_handle, device_id, byte_size)", f->string);
            goto cleanup;
        }
    if (parse_handle(doc, handle, handle_len, err) || body_count(doc, "device_id", true, &dev, err) ||
        body_count(doc, "byte_size", true, byte_size, err))
        goto cleanup;
    if (dev > 1024) {
        cr_fail(err, 400, "invalid_field", "device_id", "device_id %llu is not a device", (unsigned long long)dev);
        goto cleanup;
    }
    *device = (int)dev;
    rc = 0;
cleanup:
    cJSON_Delete(doc);
    return rc;
}

enum MHD_Result cr_kserve_cuda_shm_register(cr_conn *c)
{
    char buf[CR_SHM_NAME_MAX + 1];
    const char *name;
    unsigned char handle[IPC_HANDLE_MAX];
    size_t handle_len = 0;
    int device = 0;
    uint64_t byte_size = 0;
    cr_error err;
    if (!path_region(c, buf, sizeof buf, &name))
        return MHD_YES;
    if (parse_cuda_register(c->body ? c->body : "", c->len, handle, &handle_len, &device, &byte_size, &err) ||
        cr_cuda_shm_register(name, handle, handle_len, device, byte_size, &err))
        return cr_send_error(c, &err);
    return cr_send_cjson(c, 200, cJSON_CreateObject());
}

enum MHD_Result cr_kserve_cuda_shm_unregister(cr_conn *c)
{
    char buf[CR_SHM_NAME_MAX + 1];
    const char *name;
    cr_error err;
    if (!path_region(c, buf, sizeof buf, &name))
        return MHD_YES;
    int rc = unregister_body(c, &err)    ? -1
             : name ? cr_cuda_shm_unregister(name, &err)
                    : cr_cuda_shm_unregister_all(&err);
    return rc ? cr_send_error(c, &err) : cr_send_cjson(c, 200, cJSON_CreateObject());
}
