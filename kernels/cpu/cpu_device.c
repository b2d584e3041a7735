/* What the CPU "device" is: the host, described by /proc/cpuinfo and sysconf. */
#include "kernels/cpu/cpu_internal.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char model_name[112] = "CPU";
static pthread_once_t model_once = PTHREAD_ONCE_INIT;

/* "model name\t: AMD EPYC 9654 96-Core Processor\n" -> "AMD EPYC 9654 96-Core Processor".
 * ARM kernels print no such line; the default "CPU" stays then. */
static void read_model_name(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL)
        return;
    char line[512];
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "model name", 10) != 0)
            continue;
        const char *colon = strchr(line, ':');
        if (colon == NULL)
            continue;
        const char *v = colon + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        size_t len = strcspn(v, "\n");
        while (len > 0 && isspace((unsigned char)v[len - 1]))
            len--;
        if (len == 0)
            continue;
        if (len >= sizeof model_name)
            len = sizeof model_name - 1;
        memcpy(model_name, v, len);
        model_name[len] = '\0';
        break;
    }
    fclose(f);
}

const char *cpu_model_name(void)
{
    pthread_once(&model_once, read_model_name);
    return model_name;
}

static uint64_t pages_to_bytes(int pages_name)
{
    long pages = sysconf(pages_name);
    long page_size = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page_size <= 0)
        return 0;
    return (uint64_t)pages * (uint64_t)page_size;
}

cr_status cpu_device_info(int index, cr_device_info *out)
{
    if (index != 0 || out == NULL)
        return CR_E_INVALID;
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", cpu_model_name());
    out->index = 0;
    out->memory_total = pages_to_bytes(_SC_PHYS_PAGES);
    out->memory_free = pages_to_bytes(_SC_AVPHYS_PAGES);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN); /* the host's counterpart of SMs */
    out->multiprocessors = cpus > 0 ? (int)cpus : 1;
    return CR_OK;
}
