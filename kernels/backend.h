/* The compute backend interface: the only door from server/ to the hardware.
 *
 * kernels/ knows nothing of HTTP or JSON. A task is plain data in host memory; a worker
 * (one per CUDA stream, or one per CPU thread) runs it and fills a result. Backends report
 * failures as cr_status values the server maps to HTTP codes. */
#ifndef CRUNCHD_BACKEND_H
#define CRUNCHD_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { CR_OP_GEMM, CR_OP_ATA, CR_OP_HISTOGRAM, CR_OP_COUNT } cr_op;

/* Element types. Matrices: F32, F64, F16 (IEEE binary16) and BF16 (bfloat16), both held as their
 * 16 bits and multiplied with FP32 accumulation. Histogram data: any but F16 and BF16. */
typedef enum {
    CR_DT_F32, CR_DT_F64, CR_DT_U8, CR_DT_I8, CR_DT_U16, CR_DT_I16,
    CR_DT_U32, CR_DT_I32, CR_DT_I64, CR_DT_U64, CR_DT_F16, CR_DT_BF16, CR_DT_COUNT
} cr_dtype;
#define CR_DT_BIT(d) (1u << (d))

/* "fp32" is exact IEEE single; "tf32" allows tensor cores that round inputs to 10-bit mantissa. */
typedef enum { CR_PREC_DEFAULT, CR_PREC_TF32 } cr_precision;

typedef enum { CR_BACKEND_CPU, CR_BACKEND_CUDA } cr_backend_id;

/* A row of the kernel registry (kernels/registry.h): a kernel, its limits and its launcher. */
typedef struct cr_kernel cr_kernel;

typedef enum {
    CR_OK = 0,
    CR_E_INVALID,     /* request is well-formed but asks for the impossible: 400 */
    CR_E_SHAPE,       /* shapes do not conform: 422 */
    CR_E_UNSUPPORTED, /* kernel does not handle this dtype/precision: 400 */
    CR_E_NOMEM_HOST,  /* host allocation failed: 503 */
    CR_E_NOMEM_DEVICE,/* does not fit device memory: 507 */
    CR_E_CANCELLED,   /* cancelled by client or deadline: 499/504 decided by the engine */
    CR_E_FATAL,       /* sticky device error: device unusable, process must restart */
    CR_E_INTERNAL     /* a bug: 500 */
} cr_status;

const char *cr_status_name(cr_status s);
const char *cr_dtype_name(cr_dtype d);
size_t cr_dtype_size(cr_dtype d);
const char *cr_op_name(cr_op op);
/* "fp32" or "tf32", as requests spell them. */
const char *cr_precision_name(cr_precision p);

/* C(m×n) = alpha·op(A)·op(B) + beta·C. All row-major and densely packed as stored:
 * A is m×k (k×m when trans_a), B is k×n (n×k when trans_b), C is m×n.
 * c_in may be NULL (treated as zeros); c_out is written. dtype: F32 or F64. */
typedef struct {
    int64_t m, n, k;
    bool trans_a, trans_b;
    double alpha, beta;
    const void *a, *b, *c_in;
    void *c_out;
} cr_gemm_task;

/* C(n×n) = AᵀA for A of m×n stored row-major (trans_a: A is stored as its transpose, n×m,
 * which is how a Fortran-ordered array arrives). The full symmetric matrix is written. */
typedef struct {
    int64_t m, n;
    bool trans_a;
    const void *a;
    void *c_out;
} cr_ata_task;

/* numpy.histogram semantics: `bins` equal bins over [lo, hi], last bin closed, values outside
 * (and NaN) ignored. For U8 with bins == 256 and lo == 0, hi == 256 every byte is its own bin. */
typedef struct {
    int64_t count;      /* number of elements */
    const void *data;
    int32_t bins;
    double lo, hi;
    uint64_t *counts;   /* bins entries, written */
} cr_hist_task;

/* ---- stacks: many matrices of one shape in one task (numpy.matmul's batch dimensions) ---- */

/* Batch dimensions a stack may have: its arrays are of rank 8 at most. */
#define CR_STACK_DIMS 6
/* Operands of a stack: GEMM a, b, c_in; AᵀA a. */
#define CR_STACK_OPERANDS 3
enum { CR_STACK_A = 0, CR_STACK_B = 1, CR_STACK_C = 2 };

/* The batch dimensions of a GEMM or AᵀA task. rank 0 (a zeroed task) is one matrix, as ever.
 * Otherwise the task computes `count` products, one per index of the result's batch shape
 * dims[0..rank), in C order; the output holds count matrices (m×n, or n×n), densely packed.
 * Operand k holds mats[k] matrices, densely packed in C order over its own batch shape, which
 * numpy aligns to the right of the result's: stride[k][d] is how many of operand k's matrices
 * one step along the result's batch dimension d moves, 0 where the operand broadcasts (its
 * dimension is 1 or missing: (1, m, k) @ (b, k, n), (m, k) @ (b, k, n), (p, 1, m, k) @ (q, k, n)).
 * A GEMM's c_in has its own strides (c broadcasts too), and always full m×n matrices: the
 * decoders expand a c that broadcasts within its matrix (a row, a column) before the task. An
 * AᵀA stack never broadcasts. trans_a/trans_b act on every matrix of the stack. */
typedef struct {
    int rank;
    int64_t dims[CR_STACK_DIMS];
    int64_t count;
    int64_t mats[CR_STACK_OPERANDS];
    int64_t stride[CR_STACK_OPERANDS][CR_STACK_DIMS];
} cr_stack;

typedef struct {
    cr_op op;
    cr_dtype dtype;
    cr_precision precision;
    const cr_kernel *kernel; /* a registry row of the backend that runs the task */
    union { cr_gemm_task gemm; cr_ata_task ata; cr_hist_task hist; } u;
    cr_stack stack;          /* GEMM and AᵀA: rank 0 for one matrix; histograms: always rank 0 */
    /* Polled between phases; a backend may stop early and return CR_E_CANCELLED. */
    const volatile int *cancel;
} cr_task;

typedef struct {
    double h2d_ms, kernel_ms, d2h_ms; /* 0 where a phase does not exist (CPU) */
    char device[128];                 /* where it ran, for the response */
    int device_index;
} cr_timings;

typedef struct {
    char name[128];
    int index;
    uint64_t memory_total, memory_free;
    int multiprocessors;
    int cc_major, cc_minor;
} cr_device_info;

typedef struct cr_worker cr_worker;
typedef struct cr_sink cr_sink;
typedef struct cr_backend cr_backend;

/* How a thread waiting for a device spends the wait (--gpu-wait). */
typedef enum { CR_WAIT_YIELD, CR_WAIT_SPIN, CR_WAIT_BLOCK } cr_wait_mode;

typedef struct {
    int workers_per_device; /* the CPU backend sizes its BLAS threads from it */
    cr_wait_mode wait;      /* cuda only */
} cr_backend_opts;

struct cr_backend {
    const char *name;   /* "cpu" or "cuda" */
    cr_backend_id id;   /* its rows in the kernel registry */
    /* Prepares devices; a backend uses of o what applies to it. Returns CR_OK or why not. */
    cr_status (*init)(const cr_backend_opts *o, char *err, size_t errlen);
    void (*shutdown)(void);
    int (*device_count)(void);
    cr_status (*device_info)(int index, cr_device_info *out);
    /* A worker owns a device's stream, handles and staging; it is used by one thread at a time. */
    cr_status (*worker_create)(int device, cr_worker **out, char *err, size_t errlen);
    void (*worker_destroy)(cr_worker *w);
    /* Runs one task synchronously on the worker, with the registry row t->kernel (a row of this
     * backend). On failure, err says why (for the client). */
    cr_status (*run)(cr_worker *w, const cr_task *t, cr_timings *tm, char *err, size_t errlen);
    /* Bytes of device memory a task needs, to pick a device that can hold it (0 on CPU). */
    uint64_t (*task_device_bytes)(const cr_task *t);
    /* Optional (NULL: malloc/free): host memory the backend copies from fastest. cuda pins it,
     * so request arrays received straight into it go to the device without a staging copy.
     * Callable from any thread; host_alloc returns NULL when it cannot. */
    void *(*host_alloc)(size_t bytes);
    void (*host_free)(void *p);
    /* Optional (NULL: nothing to do): bytes [0, ready) of a host_alloc block that will hold
     * `total` bytes are final. cuda starts copying big inputs to a device while the rest of the
     * request still arrives; run() then waits for that copy instead of making its own. */
    void (*host_ready)(void *p, size_t ready, size_t total);
    /* Optional (NULL: none kept): host_alloc's memory, held by requests now and kept for reuse
     * (cuda's pinned cache, which a soak must not mistake for a leak), and the workers' own
     * staging (pinned copies of pageable operands and answers). cached and staging are held
     * outside any request: the memory budget counts them through a probe. */
    void (*host_usage)(uint64_t *in_use, uint64_t *cached, uint64_t *staging);
    /* Optional (NULL: nothing kept): gives back what host_usage calls cached. The memory budget
     * calls it before refusing a charge that the cache stands in the way of: kept memory is a
     * convenience and yields to requests. Callable from any thread. */
    void (*host_trim)(void);
    /* Optional (NULL: nothing to do): memory the backend did not allocate (a client's shared-
     * memory region, mapped for as long as it is registered) made as fast to copy from and to
     * as host_alloc's. cuda page-locks it, after which run() copies it directly, as it does
     * host_alloc's blocks. false when it could not (the copies are staged: slower, still right).
     * host_unregister undoes a successful host_register of the same p before p is unmapped. */
    bool (*host_register)(void *p, size_t bytes);
    void (*host_unregister)(void *p);
    /* Optional (NULL: the backend has no device memory to share): a client's device allocation,
     * exported by cudaIpcGetMemHandle, opened on `device` (Triton's CUDA shared memory). *out is a
     * device pointer run() reads operands from and writes results to where they are; the backend
     * checks that `bytes` fit the allocation. ipc_close undoes it; device_write copies small host
     * results (histogram edges) into such memory. */
    cr_status (*ipc_open)(const void *handle, size_t handle_len, int device, size_t bytes, void **out,
                          char *err, size_t errlen);
    void (*ipc_close)(void *p);
    cr_status (*device_write)(void *dst, const void *src, size_t bytes);
    /* Optional (NULL: every task runs alone through run()): batches of small tasks with equal
     * batch keys (kernels/registry.h) in one copy in, one launch and one copy out. batch_launch
     * queues the whole batch on lane `lane` (0 .. lanes-1) of the worker and returns, so a
     * worker keeps several batches in flight and the copies of one overlap the kernel of another;
     * batch_wait waits for that lane's batch and fills every task's status and timings (st[i],
     * tm[i]: the batch's phases). A failed launch leaves the lane free and its status in st[]. */
    int lanes;
    cr_status (*batch_launch)(cr_worker *w, int lane, cr_task *const *tasks, int n, cr_status *st,
                              char *err, size_t errlen);
    void (*batch_wait)(cr_worker *w, int lane, cr_status *st, cr_timings *tm, char *err, size_t errlen);
    /* Optional (NULL: a task that is not batched runs through run(), its worker waiting for it):
     * one task with its own kernel queued on a lane as a batch is, so that a worker keeps tasks
     * too big to batch in flight too. run_launch returns once the task is queued; a failure leaves
     * the lane free. run_wait waits for it and fills its timings. Unlike run(), no look at the
     * cancel flag between phases: the engine answers a cancelled task once it is done. */
    cr_status (*run_launch)(cr_worker *w, int lane, const cr_task *t, char *err, size_t errlen);
    cr_status (*run_wait)(cr_worker *w, int lane, cr_timings *tm, char *err, size_t errlen);
    /* The most device memory (task_device_bytes) a task should need to go through run_launch
     * (0: any). cuda: what each lane keeps allocated, so that a task on a lane allocates nothing;
     * bigger tasks gain nothing from overlap and run through run(), one at a time per worker. */
    uint64_t run_launch_max_bytes;
    /* Optional (NULL: none): the runtime library's and the driver's versions as the vendor
     * encodes them (CUDA: 1000 * major + 10 * minor; 0 when absent). Needs no device and no
     * init: `crunchd --version` asks on machines without a GPU. */
    void (*versions)(int *runtime, int *driver);
    /* Optional (NULL: none): host memory run() allocates for a task beyond its buffers, which
     * the server charges to its memory budget before the job is queued (cpu: float16/bfloat16
     * operands widened for BLAS). */
    uint64_t (*task_host_bytes)(const cr_task *t);
    /* Optional (NULL: every input is received whole into host memory): a big matrix input
     * received straight into device memory through a small ring of pinned staging slots, which
     * stay in the CPU's caches: the socket's copy lands in cache and the copy engine drains it, so
     * the operand is never written to host memory at all (cuda, H100: a 4096² float32 pair over the
     * Unix socket was received 1.9-6.1 ms sooner in 4 of 5 runs, bench/results/device-stream-h100-
     * s10.log). The bytes then exist only on that device, so the job runs there (as a CUDA
     * shared-memory tensor does): only for inputs no host code reads (matrices, not histogram data).
     * sink_open: a sink for `total` bytes on `device`; NULL when it is not
     * worth it (small) or not possible (no room): receive into host memory as usual. *staging: the
     * host bytes it holds until sink_finish, to charge. sink_space: where the next at most *len
     * bytes go (it may wait for the copy that last drained that space); NULL once broken.
     * sink_commit: n bytes were written there; -1 once broken. sink_finish: every byte is on the
     * device (waits for the last copies): the buffer and its device; -1 when a copy failed or bytes
     * are missing. sink_free (any time, from any thread): releases the sink and its device buffer;
     * a request slot holding the buffer releases it with its hold.
     * The other way, for a big result: sink_target gives an opened sink's device buffer (and its
     * device) for a job to write its output into; once the job is done, sink_read hands the
     * buffer's bytes out in order, each piece copied into a ring slot just before (the next
     * pieces' copies already queued), so the answer is sent from cached memory and its copy
     * overlaps the send: 1 with a piece (*p, *len, valid until the next call), 0 at the end, -1
     * when a copy failed. */
    cr_sink *(*sink_open)(size_t total, int device, size_t *staging);
    void *(*sink_space)(cr_sink *s, size_t *len);
    int (*sink_commit)(cr_sink *s, size_t n);
    int (*sink_finish)(cr_sink *s, void **dev, int *device);
    void *(*sink_target)(cr_sink *s, int *device);
    int (*sink_read)(cr_sink *s, const void **p, size_t *len);
    void (*sink_free)(void *s);
    /* Optional: device memory the open sinks hold on `device` now, and the most they may. */
    void (*sink_usage)(int device, uint64_t *held, uint64_t *cap);
    /* Optional (NULL: no pool of its own): the device memory the backend's allocator holds on
     * `device`: given to tasks, worker streams and sinks now (in_use), and kept for the next ones
     * (cached: cuda keeps up to CRUNCHD_DEVICE_CACHE_MB per device and gives the rest back at the
     * next synchronisation, so an idle daemon does not sit on its busiest moment's memory). */
    void (*device_pool_usage)(int device, uint64_t *in_use, uint64_t *cached);
    /* Optional: gives every device's cached memory back (after the start-up autotune, whose
     * probes are no request's cache). */
    void (*device_trim)(void);
    /* Optional (NULL: resident tensors live in host memory, as on the cpu backend): device memory
     * a resident tensor keeps between jobs (server/engine/tensors.h), outside the task pool so that
     * its cap and its trims never touch it; NULL when the device has no room. tensor_copy moves
     * bytes between host memory and such a buffer (to_device: host -> device), synchronously; a
     * run() reads the buffer as it reads a client's device memory (buf_on_device). */
    void *(*tensor_alloc)(int device, size_t bytes);
    void (*tensor_free)(int device, void *p);
    cr_status (*tensor_copy)(int device, void *dst, const void *src, size_t bytes, bool to_device);
};

extern const cr_backend cr_backend_cpu;
/* For a daemon on another backend, whose HTTP threads run tiny jobs with the CPU kernels
 * (server/engine/host_path.c): OpenBLAS computes on each caller's own thread, so a dozen
 * concurrent callers never queue for one shared thread pool. */
void cr_cpu_blas_on_caller(void);
#ifdef CRUNCHD_HAVE_CUDA
extern const cr_backend cr_backend_cuda;
#endif

/* Products the task computes: 1, or a stack's count. */
int64_t cr_task_matrices(const cr_task *t);
/* Matrices operand k (CR_STACK_A, _B, _C) holds: 1, or a stack's mats[k]. */
int64_t cr_task_operand_matrices(const cr_task *t, int k);
/* Which of operand k's matrices product i (0 <= i < count, C order over dims) reads. */
int64_t cr_stack_operand_index(const cr_stack *s, int k, int64_t i);
/* Whether operand k's matrix of product i is i * *step for every i (step 0: one matrix for all),
 * as a strided-batched library call needs; false where broadcasting leaves no common stride
 * ((p, 1, m, k) @ (q, k, n)), which needs one pointer per product. */
bool cr_stack_uniform(const cr_stack *s, int k, int64_t *step);
/* Fills s for result batch shape dims[0..rank) and each operand's own batch shape (its dims,
 * right-aligned, each equal to the result's or 1; nrank[k] 0 for an operand of one matrix, -1
 * for an operand the task lacks). The caller checked that they broadcast. */
void cr_stack_plan(cr_stack *s, int rank, const int64_t *dims, const int nrank[CR_STACK_OPERANDS],
                   const int64_t ndims[CR_STACK_OPERANDS][CR_STACK_DIMS]);

/* Floating-point operations a task performs (for GFLOP/s), and bytes it reads (for GB/s). */
double cr_task_flops(const cr_task *t);
double cr_task_bytes(const cr_task *t);

/* The task's output buffer and its size (C, or the counts). */
void *cr_task_output(const cr_task *t);
size_t cr_task_output_bytes(const cr_task *t);
/* Points the task at another output buffer (compare mode runs each kernel into scratch). */
void cr_task_set_output(cr_task *t, void *out);
/* max|x - ref| / max|ref| over the output (0 when both are all zero): the error measure of
 * compare mode and of the auto table's correctness check. */
double cr_max_rel_error(const cr_task *t, const void *x, const void *ref);

#ifdef __cplusplus
}
#endif

#endif
