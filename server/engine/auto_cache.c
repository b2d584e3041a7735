/* The auto table in a file; see auto_cache.h. JSON through cJSON: a person can read what the
 * daemon chose, and a file from another build is refused by its key, not misread. */
#include "server/engine/auto_cache.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/build_info.h"

#define MAX_FILE_BYTES (1 << 20) /* 43 rows take ~7 KB */
/* The table's layout, in the key: a file of another layout (version 1 had no size classes
 * beyond small and large) is another key, so it is measured again and rewritten. */
#define TABLE_FORMAT "auto-table 2"

void cr_auto_cache_key(const cr_backend *b, const char *device, char *key, size_t n)
{
    cr_build_info bi;
    cr_build_info_get(&bi);
    struct stat st;
    if (stat("/proc/self/exe", &st) < 0)
        memset(&st, 0, sizeof st);
    snprintf(key, n, "crunchd %s %s exe %lld:%lld.%09ld backend %s cuda %s/%s device %s %s", bi.version,
             bi.git_revision, (long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec, b->name,
             bi.cuda_runtime, bi.cuda_driver, device, TABLE_FORMAT);
}

static char *read_small_file(const char *path, char *why, size_t whylen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, whylen, "%s", strerror(errno));
        return NULL;
    }
    char *text = malloc(MAX_FILE_BYTES + 1);
    size_t len = text ? fread(text, 1, MAX_FILE_BYTES + 1, f) : 0;
    fclose(f);
    if (!text || len > MAX_FILE_BYTES) {
        snprintf(why, whylen, "%s", text ? "larger than 1 MiB" : "out of memory");
        free(text);
        return NULL;
    }
    text[len] = '\0';
    return text;
}

static const char *op_name(int i) { return cr_op_name((cr_op)i); }
static const char *dtype_name(int i) { return cr_dtype_name((cr_dtype)i); }
static const char *precision_name(int i) { return cr_precision_name((cr_precision)i); }
static const char *class_name(int i) { return cr_size_class_name((cr_size_class)i); }

/* What "large" says beside a class (cr_auto_row). */
static bool class_is_large(int cls)
{
    return cls == CR_CLASS_LARGE || cls == CR_CLASS_TALL || cls == CR_CLASS_STACK_LARGE;
}

/* A field naming one of count values (as GET /v1/kernels writes them, so that the file reads as
 * the table does): its index, or -1. */
static int name_field(const cJSON *o, const char *field, const char *(*name_of)(int), int count, int *v)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, field);
    for (int i = 0; cJSON_IsString(x) && i < count; i++)
        if (strcmp(x->valuestring, name_of(i)) == 0)
            return *v = i, 0;
    return -1;
}

/* One row; its kernel (null: none for this row) must be one of b's, and its "large" what its
 * class says. */
static int read_row(const cJSON *o, const cr_backend *b, cr_auto_row *r)
{
    int op, dtype, prec, cls;
    const cJSON *large = cJSON_GetObjectItemCaseSensitive(o, "large");
    const cJSON *kernel = cJSON_GetObjectItemCaseSensitive(o, "kernel");
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(o, "ms");
    const cJSON *probe = cJSON_GetObjectItemCaseSensitive(o, "probe");
    bool fields_ok = name_field(o, "op", op_name, CR_OP_COUNT, &op) == 0 &&
                     name_field(o, "dtype", dtype_name, CR_DT_COUNT, &dtype) == 0 &&
                     name_field(o, "precision", precision_name, CR_PREC_TF32 + 1, &prec) == 0 &&
                     name_field(o, "class", class_name, CR_CLASS_COUNT, &cls) == 0 && cJSON_IsBool(large) &&
                     cJSON_IsTrue(large) == class_is_large(cls) &&
                     cJSON_IsNumber(ms) && isfinite(ms->valuedouble) && ms->valuedouble >= 0 &&
                     cJSON_IsString(probe) && (cJSON_IsNull(kernel) || cJSON_IsString(kernel));
    if (!fields_ok)
        return -1;
    *r = (cr_auto_row){.op = (cr_op)op, .dtype = (cr_dtype)dtype, .large = cJSON_IsTrue(large),
                       .cls = (cr_size_class)cls, .precision = (cr_precision)prec, .ms = ms->valuedouble};
    snprintf(r->probe, sizeof r->probe, "%s", probe->valuestring);
    if (cJSON_IsString(kernel) && !(r->kernel = cr_kernel_find(b, r->op, kernel->valuestring)))
        return -1;
    return 0;
}

int cr_auto_cache_load(const char *path, const char *key, const cr_backend *b, cr_auto_table *out, char *why,
                       size_t whylen)
{
    int rc = -1;
    cr_auto_row *rows = NULL;
    char *text = read_small_file(path, why, whylen);
    cJSON *doc = text ? cJSON_Parse(text) : NULL;
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(doc, "key");
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(doc, "rows");
    if (!text)
        goto cleanup;
    if (!cJSON_IsString(k) || !cJSON_IsArray(list) || cJSON_GetArraySize(list) < 1) {
        snprintf(why, whylen, "not an auto table");
        goto cleanup;
    }
    if (strcmp(k->valuestring, key) != 0) {
        snprintf(why, whylen, "measured by another build or on another device");
        goto cleanup;
    }
    size_t n = (size_t)cJSON_GetArraySize(list), i = 0;
    if (!(rows = calloc(n, sizeof *rows))) {
        snprintf(why, whylen, "out of memory");
        goto cleanup;
    }
    const cJSON *o;
    cJSON_ArrayForEach(o, list) {
        if (read_row(o, b, &rows[i++]) < 0) {
            snprintf(why, whylen, "row %zu is malformed or names an unknown kernel", i);
            goto cleanup;
        }
    }
    *out = (cr_auto_table){rows, n};
    rows = NULL;
    rc = 0;
cleanup:
    free(rows);
    cJSON_Delete(doc);
    free(text);
    return rc;
}

static cJSON *table_json(const char *key, const cr_auto_table *t)
{
    cJSON *doc = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(doc, "rows");
    cJSON_AddStringToObject(doc, "key", key);
    for (size_t i = 0; list && i < t->n; i++) {
        const cr_auto_row *r = &t->rows[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(list, o);
        cJSON_AddStringToObject(o, "op", op_name(r->op));
        cJSON_AddStringToObject(o, "dtype", dtype_name(r->dtype));
        cJSON_AddStringToObject(o, "precision", precision_name(r->precision));
        cJSON_AddBoolToObject(o, "large", r->large);
        cJSON_AddStringToObject(o, "class", class_name(r->cls));
        if (r->kernel)
            cJSON_AddStringToObject(o, "kernel", r->kernel->name);
        else
            cJSON_AddNullToObject(o, "kernel");
        cJSON_AddNumberToObject(o, "ms", r->ms);
        cJSON_AddStringToObject(o, "probe", r->probe);
    }
    return doc;
}

int cr_auto_cache_save(const char *path, const char *key, const cr_auto_table *t, char *err, size_t errlen)
{
    char tmp[4096] = "";
    cJSON *doc = table_json(key, t);
    char *text = doc ? cJSON_Print(doc) : NULL;
    FILE *f = NULL;
    int rc = -1;
    if (!text) {
        snprintf(err, errlen, "out of memory");
        goto cleanup;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()); /* two daemons may share the path */
    if (!(f = fopen(tmp, "wb")) || fputs(text, f) == EOF || fputc('\n', f) == EOF) {
        snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        goto cleanup;
    }
    int closed = fclose(f);
    f = NULL;
    if (closed != 0 || rename(tmp, path) < 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        goto cleanup;
    }
    rc = 0;
cleanup:
    if (f)
        fclose(f);
    if (rc < 0 && tmp[0])
        unlink(tmp);
    free(text);
    cJSON_Delete(doc);
    return rc;
}
