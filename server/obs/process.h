/* The process_* metrics Prometheus client libraries export (resident and virtual memory, CPU
 * seconds, open and maximum descriptors, start time), read from /proc/self at scrape time. */
#ifndef CRUNCHD_PROCESS_H
#define CRUNCHD_PROCESS_H

#include <stdint.h>

typedef struct {
    uint64_t resident_bytes, virtual_bytes;
    double cpu_seconds;
    double start_time_seconds; /* since the epoch */
    uint64_t open_fds, max_fds;
} cr_process_stats;

/* -1 when /proc cannot be read (then nothing is exported). */
int cr_process_read(cr_process_stats *p);

#endif
