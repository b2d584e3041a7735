/* A stack on the CPU: each product a task of one matrix (operand k's matrix
 * cr_stack_operand_index(s, k, i), output matrix i) through the row's own one-matrix kernel.
 *
 * Threads: the worker's share of the cores is OpenBLAS's thread count (cpu_backend.c). OpenBLAS
 * 0.3.21 runs a GEMM of m·n·k < 65536·4 (64³) on the calling thread whatever that count says, so
 * a stack of such matrices run in order uses one core: below BLAS_ACROSS_MACS the products are
 * shared out over that many threads of ours instead; from it up they run in order and OpenBLAS
 * threads each call. Measured on the 2-vCPU build machine (float32 GEMM, square, best of 15, in
 * order / 2 threads of ours, three runs each): 16³ x 8192: 1.03-1.09 / 0.75-1.12 ms; 32³ x 4096:
 * 2.87-3.07 / 2.81-3.05; 48³ x 1024: 2.21-2.26 / 1.54-2.25; 64³ x 512: 2.25-2.36 / 1.45-2.33;
 * 96³ x 128: 1.65-1.77 / 1.07-1.36; 112³ x 96: 2.13-2.26 / 2.21-2.39; 128³ x 64: 2.08-2.84 /
 * 2.16-3.39; 160³ x 32: 1.68-2.03 / 1.84-1.91. So: never slower below 112³, up to 1.6x faster at
 * 48³-96³ (where OpenBLAS's per-call threading costs it), no better from 112³. Those two vCPUs
 * deliver one core of arithmetic between them (a spin loop on two threads took twice as long for
 * twice the work), so the gain small stacks get on real cores (up to the thread count) could not
 * be seen there; SSYRK (AᵀA) came out even at every size, within noise, and follows the same rule.
 * Starting a thread costs tens of µs: a stack of less work than MIN_MACS (~0.1 ms on one core)
 * runs in order. The plain C references are one-threaded at any size: their stacks are always
 * shared out. */
#include "kernels/cpu/cpu_internal.h"

#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/stack.h"

#define BLAS_ACROSS_MACS (112.0 * 112 * 112)
#define MIN_MACS (1 << 22)
#define MAX_THREADS 64

static double matrix_macs(const cr_task *t)
{
    if (t->op == CR_OP_ATA)
        return (double)t->u.ata.m * (double)t->u.ata.n * (double)t->u.ata.n;
    return (double)t->u.gemm.m * (double)t->u.gemm.n * (double)t->u.gemm.k;
}

int cpu_stack_threads(const cr_task *t, cpu_stack_kind kind)
{
    int64_t count = cr_task_matrices(t);
    int threads = openblas_get_num_threads();
    double macs = matrix_macs(t);
    if (t->stack.rank == 0 || threads <= 1 || count < 2 || macs * (double)count < MIN_MACS)
        return 1;
    if (kind == CPU_STACK_BLAS && macs >= BLAS_ACROSS_MACS)
        return 1;
    threads = threads < MAX_THREADS ? threads : MAX_THREADS;
    return count < threads ? (int)count : threads;
}

/* Product i of t as a task of one matrix. */
static void matrix_task(const cr_task *t, int64_t i, cr_task *one)
{
    const cr_stack *s = &t->stack;
    size_t es = cr_dtype_size(t->dtype);
    *one = *t;
    memset(&one->stack, 0, sizeof one->stack);
    size_t out = (size_t)cr_task_output_elements_each(t) * es;
#define AT(p, k) ((const char *)(p) + (size_t)cr_stack_operand_index(s, k, i) * (size_t)cr_task_operand_elements(t, k) * es)
    if (t->op == CR_OP_ATA) {
        one->u.ata.a = AT(t->u.ata.a, CR_STACK_A);
        one->u.ata.c_out = (char *)t->u.ata.c_out + (size_t)i * out;
        return;
    }
    one->u.gemm.a = AT(t->u.gemm.a, CR_STACK_A);
    one->u.gemm.b = AT(t->u.gemm.b, CR_STACK_B);
    if (t->u.gemm.c_in)
        one->u.gemm.c_in = AT(t->u.gemm.c_in, CR_STACK_C);
    one->u.gemm.c_out = (char *)t->u.gemm.c_out + (size_t)i * out;
#undef AT
}

/* One thread's share of the products, [lo, hi). The first failure anywhere stops the others. */
typedef struct {
    const cr_task *t;
    cpu_matrix_fn fn;
    int64_t lo, hi;
    atomic_int *stop;
    cr_status st;
    char err[256];
} share;

static void *run_share(void *arg)
{
    share *sh = arg;
    for (int64_t i = sh->lo; i < sh->hi && sh->st == CR_OK; i++) {
        if (atomic_load_explicit(sh->stop, memory_order_relaxed))
            break;
        if (cpu_cancelled(sh->t)) {
            sh->st = cpu_fail(CR_E_CANCELLED, sh->err, sizeof sh->err, "cancelled at matrix %lld of the stack",
                              (long long)i);
        } else {
            cr_task one;
            matrix_task(sh->t, i, &one);
            sh->st = sh->fn(&one, sh->err, sizeof sh->err);
        }
        if (sh->st != CR_OK)
            atomic_store(sh->stop, 1);
    }
    return NULL;
}

/* Starts shares 1.. on their own threads (fewer when the system has none to give: the caller's
 * thread then runs what did not start), runs share 0 here, joins. */
static void run_shares(share *sh, int n)
{
    pthread_t tid[MAX_THREADS];
    bool started[MAX_THREADS] = {false};
    for (int i = 1; i < n; i++)
        started[i] = pthread_create(&tid[i], NULL, run_share, &sh[i]) == 0;
    run_share(&sh[0]);
    for (int i = 1; i < n; i++) {
        if (started[i])
            pthread_join(tid[i], NULL);
        else
            run_share(&sh[i]);
    }
}

/* The first real failure speaks for the stack; a cancellation only when nothing else failed. */
static cr_status first_failure(const share *sh, int n, char *err, size_t errlen)
{
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++)
            if (sh[i].st != CR_OK && (pass || sh[i].st != CR_E_CANCELLED))
                return cpu_fail(sh[i].st, err, errlen, "%s", sh[i].err);
    return CR_OK;
}

cr_status cpu_stack_run(const cr_task *t, cpu_matrix_fn fn, cpu_stack_kind kind, char *err, size_t errlen)
{
    int64_t count = cr_task_matrices(t);
    int n = cpu_stack_threads(t, kind);
    atomic_int stop = 0;
    share one, *sh = n > 1 ? calloc((size_t)n, sizeof *sh) : &one; /* the host path's threads: one, on its stack */
    if (!sh) {
        n = 1, sh = &one; /* no memory for the shares: in order, on this thread */
    }
    for (int i = 0; i < n; i++)
        sh[i] = (share){t, fn, count * i / n, count * (i + 1) / n, &stop, CR_OK, ""};
    if (n == 1)
        run_share(&sh[0]);
    else
        run_shares(sh, n);
    cr_status st = first_failure(sh, n, err, errlen);
    if (sh != &one)
        free(sh);
    return st;
}
