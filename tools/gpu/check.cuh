/* What the GPU test binaries (tests/gpu/) share: pass/fail counting, printed as "FAIL what", and
 * the seeded xorshift their inputs come from. A file may #define GPU_TEST_SEED before including
 * this, so that its inputs stay what they were. */
#ifndef CRUNCHD_TOOLS_GPU_CHECK_CUH
#define CRUNCHD_TOOLS_GPU_CHECK_CUH

#include <stdint.h>
#include <stdio.h>

#ifndef GPU_TEST_SEED
#define GPU_TEST_SEED 0x9e3779b97f4a7c15ull
#endif

static int passed, failed;

static inline void expect(bool ok, const char *what, const char *detail = "")
{
    if (ok) {
        passed++;
    } else {
        failed++;
        printf("FAIL %s%s%s\n", what, *detail ? " " : "", detail);
    }
}

static uint64_t rng_state = GPU_TEST_SEED;

static inline uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* uniform in [lo, hi), 53 random bits */
static inline double uniform(double lo, double hi) { return lo + (hi - lo) * (double)(rnd() >> 11) / 9007199254740992.0; }

#endif
