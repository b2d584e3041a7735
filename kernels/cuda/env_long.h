/* The cuda backend's tuning variables (CRUNCHD_SINK_*, CRUNCHD_DEVICE_CACHE_MB): a whole number
 * from the environment, clamped to [lo, hi]; fallback when unset (text that is no number reads
 * as 0, as strtol has it). */
#ifndef CRUNCHD_CUDA_ENV_LONG_H
#define CRUNCHD_CUDA_ENV_LONG_H

#include <stdlib.h>

static inline long cr_env_long(const char *name, long fallback, long lo, long hi)
{
    const char *s = getenv(name);
    long v = s ? strtol(s, NULL, 10) : fallback;
    return v < lo ? lo : v > hi ? hi : v;
}

#endif
