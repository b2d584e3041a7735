/* libFuzzer harness for the JSON request decoder: every input is decoded as each route would
 * (gemm, ata, histogram, and the async form that reads "op"), with limits small enough that
 * the fuzzer cannot make it allocate much; success must leave a request that frees cleanly and
 * whose output can be allocated, failure must leave a named error and nothing allocated. Each
 * input is decoded a second time with the numeric fast path off (cJSON alone): the outcome must
 * be the same, error for error and bit for bit. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/codec/json_decode.h"
#include "server/codec/json_fastarray.h"

static const cr_limits fuzz_limits = {
    .max_elements = 1 << 16, .max_total_bytes = 4 << 20, .max_bins = 1 << 12, .max_stack = 1 << 10,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool same_error(const cr_error *a, const cr_error *b)
{
    return a->http == b->http && !strcmp(a->code, b->code) && !strcmp(a->field, b->field) &&
           !strcmp(a->message, b->message);
}

static bool same_arrays(const cr_request *a, const cr_request *b)
{
    for (int i = 0; i < CR_BUF_OUTPUT; i++)
        if (a->buf_bytes[i] != b->buf_bytes[i] ||
            (a->buf_bytes[i] && memcmp(a->bufs[i], b->bufs[i], a->buf_bytes[i]) != 0))
            return false;
    return a->task.op == b->task.op && a->task.dtype == b->task.dtype;
}

/* The same input through cJSON alone. */
static void compare_with_cjson(cr_op op, const uint8_t *data, size_t size, int rc,
                               const cr_request *r, const cr_error *e)
{
    cr_request slow;
    cr_error se;
    memset(&se, 0, sizeof se);
    cr_jfast_set_enabled(false);
    int src = cr_request_from_json(op, (const char *)data, size, &fuzz_limits, &slow, &se);
    cr_jfast_set_enabled(true);
    if (src != rc || (rc != 0 && !same_error(e, &se)) || (rc == 0 && !same_arrays(r, &slow)))
        abort();
    if (src == 0)
        cr_request_free(&slow);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int op = 0; op <= CR_OP_COUNT; op++) {
        cr_request r;
        cr_error e;
        memset(&e, 0, sizeof e);
        int rc = cr_request_from_json((cr_op)op, (const char *)data, size, &fuzz_limits, &r, &e);
        compare_with_cjson((cr_op)op, data, size, rc, &r, &e);
        if (rc != 0) {
            if (e.code[0] == '\0' || e.http < 400 || r.bufs[0] != NULL)
                abort();
            continue;
        }
        if (r.task.op >= CR_OP_COUNT || (op != CR_OP_COUNT && r.task.op != (cr_op)op))
            abort();
        if (cr_request_alloc_output(&r, &e) != 0)
            abort();
        cr_request_free(&r);
        cr_request_free(&r);
    }
    return 0;
}
