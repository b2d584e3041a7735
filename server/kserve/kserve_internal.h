/* What the KServe files share: the three models (their tensors and datatypes), the decoder of
 * an inference request into a cr_request, and the encoder of a finished job's response. */
#ifndef CRUNCHD_KSERVE_INTERNAL_H
#define CRUNCHD_KSERVE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/engine/job.h"
#include "server/request.h"

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

/* ---- request (kserve_decode.c) ------------------------------------------------------------ */

/* What the client wants back, kept from decode to encode (the job holds the arrays). */
typedef struct {
    const cr_ks_model *model;
    char *id;                     /* the request's "id", echoed; NULL when none (owned) */
    bool want[CR_KS_MAX_IO];      /* per model output: in the response */
    bool binary[CR_KS_MAX_IO];    /* per model output: as binary tensor data */
} cr_ks_spec;

/* Decodes an inference request. header_len < 0: the whole body is the JSON object; otherwise
 * the JSON header is its first header_len bytes and binary tensors follow (the caller checked
 * header_len <= len). Sizes are checked against lim before anything is allocated. On failure
 * -1 with err filled and *req and *spec freed. */
int cr_ks_decode(const cr_ks_model *m, const char *body, size_t len, int64_t header_len,
                 const cr_limits *lim, cr_request *req, cr_ks_spec *spec, cr_error *err);
void cr_ks_spec_free(cr_ks_spec *s);

/* Triton's per-model inference statistics (kserve_repo.c): one finished inference of model m. */
void cr_ks_stats_record(const cr_ks_model *m, const cr_job *j);

/* ---- response (kserve_encode.c) ----------------------------------------------------------- */

typedef struct {
    char *body;         /* malloc'd: the JSON header, then the binary outputs if any */
    size_t len;
    size_t header_len;  /* == len when nothing is binary */
} cr_ks_response;

/* The inference response of a finished (done) job; -1 when memory ran out. */
int cr_ks_encode(const cr_job *j, const cr_ks_spec *s, const char *backend, cr_ks_response *out);

#endif
