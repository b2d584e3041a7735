/* A decoded, validated request: what the client asked for, with its input arrays in memory the
 * request owns. The decoders (codec/json_decode, codec/binary_decode, kserve/kserve_decode) only
 * fill one; its life cycle is here: limits, the output buffer, freeing. The engine consumes it. */
#ifndef CRUNCHD_REQUEST_H
#define CRUNCHD_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"
#include "kernels/registry.h"
#include "server/config.h"
#include "server/error.h"
#include "server/shape.h"

/* Limits enforced while decoding, before memory is spent on the declared sizes. */
typedef struct {
    uint64_t max_elements;   /* per array */
    uint64_t max_total_bytes;/* all input and output arrays of one request together */
    int32_t max_bins;
    int64_t max_stack;       /* matrices in one stack (server/shape.h) */
} cr_limits;

/* The longest deadline a request may ask for, ms, however it asks (the body's timeout_ms, the
 * query's, X-Crunchd-Timeout-Ms): 2^53, the largest integer a JSON number holds exactly, so
 * every form has the same limit and the same refusal. */
#define CR_TIMEOUT_MS_MAX 9007199254740992LL

#define CR_REQUEST_BUFS 4
/* Slots 0..2 hold inputs (a, b, c or data); the last holds the output. */
enum { CR_BUF_A = 0, CR_BUF_B = 1, CR_BUF_C = 2, CR_BUF_OUTPUT = CR_REQUEST_BUFS - 1 };

typedef struct {
    cr_task task;                       /* pointers in task.u.* point into bufs; task.kernel is
                                           set by the engine when it resolves `kernel` */
    cr_kernel_choice kernel;            /* what the client asked: auto, all or a name */
    /* The result's shape as numpy.matmul gives it (a stack's batch dimensions, a 1-D operand's
     * dimension removed); when !shaped, the task's own (m x n, n x n, or the bins). */
    bool shaped;
    cr_shape out_shape;
    bool is_float_hist;                 /* histogram of float data: response carries edges */
    int64_t timeout_ms;                 /* 0: server default */
    void *bufs[CR_REQUEST_BUFS];        /* owned (or borrowed, below); freed by cr_request_free */
    size_t buf_bytes[CR_REQUEST_BUFS];
    /* How each buf is freed (NULL: free()): binary uploads land in the backend's pinned host
     * memory, which only its own allocator may release. */
    void (*buf_free[CR_REQUEST_BUFS])(void *p);
    /* A borrowed buffer is the client's memory (a registered shared-memory region): never freed
     * and never charged to the memory budget; the request holds it through hold, released with
     * hold_release(hold) when the slot is freed, so the region outlives every job using it. */
    bool buf_borrowed[CR_REQUEST_BUFS];
    void *hold[CR_REQUEST_BUFS];
    void (*hold_release[CR_REQUEST_BUFS])(void *hold);
    /* Borrowed slots in a client's device memory (CUDA shared memory): the host never touches
     * their bytes, and the job runs on that device (`device`), alone, never in a batch. */
    bool buf_on_device[CR_REQUEST_BUFS];
    bool on_device;
    int device;
    /* The allocator for the output buffer (NULL: malloc), so a pinned request gets a pinned
     * output and the worker copies the result back without staging. */
    void *(*out_alloc)(size_t bytes);
    void (*out_free)(void *p);
    /* A big .npy result kept in device memory for the answer to send (server/http/answer.h,
     * cr_answer_plan): the output slot borrows this sink's buffer, which the job's end keeps. */
    cr_sink *out_stream;
    uint64_t body_bytes;                /* size of the request as received */
    uint64_t work_bytes;                /* the backend's working memory for the run, charged at
                                           submit (cr_request_charge_work), released with the inputs */
    /* Where the result goes when the client named a shared-memory output (/v1's "output"): the
     * worker writes it there (a borrowed output slot) and the answer says where instead of
     * carrying it. */
    struct {
        bool on;
        char region[129];               /* CR_SHM_NAME_MAX + 1 (server/kserve/shm_region.h) */
        uint64_t offset, bytes;
    } result_shm;
    /* The result kept as a resident tensor (server/engine/tensors.h): the output slot borrows its
     * memory; a new one is listed once the job finished done, an existing one (accumulated into)
     * already is. The answer gives its metadata instead of the data. */
    struct {
        struct cr_tensor *t;            /* NULL: the result is answered, not kept */
        char id[37], name[129];         /* what the answer says of it, set when the job is done */
        int device;
        double expires_at;
    } result_tensor;
} cr_request;

/* The result's shape: out_shape, or the task's (m, n), (n, n) or (bins,). */
cr_shape cr_request_result_shape(const cr_request *r);

/* The decoders' limits from the configuration; cr_request_default_limits when cfg is NULL
 * (tests, tools): generous but finite. */
cr_limits cr_request_limits(const cr_config *cfg);

/* One buffer of `bytes` for slot, charged to the memory budget (server/memory.h) before it is
 * allocated and released when freed: from alloc (NULL, or when it fails: malloc) and freed by
 * release; NULL with a 413/503 (budget) or 503 host_memory error. Every buffer of a request is
 * made here, so every one is charged. */
void *cr_request_alloc_from(cr_request *r, int slot, size_t bytes, bool zeroed, void *(*alloc)(size_t),
                            void (*release)(void *), cr_error *err);
/* One buffer of `bytes` for slot (the output slot through out_alloc when set, zeroed on
 * request), replacing what the slot held; NULL with a 503 host_memory error. */
void *cr_request_alloc_buf(cr_request *r, int slot, size_t bytes, bool zeroed, cr_error *err);

/* Puts memory the request does not own in slot (freeing what the slot held): p stays valid
 * until the slot is freed, which calls release(hold) (NULL: nothing). Borrowed inputs feed the
 * task as they are; a borrowed output slot of exactly the task's output size becomes the output
 * (cr_request_alloc_output). */
void cr_request_adopt_buf(cr_request *r, int slot, void *p, size_t bytes, void (*release)(void *hold),
                          void *hold);

/* Says that the borrowed slot lies in device `device`'s memory. -1 with a 400 when another
 * slot lies on another device: one job runs on one device. */
int cr_request_mark_device(cr_request *r, int slot, int device, cr_error *err);

/* Allocates the output buffer for the task (C matrix, counts) and points the task at it; a
 * borrowed output slot (cr_request_adopt_buf) is used instead, zeroed for histograms. */
int cr_request_alloc_output(cr_request *r, cr_error *err);

/* Takes slot's buffer out of r, charge and all: the returned owner (NULL when memory ran out, the
 * slot untouched) keeps it until release(owner) frees it as the slot would have (a resident tensor
 * made from an upload keeps the upload's buffer this way). */
void *cr_request_take_buf(cr_request *r, int slot, void (**release)(void *owner));

/* Frees one buffer with the allocator that made it. */
void cr_request_free_buf(cr_request *r, int slot);
/* Inputs are dead once a job ends; a result kept for its TTL should not pin them too. Nor the
 * run's working memory. */
void cr_request_free_inputs(cr_request *r);
/* Charges the host memory the backend will allocate to run the task (backend.h task_host_bytes)
 * to the budget, as scratch, before it is spent. */
int cr_request_charge_work(cr_request *r, uint64_t bytes, cr_error *err);
/* A job's end: its inputs go (cr_request_free_inputs), and so does a borrowed output, whose
 * result is in the client's memory already and is read by no answer: a region is held exactly
 * while a job runs, so an async job does not keep its client from unregistering it. */
void cr_request_end(cr_request *r);

void cr_request_free(cr_request *r);

/* A decoder's working memory beside the body and the arrays (which are charged as allocated):
 * the span table (at most 1 MiB + body/4) and cJSON's tree of what is not a numeric array (at
 * most 1 MiB + body/2, server/codec/json_fastarray.h), reserved for the decode's duration. */
#define CR_DECODE_BYTES(body) ((uint64_t)(body) * 3 / 4 + (2u << 20))
int cr_request_decode_charge(size_t body_bytes, cr_error *err);
void cr_request_decode_release(size_t body_bytes);

#endif
