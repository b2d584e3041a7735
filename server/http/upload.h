/* Binary request bodies over HTTP (design.md, "Binary"): multipart/form-data with .npy parts
 * (libmicrohttpd's post processor splits the parts), an application/x-npy body, or raw
 * application/octet-stream bytes; parameters in the query string. The glue between
 * libmicrohttpd and binary_request.c, which streams the arrays into their buffers. */
#ifndef CRUNCHD_UPLOAD_H
#define CRUNCHD_UPLOAD_H

#include "server/codec/binary_decode.h"
#include "server/http/body_stream.h"
#include "server/http/conn.h"

typedef struct cr_upload cr_upload;

/* First call of a POST whose Content-Type is not JSON: checks the type against the route (415
 * naming Content-Type), the query parameters (400 naming one), the declared length against
 * --max-body-mb (413; 411 for raw bytes without one), and sets c->upload. Answers the refusals
 * itself; always MHD_YES unless the connection must be dropped. */
enum MHD_Result cr_upload_begin(cr_conn *c);
/* Whether ct is a binary body type cr_upload_begin takes (multipart/form-data, application/x-npy,
 * application/octet-stream). */
bool cr_upload_takes(const char *ct);

/* A chunk of the body (decoded, when it was sent coded: the limits count decoded bytes):
 * streamed into place, or refused (the buffers freed at once, the answer given when the body
 * is complete). Raw bytes of a coded body are buffered until their length is known. Consumes
 * *size. */
enum MHD_Result cr_upload_feed(cr_conn *c, const char *data, size_t *size);

/* The whole body read by us from the socket (the Unix socket's direct path, direct.c) instead of
 * fed by libmicrohttpd: arrays' data is received straight into them, multipart parsed here. A
 * refusal is kept as cr_upload_feed keeps it (the rest of the body read and dropped). 0 once the
 * body is read, -1 when the connection failed (s->error). */
int cr_upload_receive(cr_conn *c, cr_body_stream *s);

/* Once the body is complete: the decoded request (every part present, complete, conforming). */
int cr_upload_request(cr_conn *c, cr_request *out, cr_error *err);

/* The same for POST /v1/tensors: the one array, in out's slot A (its buffer: host memory, or the
 * device buffer it was received into, out->buf_on_device[0]), with its shape and dtype. */
int cr_upload_array(cr_conn *c, cr_request *out, cr_shape *shape, cr_dtype *dt, cr_error *err);

/* Whether the body was refused on its way in (the reason is answered once it is complete). */
bool cr_upload_failed(const cr_conn *c);

void cr_upload_free(cr_conn *c);

/* The host memory a request's binary arrays are received into: the backend's (pinned on cuda,
 * where the worker then copies without staging), with its device sinks for big matrices. */
cr_host_allocator cr_upload_allocator(const cr_conn *c);

#endif
