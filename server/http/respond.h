/* Answers: every response a handler sends goes through here, so the common headers (Retry-After,
 * the job's id and Server-Timing) and the error body shape (v1 or KServe's) are decided once. */
#ifndef CRUNCHD_HTTP_RESPOND_H
#define CRUNCHD_HTTP_RESPOND_H

#include <cjson/cJSON.h>

#include "server/codec/answer_deflate.h"

#include "server/http/conn.h"

/* A request header's value, or NULL. */
const char *cr_header(cr_conn *c, const char *name);
/* Calls it on each query parameter (decoded; value NULL for a bare key) until it says MHD_NO
 * (it may be NULL: only count). How many it saw. */
int cr_query_each(cr_conn *c, MHD_KeyValueIterator it, void *cls);
/* The query parameter key's value ("" for a bare key), or NULL when absent. */
const char *cr_query_value(cr_conn *c, const char *key);

/* Sends body (malloc'd; owned from here on, NULL means out of memory: a 503 goes instead). */
enum MHD_Result cr_send(cr_conn *c, int status, const char *content_type, char *body, size_t len);
/* The same for a body of up to two spans (a header, then a buffer kept elsewhere: a job's output),
 * valid until done(cls) is called once the answer is sent (or could not be). */
enum MHD_Result cr_send_spans(cr_conn *c, int status, const char *content_type, const cr_span *spans, int n,
                              void (*done)(void *cls), void *cls);
/* A copy of a constant text. */
enum MHD_Result cr_send_text(cr_conn *c, int status, const char *content_type, const char *text);
/* A cJSON document as compact JSON; takes and deletes doc. */
enum MHD_Result cr_send_cjson(cr_conn *c, int status, cJSON *doc);
/* The error body of the route's protocol: v1's {"error": {code, message, field}} or KServe's. */
enum MHD_Result cr_send_error(cr_conn *c, const cr_error *e);
/* cr_fail + cr_send_error in one call. */
__attribute__((format(printf, 5, 6))) enum MHD_Result
cr_refuse(cr_conn *c, int status, const char *code, const char *field, const char *fmt, ...);
/* A JSON response of body (owned from here on) for the caller to add headers to, then cr_queue;
 * NULL when memory ran out (body freed). */
struct MHD_Response *cr_json_response(cr_conn *c, char *body, size_t len);
/* Queues a response the caller built (iovec bodies, extra headers), then drops the caller's
 * reference to it. Adds what every answer carries: X-Request-Id, the CORS headers, Vary. */
enum MHD_Result cr_queue(cr_conn *c, int status, struct MHD_Response *r);

#endif
