/* The JSON decoders' fast path for numeric arrays, and the bound on what they parse into.
 *
 * cJSON builds an ~80-byte node per value: a list of rows of one number ("[1],") would take 40x
 * its text. Before cJSON sees a body, a scan finds every array that is plain numbers ("spans")
 * and parses a skeleton: the body with each span replaced by "[]". A span is either
 *  - a flat list of numbers, or
 *  - a list of rows, each a list of numbers (a matrix in its nested form: rows of any length,
 *    ragged or empty ones included; the span keeps row 0's length and the first row of another
 *    length, which is all the decoders' shape errors need),
 * standing for at least CR_JFAST_MIN values (numbers, plus rows), each number in a grammar cJSON
 * reads identically, with only JSON whitespace between. The decoder asks, for an array node,
 * whether it stands for a span, and converts the span's text straight into its destination
 * buffer (exact: the Clinger fast path, strtod otherwise). Anything else inside an array (a
 * string, null, a bad number, a control character) leaves it to cJSON, so errors and their
 * messages are exactly what they were.
 *
 * Memory: what is left for cJSON is bounded, so no shape of body costs more than a small
 * multiple of itself. cJSON's allocations for one parse are counted against
 * CR_JFAST_BUDGET_MIN + half the body (a request needs a few KB once its numbers are spans);
 * past that the parse stops and the request is refused (413 too_large, cr_jfast_fail_budget).
 * The spans' own bookkeeping is bounded the same way (CR_JFAST_BUDGET_MIN + a quarter of the
 * body): arrays past it stay with cJSON, whose budget then decides.
 *
 * One pass over the numbers: the scan that checks a span's grammar also converts its numbers,
 * keeping the values of the first CR_JFAST_VALUES_MAX of the body (128 KiB of doubles: a 64x64
 * GEMM's two operands fit twice) so the decoder copies them instead of reading the text a second
 * time; the spans past that are read from their text (cr_jfast_next), as all of them were
 * before. Either way the values are the same bits. The array is each thread's own, made once
 * (128 KiB a thread that parses JSON): no allocation, growth or copy per request. */
#ifndef CRUNCHD_JSON_FASTARRAY_H
#define CRUNCHD_JSON_FASTARRAY_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/error.h"

#define CR_JFAST_MIN 16
#define CR_JFAST_BUDGET_MIN ((size_t)1 << 20)
#define CR_JFAST_VALUES_MAX ((size_t)1 << 14)

typedef struct {
    size_t open, close;      /* body offsets of its '[' and ']' */
    size_t skel_at;          /* offset of its "[]" in the skeleton */
    int64_t count;           /* numbers, all rows together */
    int64_t rows;            /* 0: a flat list of numbers; else a list of this many rows */
    int64_t cols;            /* rows: the length of row 0 */
    int64_t odd_row;         /* rows: the first row whose length is not cols, or -1 */
    int64_t odd_len;         /* its length */
    uint64_t ordinal;        /* which '[' of the skeleton (outside strings) it is */
    int64_t values_at;       /* its numbers from f->values[values_at] on; -1: from its text */
    const cJSON *node;       /* its "[]" in the parsed skeleton */
} cr_jspan;

typedef struct cr_jfast {
    const char *body;
    size_t len;
    cr_jspan *spans;
    size_t n_spans;
    const cr_jspan **by_node;/* spans sorted by node, for lookups */
    char *skeleton;          /* NULL when there are no spans: parse the body itself */
    size_t skel_len;
    const char *text;        /* what cJSON parses: the skeleton, or the body */
    size_t text_len;
    double *values;          /* the numbers of the spans that have values_at >= 0 (the thread's) */
    size_t n_values, values_cap;
    bool values_full;        /* CR_JFAST_VALUES_MAX reached: later spans are read from text */
} cr_jfast;

/* Finds the spans and builds the skeleton; -1 when out of memory. */
int cr_jfast_scan(const char *body, size_t len, cr_jfast *f);
/* cJSON's parse of f->text, its allocations bounded (above). NULL on failure, with *end where
 * cJSON stopped (in f->text) and *over_budget telling the bound from a syntax error. */
cJSON *cr_jfast_parse(const cr_jfast *f, const char **end, bool *over_budget);
/* The 413 of a parse stopped by the bound; at: where it stopped, in f->text. Returns -1. */
int cr_jfast_fail_budget(const cr_jfast *f, size_t at, cr_error *err);
/* Ties each span to its node in the parsed skeleton; -1 when out of memory. */
int cr_jfast_bind(cr_jfast *f, const cJSON *root);
/* The span an array node stands for, or NULL (f may be NULL). */
const cr_jspan *cr_jfast_find(const cr_jfast *f, const cJSON *node);
/* Elements of an array node, spans included (a list of rows has one per row). */
int64_t cr_jfast_size(const cr_jfast *f, const cJSON *node);
/* A skeleton offset as an offset into the body (for "error at byte N"). */
size_t cr_jfast_body_offset(const cr_jfast *f, size_t skel_at);
void cr_jfast_free(cr_jfast *f);

/* The next number of a span at *p (skipping separators), advancing *p past it. Only for text
 * the scan accepted. */
double cr_jfast_next(const char **p);

/* A span's numbers in order, rows one after another: its kept values, or its text. */
typedef struct {
    const double *values; /* NULL: read text */
    const char *text;
} cr_jnums;

cr_jnums cr_jspan_numbers(const cr_jfast *f, const cr_jspan *s);

static inline double cr_jnums_next(cr_jnums *r)
{
    return r->values ? *r->values++ : cr_jfast_next(&r->text);
}

/* Before each row of a list of rows: steps the text past the row's '['. */
static inline void cr_jnums_row(cr_jnums *r)
{
    if (!r->values) {
        while (*r->text != '[')
            r->text++;
        r->text++;
    }
}

/* Tests only: off, the scan finds no spans, so a body goes through cJSON alone (the reference
 * the fast path is compared against). */
void cr_jfast_set_enabled(bool on);

#endif
