/* libFuzzer harness for the --auto-cache file (server/engine/auto_cache.c): every input is a
 * file the daemon might find at start. It is read under the key "k" with the CPU backend's
 * kernels; a file that loads must hold rows within the enums, each with a kernel of that op
 * (or none), and written back must read back the same; one that does not load must say why and
 * leave nothing allocated (LeakSanitizer checks). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/engine/auto_cache.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *scratch(const char *what)
{
    static char path[2][64];
    int i = strcmp(what, "in") != 0;
    if (!path[i][0])
        snprintf(path[i], sizeof path[i], "/tmp/fuzz-auto-cache-%ld.%s", (long)getpid(), what);
    return path[i];
}

static void check_rows(const cr_auto_table *t)
{
    for (size_t i = 0; i < t->n; i++) {
        const cr_auto_row *r = &t->rows[i];
        if ((unsigned)r->op >= CR_OP_COUNT || (unsigned)r->dtype >= CR_DT_COUNT ||
            (r->precision != CR_PREC_DEFAULT && r->precision != CR_PREC_TF32) ||
            (r->kernel && r->kernel->op != r->op) || strlen(r->probe) >= sizeof r->probe)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FILE *f = fopen(scratch("in"), "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        abort();
    cr_auto_table t = {0}, back = {0};
    char why[256] = "";
    if (cr_auto_cache_load(scratch("in"), "k", &cr_backend_cpu, &t, why, sizeof why) < 0) {
        if (!why[0] || t.rows)
            abort();
        return 0;
    }
    check_rows(&t);
    char err[512];
    if (cr_auto_cache_save(scratch("out"), "k", &t, err, sizeof err) < 0 ||
        cr_auto_cache_load(scratch("out"), "k", &cr_backend_cpu, &back, why, sizeof why) < 0 || back.n != t.n)
        abort();
    for (size_t i = 0; i < t.n; i++) {
        const cr_auto_row *a = &t.rows[i], *b = &back.rows[i];
        if (a->op != b->op || a->dtype != b->dtype || a->large != b->large || a->precision != b->precision ||
            a->kernel != b->kernel || strcmp(a->probe, b->probe) != 0)
            abort();
    }
    free(back.rows);
    free(t.rows);
    return 0;
}
