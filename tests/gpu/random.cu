/* GPU tests of generated operands (kernels/random.h through cr_backend_cuda.fill_random): every
 * dtype and distribution, counts around the grid's sizes (1, odd, past one grid-stride pass) and
 * seeds up to 2^53, made in device memory and compared bit for bit with the host generator (the
 * cpu backend's, and the one tests/http/random_ref.py reproduces in numpy); then a task that reads
 * generated operands where they lie, against the same task on host copies of them. Ends with
 * "random: N passed, M failed". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "kernels/random.h"
#include "kernels/registry.h"
#include "tools/gpu/check.cuh"

static const cr_backend *B = &cr_backend_cuda;

/* Makes count elements on device 0 and on the host; true when every byte agrees. */
static bool same_as_host(uint64_t count, cr_dtype dt, bool normal, uint64_t seed, std::vector<char> *dev_copy)
{
    size_t bytes = (size_t)count * cr_dtype_size(dt);
    std::vector<char> host(bytes + 1), dev(bytes + 1);
    void *p = B->tensor_alloc(0, bytes);
    char err[256] = "";
    bool ok = p && B->fill_random(0, p, count, dt, normal, seed, err, sizeof err) == CR_OK &&
              B->tensor_copy(0, dev.data(), p, bytes, false) == CR_OK;
    B->tensor_free(0, p);
    if (!ok) {
        printf("  fill_random failed: %s\n", err);
        return false;
    }
    cr_random_fill_host(host.data(), count, dt, normal, seed);
    if (dev_copy)
        *dev_copy = dev;
    return memcmp(host.data(), dev.data(), bytes) == 0;
}

static void test_bits(void)
{
    static const cr_dtype dts[] = {CR_DT_F32, CR_DT_F64, CR_DT_F16, CR_DT_BF16, CR_DT_U8};
    static const uint64_t counts[] = {1, 2, 255, 1000003, (8192ull * 256) + 7, (3ull << 22) + 1};
    static const uint64_t seeds[] = {0, 1, 42, 9007199254740992ull};
    char what[160];
    for (cr_dtype dt : dts)
        for (int normal = 0; normal < 2; normal++) {
            if (!cr_random_supports(dt, normal))
                continue;
            for (uint64_t n : counts)
                for (uint64_t s : seeds) {
                    snprintf(what, sizeof what, "%s %s count %llu seed %llu: device == host", cr_dtype_name(dt),
                             normal ? "normal" : "uniform", (unsigned long long)n, (unsigned long long)s);
                    expect(same_as_host(n, dt, normal, s, NULL), what);
                }
        }
}

/* The fill writes exactly count elements: the byte after them is untouched. */
static void test_bounds(void)
{
    size_t bytes = 1001 * sizeof(float);
    std::vector<unsigned char> back(bytes + 64);
    void *p = B->tensor_alloc(0, bytes + 64);
    char err[256];
    bool ok = p && cudaMemset(p, 0xab, bytes + 64) == cudaSuccess &&
              B->fill_random(0, p, 1001, CR_DT_F32, false, 3, err, sizeof err) == CR_OK &&
              B->tensor_copy(0, back.data(), p, bytes + 64, false) == CR_OK;
    B->tensor_free(0, p);
    bool tail = ok;
    for (size_t i = bytes; ok && i < bytes + 64; i++)
        tail &= back[i] == 0xab;
    expect(tail, "fill_random writes no byte past its count");
    expect(B->fill_random(0, NULL, 0, CR_DT_F32, true, 0, err, sizeof err) == CR_OK, "an empty fill is fine");
}

/* A GEMM whose operands were made on the device equals the same GEMM on host copies of them. */
static void test_task_reads_them(void)
{
    const int64_t m = 129, n = 65, k = 97;
    cr_worker *w = NULL;
    char err[256];
    if (B->worker_create(0, &w, err, sizeof err) != CR_OK) {
        expect(false, "worker_create", err);
        return;
    }
    void *da = B->tensor_alloc(0, m * k * 4), *db = B->tensor_alloc(0, k * n * 4);
    std::vector<float> ha(m * k), hb(k * n), c_dev(m * n), c_host(m * n);
    bool ok = da && db && B->fill_random(0, da, m * k, CR_DT_F32, false, 1, err, sizeof err) == CR_OK &&
              B->fill_random(0, db, k * n, CR_DT_F32, true, 2, err, sizeof err) == CR_OK;
    cr_random_fill_host(ha.data(), m * k, CR_DT_F32, false, 1);
    cr_random_fill_host(hb.data(), k * n, CR_DT_F32, true, 2);
    cr_task t = {};
    t.op = CR_OP_GEMM;
    t.dtype = CR_DT_F32;
    t.kernel = cr_kernel_find(B, CR_OP_GEMM, "naive");
    t.u.gemm = {m, n, k, false, false, 1.0, 0.0, da, db, NULL, c_dev.data()};
    cr_timings tm = {};
    ok = ok && B->run(w, &t, &tm, err, sizeof err) == CR_OK;
    t.u.gemm.a = ha.data();
    t.u.gemm.b = hb.data();
    t.u.gemm.c_out = c_host.data();
    ok = ok && B->run(w, &t, &tm, err, sizeof err) == CR_OK;
    expect(ok && memcmp(c_dev.data(), c_host.data(), c_dev.size() * 4) == 0,
           "naive GEMM of operands made on the device == of their host copies", err);
    B->tensor_free(0, da);
    B->tensor_free(0, db);
    B->worker_destroy(w);
}

int main(void)
{
    cr_backend_opts opts = {2, CR_WAIT_YIELD};
    char err[256];
    if (B->init(&opts, err, sizeof err) != CR_OK) {
        printf("cuda init failed: %s\n", err);
        return 1;
    }
    test_bits();
    test_bounds();
    test_task_reads_them();
    B->shutdown();
    printf("random: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
