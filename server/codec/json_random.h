/* /v1 operands the daemon makes itself, so that a comparison needs no upload:
 *     {"random": {"shape": [4096, 4096], "dist": "uniform" | "normal", "seed": 7}}
 * in place of a matrix (a, b, c) or of histogram data, in the request's dtype (dist: uniform by
 * default, on [-1, 1) for floats and every byte for uint8; seed: 0 by default). The numbers are
 * kernels/random.h's, the same bits on every backend: made in device memory where the backend can
 * (cuda: a kernel on the device the job will run on), else on the host. The JSON decoder's
 * (json_decode.c), like json_shm.h, and POST /v1/tensors' (tensor_routes.c). */
#ifndef CRUNCHD_JSON_RANDOM_H
#define CRUNCHD_JSON_RANDOM_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "server/codec/json_fastarray.h"
#include "server/request.h"

typedef struct {
    cr_shape shape;
    bool normal;
    uint64_t seed;
    int device;   /* where to make it: -1 any (the device of the request's other tensors, else
                     the next in turn) */
    bool on_host; /* host memory even where the backend has device memory (the host reads it) */
} cr_jrandom;

/* Once at start-up: the backend whose devices generated operands live on, and how many it has.
 * Without it (tests, tools) operands are made in host memory. */
void cr_jrandom_init(const cr_backend *b, int devices);

/* Whether node is a generated operand (an object with "random") rather than numbers. */
bool cr_jrandom_is_operand(const cJSON *node);

/* Reads node ({"random": {...}} and nothing else): shape (0 to CR_RANK_MAX dimensions >= 0, its
 * elements at most lim->max_elements: 413), dist, seed (an integer from 0 to 2^53). -1 with err
 * naming name.random or name.random.member. Spends no memory. */
int cr_jrandom_measure(const cr_jfast *fast, const cJSON *node, const char *name, const cr_limits *lim,
                       cr_jrandom *out, cr_error *err);

/* Makes op's count elements as dt at p: device memory of device (>= 0; the backend's generator)
 * or host memory (-1). For a resident tensor made from a body's "random" (field names it). -1
 * with err. */
int cr_jrandom_make(const cr_jrandom *op, cr_dtype dt, int device, void *p, const char *field, cr_error *err);

/* Makes the operand in slot of r as dt (uint8: uniform only) and returns its first byte (device
 * memory: the slot is marked so, and the job runs there); NULL with err. */
void *cr_jrandom_fill(cr_request *r, int slot, const cr_jrandom *op, cr_dtype dt, const char *name, cr_error *err);

#endif
