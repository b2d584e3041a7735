/* The histogram reference: numpy.histogram with `bins` equal bins over [lo, hi], bit for bit.
 *
 * numpy guesses a bin from (v - lo) / (hi - lo) * bins and then corrects the guess by one
 * against the edges np.linspace(lo, hi, bins + 1) actually holds, so a value equal to an
 * interior edge always lands in the upper bin and the last bin is closed. The edges are of the
 * data's type when that is floating (float32 edges for float32 data: a float32 value can sit on
 * a float32 edge that its double neighbour misses), float64 for integer data, and every value
 * is compared after conversion to that type. */
#include "kernels/cpu/cpu_internal.h"
#include "kernels/hist_range.h"

#include <math.h>
#include <string.h>

/* Elements between two polls of the cancel flag: a few milliseconds of work. */
#define HIST_BLOCK ((int64_t)1 << 20)

typedef struct {
    double lo, hi, span, step;
    int64_t bins;
    int step_underflows; /* linspace's denormal path: (i / bins) * span instead of i * step */
    float lo32, hi32;    /* the range as float32 data sees it */
} hist_edges;

/* lo and hi as cr_hist_range_fix left them (finite, lo < hi, representable in the data's type). */
static hist_edges make_edges(double lo, double hi, int32_t bins)
{
    hist_edges e;
    e.lo = lo;
    e.hi = hi;
    e.span = hi - lo;
    e.bins = bins;
    e.step = e.span / (double)e.bins;
    e.step_underflows = e.step == 0.0;
    e.lo32 = (float)lo;
    e.hi32 = (float)hi;
    return e;
}

/* np.linspace(lo, hi, bins + 1)[i], the last edge being hi itself. */
static double edge_at(const hist_edges *e, int64_t i)
{
    if (i >= e->bins)
        return e->hi;
    double y = e->step_underflows ? (double)i / (double)e->bins * e->span : (double)i * e->step;
    return y + e->lo;
}

/* The guess, clamped so that a guess of `bins` (v == hi) and any rounding overshoot stay in
 * range: numpy's `indices[indices == n_equal_bins] -= 1`. */
static int64_t first_guess(double f, int64_t bins)
{
    if (!(f >= 0.0))
        return 0;
    return f < (double)bins ? (int64_t)f : bins - 1;
}

/* v is within [lo, hi]. */
static int64_t bin_of_f64(const hist_edges *e, double v)
{
    int64_t idx = first_guess((v - e->lo) / e->span * (double)e->bins, e->bins);
    if (v < edge_at(e, idx))
        idx--;
    else if (idx != e->bins - 1 && v >= edge_at(e, idx + 1))
        idx++;
    return idx < 0 ? 0 : idx;
}

/* v is within [lo32, hi32]. numpy subtracts in float32, divides by the float64 span. */
static int64_t bin_of_f32(const hist_edges *e, float v)
{
    float off = v - e->lo32;
    int64_t idx = first_guess((double)off / e->span * (double)e->bins, e->bins);
    if (v < (float)edge_at(e, idx))
        idx--;
    else if (idx != e->bins - 1 && v >= (float)edge_at(e, idx + 1))
        idx++;
    return idx < 0 ? 0 : idx;
}

static void count_f32(const float *x, int64_t n, const hist_edges *e, uint64_t *counts)
{
    for (int64_t i = 0; i < n; i++)
        if (x[i] >= e->lo32 && x[i] <= e->hi32) /* false for NaN */
            counts[bin_of_f32(e, x[i])]++;
}

/* Every other dtype is widened to double first, as numpy casts it to the float64 edges' type
 * (int64/uint64 beyond 2^53 round, exactly as they do there). */
#define DEFINE_COUNT_AS_DOUBLE(NAME, T)                                                      \
    static void NAME(const T *x, int64_t n, const hist_edges *e, uint64_t *counts)           \
    {                                                                                         \
        for (int64_t i = 0; i < n; i++) {                                                     \
            double v = (double)x[i];                                                          \
            if (v >= e->lo && v <= e->hi)                                                     \
                counts[bin_of_f64(e, v)]++;                                                   \
        }                                                                                     \
    }

DEFINE_COUNT_AS_DOUBLE(count_f64, double)
DEFINE_COUNT_AS_DOUBLE(count_u8, uint8_t)
DEFINE_COUNT_AS_DOUBLE(count_i8, int8_t)
DEFINE_COUNT_AS_DOUBLE(count_u16, uint16_t)
DEFINE_COUNT_AS_DOUBLE(count_i16, int16_t)
DEFINE_COUNT_AS_DOUBLE(count_u32, uint32_t)
DEFINE_COUNT_AS_DOUBLE(count_i32, int32_t)
DEFINE_COUNT_AS_DOUBLE(count_i64, int64_t)
DEFINE_COUNT_AS_DOUBLE(count_u64, uint64_t)

/* Every byte its own bin: the edges are the integers 0..256, so no arithmetic is needed. */
static void count_bytes(const uint8_t *x, int64_t n, uint64_t *counts)
{
    for (int64_t i = 0; i < n; i++)
        counts[x[i]]++;
}

static int is_byte_histogram(const cr_task *t)
{
    const cr_hist_task *h = &t->u.hist;
    return t->dtype == CR_DT_U8 && h->bins == 256 && h->lo == 0.0 && h->hi == 256.0;
}

/* Counts elements [begin, begin + n) into counts. */
static void count_block(const cr_task *t, const hist_edges *e, int64_t begin, int64_t n)
{
    const cr_hist_task *h = &t->u.hist;
    uint64_t *c = h->counts;
    const void *d = h->data;
    if (is_byte_histogram(t)) {
        count_bytes((const uint8_t *)d + begin, n, c);
        return;
    }
    switch (t->dtype) {
    case CR_DT_F32: count_f32((const float *)d + begin, n, e, c); break;
    case CR_DT_F64: count_f64((const double *)d + begin, n, e, c); break;
    case CR_DT_U8: count_u8((const uint8_t *)d + begin, n, e, c); break;
    case CR_DT_I8: count_i8((const int8_t *)d + begin, n, e, c); break;
    case CR_DT_U16: count_u16((const uint16_t *)d + begin, n, e, c); break;
    case CR_DT_I16: count_i16((const int16_t *)d + begin, n, e, c); break;
    case CR_DT_U32: count_u32((const uint32_t *)d + begin, n, e, c); break;
    case CR_DT_I32: count_i32((const int32_t *)d + begin, n, e, c); break;
    case CR_DT_I64: count_i64((const int64_t *)d + begin, n, e, c); break;
    case CR_DT_U64: count_u64((const uint64_t *)d + begin, n, e, c); break;
    default: break; /* rejected by the kernel's dtype mask before we get here */
    }
}

cr_status cpu_hist_reference(const cr_task *t, char *err, size_t errlen)
{
    const cr_hist_task *h = &t->u.hist;
    double lo = h->lo, hi = h->hi;
    cr_hist_range_fix(&lo, &hi, t->dtype); /* checked by cpu_validate_task; widens lo == hi */
    hist_edges e = make_edges(lo, hi, h->bins);
    memset(h->counts, 0, (size_t)h->bins * sizeof *h->counts);
    for (int64_t begin = 0; begin < h->count; begin += HIST_BLOCK) {
        if (cpu_cancelled(t))
            return cpu_fail(CR_E_CANCELLED, err, errlen, "histogram: cancelled after %lld values",
                            (long long)begin);
        int64_t n = h->count - begin < HIST_BLOCK ? h->count - begin : HIST_BLOCK;
        count_block(t, &e, begin, n);
    }
    return CR_OK;
}
