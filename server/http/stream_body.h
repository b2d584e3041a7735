/* A streamed body (issue 37): POST or PUT to /v1/ata or /v1/histogram with Transfer-Encoding:
 * chunked, or a PUT of any length (curl -T -): raw little-endian rows (application/octet-stream,
 * ?dtype= and, for AᵀA, ?cols=N), a .npy (its header first, C order for AᵀA), or a histogram's
 * bytes. Read by the direct path on its own thread, the body is cut into parts of whole rows as it
 * arrives; each part runs as a job while the next one is received, its result folded into an
 * anonymous stream's accumulator (server/engine/streams.h), and nothing holds the whole body: the
 * memory is the answer's size plus a few parts in flight. The answer is the stream's result, as a
 * synchronous request's. */
#ifndef CRUNCHD_HTTP_STREAM_BODY_H
#define CRUNCHD_HTTP_STREAM_BODY_H

#include <stdbool.h>

#include "server/http/body_stream.h"
#include "server/http/conn.h"
#include "server/http/http_head.h"

/* Bytes of one part: whole rows up to this (a few are in flight per stream). */
#define CR_STREAM_PART_BYTES (32u << 20)

/* Whether the request is a streamed body of ours (the direct path takes it whatever its size). */
bool cr_stream_body_takes(const cr_head *hd);
/* Opens the stream for c (refusals answered as any early refusal); MHD_YES to read the body. */
enum MHD_Result cr_stream_body_begin(cr_conn *c);
/* Reads the body into parts and runs them. 0 when the body was read (or a refusal stopped it: the
 * answer says why), -1 when the connection broke. */
int cr_stream_body_receive(cr_conn *c, cr_body_stream *s);
/* The handler: waits for the parts in flight, then answers the stream's result or its error. */
enum MHD_Result cr_stream_body_answer(cr_conn *c);
/* PUT /v1/ata and /v1/histogram that libmicrohttpd got (TLS, or --direct-min-kb 0): refused at
 * once, since only the direct path streams. */
enum MHD_Result cr_route_streamed(cr_conn *c);

#endif
