/* Monotonic seconds: every duration and deadline in the daemon is measured on this clock. */
#ifndef CRUNCHD_CLOCK_H
#define CRUNCHD_CLOCK_H

#include <time.h>

static inline double cr_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Unix time in seconds, for what an answer dates (expiry times): never for durations. */
static inline double cr_wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
