/* Binary request bodies -> cr_request, streaming: each array (a .npy part, or raw uint8 bytes)
 * is allocated once, from its declared size after the limits are checked, and every arriving
 * chunk is copied straight into place. Knows nothing of HTTP: upload.c feeds it from
 * libmicrohttpd (multipart parts, or the whole body as one part). */
#ifndef CRUNCHD_BINARY_REQUEST_H
#define CRUNCHD_BINARY_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/codec/query.h"
#include "server/request.h"

/* Where input buffers come from: the backend's host allocator (pinned memory on cuda, so the
 * worker copies to the device straight from them), NULL members meaning malloc/free. `ready`
 * (optional) hears how much of an allocated buffer is final as the body arrives. */
typedef struct {
    void *(*alloc)(size_t bytes);
    void (*free)(void *p);
    void (*ready)(void *p, size_t ready, size_t total);
    /* Optional: a backend whose sink_* (backend.h) receive big matrices straight to one of its
     * first `devices` devices, never whole in host memory; the request's job then runs there. */
    const cr_backend *sink;
    int devices;
} cr_host_allocator;

typedef struct cr_bin_part cr_bin_part;
typedef struct cr_bin_request cr_bin_request;

/* NULL when out of memory. params must have passed cr_params_finish. */
cr_bin_request *cr_bin_new(const cr_params *params, const cr_limits *lim, cr_host_allocator a);
void cr_bin_free(cr_bin_request *r);

/* The body's single part: "a" for ata, "data" for histogram. */
const char *cr_bin_body_part_name(cr_op op);
/* Whether the query names a resident tensor for part `name` (?tensor_a=...). */
bool cr_bin_names_tensor(const cr_bin_request *r, const char *name);

/* Starts the part `name` ("a", "b", "c", "data"); unknown or repeated names are refused. */
cr_bin_part *cr_bin_start(cr_bin_request *r, const char *name, cr_error *err);
/* Starts a raw uint8 part of exactly `bytes` bytes (application/octet-stream histograms). */
cr_bin_part *cr_bin_start_raw(cr_bin_request *r, uint64_t bytes, cr_error *err);
/* The next n bytes of a part: header bytes first, then data straight into its buffer. */
int cr_bin_feed(cr_bin_request *r, cr_bin_part *p, const char *data, size_t n, cr_error *err);
/* Where the part's next data bytes may be received in place (a socket read straight into its
 * array: no copy), and how many are still due (*len); NULL while its header is incomplete, for a
 * part scattered as it arrives, or once it is complete: feed those bytes with cr_bin_feed. */
void *cr_bin_span(const cr_bin_request *r, const cr_bin_part *p, size_t *len);
/* How many of the part's next bytes must pass through a reader's buffer before the rest can be
 * received in place: what its .npy header still lacks (0 once it is parsed, or the part is
 * complete); SIZE_MAX for a part whose data goes through the buffer anyway (scattered). */
size_t cr_bin_buffered_need(const cr_bin_part *p);
/* n bytes landed at cr_bin_span's address; -1 with err when they could not be passed on (a
 * copy to the device failed: the part is lost, the request must fail). */
int cr_bin_spanned(cr_bin_request *r, cr_bin_part *p, size_t n, cr_error *err);
/* Bytes of the parts received straight to a device so far (cr_host_allocator.sink). */
uint64_t cr_bin_device_bytes(const cr_bin_request *r);
/* The query's resident tensor operands (tensor_a, ...), owner's, held from now (404 for an unknown
 * one); the parts that do come are received to their device. */
int cr_bin_tensors(cr_bin_request *r, const char *owner, cr_error *err);
/* A tensor upload's one array (cr_params_init_tensor): complete, moved into out's slot A. */
int cr_bin_finish_array(cr_bin_request *r, cr_request *out, cr_shape *shape, cr_dtype *dt, cr_error *err);
/* Every part complete and conforming: moves the arrays into out (a request the engine can run;
 * out's bufs are freed by cr_request_free with the allocator that made them). */
int cr_bin_finish(cr_bin_request *r, cr_request *out, cr_error *err);

#endif
