/* What the KServe files share: the three models (their tensors and datatypes), the decoder of
 * an inference request into a cr_request, and the encoder of a finished job's response. */
#ifndef CRUNCHD_KSERVE_INTERNAL_H
#define CRUNCHD_KSERVE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/codec/binary_decode.h"
#include "server/http/conn.h"
#include "server/engine/job.h"
#include "server/kserve/shm_region.h"
#include "server/kserve/shm_tensor.h"
#include "server/request.h"

struct cJSON;

/* ---- models (kserve_model.c) -------------------------------------------------------------- */

#define CR_KS_MAX_IO 3

typedef struct {
    const char *name;
    const char *const *datatypes; /* accepted (inputs) or produced (outputs); NULL-terminated */
    int rank;                     /* every dimension variable (-1 in the metadata) */
    bool optional;
} cr_ks_tensor;

typedef struct {
    const char *name;             /* "gemm", "ata", "histogram": the URL's {model} */
    cr_op op;
    cr_ks_tensor inputs[CR_KS_MAX_IO];
    int n_inputs;
    cr_ks_tensor outputs[CR_KS_MAX_IO];
    int n_outputs;
} cr_ks_model;

/* Every model, for the repository index and statistics. */
const cr_ks_model *cr_ks_models(size_t *n);
/* The model named by the first len bytes of name; NULL when there is none. */
const cr_ks_model *cr_ks_model_find(const char *name, size_t len);
/* Index of the input/output called name in the model, -1 when it has none. */
int cr_ks_input_index(const cr_ks_model *m, const char *name);
int cr_ks_output_index(const cr_ks_model *m, const char *name);
/* KServe datatype names <-> element types; NULL / -1 for ones crunchd does not take. */
const char *cr_ks_datatype_name(cr_dtype dt);
int cr_ks_datatype_parse(const char *name, cr_dtype *out);

/* ---- shared memory tensors (kserve_shm.c) ------------------------------------------------- */

/* A tensor in a registered region, as its parameters shared_memory_region, _byte_size and
 * _offset name it. An output the encoder writes (edges) keeps its window here. */
typedef struct {
    bool on;
    char region[CR_SHM_NAME_MAX + 1];
    uint64_t offset, byte_size;
    cr_shm_window out;
} cr_ks_shm;

/* ---- request (kserve_decode.c) ------------------------------------------------------------ */

/* What the client wants back, kept from decode to encode (the job holds the arrays). */
typedef struct {
    const cr_ks_model *model;
    char *id;                     /* the request's "id", echoed; NULL when none (owned) */
    bool want[CR_KS_MAX_IO];      /* per model output: in the response */
    bool binary[CR_KS_MAX_IO];    /* per model output: as binary tensor data */
    cr_ks_shm shm[CR_KS_MAX_IO];  /* per model output: written into a region instead */
} cr_ks_spec;

/* The binary section of a request (binary tensor data extension: the bytes after the JSON
 * header): its length, and a reader of its bytes. The decoder asks for each binary input's bytes
 * once, in increasing offset, so a source may be a socket read as it goes (the direct path,
 * kserve_direct.c); they land in buffers from alloc (malloc where its members are NULL). */
typedef struct cr_ks_source {
    uint64_t len;
    int (*read)(struct cr_ks_source *s, uint64_t offset, void *dst, size_t n, cr_error *err);
    cr_host_allocator alloc;
    /* Optional (NULL: every input is read into a buffer of its own): the bytes [offset, offset + n)
     * where they already lie in memory a tensor may use as it is (the gRPC listener's received
     * message, in the backend's host memory), aligned to align; NULL when they cannot be used so.
     * The input's slot then borrows them: release(hold) once the request is done with them. */
    void *(*in_place)(struct cr_ks_source *s, uint64_t offset, size_t n, size_t align, void (**release)(void *hold),
                      void **hold);
} cr_ks_source;

/* Decodes an inference request. header_len < 0: the whole body is the JSON object; otherwise
 * the JSON header is its first header_len bytes and binary tensors follow (the caller checked
 * header_len <= len). Sizes are checked against lim before anything is allocated. On failure
 * -1 with err filled and *req and *spec freed. */
int cr_ks_decode(const cr_ks_model *m, const char *body, size_t len, int64_t header_len,
                 const cr_limits *lim, cr_request *req, cr_ks_spec *spec, cr_error *err);
/* The same, binary inputs in buffers from alloc (the backend's host memory), for owner (whose
 * resident tensors inputs may name: "parameters": {"tensor": "ID"}, server/engine/tensors.h). */
int cr_ks_decode_alloc(const cr_ks_model *m, const char *body, size_t len, int64_t header_len,
                       const cr_limits *lim, cr_host_allocator alloc, const char *owner, cr_request *req,
                       cr_ks_spec *spec, cr_error *err);
/* The JSON header (hl bytes) in memory, the binary section (if any: src) from src. */
int cr_ks_decode_from(const cr_ks_model *m, const char *header, size_t hl, cr_ks_source *src,
                      const cr_limits *lim, cr_request *req, cr_ks_spec *spec, cr_error *err);
int cr_ks_decode_from_as(const cr_ks_model *m, const char *header, size_t hl, cr_ks_source *src, const cr_limits *lim,
                         const char *owner, cr_request *req, cr_ks_spec *spec, cr_error *err);
void cr_ks_spec_free(cr_ks_spec *s);

/* The shared_memory_* members of a tensor's "parameters" (an object, or NULL) into *out; out->on
 * says whether there were any. -1 with err (400, field `tensor`) when they are malformed. */
int cr_ks_shm_parse(const struct cJSON *params, const char *tensor, cr_ks_shm *out, cr_error *err);
/* An input in shared memory: its byte_size must be exactly what shape and datatype make. */
int cr_ks_shm_measure(const cr_ks_shm *s, const char *tensor, uint64_t bytes, cr_error *err);
/* Points input slot of r at its bytes in the region, held until the slot is freed (the job's
 * end). es: the element size. NULL with err. */
void *cr_ks_shm_fill_input(cr_request *r, int slot, const cr_ks_shm *s, const char *tensor, uint64_t bytes,
                           size_t es, cr_error *err);
/* The outputs of s in shared memory, once r's task is known: the result's own buffer is the
 * region (held by the request until the job is freed), edges are written by the encoder (held
 * by s). Each must fit its byte_size and share no byte with an input. -1 with err. */
int cr_ks_shm_outputs(cr_request *r, cr_ks_spec *s, cr_error *err);
/* The job is finished and its answer encoded: drops every hold on output regions, so a client
 * that unregisters on reading the answer finds them free. */
void cr_ks_shm_release_outputs(cr_request *r, cr_ks_spec *s);

/* The model of the request's path (/v2/models/{model}[/versions/1]/...), or NULL with a 404 sent. */
const cr_ks_model *cr_ks_path_model(cr_conn *c);
/* A request the direct path decoded (kserve_direct.c): moved into *req and *spec (the caller's
 * from here on); -1 with err when it was refused. */
int cr_kserve_direct_take(cr_conn *c, cr_request *req, cr_ks_spec **spec, cr_error *err);

/* Triton's per-model inference statistics (kserve_repo.c): one finished inference of model m. */
void cr_ks_stats_record(const cr_ks_model *m, const cr_job *j);

typedef struct {
    uint64_t count, ns;
} cr_ks_duration;

/* Triton's InferStatistics of one model, as every protocol reports them. */
typedef struct {
    uint64_t last_ms;       /* ms since the epoch of the last inference; 0: none yet */
    uint64_t inferences, executions;
    cr_ks_duration success, fail, queue, compute_input, compute_infer, compute_output;
} cr_ks_stats;

void cr_ks_stats_read(const cr_ks_model *m, cr_ks_stats *out);

/* The engine's dynamic batcher as Triton describes its own (--batch-delay-us, --batch-preferred):
 * false when batching is off; else up to max preferred sizes into sizes, *n of them. */
bool cr_ks_dynamic_batching(const cr_config *cfg, int *sizes, int max, int *n);

/* The extensions the server metadata lists (/v2, ServerMetadata): up to max names into out;
 * how many. b: the engine's backend (CUDA shared memory needs its ipc_open). */
size_t cr_ks_extensions(const cr_backend *b, const char **out, size_t max);

/* ---- response (kserve_encode.c) ----------------------------------------------------------- */

typedef struct {
    char *body;         /* malloc'd: the JSON header, then the binary outputs if any */
    size_t len;
    size_t header_len;  /* == len (and no tail) when nothing is binary */
    /* When the one binary output is the job's result itself: it is not copied into body, which
     * ends with the header; the answer sends these bytes of the job's output after it. */
    const void *tail;
    size_t tail_len;
} cr_ks_response;

/* One output tensor of a finished job, as every encoder writes it. */
typedef struct {
    const char *name;
    cr_dtype dt;
    cr_shape shape;   /* a stack's whole shape (cr_request_result_shape) */
    const void *data; /* count elements of dt */
    uint64_t count;
} cr_ks_output;

/* The outputs of a finished (done) job in model order (the unwanted ones too), those in shared
 * memory written there; histogram edges, when wanted, computed into *edges (the caller frees
 * them). -1 when memory ran out or a region could not be written. */
int cr_ks_outputs(const cr_job *j, const cr_ks_spec *s, cr_ks_output *out, void **edges);

/* The inference response of a finished (done) job; -1 when memory ran out. */
int cr_ks_encode(const cr_job *j, const cr_ks_spec *s, const char *backend, cr_ks_response *out);

#endif
