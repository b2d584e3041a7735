/* A binary request's parameters, from its query string (the body holds only arrays):
 *   /v1/gemm?kernel=cublas&alpha=2&beta=0.5&trans_a=true&trans_b=0&precision=tf32&timeout_ms=500
 *   /v1/gemm?dtype=bfloat16            (numpy has no bfloat16: parts sent as a.view(np.uint16))
 *   /v1/histogram?bins=100&range=0,1   (or range_lo=0&range_hi=1)
 *   /v1/jobs?op=ata&kernel=symtile
 * Strict like the JSON decoder: an unknown or repeated parameter, or a bad value, is a
 * 400 invalid_parameter naming it. Which parameters an op takes is checked per op. */
#ifndef CRUNCHD_QUERY_PARAMS_H
#define CRUNCHD_QUERY_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/request.h"

typedef struct {
    cr_op op;                 /* the route's op, or the "op" parameter on /v1/jobs */
    cr_kernel_choice kernel;
    double alpha, beta;
    bool trans_a, trans_b;
    cr_precision precision;
    bool tf32_asked;          /* precision=tf32: checked against the dtype once it is known */
    bool bf16;                /* dtype=bfloat16: 2-byte matrix parts hold bfloat16 bits */
    int64_t timeout_ms;       /* 0: server default */
    int32_t bins;             /* 0: the dtype's default */
    bool has_range;
    double lo, hi;
    unsigned seen;            /* internal: which parameters appeared */
    bool has_lo, has_hi;
    /* Resident tensors (server/engine/tensors.h): operands named by id or name instead of sent
     * (tensor_a, tensor_b, tensor_c, tensor_data; "" when the body has that part), and the result
     * kept as one (output=tensor, its name output_name). */
    char tensor[3][129];      /* by slot: a (data), b, c */
    bool output_tensor;
    char output_name[129];
    char output_into[129]; /* output_into=REF: the result written into that existing tensor */
    /* POST /v1/tensors (tensor_upload): the new tensor's name, and a raw body's shape and dtype */
    bool tensor_upload;
    char name[129];
    bool has_shape;
    int shape_rank;
    int64_t shape[8];
    cr_dtype raw_dtype;       /* default uint8 */
} cr_params;

/* Defaults for route_op (CR_OP_COUNT: /v1/jobs, the op must come as a parameter). */
void cr_params_init(cr_params *p, cr_op route_op);
/* Defaults for POST /v1/tensors: name, shape and dtype are its parameters, no op's. */
void cr_params_init_tensor(cr_params *p);

/* One decoded key=value pair (value NULL for a bare key). -1 with err. */
int cr_params_set(cr_params *p, const char *key, const char *value, const cr_limits *lim,
                  cr_error *err);

/* After the last pair: required parameters and per-op applicability. */
int cr_params_finish(cr_params *p, cr_error *err);

/* A raw query string ("a=1&b=x%20y", without the '?'), percent-decoded here: for tools, tests
 * and the fuzzer; the daemon gets its pairs already decoded from libmicrohttpd. */
int cr_request_params_from_query(const char *query, size_t len, cr_op route_op,
                                 const cr_limits *lim, cr_params *out, cr_error *err);

#endif
