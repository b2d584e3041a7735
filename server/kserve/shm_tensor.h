/* A request's tensors in registered shared-memory regions (shm_region.h), with one set of rules
 * for every protocol that names them: /v2 inference (kserve_shm.c) and /v1's JSON operands
 * (codec/json_shm.c). An input is exactly its shape times its element size; an output holds at
 * least the result; each lies inside its region at an address aligned to its element size; no
 * output shares a byte with an input (two regions of one object alias each other).
 *
 * A bound tensor is a borrowed request slot (server/request.h): the job reads and writes the
 * client's memory directly, nothing is charged or copied, and the slot holds its region until it
 * is freed, so the region cannot be unregistered under a running job. `what` names the tensor in
 * messages and is the error's field. */
#ifndef CRUNCHD_SHM_TENSOR_H
#define CRUNCHD_SHM_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "server/kserve/shm_region.h"
#include "server/request.h"

/* An input's byte size as the client gave it (size_name: the protocol's word for it) must be
 * exactly bytes, what its shape and element type make. -1 with err (400). */
int cr_shm_input_size(uint64_t given, uint64_t bytes, const char *what, const char *size_name, cr_error *err);

/* Points input slot of r at bytes [offset, offset + bytes) of region, elements of es bytes,
 * held until the slot is freed. NULL with err (400: no such region, out of its bounds,
 * misaligned, its object shrank). */
void *cr_shm_bind_input(cr_request *r, int slot, const char *region, uint64_t offset, uint64_t bytes, size_t es,
                        const char *what, cr_error *err);

/* Holds the output window [offset, offset + byte_size) of region for a result of `bytes`
 * elements of es bytes: byte_size (named size_name) must be at least bytes, and the result's
 * bytes may not overlap an input slot of r already bound to a region (input_names[slot] names
 * them). The hold and the result's address (*p); NULL with err (400). */
cr_shm_region *cr_shm_hold_output(const cr_request *r, const char *region, uint64_t offset, uint64_t byte_size,
                                  uint64_t bytes, size_t es, const char *what, const char *size_name,
                                  const char *const input_names[CR_BUF_OUTPUT], void **p, cr_error *err);

/* The result slot of r becomes the held window (p, bytes): the worker writes the result there,
 * and the hold is released with the slot. */
void cr_shm_bind_output(cr_request *r, cr_shm_region *hold, void *p, uint64_t bytes);

#endif
