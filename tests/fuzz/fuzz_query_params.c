/* libFuzzer harness for the query-string decoder of binary requests: every input is decoded as
 * the query of each route (/v1/gemm, /v1/ata, /v1/histogram, /v1/jobs). Failure must name a
 * parameter with a 4xx; success must leave values the decoders can trust. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/codec/query.h"

static const cr_limits fuzz_limits = {
    .max_elements = 1 << 16, .max_total_bytes = 1 << 20, .max_bins = 1 << 12, .max_stack = 1 << 10,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int op = 0; op <= CR_OP_COUNT; op++) {
        cr_params p;
        cr_error e = {0};
        if (cr_request_params_from_query((const char *)data, size, (cr_op)op, &fuzz_limits, &p,
                                         &e) != 0) {
            if (e.http < 400 || e.http >= 500 || !e.code[0])
                abort();
            continue;
        }
        size_t kl = strnlen(p.kernel.name, sizeof p.kernel.name);
        if (p.op >= CR_OP_COUNT || (op != CR_OP_COUNT && p.op != (cr_op)op) || kl == 0 ||
            kl >= sizeof p.kernel.name || !isfinite(p.alpha) || !isfinite(p.beta) ||
            p.timeout_ms < 0 || p.bins < 0 || p.bins > fuzz_limits.max_bins ||
            (p.has_range && !(p.lo < p.hi)))
            abort();
    }
    return 0;
}
