/* The shared-memory region table (server/kserve/shm_region.c) and borrowed request buffers
 * (server/request.c): validation, the caps (in all and per client), the budget's charge, holds
 * against unregistering, aliasing, the backend's pin/unpin pairing (a fake backend counts them),
 * the sweep (unlinked objects, idle regions, exited owners), and that borrowed memory is never
 * charged to the budget nor freed. */
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "server/clock.h"
#include "server/kserve/shm_region.h"
#include "server/memory.h"
#include "server/request.h"

static int pinned, unpinned;
static bool pin_ok = true;
static void *last_pinned;

static bool fake_register(void *p, size_t bytes)
{
    (void)bytes;
    if (!pin_ok)
        return false;
    pinned++;
    last_pinned = p;
    return true;
}

static void fake_unregister(void *p)
{
    CHECK(p != NULL);
    unpinned++;
}

static cr_backend fake;

/* A fresh object of size bytes holding 0, 1, 2, ... ; its key in key. */
static void make_object(char *key, size_t n, size_t size)
{
    snprintf(key, n, "/crunchd-unit-%d-%d", (int)getpid(), rand());
    int fd = shm_open(key, O_CREAT | O_EXCL | O_RDWR, 0600);
    CHECK(fd >= 0);
    CHECK(ftruncate(fd, (off_t)size) == 0);
    unsigned char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(p != MAP_FAILED);
    for (size_t i = 0; i < size; i++)
        p[i] = (unsigned char)i;
    munmap(p, size);
    close(fd);
}

static void test_validation(void)
{
    cr_error e;
    const char *bad_keys[] = {"", "/", "x", "/a/b", "/..", "/a..b", "/.", "/sp ace", "/../etc/passwd", NULL};
    for (int i = 0; bad_keys[i]; i++) {
        CHECK_MSG(cr_shm_register("n", bad_keys[i], 0, 16, NULL, &e) == -1 && e.http == 400 &&
                      strcmp(e.field, "key") == 0,
                  "key '%s' must be refused (got %d %s)", bad_keys[i], e.http, e.field);
    }
    char long_key[CR_SHM_KEY_MAX + 8] = "/";
    memset(long_key + 1, 'k', CR_SHM_KEY_MAX);
    CHECK(cr_shm_register("n", long_key, 0, 16, NULL, &e) == -1 && e.http == 400);
    CHECK(cr_shm_register("bad/name", "/k", 0, 16, NULL, &e) == -1 && e.http == 400 && strcmp(e.field, "name") == 0);
    CHECK(cr_shm_register("", "/k", 0, 16, NULL, &e) == -1 && strcmp(e.field, "name") == 0);
    CHECK(cr_shm_register("n", "/k", 0, 0, NULL, &e) == -1 && strcmp(e.field, "byte_size") == 0);
    CHECK(cr_shm_register("n", "/crunchd-unit-missing", 0, 16, NULL, &e) == -1 && e.http == 400 &&
          strstr(e.message, "cannot open") != NULL);
    CHECK(cr_shm_register("n", "/k", 0, (8ull << 20) + 1, NULL, &e) == -1 && e.http == 413);
}

static void test_register_hold_unregister(void)
{
    char key[64];
    cr_error e;
    make_object(key, sizeof key, 10000);
    CHECK(cr_shm_register("r1", key, 5000, 5001, NULL, &e) == -1 && strstr(e.message, "past the end") != NULL);
    CHECK(cr_shm_register("r1", key, 4099, 5000, NULL, &e) == 0); /* not page-aligned */
    CHECK(pinned == 1);
    CHECK(cr_shm_register("r1", key, 0, 16, NULL, &e) == -1 && e.http == 409 && strcmp(e.code, "already_exists") == 0);
    uint64_t n, bytes;
    cr_shm_usage(&n, &bytes);
    CHECK(n == 1 && bytes == 5000);

    void *p = NULL;
    cr_shm_region *h1 = cr_shm_acquire("r1", 1, 4999, 1, "input a", &p, &e);
    CHECK(h1 != NULL && *(unsigned char *)p == (unsigned char)4100); /* object byte 4099 + 1 */
    /* element alignment counts from the object: 4099 + 2 is no multiple of 4, 4099 + 1 is */
    CHECK(cr_shm_acquire("r1", 2, 8, 4, "input b", &p, &e) == NULL && strstr(e.message, "multiple of 4") != NULL);
    cr_shm_region *h2 = cr_shm_acquire("r1", 1, 8, 4, "input b", &p, &e);
    CHECK(h2 != NULL);
    CHECK(cr_shm_acquire("r1", 0, 5001, 1, "input c", &p, &e) == NULL && strcmp(e.field, "input c") == 0);
    CHECK(cr_shm_acquire("r1", 5001, 0, 1, "input c", &p, &e) == NULL);
    CHECK(cr_shm_acquire("r1", UINT64_MAX, 2, 1, "input c", &p, &e) == NULL); /* no wrap-around */
    CHECK(cr_shm_acquire("nope", 0, 1, 1, "input c", &p, &e) == NULL && strstr(e.message, "'nope'") != NULL);

    CHECK(cr_shm_unregister("r1", &e) == -1 && e.http == 409 && strcmp(e.code, "in_use") == 0);
    CHECK(cr_shm_unregister_all(&e) == -1 && e.http == 409 && strstr(e.message, "'r1'") != NULL);
    cr_shm_release(h2);
    CHECK(cr_shm_unregister("r1", &e) == -1); /* h1 still holds it */
    cr_shm_release(h1);
    CHECK(cr_shm_acquire("r1", 0, 16, 1, "x", &p, &e) != NULL); /* held again, kept to the end */
    cr_shm_info *list;
    size_t count;
    CHECK(cr_shm_status("r1", &list, &count, &e) == 0 && count == 1 && list[0].offset == 4099 &&
          list[0].byte_size == 5000 && strcmp(list[0].key, key) == 0);
    free(list);
    CHECK(cr_shm_status("nope", &list, &count, &e) == -1 && e.http == 404);
    shm_unlink(key);
}

static void test_cap_and_aliasing(void)
{
    char key[64];
    cr_error e;
    make_object(key, sizeof key, 3u << 20);
    CHECK(cr_shm_register("c1", key, 0, 4u << 20, NULL, &e) == -1 && e.http == 400); /* past the object */
    CHECK(cr_shm_register("c1", key, 0, 2u << 20, NULL, &e) == 0);
    CHECK(cr_shm_register("c2", key, 1u << 20, 2u << 20, NULL, &e) == 0); /* the same bytes, aliased */
    /* 4 MiB and r1's 5000 bytes registered: 4 MiB more would pass the 8 MiB cap */
    CHECK(cr_shm_register("c3", key, 0, 4u << 20, NULL, &e) == -1 && e.http == 507 &&
          strcmp(e.code, "shm_limit") == 0);
    void *p, *q;
    cr_shm_region *a = cr_shm_acquire("c1", 1u << 20, 64, 1, "a", &p, &e);
    cr_shm_region *b = cr_shm_acquire("c2", 0, 64, 1, "b", &q, &e); /* object offset 1 MiB too */
    CHECK(a && b && p != q);
    CHECK(cr_shm_overlap(a, p, 64, b, q, 64));
    CHECK(cr_shm_overlap(a, p, 64, b, (char *)q + 63, 1));
    CHECK(!cr_shm_overlap(a, p, 64, b, (char *)q + 64, 64));
    CHECK(!cr_shm_overlap(a, p, 0, b, q, 64)); /* empty ranges share nothing */
    cr_shm_release(a);
    cr_shm_release(b);
    shm_unlink(key);
}

static void test_pin_failure_is_not_fatal(void)
{
    char key[64];
    cr_error e;
    make_object(key, sizeof key, 4096);
    pin_ok = false;
    int before = pinned, unpins = unpinned;
    CHECK(cr_shm_register("nopin", key, 0, 4096, NULL, &e) == 0);
    CHECK(pinned == before);
    CHECK(cr_shm_unregister("nopin", &e) == 0 && unpinned == unpins); /* never pinned: never unpinned */
    CHECK(cr_shm_unregister("nopin", &e) == 0);                        /* unknown: no error */
    pin_ok = true;
    shm_unlink(key);
}

static int released;
static void count_release(void *hold)
{
    CHECK(hold == &released);
    released++;
}

static void test_borrowed_buffers(void)
{
    cr_error e;
    cr_mem_set_limit(1 << 20);
    cr_request r;
    memset(&r, 0, sizeof r);
    uint64_t charged = cr_mem_charged(CR_MEM_ARRAYS);
    static uint64_t client_counts[4] = {9, 9, 9, 9};
    static float client_data[8];
    cr_request_adopt_buf(&r, CR_BUF_A, client_data, sizeof client_data, count_release, &released);
    r.task.op = CR_OP_HISTOGRAM;
    r.task.dtype = CR_DT_F32;
    r.task.u.hist = (cr_hist_task){.count = 8, .data = client_data, .bins = 4, .lo = 0, .hi = 1};
    cr_request_adopt_buf(&r, CR_BUF_OUTPUT, client_counts, sizeof client_counts, count_release, &released);
    CHECK(cr_request_alloc_output(&r, &e) == 0);
    CHECK(r.task.u.hist.counts == client_counts && client_counts[0] == 0 && client_counts[3] == 0);
    CHECK(cr_mem_charged(CR_MEM_ARRAYS) == charged); /* the client's memory: not the budget's */
    cr_request_free_inputs(&r);
    CHECK(released == 1 && r.bufs[CR_BUF_A] == NULL && !r.buf_borrowed[CR_BUF_A]);
    cr_request_free(&r); /* the output's hold; neither buffer is free()d (static: would crash) */
    CHECK(released == 2);
    CHECK(cr_mem_charged(CR_MEM_ARRAYS) == charged);

    /* a borrowed output of the wrong size is the decoder's bug, not a silent overrun */
    memset(&r, 0, sizeof r);
    r.task.op = CR_OP_HISTOGRAM;
    r.task.u.hist.bins = 5;
    cr_request_adopt_buf(&r, CR_BUF_OUTPUT, client_counts, sizeof client_counts, NULL, NULL);
    CHECK(cr_request_alloc_output(&r, &e) == -1 && e.http == 500);
    cr_request_free(&r);
    cr_mem_set_limit(0);
}

/* c1 and c2 of test_cap_and_aliasing lost their object (unlinked) and nobody holds them: the
 * sweep takes them; r1 lost its object too but a request holds it, so it stays. */
static void test_sweep_unlinked(void)
{
    int unpins = unpinned;
    CHECK(cr_shm_sweep(cr_now()) == 2);
    CHECK(unpinned == unpins + 2);
    uint64_t n, bytes;
    cr_shm_usage(&n, &bytes);
    CHECK(n == 1 && bytes == 5000);
    cr_shm_info *list;
    size_t count;
    cr_error e;
    CHECK(cr_shm_status("c1", &list, &count, &e) == -1 && e.http == 404);
}

static cr_shm_owner owner(const char *client, int pid)
{
    cr_shm_owner o = {.pid = pid};
    snprintf(o.client, sizeof o.client, "%s", client);
    return o;
}

static void test_client_caps(void)
{
    char key[64];
    cr_error e;
    cr_shm_limits lim = {.max_bytes = 8u << 20, .client_max_bytes = 1u << 20, .backend = &fake};
    cr_shm_init(&lim);
    make_object(key, sizeof key, 2u << 20);
    cr_shm_owner a = owner("ip:10.0.0.1", 0), b = owner("uid:1000", 0);
    CHECK(cr_shm_register("a1", key, 0, 600u << 10, &a, &e) == 0);
    CHECK(cr_shm_register("a2", key, 0, 500u << 10, &a, &e) == -1 && e.http == 507 &&
          strstr(e.message, "--shm-client-max-mb") != NULL && strstr(e.message, "ip:10.0.0.1") != NULL);
    CHECK(cr_shm_register("b1", key, 0, 600u << 10, &b, &e) == 0); /* another client: its own room */
    CHECK(cr_shm_register("a3", key, 0, 2u << 20, &a, &e) == -1 && e.http == 413 &&
          strstr(e.message, "--shm-client-max-mb") != NULL);
    CHECK(cr_shm_register("a2", key, 0, 400u << 10, &a, &e) == 0); /* exactly to the cap */
    CHECK(cr_shm_unregister("a1", &e) == 0);
    CHECK(cr_shm_register("a4", key, 0, 600u << 10, &a, &e) == 0); /* the room came back */
    CHECK(cr_shm_unregister("a2", &e) == 0 && cr_shm_unregister("a4", &e) == 0 && cr_shm_unregister("b1", &e) == 0);
    shm_unlink(key);
}

static void test_budget_charge(void)
{
    char key[64];
    cr_error e;
    cr_shm_limits lim = {.max_bytes = 8u << 20, .client_max_bytes = 8u << 20, .backend = &fake};
    cr_shm_init(&lim);
    cr_mem_set_limit(2u << 20);
    uint64_t before = cr_mem_charged(CR_MEM_SHM);
    make_object(key, sizeof key, 4u << 20);
    CHECK(cr_shm_register("m1", key, 0, 1536u << 10, NULL, &e) == 0);
    CHECK(cr_mem_charged(CR_MEM_SHM) == before + (1536u << 10));
    int pins = pinned;
    CHECK(cr_shm_register("m2", key, 0, 1u << 20, NULL, &e) == -1 && e.http == 503 &&
          strcmp(e.code, "memory_budget") == 0);
    CHECK(pinned == pins); /* refused before anything was mapped or pinned */
    CHECK(cr_shm_register("m3", key, 0, 3u << 20, NULL, &e) == -1 && e.http == 413);
    CHECK(cr_shm_unregister("m1", &e) == 0);
    CHECK(cr_mem_charged(CR_MEM_SHM) == before);
    cr_mem_set_limit(0);
    shm_unlink(key);
}

static void test_sweep_idle(void)
{
    char key[64];
    cr_error e;
    void *p;
    cr_shm_limits lim = {.max_bytes = 8u << 20, .client_max_bytes = 8u << 20, .idle_s = 10, .backend = &fake};
    cr_shm_init(&lim);
    make_object(key, sizeof key, 4096);
    CHECK(cr_shm_register("idle", key, 0, 4096, NULL, &e) == 0);
    CHECK(cr_shm_sweep(cr_now() + 5) == 0);
    cr_shm_region *h = cr_shm_acquire("idle", 0, 16, 1, "x", &p, &e);
    CHECK(h != NULL);
    CHECK(cr_shm_sweep(cr_now() + 60) == 0); /* held: never idle, however long its job runs */
    cr_shm_release(h);                       /* its use ends now: idle from here */
    CHECK(cr_shm_sweep(cr_now() + 5) == 0);
    CHECK(cr_shm_sweep(cr_now() + 11) == 1);
    CHECK(cr_shm_status("idle", &(cr_shm_info *){NULL}, &(size_t){0}, &e) == -1 && e.http == 404);
    lim.idle_s = 0; /* never */
    cr_shm_init(&lim);
    CHECK(cr_shm_register("idle", key, 0, 4096, NULL, &e) == 0);
    CHECK(cr_shm_sweep(cr_now() + 1e6) == 0);
    CHECK(cr_shm_unregister("idle", &e) == 0);
    shm_unlink(key);
}

/* A region registered over the Unix socket lives no longer than its registering process: gone
 * once it exits, even before its parent reaps it (a zombie's pid is not yet free for reuse, and
 * a pidfd tells exit from reuse anyway). */
static void test_sweep_exited_owner(void)
{
    char key[64];
    cr_error e;
    cr_shm_limits lim = {.max_bytes = 8u << 20, .client_max_bytes = 8u << 20, .backend = &fake};
    cr_shm_init(&lim);
    make_object(key, sizeof key, 4096);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        pause();
        _exit(0);
    }
    cr_shm_owner o = owner("uid:1000", (int)child);
    CHECK(cr_shm_register("mine", key, 0, 4096, &o, &e) == 0);
    CHECK(cr_shm_sweep(cr_now()) == 0);
    kill(child, SIGKILL);
    siginfo_t si;
    CHECK(waitid(P_PID, (id_t)child, &si, WEXITED | WNOWAIT) == 0); /* exited, not reaped */
    CHECK(cr_shm_sweep(cr_now()) == 1);
    CHECK(waitpid(child, NULL, 0) == child);
    CHECK(cr_shm_register("mine", key, 0, 4096, &o, &e) == -1 && e.http == 400 &&
          strstr(e.message, "exited") != NULL);
    shm_unlink(key);
}

int main(void)
{
    fake.name = "fake";
    fake.host_register = fake_register;
    fake.host_unregister = fake_unregister;
    cr_shm_limits lim = {.max_bytes = 8u << 20, .client_max_bytes = 8u << 20, .backend = &fake};
    cr_shm_init(&lim);
    test_validation();
    test_register_hold_unregister();
    test_cap_and_aliasing();
    test_sweep_unlinked();
    test_pin_failure_is_not_fatal();
    test_borrowed_buffers();
    int regions_left_pinned = pinned - unpinned; /* r1 (held) stays until shutdown */
    CHECK(regions_left_pinned == 1);
    cr_shm_shutdown(); /* at exit, held or not */
    CHECK(pinned == unpinned);
    uint64_t n, bytes;
    cr_shm_usage(&n, &bytes);
    CHECK(n == 0 && bytes == 0);
    CHECK(cr_mem_charged(CR_MEM_SHM) == 0);
    test_client_caps();
    test_budget_charge();
    test_sweep_idle();
    test_sweep_exited_owner();
    CHECK(pinned == unpinned);
    cr_shm_usage(&n, &bytes);
    CHECK(n == 0 && bytes == 0 && cr_mem_charged(CR_MEM_SHM) == 0);
    return check_summary("test_shm_region");
}
