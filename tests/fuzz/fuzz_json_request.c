/* libFuzzer harness for the JSON request decoder: every input is decoded as each route would
 * (gemm, ata, histogram, and the async form that reads "op"), with limits small enough that
 * the fuzzer cannot make it allocate much; success must leave a request that frees cleanly and
 * whose output can be allocated, failure must leave a named error and nothing allocated. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/codec/json_decode.h"

static const cr_limits fuzz_limits = {
    .max_elements = 1 << 16, .max_total_bytes = 4 << 20, .max_bins = 1 << 12,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int op = 0; op <= CR_OP_COUNT; op++) {
        cr_request r;
        cr_error e;
        memset(&e, 0, sizeof e);
        if (cr_request_from_json((cr_op)op, (const char *)data, size, &fuzz_limits, &r, &e) != 0) {
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
