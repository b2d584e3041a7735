/* /v1 JSON operands and results in registered shared-memory regions (README, "Shared memory"), so
 * a local client with no KServe library skips the body too. An operand given as
 *     {"shm": {"region": "r", "offset": 0, "byte_size": 64}, "shape": [4, 4], "dtype": "float32"}
 * in place of a matrix (a, b, c) or of histogram data is read where it lies (offset and byte_size
 * optional: 0, and shape x dtype; dtype optional: the request's); a body's
 *     "output": {"shm": {"region": "r", "offset": 256}}
 * has the result written there instead of returned. The rules are shm_tensor.h's, as on /v2.
 * Private to the JSON decoder (json_decode.c). */
#ifndef CRUNCHD_JSON_SHM_H
#define CRUNCHD_JSON_SHM_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "server/kserve/shm_region.h"
#include "server/request.h"

#define CR_JSHM_MAX_RANK 8

/* The "shm" object: where a tensor lies. */
typedef struct {
    char region[CR_SHM_NAME_MAX + 1];
    uint64_t offset;
    uint64_t byte_size;
    bool has_byte_size;
} cr_jshm_place;

typedef struct {
    cr_jshm_place at;
    int rank;
    int64_t shape[CR_JSHM_MAX_RANK];
    uint64_t count;          /* elements: the product of shape */
    const char *dtype;       /* as the operand names it (inside the document), or NULL */
} cr_jshm_operand;

/* Whether node is an operand in shared memory (an object with "shm") rather than numbers. */
bool cr_jshm_is_operand(const cJSON *node);

/* The dtype an operand in shared memory names, or NULL (none named, or not such an operand). */
const char *cr_jshm_dtype_of(const cJSON *node);

/* Reads operand node (shm, shape, dtype and nothing else; each once): a shape of exactly rank
 * dimensions of at least 1 (rank 0: 1 to CR_JSHM_MAX_RANK dimensions of at least 0, flattened;
 * CR_JSHM_MATRIX: 1 to CR_JSHM_MAX_RANK of at least 1, a matrix operand or a stack of them) and
 * its elements against lim (413 naming field). -1 with err (field: field, or field.member). */
#define CR_JSHM_MATRIX (-1)
int cr_jshm_measure(const cJSON *node, const char *field, int rank, const cr_limits *lim, cr_jshm_operand *out,
                    cr_error *err);

/* Points slot of r at the operand's bytes, read as elements of dt: the dtype it names, if any,
 * must be dt; its byte_size, if given, exactly count x dt's size. NULL with err. */
void *cr_jshm_bind(cr_request *r, int slot, const cr_jshm_operand *op, cr_dtype dt, const char *field,
                   cr_error *err);

/* The body's "output", if any ({"shm": {...}} and nothing else): *present says whether. */
int cr_jshm_parse_output(const cJSON *root, bool *present, cr_jshm_place *out, cr_error *err);

/* Once r's task and inputs are set: its result goes to out (byte_size, when given, at least the
 * result's), sharing no byte with an input (input_names: the op's operand per slot), and
 * r->result_shm says where. -1 with err (field "output"). */
int cr_jshm_bind_output(cr_request *r, const cr_jshm_place *out, const char *const input_names[CR_BUF_OUTPUT],
                        cr_error *err);

#endif
