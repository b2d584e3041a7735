/* What the machine gives the daemon, read once at start: the CPUs it may use (online CPUs, the
 * affinity mask, and a cgroup CPU quota, whichever is least), from which the defaults that were
 * left to "auto" are sized (server/config.h), and the memory it may use (physical RAM and a
 * cgroup memory limit, whichever is less), from which the memory budget is sized. */
#ifndef CRUNCHD_MACHINE_H
#define CRUNCHD_MACHINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/config.h"

typedef struct {
    int online;        /* sysconf(_SC_NPROCESSORS_ONLN) */
    int affinity;      /* CPUs in the scheduler affinity mask */
    double quota;      /* cgroup quota in CPUs (cpu.max or cfs_quota/cfs_period); 0: none */
    int cpus;          /* the least of them, rounded up, at least 1: what sizing uses */
    uint64_t ram;      /* physical memory, bytes */
    uint64_t cgroup_memory; /* cgroup memory limit (v2 memory.max, v1 limit_in_bytes); 0: none */
    uint64_t memory;   /* the lesser of the two: what the memory budget is sized from */
} cr_machine;

void cr_machine_read(cr_machine *m);

/* A cgroup v2 cpu.max ("max 100000", "150000 100000"): the quota in CPUs, 0 for none or junk. */
double cr_cgroup_v2_quota(const char *cpu_max);

/* A cgroup memory limit file's text ("max\n", "1073741824\n"): bytes, 0 for none or junk. */
uint64_t cr_cgroup_memory_limit(const char *text);

/* Fills every field of c left at 0 ("auto"): HTTP threads, workers per device and batching for
 * the CPU backend (gpus 0) or a GPU backend with that many devices. A GPU backend's HTTP threads
 * leave a core to every worker of every device, so before its devices are counted (gpus
 * CR_GPUS_UNKNOWN) they stay 0 for a second call. queue_depth is sized by the engine once it
 * knows how many workers there are. */
#define CR_GPUS_UNKNOWN (-1)
void cr_config_size(cr_config *c, const cr_machine *m, int gpus);

/* One line saying what was sized from what, for the start-up log. */
void cr_config_describe(const cr_config *c, const cr_machine *m, char *out, size_t n);

#endif
