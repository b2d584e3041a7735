/* The engine's pure parts: the bounded queue, the async job table, config parsing. */
#include <stdlib.h>
#include <string.h>

#include "tests/unit/check.h"
#include "server/clock.h"
#include "server/config.h"
#include "server/engine/job_table.h"
#include "server/engine/queue.h"

static cr_job *new_job(void)
{
    cr_request req = {0};
    return cr_job_new(&req, true);
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
    CHECK(cr_queue_pop(&q) == a); /* FIFO */
    cr_queue_counts(&q, &queued, &running);
    CHECK(queued == 1 && running == 1);
    CHECK(!cr_queue_wait_idle(&q, cr_now() + 0.01));
    CHECK(cr_queue_remove(&q, b));
    CHECK(!cr_queue_remove(&q, b));
    cr_queue_done(&q);
    CHECK(cr_queue_wait_idle(&q, cr_now() + 0.01));
    cr_queue_close(&q);
    CHECK(cr_queue_push(&q, c) == -2);
    CHECK(cr_queue_pop(&q) == NULL); /* closed and empty: workers stop */
    cr_queue_destroy(&q);
    cr_job_release(a);
    cr_job_release(b);
    cr_job_release(c);
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
    CHECK(cr_queue_pop(&q) == j[0]);
    CHECK(cr_queue_pop(&q) == j[2]);
    cr_queue_done(&q);
    cr_queue_done(&q);
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
}

int main(void)
{
    test_queue_fifo_and_bounds();
    test_queue_expiry();
    test_job_ids_are_uuid4();
    test_table_ttl_and_cap();
    test_config();
    return check_summary("test_engine_parts");
}
