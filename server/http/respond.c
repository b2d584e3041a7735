/* Answers; see respond.h. */
#include "server/http/respond.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/codec/json_encode.h"
#include "server/http/answer_coding.h"
#include "server/http/direct_io.h"

const char *cr_header(cr_conn *c, const char *name)
{
    return c->direct ? cr_direct_header(c->direct, name) : MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, name);
}

int cr_query_each(cr_conn *c, MHD_KeyValueIterator it, void *cls)
{
    return c->direct ? cr_direct_args(c->direct, it, cls) : MHD_get_connection_values(c->conn, MHD_GET_ARGUMENT_KIND, it, cls);
}

typedef struct {
    const char *key, *value;
    bool found;
} query_find;

static enum MHD_Result find_key(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    query_find *q = cls;
    if (!key || strcmp(key, q->key) != 0)
        return MHD_YES;
    q->value = value ? value : "";
    q->found = true;
    return MHD_NO;
}

const char *cr_query_value(cr_conn *c, const char *key)
{
    query_find q = {key, NULL, false};
    cr_query_each(c, find_key, &q);
    return q.found ? q.value : NULL;
}

/* CORS on: an allowed origin may read the answer and the headers a script needs; the answer
 * depends on Origin either way, so caches keep one per origin. */
static void add_cors_headers(cr_conn *c, struct MHD_Response *r)
{
    const char *origin = cr_header(c, "Origin");
    if (!cr_cors_allows(&c->h->cors, origin))
        return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
    MHD_add_response_header(r, "Access-Control-Expose-Headers", CR_CORS_EXPOSE_HEADERS);
}

static void add_vary(cr_conn *c, struct MHD_Response *r)
{
    bool origin = c->h->cors.enabled;
    if (c->vary_encoding || origin)
        MHD_add_response_header(r, MHD_HTTP_HEADER_VARY,
                                c->vary_encoding && origin ? "Accept-Encoding, Origin"
                                : origin                   ? "Origin"
                                                           : "Accept-Encoding");
}

/* Every answer of ours passes here: the headers all of them carry are added once. */
enum MHD_Result cr_queue(cr_conn *c, int status, struct MHD_Response *r)
{
    MHD_add_response_header(r, "X-Request-Id", c->request_id);
    add_cors_headers(c, r);
    add_vary(c, r);
    c->status = status;
    /* A draining daemon closes each connection after its answer, so keep-alive clients open a
     * new one for their next request (refused once the daemon is gone) instead of sending it on
     * a connection the exit is about to close under it. */
    if (c->close_after || cr_engine_draining(c->h->deps.engine))
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    if (c->direct)
        return cr_direct_queue(c, status, r);
    enum MHD_Result ret = MHD_queue_response(c->conn, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

struct MHD_Response *cr_json_response(cr_conn *c, char *body, size_t len)
{
    cr_span span = {body, len};
    return body ? cr_answer_response(c, "application/json", &span, 1, free, body) : NULL;
}

/* The job a response is about: its id, where its time went, the kernel that ran it. */
static void add_job_headers(struct MHD_Response *r, const cr_job *j)
{
    char timing[256];
    MHD_add_response_header(r, "X-Crunchd-Job-Id", j->id);
    cr_server_timing(&j->ms, timing, sizeof timing);
    MHD_add_response_header(r, "Server-Timing", timing);
    if (cr_job_kernel_name(j))
        MHD_add_response_header(r, "X-Crunchd-Kernel", cr_job_kernel_name(j));
}

enum MHD_Result cr_send(cr_conn *c, int status, const char *content_type, char *body, size_t len)
{
    if (!body) {
        static const char oom[] = "{\"error\":{\"code\":\"host_memory\",\"message\":\"out of memory\"}}";
        status = 503;
        len = sizeof oom - 1;
        body = malloc(len);
        if (!body)
            return MHD_NO;
        memcpy(body, oom, len);
    }
    cr_span span = {body, len};
    return cr_send_spans(c, status, content_type, &span, 1, free, body);
}

enum MHD_Result cr_send_spans(cr_conn *c, int status, const char *content_type, const cr_span *spans, int n,
                              void (*done)(void *cls), void *cls)
{
    struct MHD_Response *r = cr_answer_response(c, content_type, spans, n, done, cls);
    if (!r)
        return MHD_NO;
    if (status == 503 || status == 429)
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (c->extra_header)
        MHD_add_response_header(r, c->extra_header, c->extra_value);
    if (c->job)
        add_job_headers(r, c->job);
    return cr_queue(c, status, r);
}

enum MHD_Result cr_send_text(cr_conn *c, int status, const char *content_type, const char *text)
{
    size_t len = strlen(text);
    char *body = malloc(len + 1);
    if (body)
        memcpy(body, text, len + 1);
    return cr_send(c, status, content_type, body, len);
}

enum MHD_Result cr_send_cjson(cr_conn *c, int status, cJSON *doc)
{
    char *body = doc ? cJSON_PrintUnformatted(doc) : NULL;
    cJSON_Delete(doc);
    return cr_send(c, status, "application/json", body, body ? strlen(body) : 0);
}

enum MHD_Result cr_send_error(cr_conn *c, const cr_error *e)
{
    size_t len = 0;
    snprintf(c->error_code, sizeof c->error_code, "%s", e->code);
    char *body = c->kserve ? cr_json_error_v2(e, &len) : cr_json_error(e, &len);
    return cr_send(c, e->http, "application/json", body, len);
}

enum MHD_Result cr_refuse(cr_conn *c, int status, const char *code, const char *field, const char *fmt, ...)
{
    char msg[sizeof ((cr_error *)0)->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cr_error e;
    cr_fail(&e, status, code, field, "%s", msg);
    return cr_send_error(c, &e);
}
