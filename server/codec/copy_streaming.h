/* A copy whose destination the CPU will not read next (bytes bound for the GPU's copy engine):
 * non-temporal stores where the target has them, memcpy elsewhere. */
#ifndef CRUNCHD_COPY_STREAMING_H
#define CRUNCHD_COPY_STREAMING_H

#include <stddef.h>

/* As memcpy (no overlap); the stores are visible to other agents when it returns. */
void cr_copy_streaming(void *dst, const void *src, size_t n);

#endif
