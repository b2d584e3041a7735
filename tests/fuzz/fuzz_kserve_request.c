/* libFuzzer harness for the KServe v2 request decoder: every input is decoded for each model
 * (gemm, ata, histogram) as a JSON body, and once more with its first byte choosing where a
 * JSON header ends and binary tensors begin (Inference-Header-Content-Length). Limits are small
 * so the fuzzer cannot make it allocate much. Success must leave a request that frees cleanly,
 * failure a named error and nothing allocated; and the JSON form decoded with the numeric fast
 * path off (cJSON alone) must have the same outcome, error for error and bit for bit. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/codec/json_fastarray.h"
#include "server/kserve/kserve_internal.h"

static const cr_limits fuzz_limits = {
    .max_elements = 1 << 16, .max_total_bytes = 4 << 20, .max_bins = 1 << 12, .max_stack = 1 << 10,
};

static const char *const models[] = {"gemm", "ata", "histogram"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
    int rc;
    cr_request r;
    cr_ks_spec s;
    cr_error e;
} outcome;

static void decode(const cr_ks_model *m, const uint8_t *data, size_t size, int64_t header_len,
                   outcome *o)
{
    memset(&o->e, 0, sizeof o->e);
    o->rc = cr_ks_decode(m, (const char *)data, size, header_len, &fuzz_limits, &o->r, &o->s,
                         &o->e);
    if (o->rc != 0 && (o->e.code[0] == '\0' || o->e.http < 400 || o->r.bufs[0] != NULL))
        abort();
}

static void release(outcome *o)
{
    if (o->rc != 0)
        return;
    cr_request_free(&o->r);
    cr_ks_spec_free(&o->s);
}

static bool same(const outcome *a, const outcome *b)
{
    if (a->rc != b->rc)
        return false;
    if (a->rc != 0)
        return a->e.http == b->e.http && !strcmp(a->e.code, b->e.code) &&
               !strcmp(a->e.field, b->e.field) && !strcmp(a->e.message, b->e.message);
    for (int i = 0; i < CR_BUF_OUTPUT; i++)
        if (a->r.buf_bytes[i] != b->r.buf_bytes[i] ||
            (a->r.buf_bytes[i] && memcmp(a->r.bufs[i], b->r.bufs[i], a->r.buf_bytes[i]) != 0))
            return false;
    return a->r.task.op == b->r.task.op && a->r.task.dtype == b->r.task.dtype &&
           memcmp(a->s.want, b->s.want, sizeof a->s.want) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (size_t k = 0; k < sizeof models / sizeof models[0]; k++) {
        const cr_ks_model *m = cr_ks_model_find(models[k], strlen(models[k]));
        outcome fast, slow;
        decode(m, data, size, -1, &fast);
        cr_jfast_set_enabled(false);
        decode(m, data, size, -1, &slow);
        cr_jfast_set_enabled(true);
        if (!same(&fast, &slow))
            abort();
        release(&fast);
        release(&slow);
        if (size > 1) {
            outcome split;
            decode(m, data + 1, size - 1, data[0] % size, &split);
            release(&split);
        }
    }
    return 0;
}
