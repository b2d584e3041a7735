/* A request's tensors in registered shared-memory regions, with one set of rules for every
 * protocol that names them: /v2 inference (kserve_shm.c) and /v1's JSON operands
 * (codec/json_shm.c). A region is a system one (shm_region.h: host memory mapped from /dev/shm)
 * or a CUDA one (cuda_shm_region.h: a client's device memory); one namespace holds both. An input
 * is exactly its shape times its element size; an output holds at least the result; each lies
 * inside its region at an address aligned to its element size; no output shares a byte with an
 * input (two regions of one object alias each other).
 *
 * A bound tensor is a borrowed request slot (server/request.h): the job reads and writes the
 * client's memory directly, nothing is charged or copied, and the slot holds its region until it
 * is freed, so the region cannot be unregistered under a running job. A tensor in device memory
 * also sends the job to that device. `what` names the tensor in messages and is the error's
 * field; `device_ok` false refuses CUDA regions (a protocol that reads the bytes on the host). */
#ifndef CRUNCHD_SHM_TENSOR_H
#define CRUNCHD_SHM_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/kserve/shm_region.h"
#include "server/request.h"

/* A hold on a window of a region of either kind. */
typedef struct {
    void *hold;                 /* the region's, released by release(hold); NULL: none */
    void (*release)(void *hold);
    void *p;                    /* the window's first byte */
    int device;                 /* -1: host memory; else the device whose memory it is */
} cr_shm_window;

/* An input's byte size as the client gave it (size_name: the protocol's word for it) must be
 * exactly bytes, what its shape and element type make. -1 with err (400). */
int cr_shm_input_size(uint64_t given, uint64_t bytes, const char *what, const char *size_name, cr_error *err);

/* Points input slot of r at bytes [offset, offset + bytes) of region, elements of es bytes,
 * held until the slot is freed. NULL with err (400: no such region, out of its bounds,
 * misaligned, its object shrank, a CUDA region where !device_ok). */
void *cr_shm_bind_input(cr_request *r, int slot, const char *region, uint64_t offset, uint64_t bytes, size_t es,
                        bool device_ok, const char *what, cr_error *err);

/* Holds the output window [offset, offset + byte_size) of region in *w for a result of `bytes`
 * bytes in elements of es: byte_size (named size_name) must be at least bytes, and the result's
 * bytes may not overlap an input slot of r already bound to a region (input_names[slot] names
 * them). -1 with err (400), *w holding nothing. */
int cr_shm_hold_output(const cr_request *r, const char *region, uint64_t offset, uint64_t byte_size, uint64_t bytes,
                       size_t es, bool device_ok, const char *what, const char *size_name,
                       const char *const input_names[CR_BUF_OUTPUT], cr_shm_window *w, cr_error *err);

/* The result slot of r becomes the held window (its first `bytes`): the worker writes the
 * result there, and the hold is released with the slot; *w holds nothing after. -1 with err
 * (400) when the request's other tensors are on another device (the window is released). */
int cr_shm_bind_output(cr_request *r, cr_shm_window *w, uint64_t bytes, cr_error *err);

/* Whether [a.p, a.p + n) and [b.p, b.p + m) of two held windows share bytes. */
bool cr_shm_windows_overlap(const cr_shm_window *a, uint64_t n, const cr_shm_window *b, uint64_t m);
/* Copies host bytes (a result the encoder makes) into a held window; -1 when a device refused. */
int cr_shm_window_write(const cr_shm_window *w, const void *src, size_t bytes);
/* Drops the hold, if any; *w holds nothing after. */
void cr_shm_window_release(cr_shm_window *w);

#endif
