/* A request body held in memory (JSON, KServe, a coded raw upload): one buffer per request that
 * grows by doubling up to the request's limit, each growth charged to the memory budget first;
 * and the way a body is refused while it is still arriving. */
#ifndef CRUNCHD_HTTP_BODY_H
#define CRUNCHD_HTTP_BODY_H

#include "server/http/conn.h"

/* Appends n bytes to c->body. 0; -1 when c->len would pass c->limit (nothing appended); -2
 * when the budget or malloc refused the growth (err says why). */
int cr_body_append(cr_conn *c, const char *data, size_t n, cr_error *err);

/* Frees the buffer and gives its charge back (c->len stays: it is what arrived). */
void cr_body_free(cr_conn *c);

/* libmicrohttpd (0.9.75) takes no answer while a body arrives: frees the buffer, keeps err to
 * answer once the body is complete, and has the rest of it dropped unread. An upload's arrays
 * are its own to free (cr_upload_free, or its failure path). */
void cr_body_refuse_later(cr_conn *c, const cr_error *err);

#endif
