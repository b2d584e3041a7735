/* One memory budget for the whole daemon (--max-memory-mb). Everything a request or a job holds
 * is charged here before it is allocated and released when it is freed: the body as it arrives,
 * the decoder's working memory, input and output arrays (which stay charged while a finished
 * async result is kept), compare mode's scratch, registered shared-memory regions. Memory the backend keeps for reuse (cuda's
 * pinned cache) is read through a probe and counts against the same limit. Over the budget a
 * new charge fails with 503 (Retry-After: others will finish) or, when it could never fit,
 * 413: a client learns at once, and the daemon is never OOM-killed by what its limits missed. */
#ifndef CRUNCHD_MEMORY_H
#define CRUNCHD_MEMORY_H

#include <stdint.h>

#include "server/error.h"

typedef enum {
    CR_MEM_BODY,     /* request bodies as received (JSON text) */
    CR_MEM_DECODE,   /* a decoder's working memory, reserved for the decode's duration */
    CR_MEM_ARRAYS,   /* inputs, outputs and kept results */
    CR_MEM_SCRATCH,  /* compare mode's per-kernel outputs */
    CR_MEM_SHM,      /* registered shared-memory regions: mapped (pinned on cuda) while registered */
    CR_MEM_TENSOR,   /* resident tensors in host memory (the cpu backend's) and streams' accumulators */
    CR_MEM_KINDS
} cr_mem_kind;

/* 0: no limit (tools and tests that build requests directly). */
void cr_mem_set_limit(uint64_t bytes);
uint64_t cr_mem_limit(void);
/* Bytes the backend holds outside any request (cuda's pinned cache), counted with the charges;
 * trim (NULL: none) gives the cache back, and is called once before a charge that the held bytes
 * would refuse is refused. */
void cr_mem_set_probe(uint64_t (*held)(void), void (*trim)(void));

/* Charges bytes of kind; on refusal fills err (413 too_large when bytes alone exceed the limit,
 * else 503 memory_budget) and charges nothing. `what` names the thing for the message. */
int cr_mem_charge(cr_mem_kind kind, uint64_t bytes, const char *what, cr_error *err);
/* A buffer that grows from have to want bytes: charges the difference, refused with 413 when want
 * alone could never fit. */
int cr_mem_grow(cr_mem_kind kind, uint64_t have, uint64_t want, const char *what, cr_error *err);
void cr_mem_release(cr_mem_kind kind, uint64_t bytes);

uint64_t cr_mem_charged(cr_mem_kind kind);
uint64_t cr_mem_held(void);      /* the probe's bytes */
uint64_t cr_mem_refusals(void);  /* charges refused since start */
const char *cr_mem_kind_name(cr_mem_kind kind);

#endif
