/* The memory budget; see memory.h. Lock-free: a charge is a compare-and-swap on the total, so
 * HTTP threads and workers charge without contending on a mutex. */
#include "server/memory.h"

#include <stdatomic.h>
#include <stddef.h>

static _Atomic uint64_t limit_bytes;
static _Atomic uint64_t total;
static _Atomic uint64_t by_kind[CR_MEM_KINDS];
static _Atomic uint64_t refusals;
static uint64_t (*_Atomic probe)(void);
static void (*_Atomic trim_held)(void);

void cr_mem_set_limit(uint64_t bytes) { atomic_store(&limit_bytes, bytes); }
uint64_t cr_mem_limit(void) { return atomic_load(&limit_bytes); }
void cr_mem_set_probe(uint64_t (*held)(void), void (*trim)(void))
{
    atomic_store(&trim_held, trim);
    atomic_store(&probe, held);
}

uint64_t cr_mem_held(void)
{
    uint64_t (*p)(void) = atomic_load(&probe);
    return p ? p() : 0;
}

static int refuse(uint64_t bytes, uint64_t limit, uint64_t in_use, const char *what, cr_error *err)
{
    atomic_fetch_add(&refusals, 1);
    double mib = (double)bytes / 1048576.0, lim = (double)limit / 1048576.0;
    if (bytes > limit)
        return cr_fail(err, 413, "too_large", "", "%s needs %.1f MiB, more than --max-memory-mb (%.0f MiB)",
                       what, mib, lim);
    return cr_fail(err, 503, "memory_budget", "",
                   "%s needs %.1f MiB; %.1f of --max-memory-mb (%.0f MiB) are in use: retry later", what,
                   mib, (double)in_use / 1048576.0, lim);
}

static int charge(cr_mem_kind kind, uint64_t bytes, uint64_t need, const char *what, cr_error *err)
{
    uint64_t limit = atomic_load(&limit_bytes);
    if (limit) {
        uint64_t held = cr_mem_held();
        uint64_t cur = atomic_load(&total);
        void (*trim)(void) = atomic_load(&trim_held);
        do {
            if (need > limit || bytes > limit)
                return refuse(need, limit, cur + held, what, err);
            if (cur + held > limit - bytes && held && trim) { /* the cache yields, once */
                trim();
                trim = NULL;
                held = cr_mem_held();
            }
            if (cur + held > limit - bytes)
                return refuse(need, limit, cur + held, what, err);
        } while (!atomic_compare_exchange_weak(&total, &cur, cur + bytes));
    } else {
        atomic_fetch_add(&total, bytes);
    }
    atomic_fetch_add(&by_kind[kind], bytes);
    return 0;
}

int cr_mem_charge(cr_mem_kind kind, uint64_t bytes, const char *what, cr_error *err)
{
    return charge(kind, bytes, bytes, what, err);
}

int cr_mem_grow(cr_mem_kind kind, uint64_t have, uint64_t want, const char *what, cr_error *err)
{
    return want <= have ? 0 : charge(kind, want - have, want, what, err);
}

void cr_mem_release(cr_mem_kind kind, uint64_t bytes)
{
    atomic_fetch_sub(&by_kind[kind], bytes);
    atomic_fetch_sub(&total, bytes);
}

uint64_t cr_mem_charged(cr_mem_kind kind) { return atomic_load(&by_kind[kind]); }
uint64_t cr_mem_refusals(void) { return atomic_load(&refusals); }

const char *cr_mem_kind_name(cr_mem_kind kind)
{
    static const char *const names[CR_MEM_KINDS] = {"body", "decode", "arrays", "scratch", "shm", "tensor"};
    return kind < CR_MEM_KINDS ? names[kind] : "?";
}
