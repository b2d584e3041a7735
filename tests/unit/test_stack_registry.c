/* Unit tests of what the registry says about stacks and size classes (kernels/registry.c) and of
 * the auto table's file with them (server/engine/auto_cache.c): the size class of a task by shape
 * (stack classes by the flops of one matrix, the tall AᵀA class, issue 34's shapes), a row without
 * `stacks` refusing a stack (CR_KCHECK_STACK, naming the rows that take one) and out of the
 * candidates, no batch row for a stack, auto's pick per class from a table, a stack's reference,
 * and the auto table's file keeping each row's class (a file without classes is refused). On a
 * cuda build the cuda rows too, registry only (no device). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/backend.h"
#include "kernels/registry.h"
#include "server/engine/auto_cache.h"
#include "tests/unit/check.h"

static cr_task gemm(int64_t m, int64_t n, int64_t k, int64_t count)
{
    cr_task t = {.op = CR_OP_GEMM, .dtype = CR_DT_F32};
    t.u.gemm = (cr_gemm_task){.m = m, .n = n, .k = k};
    if (count) {
        int64_t ndims[3][CR_STACK_DIMS] = {{count}, {count}, {0}};
        int nrank[3] = {1, 1, -1};
        cr_stack_plan(&t.stack, 1, &count, nrank, ndims);
    }
    return t;
}

static cr_task ata(int64_t m, int64_t n, int64_t count)
{
    cr_task t = {.op = CR_OP_ATA, .dtype = CR_DT_F32};
    t.u.ata = (cr_ata_task){.m = m, .n = n};
    if (count) {
        int64_t ndims[3][CR_STACK_DIMS] = {{count}};
        int nrank[3] = {1, -1, -1};
        cr_stack_plan(&t.stack, 1, &count, nrank, ndims);
    }
    return t;
}

#define CLASS(task, want)                                                                                  \
    do {                                                                                                   \
        cr_task t_ = (task);                                                                               \
        cr_size_class c_ = cr_task_size_class(&t_);                                                        \
        CHECK_MSG(c_ == (want), "%s: %s, want %s", #task, cr_size_class_name(c_), cr_size_class_name(want)); \
    } while (0)

static void test_classes(void)
{
    CLASS(gemm(64, 64, 64, 0), CR_CLASS_SMALL);
    CLASS(gemm(255, 256, 256, 0), CR_CLASS_SMALL);
    CLASS(gemm(256, 256, 256, 0), CR_CLASS_LARGE);
    CLASS(gemm(1 << 20, 64, 64, 0), CR_CLASS_LARGE); /* tall is AᵀA's alone */
    CLASS(ata(1 << 20, 64, 0), CR_CLASS_TALL);       /* issue 34: cublas-batched 2.8x symtile */
    CLASS(ata(1 << 20, 128, 0), CR_CLASS_TALL);      /* 1.25x */
    CLASS(ata(1 << 20, 256, 0), CR_CLASS_TALL);
    CLASS(ata(1 << 20, 257, 0), CR_CLASS_LARGE);     /* symtile wins from 256 up */
    CLASS(ata(262144, 64, 0), CR_CLASS_TALL);        /* the probe */
    CLASS(ata(64 * 100 - 1, 100, 0), CR_CLASS_LARGE); /* m just under 64 n */
    CLASS(ata(64 * 100, 100, 0), CR_CLASS_TALL);
    CLASS(ata(2048, 8, 0), CR_CLASS_SMALL);          /* tall and narrow but small */
    CLASS(ata(2048, 2048, 0), CR_CLASS_LARGE);
    CLASS(gemm(16, 16, 16, 100000), CR_CLASS_STACK_TINY);
    CLASS(gemm(23, 24, 24, 16384), CR_CLASS_STACK_TINY);
    CLASS(gemm(24, 24, 24, 1), CR_CLASS_STACK_SMALL);
    CLASS(gemm(32, 32, 32, 2048), CR_CLASS_STACK_SMALL);
    CLASS(gemm(127, 128, 128, 64), CR_CLASS_STACK_SMALL);
    CLASS(gemm(128, 128, 128, 64), CR_CLASS_STACK_LARGE);
    CLASS(gemm(4096, 4096, 4096, 2), CR_CLASS_STACK_LARGE);
    CLASS(gemm(8, 8, 8, 0), CR_CLASS_SMALL);          /* rank 0 is never a stack class */
    CLASS(ata(16, 16, 16384), CR_CLASS_STACK_TINY);
    CLASS(ata(1 << 20, 64, 3), CR_CLASS_STACK_LARGE); /* a stack of tall ones: a stack first */
    cr_task h = {.op = CR_OP_HISTOGRAM, .dtype = CR_DT_U8};
    h.u.hist.count = 1 << 20;
    CHECK(cr_task_size_class(&h) == CR_CLASS_LARGE);
    h.u.hist.count = 1000;
    CHECK(cr_task_size_class(&h) == CR_CLASS_SMALL);
    const char *names[] = {"small", "large", "tall", "stack-tiny", "stack-small", "stack-large"};
    for (int c = 0; c < CR_CLASS_COUNT; c++)
        CHECK(strcmp(cr_size_class_name((cr_size_class)c), names[c]) == 0);
    CHECK(strcmp(cr_size_class_name(CR_CLASS_COUNT), "?") == 0);
}

/* A row that runs one matrix at a time, made up: the stack refusal names the backend's rows of
 * its op that take stacks. */
static void test_refusal(void)
{
    const cr_kernel one = {.name = "smem", .backend = CR_BACKEND_CPU, .op = CR_OP_GEMM,
                           .dtypes = CR_DT_BIT(CR_DT_F32)};
    cr_task t = gemm(8, 8, 8, 3);
    char msg[256] = "";
    CHECK(cr_kernel_check(&one, &t, msg, sizeof msg) == CR_KCHECK_STACK);
    CHECK_MSG(strcmp(msg, "kernel 'smem' runs one matrix at a time; a stack needs one of: openblas, reference") == 0,
              "message: %s", msg);
    CHECK(!cr_kernel_candidate(&one, &t, false) && !cr_kernel_candidate(&one, &t, true));
    cr_kernel takes = one;
    takes.stacks = true;
    CHECK(cr_kernel_check(&takes, &t, NULL, 0) == CR_KCHECK_OK && cr_kernel_candidate(&takes, &t, true));
    cr_task single = gemm(8, 8, 8, 0);
    CHECK(cr_kernel_check(&one, &single, NULL, 0) == CR_KCHECK_OK && cr_kernel_candidate(&one, &single, false));
    t.dtype = CR_DT_F64; /* the dtype comes first: a stack of a dtype the row lacks is a dtype refusal */
    CHECK(cr_kernel_check(&one, &t, NULL, 0) == CR_KCHECK_DTYPE);
    /* every cpu matrix row takes stacks */
    size_t n = 0;
    const cr_kernel *k = cr_kernels(&cr_backend_cpu, &n);
    for (size_t i = 0; i < n; i++)
        CHECK_MSG(k[i].op == CR_OP_HISTOGRAM || k[i].stacks, "cpu %s %s takes stacks", cr_op_name(k[i].op), k[i].name);
}

static void test_batch_row(void)
{
    cr_task one = gemm(8, 8, 8, 0), st = gemm(8, 8, 8, 4);
    CHECK(cr_kernel_batch_row(&cr_backend_cpu, &one) != NULL);
    CHECK_MSG(cr_kernel_batch_row(&cr_backend_cpu, &st) == NULL, "a stack is never merged into a batch");
    cr_task a = ata(8, 8, 4);
    CHECK(cr_kernel_batch_row(&cr_backend_cpu, &a) == NULL);
}

/* auto: the table's row of the task's class; without one, the (stack-taking) reference. */
static void test_auto(void)
{
    const cr_backend *b = &cr_backend_cpu;
    const cr_kernel *blas = cr_kernel_find(b, CR_OP_GEMM, "openblas"), *ref = cr_kernel_find(b, CR_OP_GEMM, "reference");
    cr_auto_row rows[] = {
        {.op = CR_OP_GEMM, .dtype = CR_DT_F32, .cls = CR_CLASS_SMALL, .kernel = blas},
        {.op = CR_OP_GEMM, .dtype = CR_DT_F32, .cls = CR_CLASS_STACK_TINY, .kernel = ref},
        {.op = CR_OP_GEMM, .dtype = CR_DT_F32, .cls = CR_CLASS_STACK_SMALL, .kernel = blas},
        {.op = CR_OP_ATA, .dtype = CR_DT_F32, .cls = CR_CLASS_LARGE, .large = true,
         .kernel = cr_kernel_find(b, CR_OP_ATA, "openblas")},
    };
    cr_auto_table tab = {rows, sizeof rows / sizeof rows[0]};
    cr_kernel_choice c = cr_kernel_choice_auto();
    const cr_kernel *got = NULL;
    char msg[256];
    cr_task t = gemm(16, 16, 16, 100);
    CHECK(cr_kernel_resolve(b, &tab, &c, &t, &got, msg, sizeof msg) == CR_RESOLVE_OK && got == ref);
    t = gemm(32, 32, 32, 100);
    CHECK(cr_kernel_resolve(b, &tab, &c, &t, &got, msg, sizeof msg) == CR_RESOLVE_OK && got == blas);
    t = gemm(256, 256, 256, 4); /* no stack-large row: the reference */
    CHECK(cr_kernel_resolve(b, &tab, &c, &t, &got, msg, sizeof msg) == CR_RESOLVE_OK && got == ref);
    t = gemm(16, 16, 16, 0);
    CHECK(cr_kernel_resolve(b, &tab, &c, &t, &got, msg, sizeof msg) == CR_RESOLVE_OK && got == blas);
    cr_task tall = ata(262144, 64, 0); /* no tall row: the large one answers */
    CHECK(cr_kernel_resolve(b, &tab, &c, &tall, &got, msg, sizeof msg) == CR_RESOLVE_OK && got == rows[3].kernel);
}

#ifdef CRUNCHD_HAVE_CUDA
/* The cuda rows, from the registry alone. */
static void test_cuda_rows(void)
{
    const cr_backend *b = &cr_backend_cuda;
    const char *gemm_stack[] = {"cublas", "cublas-tf32", "batched"}, *ata_stack[] = {"cublas-batched", "batched"};
    for (size_t i = 0; i < 3; i++)
        CHECK_MSG(cr_kernel_find(b, CR_OP_GEMM, gemm_stack[i])->stacks, "cuda gemm %s takes stacks", gemm_stack[i]);
    for (size_t i = 0; i < 2; i++)
        CHECK_MSG(cr_kernel_find(b, CR_OP_ATA, ata_stack[i])->stacks, "cuda ata %s takes stacks", ata_stack[i]);
    cr_task t = gemm(8, 8, 8, 3);
    cr_kernel_choice c;
    cr_kernel_choice_parse("smem", &c);
    const cr_kernel *got = NULL;
    char msg[256] = "";
    CHECK(cr_kernel_resolve(b, NULL, &c, &t, &got, msg, sizeof msg) == CR_RESOLVE_SHAPE && !got);
    CHECK_MSG(strcmp(msg, "kernel 'smem' runs one matrix at a time; a stack needs one of: cublas, cublas-tf32, batched") == 0,
              "message: %s", msg);
    t.dtype = CR_DT_F16; /* only cublas takes float16 stacks */
    cr_kernel_choice_parse("tc", &c);
    CHECK(cr_kernel_resolve(b, NULL, &c, &t, &got, msg, sizeof msg) == CR_RESOLVE_SHAPE);
    CHECK_MSG(strstr(msg, "needs one of: cublas") && !strstr(msg, "batched"), "message: %s", msg);
    cr_task a = ata(64, 64, 3);
    const cr_kernel *ref = cr_kernel_reference(b, &a);
    CHECK_MSG(ref && !strcmp(ref->name, "cublas-batched"), "an AᵀA stack's reference: %s", ref ? ref->name : "none");
    cr_task one = ata(64, 64, 0);
    CHECK(!strcmp(cr_kernel_reference(b, &one)->name, "cublas-syrk"));
    c = cr_kernel_choice_auto();
    CHECK(cr_kernel_resolve(b, NULL, &c, &a, &got, msg, sizeof msg) == CR_RESOLVE_OK && got == ref);
    cr_kernel_choice_parse("all", &c);
    CHECK(cr_kernel_resolve(b, NULL, &c, &a, &got, msg, sizeof msg) == CR_RESOLVE_OK && got == ref);
    size_t n = 0, candidates = 0;
    const cr_kernel *k = cr_kernels(b, &n);
    for (size_t i = 0; i < n; i++)
        candidates += cr_kernel_candidate(&k[i], &a, true);
    CHECK_MSG(candidates == 2, "compare mode on an AᵀA stack runs %zu rows, want cublas-batched and batched", candidates);
    cr_task g = gemm(8, 8, 8, 3), g1 = gemm(8, 8, 8, 0);
    CHECK(!strcmp(cr_kernel_batch_row(b, &g1)->name, "cublas") && !cr_kernel_batch_row(b, &g));
}
#endif

/* The file keeps every row's class; one without classes (the old layout) is refused. */
static void test_auto_cache(void)
{
    const cr_backend *b = &cr_backend_cpu;
    char path[64], key[512], why[256] = "", err[256] = "";
    snprintf(path, sizeof path, "/tmp/test-stack-auto-%ld.json", (long)getpid());
    cr_auto_cache_key(b, "dev", key, sizeof key);
    CHECK_MSG(strstr(key, "auto-table 2") != NULL, "the key names the table's layout: %s", key);
    cr_auto_row rows[CR_CLASS_COUNT];
    for (int c = 0; c < CR_CLASS_COUNT; c++) {
        bool large = c == CR_CLASS_LARGE || c == CR_CLASS_TALL || c == CR_CLASS_STACK_LARGE;
        rows[c] = (cr_auto_row){.op = CR_OP_ATA, .dtype = CR_DT_F64, .large = large, .cls = (cr_size_class)c,
                                .kernel = cr_kernel_find(b, CR_OP_ATA, "openblas"), .ms = 0.5 + c};
        snprintf(rows[c].probe, sizeof rows[c].probe, "probe%d", c);
    }
    cr_auto_table tab = {rows, CR_CLASS_COUNT}, back = {0};
    CHECK(cr_auto_cache_save(path, key, &tab, err, sizeof err) == 0);
    CHECK_MSG(cr_auto_cache_load(path, key, b, &back, why, sizeof why) == 0 && back.n == CR_CLASS_COUNT, "%s", why);
    for (size_t i = 0; i < back.n; i++)
        CHECK(back.rows[i].cls == rows[i].cls && back.rows[i].large == rows[i].large && back.rows[i].kernel == rows[i].kernel);
    free(back.rows);
    back = (cr_auto_table){0};
    FILE *f = fopen(path, "w"); /* the old layout: no "class" */
    fprintf(f, "{\"key\": \"%s\", \"rows\": [{\"op\": \"ata\", \"dtype\": \"float64\", \"precision\": \"fp32\", "
               "\"large\": true, \"kernel\": \"openblas\", \"ms\": 1, \"probe\": \"x\"}]}\n", key);
    fclose(f);
    CHECK(cr_auto_cache_load(path, key, b, &back, why, sizeof why) < 0 && strstr(why, "malformed") && !back.rows);
    f = fopen(path, "w"); /* a class whose "large" disagrees */
    fprintf(f, "{\"key\": \"%s\", \"rows\": [{\"op\": \"ata\", \"dtype\": \"float64\", \"precision\": \"fp32\", "
               "\"large\": true, \"class\": \"stack-small\", \"kernel\": \"openblas\", \"ms\": 1, \"probe\": \"x\"}]}\n", key);
    fclose(f);
    CHECK(cr_auto_cache_load(path, key, b, &back, why, sizeof why) < 0 && !back.rows);
    unlink(path);
}

int main(void)
{
    test_classes();
    test_refusal();
    test_batch_row();
    test_auto();
#ifdef CRUNCHD_HAVE_CUDA
    test_cuda_rows();
#endif
    test_auto_cache();
    return check_summary("test_stack_registry");
}
