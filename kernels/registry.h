/* The kernel registry: every kernel crunchd ships, on every backend, as one row of one table
 * (kernels/registry.c), and the only code that compares kernel names.
 *
 * A row says what the kernel computes (op, dtypes, precision), what it takes (shape limits),
 * how to launch it on its backend, and how the service may use it (reference for compare mode,
 * batchable). Everything that asks "which kernel?" asks here: the decoders (is this a kernel
 * name?), the engine ("auto" and "all", can this kernel run this task?), compare mode and the
 * auto table (which kernels to try), /v1/kernels (the list) and both backends (the launcher).
 * Adding a kernel is writing its launcher and adding its row. */
#ifndef CRUNCHD_REGISTRY_H
#define CRUNCHD_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CR_KERNEL_NAME_MAX 32

/* Launchers. CPU: a validated task in, a status out. CUDA: asynchronous on the worker's stream,
 * device pointers in the launch (kernels/cuda/launch.h), a cudaError_t out as an int so this
 * header needs no CUDA headers. */
struct cr_cuda_launch;
typedef cr_status (*cr_cpu_launcher)(const cr_task *t, char *err, size_t errlen);
typedef int (*cr_cuda_launcher)(struct cr_cuda_launch *l);
/* Device scratch a kernel needs for a task, beyond its inputs and output. */
typedef uint64_t (*cr_scratch_fn)(const cr_task *t);

struct cr_kernel {
    const char *name;         /* unique per (backend, op) */
    cr_backend_id backend;
    cr_op op;
    uint32_t dtypes;          /* CR_DT_BIT mask of the input dtypes it runs */
    cr_precision precision;   /* CR_PREC_TF32: rounds its inputs; runs only when a request allows it */
    bool reference;           /* its op's reference: compare mode's baseline, auto's fallback */
    bool batchable;           /* may run several queued jobs in one launch (the batcher) */
    bool hidden;              /* test builds' fault injection: found by name, never listed, tried or picked */
    bool named_only;          /* runs when named and in compare mode; auto never picks it */
    bool stacks;              /* runs a whole stack (cr_task.stack, rank > 0) in one launch; rows
                               * without it take one matrix at a time and refuse a stack */
    int64_t max_dim;          /* largest m, n, k, or histogram element count it takes; 0: any */
    const char *summary;
    cr_cpu_launcher cpu;      /* exactly one of cpu/cuda, by backend */
    cr_cuda_launcher cuda;
    cr_scratch_fn scratch;    /* NULL: no scratch */
};

/* The rows of a backend, in table order. */
const cr_kernel *cr_kernels(const cr_backend *b, size_t *count);

/* The row named `name` for op on b; NULL when there is none. */
const cr_kernel *cr_kernel_find(const cr_backend *b, cr_op op, const char *name);

/* The reference row for the task's op and dtype on b; NULL when b cannot run that at all. For a
 * stack, the reference when it takes stacks, else the op's batchable row that does (cuda AᵀA:
 * cublas-syrk has no batched form, cublas-batched stands in), else the first row that does. */
const cr_kernel *cr_kernel_reference(const cr_backend *b, const cr_task *t);

/* Why a kernel cannot run a task. */
typedef enum {
    CR_KCHECK_OK,
    CR_KCHECK_OP,        /* the row is another op's */
    CR_KCHECK_DTYPE,     /* the task's dtype is not among the row's */
    CR_KCHECK_PRECISION, /* a tf32 kernel and the task did not allow tf32 */
    CR_KCHECK_SHAPE,     /* a dimension over the row's max_dim */
    CR_KCHECK_STACK,     /* a stack (rank > 0) and a row that runs one matrix at a time */
} cr_kcheck;

/* Whether k can run t exactly as asked; msg (may be NULL) says why not. */
cr_kcheck cr_kernel_check(const cr_kernel *k, const cr_task *t, char *msg, size_t msglen);

/* Compare mode and the auto table: whether k is one of the candidates for t. tf32 kernels are
 * candidates for float32 tasks in compare mode (which runs them with tf32 allowed), and for the
 * auto table only under a tf32 task. A stack's candidates are the rows that take stacks. */
bool cr_kernel_candidate(const cr_kernel *k, const cr_task *t, bool compare);

/* ---- batching: small tasks of one shape sharing a launch -------------------------------- */

/* Histograms batch up to this many bins (one privatised copy per block in shared memory). */
#define CR_BATCH_MAX_BINS 4096

/* What must be equal for tasks to share one launch of their batch row: the row, the dtype and
 * precision, and the shape and scalars (histograms: the bins; each keeps its own data length and
 * range). Built zeroed, so memcmp compares it. */
typedef struct {
    const cr_kernel *row;
    cr_op op;
    cr_dtype dtype;
    cr_precision precision;
    int64_t m, n, k;
    bool trans_a, trans_b, has_c;
    double alpha, beta;
    int32_t bins;
} cr_batch_key;

/* The row that runs t in a batch (the backend's batchable row for t's op and precision) when t
 * is small enough to gain from one (not "large", bins <= CR_BATCH_MAX_BINS); NULL otherwise, and
 * always for a stack: it is a batch of its own, with its own strides, which no batch key says. */
const cr_kernel *cr_kernel_batch_row(const cr_backend *b, const cr_task *t);
void cr_batch_key_of(const cr_task *t, const cr_kernel *row, cr_batch_key *key);
bool cr_batch_key_equal(const cr_batch_key *a, const cr_batch_key *b);

/* ---- what the client asked for --------------------------------------------------------- */

typedef enum { CR_KERNEL_AUTO, CR_KERNEL_ALL, CR_KERNEL_NAMED } cr_kernel_mode;

typedef struct {
    cr_kernel_mode mode;
    char name[CR_KERNEL_NAME_MAX]; /* the name (NAMED), or "auto"/"all" */
} cr_kernel_choice;

/* "auto", "all" or a well-formed name (1..31 of a-z, 0-9, '-'); -1 when malformed. Whether the
 * name exists is resolve's question, once the backend and the task are known. */
int cr_kernel_choice_parse(const char *s, cr_kernel_choice *out);
/* The default: auto. */
cr_kernel_choice cr_kernel_choice_auto(void);

/* ---- the auto table -------------------------------------------------------------------- */

/* The size classes the auto table measures each (op, dtype, precision) in, each on its own probe
 * (server/engine/autotune.c): one matrix, small or large (from 256³ flops; histograms from 2^20
 * elements); an AᵀA of a tall, narrow A (large, n <= 256, m >= 64 n: on the H200 cublas-batched
 * beat symtile 2.8x at 1,048,576 x 64 and 1.25x at x 128, symtile won from n = 256); a stack of
 * tiny matrices (under 24³ flops each: the H200 ran the own batched kernel 2-6x faster than
 * cuBLAS's strided-batched at 8³ and 16³, cuBLAS was faster from 32³), of small ones, or of large
 * ones (from 128³ flops per matrix). */
typedef enum {
    CR_CLASS_SMALL,
    CR_CLASS_LARGE,
    CR_CLASS_TALL,
    CR_CLASS_STACK_TINY,
    CR_CLASS_STACK_SMALL,
    CR_CLASS_STACK_LARGE,
    CR_CLASS_COUNT
} cr_size_class;

cr_size_class cr_task_size_class(const cr_task *t);
/* "small", "large", "tall", "stack-tiny", "stack-small", "stack-large" (the --auto-cache file's
 * spelling). */
const char *cr_size_class_name(cr_size_class c);

/* One row of the table behind "auto", measured at start-up: the fastest correct kernel on a
 * probe of each (op, dtype, size class, precision). `large` is kept beside the class for the
 * listings that show two sizes: true for the large, tall and stack-large classes. */
typedef struct {
    cr_op op;
    cr_dtype dtype;
    bool large;
    cr_size_class cls;
    cr_precision precision;
    const cr_kernel *kernel; /* NULL: this backend has nothing for the row */
    double ms;               /* of the winning kernel on the probe */
    char probe[48];          /* the probe's shape, e.g. "64x64x64" */
} cr_auto_row;

typedef struct {
    cr_auto_row *rows;
    size_t n;
} cr_auto_table;

/* Large from 256³ flops (matrices: all of a stack's) or 2^20 elements (histograms). */
bool cr_task_is_large(const cr_task *t);

/* ---- resolution: the one place a choice becomes a kernel ------------------------------- */

typedef enum {
    CR_RESOLVE_OK,
    CR_RESOLVE_NO_KERNEL,  /* auto/all: the backend has no kernel of the op for the dtype */
    CR_RESOLVE_UNKNOWN,    /* no row of that name for the op on the backend */
    CR_RESOLVE_DTYPE,      /* the named row exists and cannot run the task: msg says why */
    CR_RESOLVE_PRECISION,
    CR_RESOLVE_SHAPE,      /* also a stack named to a row that runs one matrix at a time */
} cr_resolve;

/* The row that runs t for the client's choice: auto → the auto table's pick for t's class
 * (the reference when the table has none; a stack's reference takes stacks); all → the reference
 * (compare mode then runs every candidate); a name → that row, checked against t. msg says why
 * when not OK. */
cr_resolve cr_kernel_resolve(const cr_backend *b, const cr_auto_table *tab, const cr_kernel_choice *c,
                             const cr_task *t, const cr_kernel **out, char *msg, size_t msglen);

#ifdef __cplusplus
}
#endif

#endif
