/* Request bodies sent with Content-Encoding gzip or deflate, for every route at once: decoded as
 * they arrive, before the route's own reader (JSON buffer, .npy stream, multipart parser,
 * KServe) sees a byte, so the limits and the memory budget count decoded bytes
 * (server/codec/body_inflate.h does the decoding). */
#ifndef CRUNCHD_HTTP_BODY_CODING_H
#define CRUNCHD_HTTP_BODY_CODING_H

#include "server/http/conn.h"

/* Where the decoded body goes: the listener's reader of the route's body. */
typedef enum MHD_Result (*cr_body_reader)(cr_conn *c, const char *data, size_t n);

/* First call of a request with a body: reads Content-Encoding and sets up the decoder. -1 with
 * err (415 naming Content-Encoding) for a coding we do not decode. */
int cr_body_coding_begin(cr_conn *c, cr_error *err);

/* A chunk of a coded body as sent: decoded into read. Stops decoding once the body was refused;
 * a coded body longer than its limit as sent drops the connection (the decoded one is refused
 * with 413 by read, as any body). */
enum MHD_Result cr_body_coding_feed(cr_conn *c, const char *data, size_t n, cr_body_reader read);

/* The body is complete: -1 with the refusal recorded (cr_body_refuse_later) when its stream was
 * not. */
int cr_body_coding_end(cr_conn *c);

void cr_body_coding_free(cr_conn *c);

#endif
