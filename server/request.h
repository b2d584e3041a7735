/* A decoded, validated request: what the client asked for, with its input arrays in memory the
 * request owns. Produced by the decoders (JSON, later .npy/multipart), consumed by the engine. */
#ifndef CRUNCHD_REQUEST_H
#define CRUNCHD_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../kernels/backend.h"
#include "error.h"

/* Limits enforced while decoding, before memory is spent on the declared sizes. */
typedef struct {
    uint64_t max_elements;   /* per array */
    uint64_t max_total_bytes;/* all input and output arrays of one request together */
    int32_t max_bins;
} cr_limits;

#define CR_KERNEL_NAME_MAX 32
#define CR_REQUEST_BUFS 4
/* Slots 0..2 hold inputs (a, b, c or data); the last holds the output. */
#define CR_BUF_OUTPUT (CR_REQUEST_BUFS - 1)

typedef struct {
    cr_task task;                       /* pointers in task.u.* point into bufs */
    char kernel[CR_KERNEL_NAME_MAX];    /* a kernel name, "auto" or "all" */
    bool is_float_hist;                 /* histogram of float data: response carries edges */
    int64_t timeout_ms;                 /* 0: server default */
    void *bufs[CR_REQUEST_BUFS];        /* owned; freed by cr_request_free */
    size_t buf_bytes[CR_REQUEST_BUFS];
    /* How each buf is freed (NULL: free()): binary uploads land in the backend's pinned host
     * memory, which only its own allocator may release. */
    void (*buf_free[CR_REQUEST_BUFS])(void *p);
    /* The allocator for the output buffer (NULL: malloc), so a pinned request gets a pinned
     * output and the worker copies the result back without staging. */
    void *(*out_alloc)(size_t bytes);
    void (*out_free)(void *p);
    uint64_t body_bytes;                /* size of the request as received */
} cr_request;

/* Decodes a JSON body. op == CR_OP_COUNT means "read the op from the body's \"op\" field" (the
 * async /v1/jobs form). On failure returns -1 with err filled (field named) and *out freed. */
int cr_request_from_json(cr_op op, const char *body, size_t len, const cr_limits *lim,
                         cr_request *out, cr_error *err);

/* Allocates the output buffer for task (C matrix, counts) in out->bufs; -1 on failure. */
int cr_request_alloc_output(cr_request *r, cr_error *err);

/* Frees one buffer with the allocator that made it. */
void cr_request_free_buf(cr_request *r, int slot);

void cr_request_free(cr_request *r);

#endif
