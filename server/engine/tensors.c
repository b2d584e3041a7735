/* The resident tensor table; see tensors.h. */
#include "server/engine/tensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/clock.h"
#include "server/engine/owned.h"
#include "server/memory.h"
#include "server/obs/log.h"
#include "server/uuid4.h"

struct cr_tensor {
    cr_owned node;          /* first: the list's node is the tensor; node.name is its id */
    cr_tensor_info info;
    void *data;
    bool charged;           /* host memory charged to the budget (CR_MEM_TENSOR) */
    void (*release)(void *owner); /* adopted memory: its owner frees it (the upload's own charge) */
    void *release_arg;
    bool published;
};

static void tensor_free_node(cr_owned *o);
static cr_owned_list tensors = CR_OWNED_LIST(tensor_free_node);
static cr_tensor_limits limits;
/* per device (index device + 1: 0 is host memory): bytes made, guarded by tensors.mu */
static uint64_t device_bytes[CR_TENSOR_MAX_DEVICES + 1];
static uint64_t device_count[CR_TENSOR_MAX_DEVICES + 1], device_created[CR_TENSOR_MAX_DEVICES + 1],
    device_expired[CR_TENSOR_MAX_DEVICES + 1];

static bool on_devices(void) { return limits.backend && limits.backend->tensor_alloc && limits.devices > 0; }
static int slot_of(int device) { return device + 1; }

void cr_tensors_init(const cr_tensor_limits *lim)
{
    limits = *lim;
    if (limits.devices > CR_TENSOR_MAX_DEVICES)
        limits.devices = CR_TENSOR_MAX_DEVICES;
    cr_owned_caps caps = {.owner_max_bytes = lim->client_max_bytes, .idle_s = lim->idle_s, .what = "tensor",
                          .code = "tensor_limit", .max_flag = "--tensor-max-mb",
                          .owner_flag = "--tensor-client-max-mb"};
    cr_owned_set_caps(&tensors, &caps);
}

void cr_tensors_shutdown(void) { cr_owned_clear(&tensors); }

const char *cr_tensors_instance(void) { return limits.instance; }

/* ---- names ------------------------------------------------------------------------------------ */

static bool looks_like_uuid(const char *s)
{
    if (strlen(s) != CR_TENSOR_ID_LEN)
        return false;
    for (int i = 0; i < CR_TENSOR_ID_LEN; i++) {
        bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        char c = s[i];
        if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
    }
    return true;
}

int cr_tensor_check_name(const char *name, const char *field, cr_error *err)
{
    size_t n = strlen(name);
    bool ok = n >= 1 && n <= CR_TENSOR_NAME_MAX && strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                               "0123456789._-") == n;
    if (!ok)
        return cr_fail(err, 400, "invalid_field", field, "a tensor name is 1 to %d of A-Z a-z 0-9 . _ -",
                       CR_TENSOR_NAME_MAX);
    if (looks_like_uuid(name))
        return cr_fail(err, 400, "invalid_field", field, "a tensor name may not look like an id (a UUID)");
    return 0;
}

/* ---- the table (mu held) ---------------------------------------------------------------------- */

/* The owner's tensor whose id or name is ref (listed ones only). */
static cr_tensor *find_locked(const char *owner, const char *ref)
{
    for (cr_owned *o = tensors.head; o; o = o->next) {
        cr_tensor *t = (cr_tensor *)o;
        if (strcmp(o->owner, owner) == 0 && (strcmp(t->info.id, ref) == 0 || strcmp(t->info.name, ref) == 0))
            return t;
    }
    return NULL;
}

static int name_taken_locked(const char *owner, const char *name, cr_error *err)
{
    if (name[0] && find_locked(owner, name))
        return cr_fail(err, 409, "already_exists", "name", "you have a tensor named '%s' already (delete it first)",
                       name);
    return 0;
}

/* Room on the device (its --tensor-max-mb) and, through the list, the owner's cap. */
static int admit_locked(const char *owner, int device, uint64_t bytes, cr_error *err)
{
    uint64_t cap = limits.max_bytes[device < 0 ? 0 : device], have = device_bytes[slot_of(device)];
    if (cap && bytes > cap)
        return cr_fail(err, 413, "too_large", "shape", "a tensor of %llu bytes is over --tensor-max-mb (%llu MiB%s)",
                       (unsigned long long)bytes, (unsigned long long)(cap >> 20), device < 0 ? "" : " per device");
    if (cap && bytes > cap - have)
        return cr_fail(err, 507, "tensor_limit", "shape", "%llu more bytes of tensors would pass --tensor-max-mb on "
                       "%s%d (%llu MiB, %llu bytes held); delete some (GET /v1/tensors lists yours)",
                       (unsigned long long)bytes, device < 0 ? "the host" : "device ", device < 0 ? 0 : device,
                       (unsigned long long)(cap >> 20), (unsigned long long)have);
    return cr_owned_admit_locked(&tensors, owner, bytes, "shape", err);
}

/* The device with the most room under its cap. */
static int pick_device_locked(void)
{
    int best = 0;
    uint64_t room = 0;
    for (int d = 0; d < limits.devices; d++) {
        uint64_t r = limits.max_bytes[d] > device_bytes[slot_of(d)] ? limits.max_bytes[d] - device_bytes[slot_of(d)] : 0;
        if (r > room) {
            room = r;
            best = d;
        }
    }
    return best;
}

/* ---- lifetime --------------------------------------------------------------------------------- */

static void tensor_free(cr_tensor *t)
{
    int d = t->info.device;
    if (t->release)
        t->release(t->release_arg);
    else if (t->data && d >= 0)
        limits.backend->tensor_free(d, t->data);
    else
        free(t->data);
    if (t->charged)
        cr_mem_release(CR_MEM_TENSOR, t->info.bytes);
    pthread_mutex_lock(&tensors.mu);
    device_bytes[slot_of(d)] -= t->info.bytes;
    if (t->published)
        device_count[slot_of(d)]--;
    pthread_mutex_unlock(&tensors.mu);
    free(t);
}

static void tensor_free_node(cr_owned *o) { tensor_free((cr_tensor *)o); }

static void wall_times(cr_tensor *t)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    t->info.created_at = (double)now.tv_sec + now.tv_nsec / 1e9;
}

/* Memory for t: the device's, or host memory charged to the budget. */
static int alloc_data(cr_tensor *t, cr_error *err)
{
    size_t n = (size_t)t->info.bytes;
    if (t->info.device >= 0) {
        if (!(t->data = limits.backend->tensor_alloc(t->info.device, n)))
            return cr_fail(err, 507, "device_memory", "shape", "device %d has no room for a tensor of %llu bytes",
                           t->info.device, (unsigned long long)t->info.bytes);
        return 0;
    }
    if (cr_mem_charge(CR_MEM_TENSOR, n, "a resident tensor", err) < 0)
        return -1;
    t->charged = true;
    if (!(t->data = malloc(n ? n : 1)))
        return cr_fail(err, 503, "host_memory", "", "out of memory for a tensor of %llu bytes", (unsigned long long)n);
    return 0;
}

/* A tensor's record, admitted against the caps and its bytes reserved on its device (no memory). */
static cr_tensor *tensor_record(const char *owner, const char *name, const cr_shape *shape, cr_dtype dt, int device,
                                cr_error *err)
{
    uint64_t count = cr_shape_count(shape), bytes;
    if (count == UINT64_MAX || __builtin_mul_overflow(count, (uint64_t)cr_dtype_size(dt), &bytes)) {
        cr_fail(err, 413, "too_large", "shape", "the tensor's size overflows");
        return NULL;
    }
    name = name ? name : "";
    if (name[0] && cr_tensor_check_name(name, "name", err))
        return NULL;
    cr_tensor *t = calloc(1, sizeof *t);
    if (!t) {
        cr_fail(err, 503, "host_memory", "", "out of memory");
        return NULL;
    }
    cr_uuid4(t->info.id);
    snprintf(t->info.name, sizeof t->info.name, "%s", name);
    snprintf(t->node.owner, sizeof t->node.owner, "%s", owner);
    t->node.name = t->info.id;
    t->info.shape = *shape;
    t->info.dtype = dt;
    t->info.bytes = t->node.byte_size = bytes;
    wall_times(t);
    pthread_mutex_lock(&tensors.mu);
    t->info.device = !on_devices() ? -1 : device >= 0 && device < limits.devices ? device : pick_device_locked();
    int rc = name_taken_locked(owner, name, err) || admit_locked(owner, t->info.device, bytes, err) ? -1 : 0;
    if (rc == 0)
        device_bytes[slot_of(t->info.device)] += bytes; /* reserved: its allocation happens unlocked */
    pthread_mutex_unlock(&tensors.mu);
    if (rc) {
        free(t);
        return NULL;
    }
    return t;
}

cr_tensor *cr_tensor_new(const char *owner, const char *name, const cr_shape *shape, cr_dtype dt, int device,
                         cr_error *err)
{
    cr_tensor *t = tensor_record(owner, name, shape, dt, device, err);
    if (t && alloc_data(t, err)) {
        tensor_free(t);
        return NULL;
    }
    return t;
}

cr_tensor *cr_tensor_adopt(const char *owner, const char *name, const cr_shape *shape, cr_dtype dt, int device,
                           void *data, void (*release)(void *owner), void *release_arg, cr_error *err)
{
    bool copy = device < 0 && on_devices(); /* host bytes on a backend whose tensors live on devices */
    cr_tensor *t = copy ? cr_tensor_new(owner, name, shape, dt, -1, err)
                        : tensor_record(owner, name, shape, dt, device, err);
    if (t && copy && cr_tensor_write(t, 0, data, (size_t)t->info.bytes, err) < 0) {
        tensor_free(t);
        t = NULL;
    }
    if (!t || copy) {
        release(release_arg);
        return t;
    }
    t->data = data;
    t->release = release;
    t->release_arg = release_arg;
    return t;
}

int cr_tensor_publish(cr_tensor *t, cr_error *err)
{
    pthread_mutex_lock(&tensors.mu);
    int rc = name_taken_locked(t->node.owner, t->info.name, err);
    if (rc == 0) {
        t->node.last_used = cr_now();
        t->published = true;
        cr_owned_append_locked(&tensors, &t->node);
        device_count[slot_of(t->info.device)]++;
        device_created[slot_of(t->info.device)]++;
    }
    pthread_mutex_unlock(&tensors.mu);
    return rc;
}

void cr_tensor_discard(cr_tensor *t)
{
    if (t)
        tensor_free(t);
}

/* ---- use ---------------------------------------------------------------------------------------- */

static int not_found(const char *ref, const char *field, cr_error *err)
{
    return cr_fail(err, 404, "not_found", field, "no tensor '%.128s' of yours (GET /v1/tensors lists them; tensors "
                   "live on the replica that made them, and a restart loses them)", ref);
}

cr_tensor *cr_tensor_acquire(const char *owner, const char *ref, const char *field, cr_error *err)
{
    pthread_mutex_lock(&tensors.mu);
    cr_tensor *t = find_locked(owner, ref);
    if (t)
        cr_owned_hold_locked(&t->node);
    pthread_mutex_unlock(&tensors.mu);
    if (!t)
        not_found(ref, field, err);
    return t;
}

int cr_tensor_describe(const char *owner, const char *ref, const char *field, cr_tensor_info *out, cr_error *err)
{
    pthread_mutex_lock(&tensors.mu);
    cr_tensor *t = find_locked(owner, ref);
    if (t)
        cr_tensor_info_of(t, out);
    pthread_mutex_unlock(&tensors.mu);
    return t ? 0 : (not_found(ref, field, err), -1);
}

void cr_tensor_release(void *t)
{
    cr_tensor *x = t;
    if (!x)
        return;
    if (!x->published) { /* a job's output that was never listed: its hold was its only one */
        cr_tensor_discard(x);
        return;
    }
    cr_owned_release(&tensors, &x->node, cr_now());
}

int cr_tensor_delete(const char *owner, const char *ref, cr_tensor_info *info, cr_error *err)
{
    cr_owned *free_now = NULL;
    pthread_mutex_lock(&tensors.mu);
    cr_tensor *t = find_locked(owner, ref);
    if (t) {
        *info = t->info;
        cr_owned_remove_locked(&tensors, &t->node, &free_now);
    }
    pthread_mutex_unlock(&tensors.mu);
    if (!t)
        return not_found(ref, "id", err);
    if (free_now)
        tensor_free(t);
    return 0;
}

void cr_tensor_info_of(const cr_tensor *t, cr_tensor_info *out)
{
    *out = t->info;
    /* expiry: idle_s after its last use, in wall-clock time */
    double idle_for = cr_now() - t->node.last_used;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    double wall = (double)now.tv_sec + now.tv_nsec / 1e9;
    out->expires_at = limits.idle_s > 0 ? wall - (t->published ? idle_for : 0) + limits.idle_s : 0;
}

int cr_tensor_list(const char *owner, cr_tensor_info **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&tensors.mu);
    size_t count = 0;
    for (cr_owned *o = tensors.head; o; o = o->next)
        count += strcmp(o->owner, owner) == 0;
    cr_tensor_info *list = count ? malloc(count * sizeof *list) : NULL;
    size_t i = 0;
    for (cr_owned *o = tensors.head; list && o; o = o->next)
        if (strcmp(o->owner, owner) == 0)
            cr_tensor_info_of((cr_tensor *)o, &list[i++]);
    pthread_mutex_unlock(&tensors.mu);
    if (count && !list)
        return -1;
    *out = list;
    *n = count;
    return 0;
}

void *cr_tensor_data(const cr_tensor *t) { return t->data; }
int cr_tensor_device(const cr_tensor *t) { return t->info.device; }
const cr_shape *cr_tensor_shape(const cr_tensor *t) { return &t->info.shape; }
cr_dtype cr_tensor_dtype(const cr_tensor *t) { return t->info.dtype; }
uint64_t cr_tensor_bytes(const cr_tensor *t) { return t->info.bytes; }

static int device_fault(cr_error *err, const char *what)
{
    return cr_fail(err, 503, "device_fault", "", "copying a tensor %s its device failed", what);
}

int cr_tensor_write(cr_tensor *t, uint64_t off, const void *src, size_t n, cr_error *err)
{
    if (off > t->info.bytes || n > t->info.bytes - off)
        return cr_fail(err, 500, "internal", "", "a tensor write past its end");
    if (t->info.device < 0) {
        memcpy((char *)t->data + off, src, n);
        return 0;
    }
    return limits.backend->tensor_copy(t->info.device, (char *)t->data + off, src, n, true) == CR_OK
               ? 0
               : device_fault(err, "to");
}

int cr_tensor_read(const cr_tensor *t, void *dst, cr_error *err)
{
    if (t->info.device < 0) {
        memcpy(dst, t->data, (size_t)t->info.bytes);
        return 0;
    }
    return limits.backend->tensor_copy(t->info.device, dst, t->data, (size_t)t->info.bytes, false) == CR_OK
               ? 0
               : device_fault(err, "from");
}

int cr_request_bind_tensor(cr_request *r, int slot, cr_tensor *t, cr_error *err)
{
    cr_request_adopt_buf(r, slot, t->data, (size_t)t->info.bytes, cr_tensor_release, t);
    return t->info.device >= 0 ? cr_request_mark_device(r, slot, t->info.device, err) : 0;
}

static cr_dtype result_dtype(const cr_request *r)
{
    return r->task.op == CR_OP_HISTOGRAM ? CR_DT_U64 : r->task.dtype;
}

static int bind_output(cr_request *r, cr_tensor *t, cr_error *err)
{
    r->result_tensor.t = t;
    cr_request_adopt_buf(r, CR_BUF_OUTPUT, t->data, (size_t)t->info.bytes, cr_tensor_release, t);
    return t->info.device >= 0 ? cr_request_mark_device(r, CR_BUF_OUTPUT, t->info.device, err) : 0;
}

int cr_request_keep_result(cr_request *r, const char *owner, const char *name, cr_error *err)
{
    cr_shape s = cr_request_result_shape(r);
    cr_tensor *t = cr_tensor_new(owner, name, &s, result_dtype(r), r->on_device ? r->device : -1, err);
    if (!t)
        return -1;
    t->node.holds = 1; /* the job's, from now: released at its end (discarded if never listed) */
    return bind_output(r, t, err);
}

int cr_request_result_into(cr_request *r, const char *owner, const char *ref, cr_error *err)
{
    cr_tensor *t = cr_tensor_acquire(owner, ref, "output.tensor", err);
    if (!t)
        return -1;
    cr_shape s = cr_request_result_shape(r);
    char want[160], got[160];
    if (t->info.dtype != result_dtype(r) || t->info.shape.rank != s.rank ||
        memcmp(t->info.shape.dims, s.dims, sizeof s.dims[0] * (size_t)s.rank)) {
        cr_shape_format(&s, want, sizeof want);
        cr_shape_format(&t->info.shape, got, sizeof got);
        cr_fail(err, 422, "shape_mismatch", "output.tensor", "tensor %.64s is %s %s; the result is %s %s", ref,
                cr_dtype_name(t->info.dtype), got, cr_dtype_name(result_dtype(r)), want);
        cr_tensor_release(t);
        return -1;
    }
    return bind_output(r, t, err);
}

int cr_tensor_keep_result(cr_request *r, cr_error *err)
{
    cr_tensor *t = r->result_tensor.t;
    if (!t->published && cr_tensor_publish(t, err) < 0)
        return -1;
    cr_tensor_info i;
    cr_tensor_info_of(t, &i);
    memcpy(r->result_tensor.id, i.id, sizeof r->result_tensor.id);
    memcpy(r->result_tensor.name, i.name, sizeof r->result_tensor.name);
    r->result_tensor.device = i.device;
    r->result_tensor.expires_at = i.expires_at;
    return 0;
}

/* ---- upkeep ------------------------------------------------------------------------------------- */

static bool idle_too_long(cr_owned *o, double now)
{
    if (!(limits.idle_s > 0 && now - o->last_used >= limits.idle_s))
        return false;
    cr_tensor *t = (cr_tensor *)o;
    device_expired[slot_of(t->info.device)]++;
    cr_log("info", "tensor %s%s%s of %s expired: unused for %.0f s (--tensor-idle-s)", t->info.id,
           t->info.name[0] ? " " : "", t->info.name, o->owner[0] ? o->owner : "an anonymous client", now - o->last_used);
    return true;
}

int cr_tensors_sweep(double now) { return cr_owned_sweep(&tensors, idle_too_long, now); }

void cr_tensors_usage(int device, cr_tensor_usage *out)
{
    int s = slot_of(device < -1 ? -1 : device > CR_TENSOR_MAX_DEVICES - 1 ? CR_TENSOR_MAX_DEVICES - 1 : device);
    pthread_mutex_lock(&tensors.mu);
    out->count = device_count[s];
    out->bytes = device_bytes[s];
    out->created = device_created[s];
    out->expired = device_expired[s];
    pthread_mutex_unlock(&tensors.mu);
}
