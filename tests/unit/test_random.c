/* The generated operands' generator (kernels/random.h) on the host: splitmix64's published first
 * outputs for seed 0, exact values the numpy reference (tests/http/random_ref.py) gives, the
 * float16/bfloat16 rounding at its edges, uniform values inside [-1, 1), and a fill split over
 * threads equal to one made element by element. */
#include <stdlib.h>
#include <string.h>

#include "kernels/random.h"
#include "tests/unit/check.h"

static void test_words(void)
{
    /* splitmix64 seeded with 0: mix(0) is 0, so seed 0's key is the generator's own state */
    uint64_t key = cr_random_key(0);
    CHECK(key == 0);
    CHECK(cr_random_word(key, 0) == 0xe220a8397b1dcdafull);
    CHECK(cr_random_word(key, 1) == 0x6e789e6aa1b965f4ull);
    CHECK(cr_random_word(key, 2) == 0x06c45d188009454full);
    CHECK(cr_random_word(cr_random_key(1), 0) != cr_random_word(key, 0));
}

static void test_values_of_the_reference(void)
{
    double u[3], n[3];
    cr_random_fill_host(u, 3, CR_DT_F64, false, 0);
    cr_random_fill_host(n, 3, CR_DT_F64, true, 0);
    /* random_operand((3,), "float64", dist, 0) of tests/http/random_ref.py, as float.hex prints them */
    const double want_u[3] = {0x1.8882a0e5ec772p-1, -0x1.18761955e46a0p-3, -0x1.e4ee8b9dffdb0p-1};
    const double want_n[3] = {-0x1.e247d108691cep+0, 0x1.d2241bf902963p-3, -0x1.c581393a15298p-3};
    for (int i = 0; i < 3; i++) {
        CHECK_MSG(u[i] == want_u[i], "uniform[%d] = %a, want %a", i, u[i], want_u[i]);
        CHECK_MSG(n[i] == want_n[i], "normal[%d] = %a, want %a", i, n[i], want_n[i]);
    }
}

static void test_half_rounding(void)
{
    CHECK(cr_random_to_f16(1.0f) == 0x3c00);
    CHECK(cr_random_to_f16(-2.0f) == 0xc000);
    CHECK(cr_random_to_f16(0x1p-24f) == 0x0001);           /* the smallest subnormal */
    CHECK(cr_random_to_f16(0x1p-25f) == 0x0000);           /* half of it ties to the even 0 */
    CHECK(cr_random_to_f16(0x1.8p-25f) == 0x0001);         /* past the tie: up */
    CHECK(cr_random_to_f16(1.0f + 0x1p-11f) == 0x3c00);    /* a tie between 1 and 1 + 2^-10: even */
    CHECK(cr_random_to_f16(1.0f + 0x1.8p-11f) == 0x3c01);
    CHECK(cr_random_to_f16(65520.0f) == 0x7c00);           /* rounds to infinity */
    CHECK(cr_random_to_f16(0x1.ffcp-15f) == 0x0400);       /* a subnormal rounding up to the smallest normal */
    CHECK(cr_random_to_bf16(1.0f) == 0x3f80);
    CHECK(cr_random_to_bf16(1.0f + 0x1p-8f) == 0x3f80);    /* a tie: even */
    CHECK(cr_random_to_bf16(1.0f + 0x1.8p-8f) == 0x3f81);
}

static void test_uniform_range(void)
{
    enum { N = 100000 };
    float *f = malloc(N * sizeof *f);
    uint8_t *b = malloc(N);
    cr_random_fill_host(f, N, CR_DT_F32, false, 9);
    cr_random_fill_host(b, N, CR_DT_U8, false, 9);
    int bad = 0, seen[256] = {0};
    for (int i = 0; i < N; i++) {
        bad += !(f[i] >= -1.0f && f[i] < 1.0f);
        seen[b[i]] = 1;
    }
    int values = 0;
    for (int v = 0; v < 256; v++)
        values += seen[v];
    CHECK_MSG(bad == 0, "%d float32 values outside [-1, 1)", bad);
    CHECK_MSG(values == 256, "%d of 256 byte values seen", values);
    free(f);
    free(b);
}

/* A fill big enough for threads equals the element-by-element loop, for each dtype. */
static void test_threads_change_nothing(void)
{
    const uint64_t n = (3u << 20) + 5;
    const cr_dtype dts[] = {CR_DT_F32, CR_DT_F64, CR_DT_F16, CR_DT_BF16};
    char *a = malloc(n * 8), *b = malloc(n * 8);
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
        uint64_t key = cr_random_key(77);
        cr_random_fill_host(a, n, dts[d], true, 77);
        for (uint64_t i = 0; i < n; i++)
            cr_random_store(b, i, dts[d], true, key);
        CHECK_MSG(memcmp(a, b, n * cr_dtype_size(dts[d])) == 0, "%s: threaded fill differs", cr_dtype_name(dts[d]));
    }
    free(a);
    free(b);
}

int main(void)
{
    test_words();
    test_values_of_the_reference();
    test_half_rounding();
    test_uniform_range();
    test_threads_change_nothing();
    return check_summary("random");
}
