/* Uploads received straight to a device, and results sent straight from one, through a ring of
 * cached staging slots; see device_sink.cu and backend.h (sink_*). */
#ifndef CRUNCHD_DEVICE_SINK_H
#define CRUNCHD_DEVICE_SINK_H

#include <stddef.h>

#include "kernels/backend.h"

cr_sink *cr_sink_open(size_t total, int device, size_t *staging);
void *cr_sink_space(cr_sink *s, size_t *len);
int cr_sink_commit(cr_sink *s, size_t n);
int cr_sink_finish(cr_sink *s, void **dev, int *device);
void *cr_sink_target(cr_sink *s, int *device);
int cr_sink_read(cr_sink *s, const void **p, size_t *len);
void cr_sink_free(void *s);
void cr_sink_usage(int device, uint64_t *held, uint64_t *cap);

#endif
