/* The auto table kept in a file between starts (--auto-cache PATH). Measuring it is most of a
 * cuda start (43 rows: one matrix small and large, tall AᵀA, stacks of tiny, small and large matrices;
 * probes up to 512 MiB, every candidate kernel four times: about 10 s on the H200 host before the
 * stack and tall rows), and its answer depends only on the binary and the device it ran on, which the
 * file's key names: another build, backend or device measures again and rewrites the file. */
#ifndef CRUNCHD_AUTO_CACHE_H
#define CRUNCHD_AUTO_CACHE_H

#include <stddef.h>

#include "kernels/registry.h"

/* This binary (version, revision, and the executable's size and mtime, so a rebuild with the
 * same revision counts as another), the backend and the device the table was measured on, and
 * the table's layout (its size classes): a file of another layout is measured again. */
void cr_auto_cache_key(const cr_backend *b, const char *device, char *key, size_t n);

/* 0: *out holds the file's rows (malloc'd), every kernel found in b. -1: no usable file (missing,
 * another key, unreadable or malformed: why, in why), nothing allocated. */
int cr_auto_cache_load(const char *path, const char *key, const cr_backend *b, cr_auto_table *out, char *why,
                       size_t whylen);

/* Writes the table under key, atomically (a temporary file renamed over path). -1 with err. */
int cr_auto_cache_save(const char *path, const char *key, const cr_auto_table *t, char *err, size_t errlen);

#endif
