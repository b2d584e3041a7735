/* The JSON decoder's fast path for long numeric arrays.
 *
 * cJSON builds a ~64-byte node per number (6x the body in memory, ~20 MB/s). Before cJSON sees
 * a body, a scan finds every array of plain numbers ("spans", >= CR_JFAST_MIN elements, each
 * number in a grammar cJSON reads identically) and parses a skeleton: the body with each span
 * replaced by "[]". The decoder then asks, for an array node, whether it stands for a span, and
 * converts the span's text straight into its destination buffer (exact: the Clinger fast path,
 * strtod otherwise). Anything unusual inside an array (a string, null, a bad number) leaves it to
 * cJSON, so errors and their messages are exactly what they were. */
#ifndef CRUNCHD_JSON_FASTARRAY_H
#define CRUNCHD_JSON_FASTARRAY_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#define CR_JFAST_MIN 16

typedef struct {
    size_t open, close;      /* body offsets of its '[' and ']' */
    size_t skel_at;          /* offset of its "[]" in the skeleton */
    int64_t count;
    uint64_t ordinal;        /* which '[' of the document (outside strings) it is */
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
} cr_jfast;

/* Finds the spans and builds the skeleton; -1 when out of memory. */
int cr_jfast_scan(const char *body, size_t len, cr_jfast *f);
/* Ties each span to its node in the parsed skeleton; -1 when out of memory. */
int cr_jfast_bind(cr_jfast *f, const cJSON *root);
/* The span an array node stands for, or NULL (f may be NULL). */
const cr_jspan *cr_jfast_find(const cr_jfast *f, const cJSON *node);
/* A skeleton offset as an offset into the body (for "error at byte N"). */
size_t cr_jfast_body_offset(const cr_jfast *f, size_t skel_at);
void cr_jfast_free(cr_jfast *f);

/* The next number of a span at *p (skipping separators), advancing *p past it. Only for text
 * the scan accepted. */
double cr_jfast_next(const char **p);

#endif
