/* A backend whose only part is a sink (kernels/backend.h, sink_*) with host memory for a device
 * and a ring of tiny slots, so that every way a body can be cut crosses many slot edges; it can
 * be told to break at the n-th commit. For the decoder's unit test and fuzz harness. */
#ifndef CRUNCHD_TESTS_FAKE_SINK_H
#define CRUNCHD_TESTS_FAKE_SINK_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"

#define FAKE_SLOT 48
#define FAKE_SLOTS 3

struct cr_sink {
    size_t total, written, fill, copied;
    int cur, device;
    char ring[FAKE_SLOTS][FAKE_SLOT];
    char *dev;
};

#define FAKE_DEVICES 4
static uint64_t fake_held[FAKE_DEVICES];
static int fake_sinks_open, fake_fail_commit_at = -1, fake_commits;
static size_t fake_sink_min = 1;
static bool fake_sink_misused; /* a commit past the space it was given */

static cr_sink *fake_open(size_t total, int device, size_t *staging)
{
    if (total < fake_sink_min)
        return NULL;
    cr_sink *s = calloc(1, sizeof *s);
    if (!s || !(s->dev = malloc(total))) {
        free(s);
        return NULL;
    }
    s->total = total;
    s->device = device;
    *staging = sizeof s->ring;
    fake_sinks_open++;
    fake_held[device % FAKE_DEVICES] += total;
    return s;
}

static void *fake_space(cr_sink *s, size_t *len)
{
    size_t left = s->total - s->written, room = FAKE_SLOT - s->fill;
    if (!left)
        return NULL;
    *len = room < left ? room : left;
    return s->ring[s->cur] + s->fill;
}

static int fake_commit(cr_sink *s, size_t n)
{
    if (fake_commits++ == fake_fail_commit_at)
        return -1;
    if (n > FAKE_SLOT - s->fill || n > s->total - s->written) {
        fake_sink_misused = true;
        return -1;
    }
    s->fill += n;
    s->written += n;
    if (s->fill == FAKE_SLOT || s->written == s->total) { /* the "copy engine" drains the slot */
        memcpy(s->dev + s->copied, s->ring[s->cur], s->fill);
        memset(s->ring[s->cur], 0xEE, FAKE_SLOT); /* a reused slot holds garbage until written */
        s->copied += s->fill;
        s->fill = 0;
        s->cur = (s->cur + 1) % FAKE_SLOTS;
    }
    return 0;
}

static int fake_finish(cr_sink *s, void **dev, int *device)
{
    if (s->copied != s->total)
        return -1;
    *dev = s->dev;
    *device = s->device;
    return 0;
}

static void fake_free(void *p)
{
    cr_sink *s = p;
    fake_held[s->device % FAKE_DEVICES] -= s->total;
    free(s->dev);
    free(s);
    fake_sinks_open--;
}

static void fake_usage(int device, uint64_t *held, uint64_t *cap)
{
    *held = fake_held[device % FAKE_DEVICES];
    *cap = UINT64_MAX;
}

static const cr_backend fake_sink_backend = {.name = "fake", .sink_open = fake_open, .sink_space = fake_space,
                                             .sink_commit = fake_commit, .sink_finish = fake_finish,
                                             .sink_free = fake_free, .sink_usage = fake_usage};

#endif
