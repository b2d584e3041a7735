/* Resident tensors (issue 36): an operand uploaded once and named by id in many jobs, and results
 * kept on the device for the next job. A tensor is an owned object (owned.h): its creator owns it
 * (another client is told 404), its bytes count against --tensor-max-mb per device and
 * --tensor-client-max-mb per owner (507 tensor_limit, never someone else's tensor dropped), it
 * expires after --tensor-idle-s unused, and DELETE removes it at once while the jobs using it keep
 * it until they end. On cuda its memory is device memory (backend.h, tensor_alloc), so a job that
 * names it copies nothing to the device and runs where it lies; on cpu it is host memory charged to
 * the memory budget. A restart loses them all: they are a cache of the client's data, not a store.
 *
 * A job holds each tensor it names from decode to its end (the request slot's hold); an output
 * tensor is made at decode on the job's device and published (listed, found by id) only when the
 * job finished done. */
#ifndef CRUNCHD_ENGINE_TENSORS_H
#define CRUNCHD_ENGINE_TENSORS_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/backend.h"
#include "server/error.h"
#include "server/request.h"
#include "server/shape.h"

#define CR_TENSOR_NAME_MAX 128
#define CR_TENSOR_ID_LEN 36
#define CR_TENSOR_MAX_DEVICES 16

typedef struct cr_tensor cr_tensor;

/* What GET /v1/tensors/{id} says of one. */
typedef struct {
    char id[CR_TENSOR_ID_LEN + 1];
    char name[CR_TENSOR_NAME_MAX + 1];  /* "" when none was given */
    cr_shape shape;
    cr_dtype dtype;
    uint64_t bytes;
    int device;                         /* -1: host memory (cpu backend) */
    double created_at, expires_at;      /* seconds since the epoch; expiry if nothing uses it */
} cr_tensor_info;

typedef struct {
    const cr_backend *backend;          /* its tensor_alloc, when it has one, places them on devices */
    int devices;
    uint64_t max_bytes[CR_TENSOR_MAX_DEVICES]; /* --tensor-max-mb per device (cpu: [0], host memory) */
    uint64_t client_max_bytes;          /* --tensor-client-max-mb */
    double idle_s;                      /* --tensor-idle-s; 0: never */
    char instance[128];                 /* --instance-name: answers say which replica holds them */
} cr_tensor_limits;

/* --instance-name, for answers about tensors. */
const char *cr_tensors_instance(void);

void cr_tensors_init(const cr_tensor_limits *lim);
void cr_tensors_shutdown(void);

/* Names: 1 to 128 of [A-Za-z0-9._-], not a UUID (ids are). -1 with a 400 naming field. */
int cr_tensor_check_name(const char *name, const char *field, cr_error *err);

/* A new tensor of shape and dtype for owner, its memory allocated (uninitialized) on device (-1:
 * the device with the most room; host memory without tensor_alloc), charged, not yet listed. name
 * may be NULL or "". NULL with err: 400 bad name, 409 name taken by the owner, 413/507 caps, 503
 * budget, 507 device memory. */
cr_tensor *cr_tensor_new(const char *owner, const char *name, const cr_shape *shape, cr_dtype dt, int device,
                         cr_error *err);
/* The same around memory that already holds the tensor's bytes (an upload's buffer: host memory,
 * or the device buffer it was received into, device >= 0), which release(owner) frees; admitted
 * against the caps like any other. On a backend with device memory, host bytes are copied into
 * a new device buffer and released at once. NULL with err (the memory released then too). */
cr_tensor *cr_tensor_adopt(const char *owner, const char *name, const cr_shape *shape, cr_dtype dt, int device,
                           void *data, void (*release)(void *owner), void *release_arg, cr_error *err);
/* Lists it: from now on it is found by id (and name). -1 with 409 when its name was taken since. */
int cr_tensor_publish(cr_tensor *t, cr_error *err);
/* Frees a tensor never published (its upload or its job failed). */
void cr_tensor_discard(cr_tensor *t);

/* owner's tensor named ref (its id or its name), held until cr_tensor_release; NULL with a 404
 * (also for another owner's: an id tells nobody else anything). */
cr_tensor *cr_tensor_acquire(const char *owner, const char *ref, const char *field, cr_error *err);
/* The metadata of one, for GET /v1/tensors/{ref}: a look, not a use (its idle clock runs on). */
int cr_tensor_describe(const char *owner, const char *ref, const char *field, cr_tensor_info *out, cr_error *err);
void cr_tensor_release(void *t); /* a cr_tensor *: a request slot's hold_release */

/* Removes owner's tensor ref at once (jobs holding it keep it until they end); *info what it was.
 * -1 with a 404. */
int cr_tensor_delete(const char *owner, const char *ref, cr_tensor_info *info, cr_error *err);
/* owner's tensors (malloc'd, *n of them). -1 when memory ran out. */
int cr_tensor_list(const char *owner, cr_tensor_info **out, size_t *n);

void cr_tensor_info_of(const cr_tensor *t, cr_tensor_info *out);
void *cr_tensor_data(const cr_tensor *t);
int cr_tensor_device(const cr_tensor *t);
const cr_shape *cr_tensor_shape(const cr_tensor *t);
cr_dtype cr_tensor_dtype(const cr_tensor *t);
uint64_t cr_tensor_bytes(const cr_tensor *t);

/* Bytes between host memory and the tensor's: [off, off + n) of it. -1 with err (503 device_fault). */
int cr_tensor_write(cr_tensor *t, uint64_t off, const void *src, size_t n, cr_error *err);
int cr_tensor_read(const cr_tensor *t, void *dst, cr_error *err);

/* Points slot of r at the tensor's memory, held until the slot is freed; a device tensor pins the
 * job to its device (cr_request_mark_device: 400 when another operand lies on another). Takes the
 * caller's hold. -1 with err. */
int cr_request_bind_tensor(cr_request *r, int slot, cr_tensor *t, cr_error *err);

/* r's result kept as owner's new tensor (name: NULL or ""), made now as the output slot on the
 * device the job runs on (the one its operands lie on, else the one with most room): the answer
 * gives its metadata. -1 with err (caps, names, device memory). */
int cr_request_keep_result(cr_request *r, const char *owner, const char *name, cr_error *err);
/* r's result written into owner's existing tensor ref instead, which must have the result's shape and
 * dtype; with c naming the same tensor and beta 1 that is C += alpha·op(A)·op(B), in place. */
int cr_request_result_into(cr_request *r, const char *owner, const char *ref, cr_error *err);

/* r's job finished done: a new result tensor is listed (409 when its name was taken meanwhile) and
 * what the answer says of it copied into r->result_tensor. -1 with err. */
int cr_tensor_keep_result(cr_request *r, cr_error *err);

/* Expires what nothing used for --tensor-idle-s; how many. About once a second from main's loop. */
int cr_tensors_sweep(double now);

/* Per device (-1: host), for the metrics. */
typedef struct {
    uint64_t count, bytes, created, expired;
} cr_tensor_usage;
void cr_tensors_usage(int device, cr_tensor_usage *out);

#endif
