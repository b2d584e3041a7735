/* The machine and the defaults sized from it; see machine.h. */
#include "server/machine.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

double cr_cgroup_v2_quota(const char *cpu_max)
{
    char quota[32];
    long long period = 0;
    if (!cpu_max || sscanf(cpu_max, "%31s %lld", quota, &period) != 2 || period <= 0)
        return 0.0;
    if (strcmp(quota, "max") == 0)
        return 0.0;
    char *end = NULL;
    double q = strtod(quota, &end);
    return end != quota && *end == '\0' && q > 0 ? q / (double)period : 0.0;
}

static int read_text(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t got = fread(buf, 1, n - 1, f);
    fclose(f);
    buf[got] = '\0';
    return got ? 0 : -1;
}

/* This process's cgroup v2 directory (from /proc/self/cgroup's "0::/path" line), else the root. */
static void own_cgroup_file(const char *name, char *out, size_t n)
{
    char line[512] = "";
    const char *path = "";
    if (read_text("/proc/self/cgroup", line, sizeof line) == 0) {
        char *p = strstr(line, "0::");
        if (p) {
            path = p + 3;
            p[3 + strcspn(p + 3, "\n")] = '\0';
        }
    }
    snprintf(out, n, "/sys/fs/cgroup%s/%s", strcmp(path, "/") == 0 ? "" : path, name);
}

static double cgroup_quota(void)
{
    char path[600], text[128];
    own_cgroup_file("cpu.max", path, sizeof path);
    if (read_text(path, text, sizeof text) == 0 || read_text("/sys/fs/cgroup/cpu.max", text, sizeof text) == 0)
        return cr_cgroup_v2_quota(text);
    char quota[32], period[32]; /* cgroup v1 */
    if (read_text("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", quota, sizeof quota) == 0 &&
        read_text("/sys/fs/cgroup/cpu/cpu.cfs_period_us", period, sizeof period) == 0) {
        double q = atof(quota), p = atof(period);
        return q > 0 && p > 0 ? q / p : 0.0;
    }
    return 0.0;
}

uint64_t cr_cgroup_memory_limit(const char *text)
{
    if (!text)
        return 0;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || errno || (*end && *end != '\n'))
        return 0; /* "max", empty, junk */
    /* cgroup v1 writes "no limit" as the largest page-aligned signed value */
    return v >= (1ull << 62) ? 0 : (uint64_t)v;
}

static uint64_t cgroup_memory(void)
{
    char path[600], text[64];
    own_cgroup_file("memory.max", path, sizeof path);
    if (read_text(path, text, sizeof text) == 0 || read_text("/sys/fs/cgroup/memory.max", text, sizeof text) == 0)
        return cr_cgroup_memory_limit(text);
    if (read_text("/sys/fs/cgroup/memory/memory.limit_in_bytes", text, sizeof text) == 0)
        return cr_cgroup_memory_limit(text);
    return 0;
}

static void read_memory(cr_machine *m)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    m->ram = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    m->cgroup_memory = cgroup_memory();
    m->memory = m->cgroup_memory && (m->cgroup_memory < m->ram || !m->ram) ? m->cgroup_memory : m->ram;
}

void cr_machine_read(cr_machine *m)
{
    cpu_set_t set;
    memset(m, 0, sizeof *m);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    m->online = online > 0 ? (int)online : 1;
    m->affinity = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : m->online;
    m->quota = cgroup_quota();
    int cpus = m->affinity < m->online ? m->affinity : m->online;
    if (m->quota > 0 && ceil(m->quota) < cpus)
        cpus = (int)ceil(m->quota);
    m->cpus = cpus > 0 ? cpus : 1;
    read_memory(m);
}

static int clamp(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* GPU: workers mostly wait on the device and keep three jobs or batches in flight each, so a few per
 * device suffice; each still wants a core when a batch completes, and the HTTP threads (the CPU
 * work of a request: parse and encode) take the rest. One HTTP thread per CPU on top of the
 * workers only made them queue for cores: on the 16-core H100 machine 12 threads served the
 * small rows of bench-load 5-20% faster than 16 and never slower (docs/operations.md).
 * CPU backend: workers compute, sharing the cores with OpenBLAS's threads (cpu_backend.c). */
void cr_config_size(cr_config *c, const cr_machine *m, int gpus)
{
    bool gpu = gpus != 0;
    if (!c->workers)
        c->workers = gpu ? clamp(m->cpus / 4, 2, 4) : clamp(m->cpus / 2, 2, 32);
    if (!c->http_threads && gpus != CR_GPUS_UNKNOWN)
        c->http_threads = clamp(gpu ? m->cpus - c->workers * gpus : m->cpus, 2, 64);
    if (c->batch_max < 0)
        c->batch_max = gpu ? 32 : 0; /* on the CPU a batch saves no launch: it only serialises */
    /* The other quarter: code, libraries, stacks, per-connection buffers, the CUDA context. */
    if (!c->max_memory_mb) {
        c->max_memory_mb = m->memory ? (int64_t)(m->memory / 4 * 3 >> 20) : 4096;
        c->max_memory_auto = m->memory != 0;
    }
    if (c->max_memory_mb < 1)
        c->max_memory_mb = 1;
    /* Registered regions are the clients' memory, but pinned on cuda and read by our jobs:
     * bounded like the rest of what we hold, with room left for the budget's own. */
    if (!c->shm_max_mb)
        c->shm_max_mb = c->max_memory_mb / 2 > 0 ? c->max_memory_mb / 2 : 1;
    /* One client cannot take every region's room: three more of its size still fit. */
    if (!c->shm_client_max_mb)
        c->shm_client_max_mb = c->shm_max_mb / 4 > 0 ? c->shm_max_mb / 4 : 1;
    /* kept results are memory the budget counts: they can never be allowed more */
    if (c->result_cap_mb > c->max_memory_mb)
        c->result_cap_mb = c->max_memory_mb;
}

void cr_config_describe(const cr_config *c, const cr_machine *m, char *out, size_t n)
{
    char quota[32] = "none", memlim[32] = "none";
    if (m->cgroup_memory)
        snprintf(memlim, sizeof memlim, "%llu MiB", (unsigned long long)(m->cgroup_memory >> 20));
    if (m->quota > 0)
        snprintf(quota, sizeof quota, "%.2f CPUs", m->quota);
    snprintf(out, n,
             "sized for %d CPUs (online %d, affinity %d, cgroup quota %s): %d HTTP threads, %d workers "
             "per device (GPU wait: %s), queue %d, batches of up to %d jobs (delay %d us); memory budget %lld MiB "
             "(RAM %llu MiB, cgroup limit %s)",
             m->cpus, m->online, m->affinity, quota, c->http_threads, c->workers, c->gpu_wait, c->queue_depth, c->batch_max,
             c->batch_delay_us, (long long)c->max_memory_mb, (unsigned long long)(m->ram >> 20), memlim);
}
