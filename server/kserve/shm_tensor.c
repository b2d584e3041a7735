/* Tensors in shared-memory regions; see shm_tensor.h. */
#include "server/kserve/shm_tensor.h"

#include <string.h>

#include "server/kserve/cuda_shm_region.h"

int cr_shm_input_size(uint64_t given, uint64_t bytes, const char *what, const char *size_name, cr_error *err)
{
    if (given != bytes)
        return cr_fail(err, 400, "invalid_field", what,
                       "%s: %s is %llu bytes but its shape and element type make %llu", what, size_name,
                       (unsigned long long)given, (unsigned long long)bytes);
    return 0;
}

/* ---- windows -------------------------------------------------------------------------------- */

/* Holds [offset, offset + bytes) of region `name`, in whichever table has it. */
static int acquire(const char *name, uint64_t offset, uint64_t bytes, size_t align, bool device_ok,
                   const char *what, cr_shm_window *w, cr_error *err)
{
    memset(w, 0, sizeof *w);
    w->device = -1;
    if (cr_cuda_shm_registered(name)) {
        if (!device_ok)
            return cr_fail(err, 400, "invalid_field", what,
                           "%s: '%s' is a CUDA shared memory region; this route reads system regions only", what,
                           name);
        w->hold = cr_cuda_shm_acquire(name, offset, bytes, align, what, &w->p, &w->device, err);
        w->release = cr_cuda_shm_release;
    } else {
        w->hold = cr_shm_acquire(name, offset, bytes, align, what, &w->p, err);
        w->release = cr_shm_release;
    }
    return w->hold ? 0 : -1;
}

void cr_shm_window_release(cr_shm_window *w)
{
    if (w->hold)
        w->release(w->hold);
    memset(w, 0, sizeof *w);
    w->device = -1;
}

/* The window becomes the request's slot, which releases it when freed. */
static int adopt(cr_request *r, int slot, cr_shm_window *w, uint64_t bytes, cr_error *err)
{
    cr_shm_window taken = *w;
    memset(w, 0, sizeof *w);
    w->device = -1;
    cr_request_adopt_buf(r, slot, taken.p, (size_t)bytes, taken.release, taken.hold);
    return taken.device >= 0 ? cr_request_mark_device(r, slot, taken.device, err) : 0;
}

/* Two system regions alias when they map one object; device pointers of one process alias
 * when their ranges meet; memory of the two kinds never does. */
static bool overlap(void (*ra)(void *), void *a, const void *p, uint64_t n, void (*rb)(void *), void *b,
                    const void *q, uint64_t m)
{
    if (ra != rb || !n || !m)
        return false;
    if (ra == cr_shm_release)
        return cr_shm_overlap(a, p, (size_t)n, b, q, (size_t)m);
    uintptr_t x = (uintptr_t)p, y = (uintptr_t)q;
    return x < y + m && y < x + n;
}

bool cr_shm_windows_overlap(const cr_shm_window *a, uint64_t n, const cr_shm_window *b, uint64_t m)
{
    return a->hold && b->hold && overlap(a->release, a->hold, a->p, n, b->release, b->hold, b->p, m);
}

int cr_shm_window_write(const cr_shm_window *w, const void *src, size_t bytes)
{
    if (w->device < 0) {
        memcpy(w->p, src, bytes);
        return 0;
    }
    return cr_cuda_shm_write(w->p, src, bytes);
}

/* ---- tensors -------------------------------------------------------------------------------- */

void *cr_shm_bind_input(cr_request *r, int slot, const char *region, uint64_t offset, uint64_t bytes, size_t es,
                        bool device_ok, const char *what, cr_error *err)
{
    cr_shm_window w;
    if (acquire(region, offset, bytes, es, device_ok, what, &w, err))
        return NULL;
    void *p = w.p;
    return adopt(r, slot, &w, bytes, err) ? NULL : p; /* on failure the slot holds it, freed with r */
}

/* The kernel would read what it writes. */
static int check_inputs_apart(const cr_request *r, const cr_shm_window *out, uint64_t n, const char *what,
                              const char *const input_names[CR_BUF_OUTPUT], cr_error *err)
{
    for (int slot = 0; slot < CR_BUF_OUTPUT; slot++)
        if (r->buf_borrowed[slot] && overlap(out->release, out->hold, out->p, n, r->hold_release[slot], r->hold[slot],
                                             r->bufs[slot], r->buf_bytes[slot]))
            return cr_fail(err, 400, "invalid_field", what, "%s: its shared memory overlaps input %s's", what,
                           input_names[slot]);
    return 0;
}

int cr_shm_hold_output(const cr_request *r, const char *region, uint64_t offset, uint64_t byte_size, uint64_t bytes,
                       size_t es, bool device_ok, const char *what, const char *size_name,
                       const char *const input_names[CR_BUF_OUTPUT], cr_shm_window *w, cr_error *err)
{
    memset(w, 0, sizeof *w);
    w->device = -1;
    if (byte_size < bytes)
        return cr_fail(err, 400, "invalid_field", what, "%s: %s %llu is smaller than the result's %llu bytes", what,
                       size_name, (unsigned long long)byte_size, (unsigned long long)bytes);
    if (acquire(region, offset, byte_size, es, device_ok, what, w, err))
        return -1;
    if (check_inputs_apart(r, w, bytes, what, input_names, err)) {
        cr_shm_window_release(w);
        return -1;
    }
    return 0;
}

int cr_shm_bind_output(cr_request *r, cr_shm_window *w, uint64_t bytes, cr_error *err)
{
    return adopt(r, CR_BUF_OUTPUT, w, bytes, err);
}
