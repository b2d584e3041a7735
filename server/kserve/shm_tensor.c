/* Tensors in shared-memory regions; see shm_tensor.h. */
#include "server/kserve/shm_tensor.h"

int cr_shm_input_size(uint64_t given, uint64_t bytes, const char *what, const char *size_name, cr_error *err)
{
    if (given != bytes)
        return cr_fail(err, 400, "invalid_field", what,
                       "%s: %s is %llu bytes but its shape and element type make %llu", what, size_name,
                       (unsigned long long)given, (unsigned long long)bytes);
    return 0;
}

void *cr_shm_bind_input(cr_request *r, int slot, const char *region, uint64_t offset, uint64_t bytes, size_t es,
                        const char *what, cr_error *err)
{
    void *p = NULL;
    cr_shm_region *hold = cr_shm_acquire(region, offset, bytes, es, what, &p, err);
    if (!hold)
        return NULL;
    cr_request_adopt_buf(r, slot, p, (size_t)bytes, cr_shm_release, hold);
    return p;
}

/* The kernel would read what it writes. */
static int check_inputs_apart(const cr_request *r, const cr_shm_region *out, const void *p, uint64_t n,
                              const char *what, const char *const input_names[CR_BUF_OUTPUT], cr_error *err)
{
    for (int slot = 0; slot < CR_BUF_OUTPUT; slot++)
        if (r->buf_borrowed[slot] && r->hold_release[slot] == cr_shm_release &&
            cr_shm_overlap(out, p, n, r->hold[slot], r->bufs[slot], r->buf_bytes[slot]))
            return cr_fail(err, 400, "invalid_field", what, "%s: its shared memory overlaps input %s's", what,
                           input_names[slot]);
    return 0;
}

cr_shm_region *cr_shm_hold_output(const cr_request *r, const char *region, uint64_t offset, uint64_t byte_size,
                                  uint64_t bytes, size_t es, const char *what, const char *size_name,
                                  const char *const input_names[CR_BUF_OUTPUT], void **p, cr_error *err)
{
    if (byte_size < bytes) {
        cr_fail(err, 400, "invalid_field", what, "%s: %s %llu is smaller than the result's %llu bytes", what,
                size_name, (unsigned long long)byte_size, (unsigned long long)bytes);
        return NULL;
    }
    cr_shm_region *hold = cr_shm_acquire(region, offset, byte_size, es, what, p, err);
    if (hold && check_inputs_apart(r, hold, *p, bytes, what, input_names, err)) {
        cr_shm_release(hold);
        return NULL;
    }
    return hold;
}

void cr_shm_bind_output(cr_request *r, cr_shm_region *hold, void *p, uint64_t bytes)
{
    cr_request_adopt_buf(r, CR_BUF_OUTPUT, p, (size_t)bytes, cr_shm_release, hold);
}
