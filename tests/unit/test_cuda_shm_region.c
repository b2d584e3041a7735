/* The CUDA shared-memory region table (server/kserve/cuda_shm_region.c) on any machine: a fake
 * backend's ipc_open hands out host memory and counts opens and closes, so the table's rules run
 * without a GPU: validation, one namespace with the system table, the table's size, holds
 * against unregistering (one region and all), bounds and alignment of a hold, status order, the
 * idle sweep, and that every handle opened is closed exactly once. tests/http/test_cuda_shm.py
 * covers the real handles on the GPU machine. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/unit/check.h"
#include "server/clock.h"
#include "server/kserve/cuda_shm_region.h"
#include "server/kserve/shm_region.h"

static int opened, closed;
static cr_status open_answer = CR_OK;

static cr_status fake_ipc_open(const void *handle, size_t handle_len, int device, size_t bytes, void **out,
                               char *why, size_t whylen)
{
    (void)handle, (void)handle_len, (void)device;
    if (open_answer != CR_OK) {
        snprintf(why, whylen, "the handle does not open");
        return open_answer;
    }
    *out = calloc(1, bytes);
    if (!*out)
        return CR_E_NOMEM_HOST;
    opened++;
    return CR_OK;
}

static void fake_ipc_close(void *p)
{
    CHECK(p != NULL);
    free(p);
    closed++;
}

static cr_backend fake;
static const char handle[64];

static int reg(const char *name, int device, uint64_t bytes, cr_error *e)
{
    return cr_cuda_shm_register(name, handle, sizeof handle, device, bytes, e);
}

static void test_validation(void)
{
    cr_error e;
    CHECK(reg("", 0, 64, &e) == -1 && e.http == 400 && strcmp(e.field, "name") == 0);
    CHECK(reg("a/b", 0, 64, &e) == -1 && e.http == 400);
    CHECK(reg("r", 2, 64, &e) == -1 && e.http == 400 && strcmp(e.field, "device_id") == 0);
    CHECK(reg("r", -1, 64, &e) == -1 && e.http == 400 && strcmp(e.field, "device_id") == 0);
    CHECK(reg("r", 0, 0, &e) == -1 && e.http == 400 && strcmp(e.field, "byte_size") == 0);
    CHECK(reg("r", 0, (1ull << 53) + 1, &e) == -1 && e.http == 400 && strcmp(e.field, "byte_size") == 0);
    open_answer = CR_E_INVALID;
    CHECK(reg("r", 0, 64, &e) == -1 && e.http == 400 && strcmp(e.field, "raw_handle") == 0);
    open_answer = CR_E_FATAL;
    CHECK(reg("r", 0, 64, &e) == -1 && e.http == 503);
    open_answer = CR_OK;
    CHECK(!cr_cuda_shm_registered("r") && opened == closed);
}

/* A name lives in one of the two tables. */
static void test_one_namespace(void)
{
    cr_error e;
    char key[64];
    snprintf(key, sizeof key, "/crunchd-unit-cuda-%d", (int)getpid());
    int fd = shm_open(key, O_CREAT | O_EXCL | O_RDWR, 0600);
    CHECK(fd >= 0 && ftruncate(fd, 4096) == 0);
    close(fd);
    CHECK(cr_shm_register("both", key, 0, 4096, NULL, &e) == 0);
    CHECK(reg("both", 0, 64, &e) == -1 && e.http == 409 && strcmp(e.code, "already_exists") == 0);
    CHECK(cr_shm_unregister("both", &e) == 0);
    CHECK(reg("both", 0, 64, &e) == 0);
    CHECK(reg("both", 1, 64, &e) == -1 && e.http == 409);
    CHECK(cr_cuda_shm_unregister("both", &e) == 0);
    shm_unlink(key);
}

static void test_holds(void)
{
    cr_error e;
    void *p = NULL;
    int dev = -1;
    CHECK(reg("r1", 1, 1024, &e) == 0 && reg("r2", 0, 512, &e) == 0);
    cr_cuda_shm_region *h = cr_cuda_shm_acquire("r1", 256, 768, 4, "input a", &p, &dev, &e);
    CHECK(h != NULL && dev == 1 && p != NULL);
    CHECK(cr_cuda_shm_acquire("r1", 256, 769, 4, "input a", &p, &dev, &e) == NULL && e.http == 400 &&
          strcmp(e.field, "input a") == 0);
    CHECK(cr_cuda_shm_acquire("r1", 1025, 0, 1, "input a", &p, &dev, &e) == NULL && e.http == 400);
    CHECK(cr_cuda_shm_acquire("r1", 6, 8, 4, "input a", &p, &dev, &e) == NULL && e.http == 400); /* misaligned */
    CHECK(cr_cuda_shm_acquire("nope", 0, 8, 1, "input a", &p, &dev, &e) == NULL && e.http == 400);
    CHECK(cr_cuda_shm_unregister("r1", &e) == -1 && e.http == 409 && strcmp(e.code, "in_use") == 0);
    CHECK(cr_cuda_shm_unregister_all(&e) == -1 && e.http == 409); /* r2 goes, r1 stays */
    CHECK(cr_cuda_shm_registered("r1") && !cr_cuda_shm_registered("r2"));
    uint64_t n = 0, bytes = 0;
    cr_cuda_shm_usage(&n, &bytes);
    CHECK(n == 1 && bytes == 1024);
    cr_cuda_shm_release(h);
    CHECK(cr_cuda_shm_unregister("r1", &e) == 0);
    CHECK(cr_cuda_shm_unregister("r1", &e) == 0); /* unknown names unregister quietly, as Triton's */
    CHECK(cr_cuda_shm_unregister_all(&e) == 0);
    cr_cuda_shm_usage(&n, &bytes);
    CHECK(n == 0 && bytes == 0 && opened == closed);
}

static void test_status_and_capacity(void)
{
    cr_error e;
    char name[32];
    for (int i = 0; i < CR_SHM_MAX_REGIONS; i++) {
        snprintf(name, sizeof name, "r%03d", i);
        CHECK(reg(name, i % 2, 64 + (uint64_t)i, &e) == 0);
    }
    CHECK(reg("one-more", 0, 64, &e) == -1 && e.http == 507 && strcmp(e.code, "shm_limit") == 0);
    cr_cuda_shm_info *list = NULL;
    size_t n = 0;
    CHECK(cr_cuda_shm_status(NULL, &list, &n, &e) == 0 && n == CR_SHM_MAX_REGIONS);
    bool ordered = list != NULL;
    for (size_t i = 0; list && i < n; i++) {
        snprintf(name, sizeof name, "r%03zu", i);
        ordered &= strcmp(list[i].name, name) == 0 && list[i].byte_size == 64 + i && list[i].device_id == (int)(i % 2);
    }
    CHECK(ordered); /* in the order they came */
    free(list);
    CHECK(cr_cuda_shm_status("r007", &list, &n, &e) == 0 && n == 1 && list && strcmp(list[0].name, "r007") == 0);
    free(list);
    CHECK(cr_cuda_shm_status("nope", &list, &n, &e) == -1 && e.http == 404 && n == 0);
    CHECK(cr_cuda_shm_unregister_all(&e) == 0 && opened == closed);
}

static void test_sweep_idle(void)
{
    cr_error e;
    void *p;
    int dev;
    cr_cuda_shm_init(&fake, 2, 10);
    CHECK(reg("idle", 0, 64, &e) == 0);
    CHECK(cr_cuda_shm_sweep(cr_now() + 5) == 0);
    cr_cuda_shm_region *h = cr_cuda_shm_acquire("idle", 0, 8, 1, "x", &p, &dev, &e);
    CHECK(h != NULL);
    CHECK(cr_cuda_shm_sweep(cr_now() + 60) == 0); /* held: never idle */
    cr_cuda_shm_release(h);
    CHECK(cr_cuda_shm_sweep(cr_now() + 5) == 0);
    CHECK(cr_cuda_shm_sweep(cr_now() + 11) == 1 && !cr_cuda_shm_registered("idle"));
    cr_cuda_shm_init(&fake, 2, 0); /* never */
    CHECK(reg("idle", 0, 64, &e) == 0);
    CHECK(cr_cuda_shm_sweep(cr_now() + 1e6) == 0);
    cr_cuda_shm_shutdown(); /* closes what is left */
    CHECK(!cr_cuda_shm_registered("idle") && opened == closed);
}

int main(void)
{
    fake.name = "fake";
    fake.ipc_open = fake_ipc_open;
    fake.ipc_close = fake_ipc_close;
    cr_shm_limits lim = {.max_bytes = 8u << 20, .client_max_bytes = 8u << 20, .backend = &fake};
    cr_shm_init(&lim);
    cr_error e;
    cr_cuda_shm_init(&(cr_backend){.name = "cpu"}, 1, 0);
    CHECK(reg("r", 0, 64, &e) == -1 && e.http == 400 && strcmp(e.code, "unsupported") == 0);
    cr_cuda_shm_init(&fake, 2, 0);
    test_validation();
    test_one_namespace();
    test_holds();
    test_status_and_capacity();
    test_sweep_idle();
    CHECK(opened > 0 && opened == closed);
    return check_summary("test_cuda_shm_region");
}
