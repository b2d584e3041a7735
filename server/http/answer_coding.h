/* Answers compressed for every route at once: gzip or deflate when the client's
 * Accept-Encoding allows it and it is worth it (server/codec/answer_deflate.h), read from where
 * the answer already lies as it is sent. */
#ifndef CRUNCHD_HTTP_ANSWER_CODING_H
#define CRUNCHD_HTTP_ANSWER_CODING_H

#include "server/codec/answer_deflate.h"
#include "server/http/conn.h"

/* The response for an answer of spans (read in place until done(cls) is called; done may be
 * NULL), compressed in the coding the client accepts when cr_deflate_worth_it, with
 * Content-Type and, when compressed, Content-Encoding. Vary: Accept-Encoding is noted on c for
 * every answer that could have been compressed. NULL when out of memory (done called). */
struct MHD_Response *cr_answer_response(cr_conn *c, const char *content_type, const cr_span *spans,
                                          int n, void (*done)(void *cls), void *cls);

#endif
