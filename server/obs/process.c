/* process_* metrics from /proc/self; see process.h. */
#include "server/obs/process.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* Seconds since the epoch at which the machine booted (/proc/stat's btime). */
static double boot_time(void)
{
    FILE *f = fopen("/proc/stat", "r");
    char line[256];
    double t = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "btime %lf", &t) == 1)
            break;
    if (f)
        fclose(f);
    return t;
}

static uint64_t count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    uint64_t n = 0;
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n > 0 ? n - 1 : 0; /* less the directory stream's own descriptor */
}

int cr_process_read(cr_process_stats *p)
{
    memset(p, 0, sizeof *p);
    FILE *f = fopen("/proc/self/stat", "r");
    char buf[1024];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    char *rp = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    unsigned long utime, stime, vsize;
    unsigned long long start;
    long rss;
    /* from field 3 (state): utime is field 14, stime 15, starttime 22, vsize 23, rss 24 */
    if (!rp || sscanf(rp + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %*d %*d %*d %*d %*d %*d %llu %lu %ld",
                      &utime, &stime, &start, &vsize, &rss) != 5)
        return -1;
    double hz = (double)sysconf(_SC_CLK_TCK);
    p->cpu_seconds = (double)(utime + stime) / hz;
    p->start_time_seconds = boot_time() + (double)start / hz;
    p->virtual_bytes = vsize;
    p->resident_bytes = (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE);
    p->open_fds = count_fds();
    struct rlimit rl;
    p->max_fds = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? (uint64_t)rl.rlim_cur : 0;
    return 0;
}
