/* The generator of random.h over host memory: the cpu backend's fill_random and every backend's
 * host fallback (an operand the host must read, as a histogram's data without a range). Big
 * fills are split over a few threads: each element depends on its index alone, so the split
 * changes no bit. */
#include "kernels/random.h"

#include <pthread.h>
#include <unistd.h>

#define FILL_THREADS_MAX 16
#define FILL_PER_THREAD_MIN (1u << 20) /* below a million elements a thread costs more than it saves */

typedef struct {
    void *p;
    uint64_t from, to, key;
    cr_dtype dt;
    bool normal;
} fill_part;

static void fill_range(const fill_part *f)
{
    for (uint64_t i = f->from; i < f->to; i++)
        cr_random_store(f->p, i, f->dt, f->normal, f->key);
}

static void *fill_thread(void *arg)
{
    fill_range(arg);
    return NULL;
}

static int fill_threads(uint64_t count)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    uint64_t by_size = count / FILL_PER_THREAD_MIN;
    int n = cpus > FILL_THREADS_MAX ? FILL_THREADS_MAX : cpus < 1 ? 1 : (int)cpus;
    return by_size < (uint64_t)n ? (by_size < 1 ? 1 : (int)by_size) : n;
}

void cr_random_fill_host(void *p, uint64_t count, cr_dtype dt, bool normal, uint64_t seed)
{
    int n = fill_threads(count);
    fill_part parts[FILL_THREADS_MAX];
    pthread_t tid[FILL_THREADS_MAX];
    bool started[FILL_THREADS_MAX] = {false};
    uint64_t key = cr_random_key(seed), step = count / (uint64_t)n;
    for (int t = 0; t < n; t++) {
        parts[t] = (fill_part){p, step * (uint64_t)t, t == n - 1 ? count : step * (uint64_t)(t + 1), key, dt, normal};
        /* part 0 runs on this thread; a thread that cannot start leaves its part to this one too */
        started[t] = t > 0 && pthread_create(&tid[t], NULL, fill_thread, &parts[t]) == 0;
    }
    for (int t = 0; t < n; t++)
        if (!started[t])
            fill_range(&parts[t]);
    for (int t = 1; t < n; t++)
        if (started[t])
            pthread_join(tid[t], NULL);
}
