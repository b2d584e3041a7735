/* The engine's pure parts: the bounded queue, the async job table, config parsing. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/unit/check.h"
#include "server/clock.h"
#include "server/config.h"
#include "server/engine/job_table.h"
#include "server/engine/queue.h"
#include "server/machine.h"
#include "server/memory.h"

static cr_job *new_job(void)
{
    cr_request req = {0};
    return cr_job_new(&req, true);
}

static const cr_take_policy one = {.max = 1};

/* One job, as a worker with batching off takes it (NULL when closed and empty). */
static cr_job *take1(cr_queue *q)
{
    cr_job *j = NULL;
    return cr_queue_take(q, &one, true, &j) == 1 ? j : NULL;
}

/* A job that may share a launch with the others of `key` (a stand-in shape). */
static cr_job *batch_job(int key, double enqueued_at)
{
    cr_job *j = new_job();
    j->batchable = true;
    j->batch_key.m = key;
    j->enqueued_at = enqueued_at;
    return j;
}

static void release_all(cr_job **j, int n)
{
    for (int i = 0; i < n; i++)
        cr_job_release(j[i]);
}

/* Triton's dynamic batcher rules: same key together, oldest first, up to max; a lone job or
 * another key is not held up behind a batch that waits for partners; preferred sizes; the delay;
 * a device that had no room for a job does not take it again. */
static void test_queue_batches(void)
{
    cr_queue q;
    cr_job *out[8], *j[8];
    CHECK(cr_queue_init(&q, 16) == 0);
    double now = cr_now();
    j[0] = batch_job(64, now);
    j[1] = batch_job(16, now);
    j[2] = batch_job(64, now);
    j[3] = new_job(); /* not batchable */
    j[4] = batch_job(64, now);
    for (int i = 0; i < 5; i++)
        CHECK(cr_queue_push(&q, j[i]) == 0);
    cr_take_policy p = {.max = 2};
    CHECK(cr_queue_take(&q, &p, false, out) == 2 && out[0] == j[0] && out[1] == j[2]);
    CHECK(cr_queue_take(&q, &p, false, out) == 1 && out[0] == j[1]); /* alone: no delay, take it */
    CHECK(cr_queue_take(&q, &p, false, out) == 1 && out[0] == j[3]);
    CHECK(cr_queue_take(&q, &p, false, out) == 1 && out[0] == j[4]);
    CHECK(cr_queue_take(&q, &p, false, out) == 0);
    cr_queue_done(&q, 5);
    release_all(j, 5);

    /* a delay holds a lone batchable job back, but not a non-batchable one behind it */
    cr_take_policy wait = {.max = 4, .delay_s = 60};
    j[0] = batch_job(64, now);
    j[1] = new_job();
    CHECK(cr_queue_push(&q, j[0]) == 0 && cr_queue_push(&q, j[1]) == 0);
    CHECK(cr_queue_take(&q, &wait, false, out) == 1 && out[0] == j[1]);
    CHECK(cr_queue_take(&q, &wait, false, out) == 0);
    j[2] = batch_job(64, now), j[3] = batch_job(64, now), j[4] = batch_job(64, now);
    for (int i = 2; i < 5; i++)
        CHECK(cr_queue_push(&q, j[i]) == 0);
    CHECK(cr_queue_take(&q, &wait, false, out) == 4 && out[0] == j[0] && out[3] == j[4]); /* max reached */
    cr_queue_done(&q, 5);
    release_all(j, 5);

    /* preferred sizes: the largest one there are enough jobs for */
    const int preferred[] = {2, 4};
    cr_take_policy pref = {.max = 8, .delay_s = 60, .preferred = preferred, .n_preferred = 2};
    for (int i = 0; i < 5; i++)
        CHECK(cr_queue_push(&q, j[i] = batch_job(7, now)) == 0);
    CHECK(cr_queue_take(&q, &pref, false, out) == 4);
    CHECK(cr_queue_take(&q, &pref, false, out) == 0); /* one left, below every preferred size */
    j[4]->enqueued_at = now - 61; /* its delay passed: it goes as it is */
    CHECK(cr_queue_take(&q, &pref, false, out) == 1 && out[0] == j[4]);
    cr_queue_done(&q, 5);
    release_all(j, 5);

    /* a job that found no room on device 0 is left for another device */
    j[0] = new_job();
    j[0]->devices_tried = 1u << 0;
    CHECK(cr_queue_push(&q, j[0]) == 0);
    cr_take_policy dev0 = {.max = 1, .device = 0}, dev1 = {.max = 1, .device = 1};
    CHECK(cr_queue_take(&q, &dev0, false, out) == 0);
    CHECK(cr_queue_take(&q, &dev1, false, out) == 1 && out[0] == j[0]);
    cr_queue_requeue(&q, j[0]); /* back at the head, not running */
    int queued, running;
    cr_queue_counts(&q, &queued, &running);
    CHECK(queued == 1 && running == 0);
    cr_queue_close(&q);
    CHECK(cr_queue_take(&q, &dev0, true, out) == -1); /* closed: nothing device 0 may take */
    CHECK(cr_queue_take(&q, &dev1, true, out) == 1);
    cr_queue_done(&q, 1);
    cr_queue_destroy(&q);
    cr_job_release(j[0]);
}

typedef struct {
    cr_queue *q;
    int device;
    _Atomic int waiting, took; /* took: 1 a job, -1 closed */
} device_worker;

static void *device_worker_main(void *arg)
{
    device_worker *w = arg;
    cr_take_policy p = {.max = 1, .device = w->device};
    cr_job *j = NULL;
    atomic_store(&w->waiting, 1);
    int n = cr_queue_take(w->q, &p, true, &j);
    atomic_store(&w->took, n == 1 ? 1 : -1);
    if (n == 1) {
        cr_queue_done(w->q, 1);
        cr_job_release(j);
    }
    return NULL;
}

/* A job only device 1 may take (its tensors are there), pushed while a device-0 worker and then a
 * device-1 worker wait: device 1's worker gets it. With one waiter woken per push, the wake-up
 * went to device 0's (the older waiter), which cannot take it, and the job stayed queued with
 * device 1 idle (a 2-GPU host stalled this way). */
static void test_queue_wakes_the_right_device(void)
{
    cr_queue q;
    CHECK(cr_queue_init(&q, 4) == 0);
    device_worker w[2] = {{.q = &q, .device = 0}, {.q = &q, .device = 1}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        CHECK(pthread_create(&t[i], NULL, device_worker_main, &w[i]) == 0);
        while (!atomic_load(&w[i].waiting))
            sched_yield();
        nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL); /* into its wait, in this order */
    }
    cr_job *j = new_job();
    j->devices_tried = 1u << 0;
    CHECK(cr_queue_push(&q, j) == 0);
    double until = cr_now() + 5.0;
    while (!atomic_load(&w[1].took) && cr_now() < until)
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    CHECK(atomic_load(&w[1].took) == 1);
    CHECK(atomic_load(&w[0].took) == 0);
    cr_queue_close(&q); /* device 0's worker leaves; so does device 1's, had it missed the job */
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CHECK(atomic_load(&w[0].took) == -1);
    cr_queue_destroy(&q);
}

static void test_machine_sizing(void)
{
    CHECK(cr_cgroup_v2_quota("max 100000\n") == 0.0);
    CHECK(cr_cgroup_v2_quota("150000 100000\n") == 1.5);
    CHECK(cr_cgroup_v2_quota("garbage") == 0.0);
    CHECK(cr_cgroup_v2_quota("100000 0") == 0.0);
    cr_machine m = {.online = 16, .affinity = 16, .quota = 0, .cpus = 16};
    cr_config gpu = {.batch_max = -1}, cpu = {.batch_max = -1}, set = {.workers = 7, .http_threads = 3, .batch_max = 0};
    cr_config_size(&gpu, &m, CR_GPUS_UNKNOWN);
    CHECK(gpu.http_threads == 0 && gpu.workers == 4 && gpu.batch_max == 32); /* threads wait for the count */
    cr_config_size(&gpu, &m, 1);
    CHECK(gpu.http_threads == 12 && gpu.workers == 4); /* a core per worker */
    cr_config two = {.batch_max = -1};
    cr_config_size(&two, &m, 2);
    CHECK(two.http_threads == 8 && two.workers == 4); /* every device's workers */
    cr_config_size(&cpu, &m, 0);
    CHECK(cpu.http_threads == 16 && cpu.workers == 8 && cpu.batch_max == 0);
    cr_config_size(&set, &m, 1); /* what was set stays */
    CHECK(set.workers == 7 && set.http_threads == 3 && set.batch_max == 0);
    cr_machine small = {.online = 64, .affinity = 64, .quota = 1.5, .cpus = 2};
    cr_config q = {.batch_max = -1};
    cr_config_size(&q, &small, 1);
    CHECK(q.http_threads == 2 && q.workers == 2);
    cr_machine here;
    cr_machine_read(&here);
    CHECK(here.cpus >= 1 && here.cpus <= here.online);
    CHECK(here.ram > 0 && here.memory > 0 && here.memory <= here.ram);

    CHECK(cr_cgroup_memory_limit("max\n") == 0);
    CHECK(cr_cgroup_memory_limit("1073741824\n") == 1073741824ull);
    CHECK(cr_cgroup_memory_limit("9223372036854771712\n") == 0); /* v1's "no limit" */
    CHECK(cr_cgroup_memory_limit("12x") == 0 && cr_cgroup_memory_limit("") == 0);
    cr_machine ram = {.cpus = 4, .ram = 16ull << 30, .memory = 16ull << 30};
    cr_config budget = {.batch_max = -1}, given = {.batch_max = -1, .max_memory_mb = 100};
    cr_config_size(&budget, &ram, 0);
    CHECK(budget.max_memory_mb == 12288); /* 3/4 of the memory */
    cr_config_size(&given, &ram, 0);
    CHECK(given.max_memory_mb == 100);
}

/* Every charge is refused or counted whole; 413 for what could never fit, 503 for what does not
 * fit now; the probe's bytes count against the same limit. */
static uint64_t probe_bytes;
static uint64_t probe(void) { return probe_bytes; }
static int trims;
static void trim_half(void)
{
    trims++;
    probe_bytes /= 2;
}

static void test_memory_budget(void)
{
    cr_error err;
    cr_mem_set_limit(1000);
    CHECK(cr_mem_charge(CR_MEM_ARRAYS, 600, "x", &err) == 0);
    CHECK(cr_mem_charge(CR_MEM_BODY, 300, "x", &err) == 0);
    CHECK(cr_mem_charged(CR_MEM_ARRAYS) == 600 && cr_mem_charged(CR_MEM_BODY) == 300);
    uint64_t refused = cr_mem_refusals();
    CHECK(cr_mem_charge(CR_MEM_ARRAYS, 200, "x", &err) == -1 && err.http == 503 &&
          strcmp(err.code, "memory_budget") == 0);
    CHECK(cr_mem_charge(CR_MEM_ARRAYS, 1001, "x", &err) == -1 && err.http == 413);
    CHECK(cr_mem_refusals() == refused + 2);
    CHECK(cr_mem_charged(CR_MEM_ARRAYS) == 600); /* refused charges left nothing behind */
    CHECK(cr_mem_grow(CR_MEM_BODY, 300, 400, "x", &err) == 0 && cr_mem_charged(CR_MEM_BODY) == 400);
    CHECK(cr_mem_grow(CR_MEM_BODY, 400, 2000, "x", &err) == -1 && err.http == 413);
    cr_mem_release(CR_MEM_BODY, 400);
    probe_bytes = 350;
    cr_mem_set_probe(probe, NULL);
    CHECK(cr_mem_charge(CR_MEM_DECODE, 100, "x", &err) == -1 && err.http == 503);
    CHECK(cr_mem_charge(CR_MEM_DECODE, 50, "x", &err) == 0);
    cr_mem_release(CR_MEM_DECODE, 50);
    /* a cache that can be given back yields to a charge, once, and only when it is in the way */
    cr_mem_set_probe(probe, trim_half);
    CHECK(cr_mem_charge(CR_MEM_DECODE, 50, "x", &err) == 0 && trims == 0);
    cr_mem_release(CR_MEM_DECODE, 50);
    CHECK(cr_mem_charge(CR_MEM_DECODE, 200, "x", &err) == 0 && trims == 1 && probe_bytes == 175);
    cr_mem_release(CR_MEM_DECODE, 200);
    CHECK(cr_mem_charge(CR_MEM_DECODE, 350, "x", &err) == -1 && err.http == 503 && trims == 2);
    cr_mem_set_probe(NULL, NULL);
    cr_mem_release(CR_MEM_ARRAYS, 600);
    for (int k = 0; k < CR_MEM_KINDS; k++)
        CHECK(cr_mem_charged((cr_mem_kind)k) == 0);
    cr_mem_set_limit(0); /* no limit: everything is counted, nothing refused */
    CHECK(cr_mem_charge(CR_MEM_ARRAYS, 1ull << 60, "x", &err) == 0);
    cr_mem_release(CR_MEM_ARRAYS, 1ull << 60);
}

static void test_queue_fifo_and_bounds(void)
{
    cr_queue q;
    CHECK(cr_queue_init(&q, 2) == 0);
    cr_job *a = new_job(), *b = new_job(), *c = new_job();
    CHECK(cr_queue_push(&q, a) == 0);
    CHECK(cr_queue_push(&q, b) == 0);
    CHECK(cr_queue_push(&q, c) == -1); /* full: admission control refuses */
    int queued, running;
    cr_queue_counts(&q, &queued, &running);
    CHECK(queued == 2 && running == 0);
    CHECK(take1(&q) == a); /* FIFO */
    cr_queue_counts(&q, &queued, &running);
    CHECK(queued == 1 && running == 1);
    CHECK(!cr_queue_wait_idle(&q, cr_now() + 0.01));
    CHECK(cr_queue_remove(&q, b));
    CHECK(!cr_queue_remove(&q, b));
    cr_queue_done(&q, 1);
    CHECK(cr_queue_wait_idle(&q, cr_now() + 0.01));
    cr_queue_close(&q);
    CHECK(cr_queue_push(&q, c) == -2);
    CHECK(take1(&q) == NULL); /* closed and empty: workers stop */
    cr_queue_destroy(&q);
    cr_job_release(a);
    cr_job_release(b);
    cr_job_release(c);
}

/* The drain's cut-off: every waiting job comes back to be failed, in order, the running one
 * stays the worker's, and the closed queue takes nothing more; idle once the runner is done. */
static void test_queue_close_and_take(void)
{
    cr_queue q;
    CHECK(cr_queue_init(&q, 8) == 0);
    cr_job *j[4];
    for (int i = 0; i < 4; i++)
        CHECK(cr_queue_push(&q, j[i] = new_job()) == 0);
    CHECK(take1(&q) == j[0]);
    cr_job *left = cr_queue_close_and_take(&q);
    CHECK(left == j[1] && left->next == j[2] && j[2]->next == j[3] && j[3]->next == NULL);
    int queued, running;
    cr_queue_counts(&q, &queued, &running);
    CHECK(queued == 0 && running == 1);
    CHECK(cr_queue_push(&q, j[1]) == -2);
    CHECK(take1(&q) == NULL); /* closed and empty: the workers stop */
    CHECK(!cr_queue_wait_idle(&q, cr_now() + 0.01));
    cr_queue_done(&q, 1);
    CHECK(cr_queue_wait_idle(&q, cr_now() + 0.01));
    CHECK(cr_queue_close_and_take(&q) == NULL);
    cr_queue_destroy(&q);
    release_all(j, 4);
}

static void test_queue_expiry(void)
{
    cr_queue q;
    CHECK(cr_queue_init(&q, 8) == 0);
    cr_job *j[4];
    for (int i = 0; i < 4; i++) {
        j[i] = new_job();
        j[i]->deadline = i % 2 ? 10.0 : 0.0; /* odd ones expire at t=10 */
        CHECK(cr_queue_push(&q, j[i]) == 0);
    }
    CHECK(cr_queue_take_expired(&q, 5.0) == NULL);
    cr_job *exp = cr_queue_take_expired(&q, 11.0);
    CHECK(exp == j[1] && exp->next == j[3] && j[3]->next == NULL);
    CHECK(take1(&q) == j[0]);
    CHECK(take1(&q) == j[2]);
    cr_queue_done(&q, 2);
    cr_queue_destroy(&q);
    for (int i = 0; i < 4; i++)
        cr_job_release(j[i]);
}

static void test_job_ids_are_uuid4(void)
{
    cr_job *a = new_job(), *b = new_job();
    CHECK(strlen(a->id) == 36 && a->id[14] == '4'); /* version nibble */
    CHECK(strchr("89ab", a->id[19]) != NULL);       /* RFC 4122 variant */
    CHECK(strcmp(a->id, b->id) != 0);
    cr_job_release(a);
    cr_job_release(b);
}

static void test_table_ttl_and_cap(void)
{
    cr_job_table t;
    CHECK(cr_job_table_init(&t, 1.0, 1 << 20) == 0);
    cr_job *j = new_job();
    cr_job_table_put(&t, j);
    cr_job *got = cr_job_table_get(&t, j->id);
    CHECK(got == j);
    cr_job_release(got);
    CHECK(cr_job_table_get(&t, "00000000-0000-4000-8000-000000000000") == NULL);
    CHECK(cr_job_table_unfetched(&t) == 1);
    atomic_store(&j->state, CR_JOB_DONE);
    j->finished_at = cr_now() - 5.0; /* finished long ago: past the TTL */
    got = cr_job_table_get(&t, j->id);
    CHECK(got == NULL); /* expired jobs are gone to clients even before the sweep */
    cr_job_table_sweep(&t, cr_now());
    CHECK(t.count == 0 && t.bytes == 0);
    cr_job_release(j);

    cr_job_table_destroy(&t);
    CHECK(cr_job_table_init(&t, 100.0, 1) == 0); /* a cap of one byte: finished jobs evicted */
    cr_job *k = new_job();
    cr_job_table_put(&t, k);
    cr_job_table_sweep(&t, cr_now());
    CHECK(t.count == 1); /* unfinished jobs are never evicted */
    atomic_store(&k->state, CR_JOB_DONE);
    k->finished_at = cr_now();
    cr_job_table_sweep(&t, cr_now());
    CHECK(t.count == 0);
    cr_job *taken = cr_job_table_take(&t, k->id);
    CHECK(taken == NULL);
    cr_job_release(k);
    cr_job_table_destroy(&t);

    /* A result is counted once its job finishes (the output is allocated after the job enters
     * the table: counting at entry counted inputs only), and the oldest finished goes first. */
    CHECK(cr_job_table_init(&t, 100.0, 2 * sizeof(cr_job) + 150000) == 0);
    cr_job *r[3];
    for (int i = 0; i < 3; i++) {
        r[i] = new_job();
        cr_job_table_put(&t, r[i]);
        r[i]->req.buf_bytes[CR_BUF_OUTPUT] = 100000; /* bytes only: no buffer to free */
        atomic_store(&r[i]->state, CR_JOB_DONE);
        r[i]->finished_at = cr_now() - 3 + i;
    }
    cr_job_table_sweep(&t, cr_now());
    CHECK(t.count == 1 && cr_job_table_bytes(&t) == sizeof(cr_job) + 100000);
    cr_job *kept = cr_job_table_get(&t, r[2]->id);
    CHECK(kept == r[2]); /* the newest result survives */
    cr_job_release(kept);
    for (int i = 0; i < 3; i++)
        cr_job_release(r[i]);
    cr_job_table_destroy(&t);
}

static int load(cr_config *c, int argc, char **argv)
{
    FILE *devnull = fopen("/dev/null", "w");
    int rc = cr_config_load(c, argc, argv, devnull);
    fclose(devnull);
    return rc;
}

static void test_config(void)
{
    cr_config c;
    char *defaults[] = {"crunchd"};
    CHECK(load(&c, 1, defaults) == 0);
    CHECK(c.port == 8080 && strcmp(c.bind, "127.0.0.1") == 0 && strcmp(c.backend, "auto") == 0);
    char *flags[] = {"crunchd", "--port", "0", "--backend", "cpu", "--test-hooks", "--queue-depth", "7"};
    CHECK(load(&c, 8, flags) == 0);
    CHECK(c.port == 0 && strcmp(c.backend, "cpu") == 0 && c.test_hooks && c.queue_depth == 7);
    setenv("CRUNCHD_WORKERS", "3", 1);
    CHECK(load(&c, 1, defaults) == 0 && c.workers == 3);
    char *flag_wins[] = {"crunchd", "--workers", "5"};
    CHECK(load(&c, 3, flag_wins) == 0 && c.workers == 5);
    setenv("CRUNCHD_WORKERS", "many", 1);
    CHECK(load(&c, 1, defaults) == -1);
    unsetenv("CRUNCHD_WORKERS");
    char *bad_port[] = {"crunchd", "--port", "70000"};
    CHECK(load(&c, 3, bad_port) == -1);
    char *bad_backend[] = {"crunchd", "--backend", "tpu"};
    CHECK(load(&c, 3, bad_backend) == -1);
    char *unknown[] = {"crunchd", "--frobnicate"};
    CHECK(load(&c, 2, unknown) == -1);
    char *stray[] = {"crunchd", "extra"};
    CHECK(load(&c, 2, stray) == -1);
    /* one address gets half the connections unless told; 0 lifts the limit */
    CHECK(load(&c, 1, defaults) == 0 && c.max_connections == 1024 && c.max_connections_per_ip == 512);
    char *few[] = {"crunchd", "--max-connections", "1"};
    CHECK(load(&c, 3, few) == 0 && c.max_connections_per_ip == 1);
    char *unlimited[] = {"crunchd", "--max-connections-per-ip", "0"};
    CHECK(load(&c, 3, unlimited) == 0 && c.max_connections_per_ip == 0);
    CHECK(c.read_timeout_s == 30 && c.min_body_rate_kbs == 8 && !c.reuse_port);
}

int main(void)
{
    test_queue_fifo_and_bounds();
    test_queue_close_and_take();
    test_queue_expiry();
    test_queue_batches();
    test_queue_wakes_the_right_device();
    test_machine_sizing();
    test_memory_budget();
    test_job_ids_are_uuid4();
    test_table_ttl_and_cap();
    test_config();
    return check_summary("test_engine_parts");
}
