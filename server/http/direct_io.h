/* The Unix socket's direct path (direct.h), the transport's side: what a cr_conn whose request
 * crunchd reads itself (c->direct) uses instead of libmicrohttpd for its headers, query, answer
 * and sync wait (respond.c, answer_coding.c, submit.c, upload.c), and the state of that request. */
#ifndef CRUNCHD_HTTP_DIRECT_IO_H
#define CRUNCHD_HTTP_DIRECT_IO_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/uio.h>

#include "server/codec/answer_deflate.h"
#include "server/http/body_stream.h"
#include "server/http/conn.h"
#include "server/http/http_head.h"

/* The stop flag is looked at this often while a job runs or a socket waits. */
#define CR_DIRECT_SLICE_NS 100000000L

typedef struct cr_direct {
    int fd;
    const cr_head *head;
    const _Atomic bool *stop;
    bool expect_continue;      /* the client waits for "100 Continue" before sending its body */
    bool body_read;            /* answers are written at once from here on */
    bool close;                /* the connection ends with this answer */
    bool written;              /* an answer went out whole */
    struct MHD_Response *pending; /* an answer given before the body was read: sent after it */
    int pending_status;
    cr_span spans[2];
    int nspans;
    /* The last span lies in device memory (a big .npy result kept there, answer.c): sent piece by
     * piece as stream_read hands it out (backend.h, sink_read). */
    int (*stream_read)(cr_sink *s, const void **p, size_t *len);
    cr_sink *stream;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool woken;
    cr_body_stream body;
} cr_direct;

const char *cr_direct_header(const cr_direct *d, const char *name);
int cr_direct_args(const cr_direct *d, MHD_KeyValueIterator it, void *cls);
/* The answer's body (up to 2 spans), valid until its response is destroyed. */
void cr_direct_keep_body(cr_direct *d, const cr_span *spans, int n);
/* The kept body's last span is on a device: read gives its bytes in pieces (see above). */
void cr_direct_stream_last(cr_direct *d, int (*read)(cr_sink *s, const void **p, size_t *len), cr_sink *s);
/* Writes the answer (or keeps it until the body has been read); takes r. */
enum MHD_Result cr_direct_queue(cr_conn *c, int status, struct MHD_Response *r);
/* Blocking with a timeout of one slice each way, or (false) back to non-blocking. */
int cr_direct_set_blocking(int fd, bool blocking);
/* Everything in iov out, within timeout_s of no progress. 0, or -1. */
int cr_direct_send(cr_direct *d, struct iovec *iov, int n, int timeout_s);
/* The job's worker (or the drain's cut-off) wakes the request's thread. */
void cr_direct_wake(cr_direct *d);
/* Blocks until woken (true) or the daemon stops (false). */
bool cr_direct_wait_woken(cr_direct *d);

#endif
