/* libFuzzer harness for the streaming multipart parser alone (server/codec/multipart.c); the
 * end-to-end path through the daemon is fuzz_multipart's. Byte 0 picks the Content-Type's
 * boundary spelling and seeds the piece sizes; the rest is the body. Oracle: the body fed whole
 * and fed in input-chosen pieces give the same result, parts and bytes (the delimiter may straddle
 * any piece boundary), a failure always says why, and no part holds more bytes than the body. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/codec/multipart.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_PARTS 16

typedef struct {
    int n;
    char name[MAX_PARTS][CR_MP_NAME_MAX];
    uint64_t len[MAX_PARTS], hash[MAX_PARTS];
} result;

static int on_part(void *cls, const char *name, const char *filename)
{
    result *r = cls;
    (void)filename;
    if (r->n == MAX_PARTS)
        return -1; /* a sink refusal: must stop the parse with no reason of its own */
    snprintf(r->name[r->n], CR_MP_NAME_MAX, "%s", name);
    r->len[r->n] = 0;
    r->hash[r->n++] = 1469598103934665603ull;
    return 0;
}

static int on_data(void *cls, const char *bytes, size_t n)
{
    result *r = cls;
    if (r->n == 0 || n == 0)
        abort(); /* data before any part, or an empty piece */
    for (size_t i = 0; i < n; i++)
        r->hash[r->n - 1] = (r->hash[r->n - 1] ^ (uint8_t)bytes[i]) * 1099511628211ull;
    r->len[r->n - 1] += n;
    return 0;
}

static const char *const content_types[] = {
    "multipart/form-data; boundary=XyZ",
    "multipart/form-data; boundary=\"a b\"",
    "multipart/form-data; boundary=-",
    "multipart/form-data; boundary=0123456789012345678901234567890123456789012345678901234567890123456789",
};

static int parse(const char *ct, const uint8_t *body, size_t len, unsigned seed, result *r, char *why)
{
    cr_multipart m;
    memset(r, 0, sizeof *r);
    int rc = cr_multipart_init(&m, ct, (cr_mp_sink){on_part, on_data, r});
    for (size_t at = 0; rc == 0 && at < len;) {
        size_t n = seed ? 1 + (size_t)(rand_r(&seed) % 13) : len;
        n = n < len - at ? n : len - at;
        rc = cr_multipart_feed(&m, (const char *)body + at, n);
        at += n;
    }
    if (rc == 0)
        rc = cr_multipart_finish(&m);
    snprintf(why, 160, "%s", m.why);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *ct = content_types[data[0] % 4];
    result whole, pieces;
    char why_whole[160], why_pieces[160];
    int a = parse(ct, data + 1, size - 1, 0, &whole, why_whole);
    int b = parse(ct, data + 1, size - 1, 1u + data[0], &pieces, why_pieces);
    if (a != b || whole.n != pieces.n || strcmp(why_whole, why_pieces) != 0)
        abort();
    if (a != 0 && !why_whole[0] && whole.n < MAX_PARTS)
        abort(); /* failed without saying why, and no sink refused */
    uint64_t total = 0;
    for (int i = 0; i < whole.n; i++) {
        if (strcmp(whole.name[i], pieces.name[i]) || whole.len[i] != pieces.len[i] || whole.hash[i] != pieces.hash[i])
            abort();
        total += whole.len[i];
    }
    if (total > size)
        abort();
    return 0;
}
