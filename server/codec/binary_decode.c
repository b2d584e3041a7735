/* Binary bodies streamed into their final buffers; see binary_request.h. */
#include "server/codec/binary_decode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/hist_range.h"
#include "server/codec/copy_streaming.h"
#include "server/codec/npy.h"
#include "server/engine/tensors.h"
#include "server/memory.h"

enum { BUF_A = 0, BUF_B = 1, BUF_C = 2 };
#define MAX_PARTS 3

struct cr_bin_part {
    char name[8];
    int slot;
    bool raw;                /* no header: uint8 bytes (octet-stream) */
    bool header_done;
    uint8_t *hdr;            /* header bytes gathered so far (freed once parsed) */
    size_t hdr_len, hdr_need;
    cr_npy_header h;
    void *data;              /* the array's buffer, r->bufs[slot] */
    uint64_t received;       /* data bytes so far */
    /* A Fortran-ordered c, or stack (3 dimensions or more), has no transpose flag in the task:
     * its elements are scattered into C order as they arrive (still one copy); carry holds an
     * element split between chunks. */
    bool scatter;
    uint8_t carry[8];
    size_t carry_len;
    /* Received straight to a device (cr_host_allocator.sink): data is NULL until the last byte
     * is there, then the device buffer, which the request's slot holds from then on. */
    cr_sink *sink;           /* of the request's cr_host_allocator.sink */
    size_t staging;          /* its host bytes, charged to the budget while it is open */
};

struct cr_bin_request {
    cr_params params;
    char owner[64];          /* who asks: resident tensors are theirs (server/engine/tensors.h) */
    struct cr_tensor *tensor[MAX_PARTS]; /* operands named by tensor_a..: held until finish binds them */
    cr_limits lim;
    cr_host_allocator alloc;
    cr_request req;          /* the buffers, owned here until finish moves them out */
    cr_bin_part parts[MAX_PARTS];
    int n_parts;
    uint64_t input_bytes;
    int sink_device;         /* -1 until a part opens a sink: every part of a request goes there */
    uint64_t device_bytes;   /* bytes received straight to the device */
};

cr_bin_request *cr_bin_new(const cr_params *params, const cr_limits *lim, cr_host_allocator a)
{
    cr_bin_request *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->params = *params;
    r->lim = *lim;
    r->alloc = a;
    r->sink_device = -1;
    return r;
}

/* The operands the query names (tensor_a, tensor_b, tensor_c, tensor_data), held from now: the parts
 * that do come are then received to their device. */
int cr_bin_tensors(cr_bin_request *r, const char *owner, cr_error *err)
{
    static const char *const params[2][MAX_PARTS] = {{"tensor_a", "tensor_b", "tensor_c"}, {"tensor_data", "", ""}};
    snprintf(r->owner, sizeof r->owner, "%s", owner ? owner : "");
    for (int k = 0; k < MAX_PARTS; k++) {
        if (!r->params.tensor[k][0])
            continue;
        const char *field = params[r->params.op == CR_OP_HISTOGRAM][k];
        if (!(r->tensor[k] = cr_tensor_acquire(r->owner, r->params.tensor[k], field, err)))
            return -1;
        if (cr_tensor_device(r->tensor[k]) >= 0 && r->sink_device < 0)
            r->sink_device = cr_tensor_device(r->tensor[k]);
    }
    return 0;
}

static void drop_sink(cr_bin_request *r, cr_bin_part *p)
{
    if (!p->sink)
        return;
    r->alloc.sink->sink_free(p->sink);
    cr_mem_release(CR_MEM_DECODE, p->staging);
    p->sink = NULL;
    p->staging = 0;
}

void cr_bin_free(cr_bin_request *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->n_parts; i++) {
        free(r->parts[i].hdr);
        drop_sink(r, &r->parts[i]);
    }
    for (int k = 0; k < MAX_PARTS; k++)
        cr_tensor_release(r->tensor[k]);
    cr_request_free(&r->req);
    free(r);
}

const char *cr_bin_body_part_name(cr_op op) { return op == CR_OP_HISTOGRAM ? "data" : "a"; }

static int slot_of(cr_op op, const char *name);

bool cr_bin_names_tensor(const cr_bin_request *r, const char *name)
{
    int slot = slot_of(r->params.op, name);
    return slot >= 0 && r->tensor[slot];
}

/* ---- parts ---------------------------------------------------------------------------------- */

static int slot_of(cr_op op, const char *name)
{
    if (op == CR_OP_COUNT) /* a tensor upload: its one array */
        return strcmp(name, "a") == 0 || strcmp(name, "data") == 0 ? BUF_A : -1;
    if (op == CR_OP_HISTOGRAM)
        return strcmp(name, "data") == 0 ? BUF_A : -1;
    if (strcmp(name, "a") == 0)
        return BUF_A;
    if (op == CR_OP_GEMM && strcmp(name, "b") == 0)
        return BUF_B;
    if (op == CR_OP_GEMM && strcmp(name, "c") == 0)
        return BUF_C;
    return -1;
}

static cr_bin_part *find_part(cr_bin_request *r, const char *name)
{
    for (int i = 0; i < r->n_parts; i++)
        if (strcmp(r->parts[i].name, name) == 0)
            return &r->parts[i];
    return NULL;
}

cr_bin_part *cr_bin_start(cr_bin_request *r, const char *name, cr_error *err)
{
    cr_op op = r->params.op;
    int slot = slot_of(op, name);
    if (slot < 0) {
        cr_fail(err, 400, "invalid_field", name,
                "unexpected part \"%.40s\" for %s (expected %s; parameters go in the query string)",
                name, cr_op_name(op),
                op == CR_OP_GEMM ? "a, b and optionally c" : op == CR_OP_ATA ? "a" : "data");
        return NULL;
    }
    if (find_part(r, name)) {
        cr_fail(err, 400, "invalid_field", name, "part %s appears twice", name);
        return NULL;
    }
    if (r->tensor[slot]) {
        cr_fail(err, 400, "invalid_field", name, "part %s is sent and named as a tensor by the query: one of the two",
                name);
        return NULL;
    }
    cr_bin_part *p = &r->parts[r->n_parts++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->slot = slot;
    p->hdr_need = 8;
    return p;
}

/* One allocation for one array, through the backend's allocator when it has one; plain memory
 * when pinning fails (the worker then stages the copy, slower but correct). */
static void *alloc_array(cr_bin_request *r, cr_bin_part *p, uint64_t bytes, cr_error *err)
{
    void *mem = cr_request_alloc_from(&r->req, p->slot, (size_t)bytes, false, r->alloc.alloc, r->alloc.free, err);
    if (!mem && strcmp(err->code, "host_memory") == 0)
        cr_fail(err, 503, "host_memory", p->name, "could not allocate %llu bytes for part %s",
                (unsigned long long)bytes, p->name);
    if (!mem && !err->field[0])
        snprintf(err->field, sizeof err->field, "%s", p->name);
    p->data = mem;
    return mem;
}

/* Element count and total bytes against the limits, before anything is allocated. */
static int check_limits(cr_bin_request *r, const cr_bin_part *p, cr_error *err)
{
    uint64_t sum;
    if (p->h.count > r->lim.max_elements)
        return cr_fail(err, 413, "too_large", p->name,
                       "%s has %llu elements, over the limit of %llu per array", p->name,
                       (unsigned long long)p->h.count, (unsigned long long)r->lim.max_elements);
    if (__builtin_add_overflow(r->input_bytes, p->h.data_bytes, &sum) ||
        sum > r->lim.max_total_bytes)
        return cr_fail(err, 413, "too_large", p->name,
                       "inputs exceed the limit of %llu bytes (at %s)",
                       (unsigned long long)r->lim.max_total_bytes, p->name);
    r->input_bytes = sum;
    return 0;
}

static cr_shape part_shape(const cr_bin_part *p)
{
    cr_shape s = {.rank = p->h.ndim};
    for (int d = 0; d < p->h.ndim && d < CR_RANK_MAX; d++)
        s.dims[d] = p->h.shape[d];
    return s;
}

static void shape_text(const cr_npy_header *h, char *out, size_t cap)
{
    size_t n = (size_t)snprintf(out, cap, "(");
    for (int i = 0; i < h->ndim && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%lld", i ? ", " : "", (long long)h->shape[i]);
    if (n < cap)
        snprintf(out + n, cap - n, "%s)", h->ndim == 1 ? "," : "");
}

/* dtype=bfloat16 (GEMM): any 2-byte part holds bfloat16 bits, whatever numpy called them. */
static int apply_bf16(cr_bin_request *r, cr_bin_part *p, cr_error *err)
{
    if (!r->params.bf16)
        return 0;
    if (cr_dtype_size(p->h.dtype) != 2)
        return cr_fail(err, 400, "invalid_field", p->name, "%s is %s but dtype=bfloat16 takes 2-byte "
                       "elements (numpy: a.view(np.uint16))", p->name, cr_dtype_name(p->h.dtype));
    p->h.dtype = CR_DT_BF16;
    return 0;
}

/* What the op accepts of this part: matrices are 2-D float32/float64 (GEMM: also float16 and
 * bfloat16) of one dtype. */
static int check_part(cr_bin_request *r, const cr_bin_part *p, cr_error *err)
{
    char shape[96];
    if (r->params.op == CR_OP_COUNT) /* a tensor: any dtype, any rank up to 8 */
        return p->h.ndim > CR_RANK_MAX ? cr_fail(err, 400, "invalid_field", p->name, "a tensor has at most %d "
                                                 "dimensions", CR_RANK_MAX)
                                       : 0;
    if (r->params.op == CR_OP_HISTOGRAM && p->h.dtype == CR_DT_F16)
        return cr_fail(err, 400, "invalid_field", p->name, "%s: float16 histograms are not supported "
                       "(numpy bins them in float16 arithmetic); send float32 (a.astype(np.float32))", p->name);
    if (r->params.op == CR_OP_HISTOGRAM)
        return 0;
    bool half = r->params.op == CR_OP_GEMM && (p->h.dtype == CR_DT_F16 || p->h.dtype == CR_DT_BF16);
    if (p->h.dtype != CR_DT_F32 && p->h.dtype != CR_DT_F64 && !half)
        return cr_fail(err, 400, "invalid_field", p->name, "%s must be %s, got %s", p->name,
                       r->params.op == CR_OP_GEMM ? "float32, float64, float16 (or 2-byte parts with "
                       "dtype=bfloat16)" : "float32 or float64", cr_dtype_name(p->h.dtype));
    shape_text(&p->h, shape, sizeof shape);
    bool c_any = strcmp(p->name, "c") == 0; /* c broadcasts: a scalar or a row will do */
    if (p->h.ndim > CR_RANK_MAX || (!c_any && p->h.ndim < 1))
        return cr_fail(err, 400, "invalid_field", p->name, "%s must be a matrix, a stack of them or a vector "
                       "(1 to %d dimensions), got shape %s", p->name, CR_RANK_MAX, shape);
    cr_shape s = part_shape(p);
    if (p->h.ndim > 0 && cr_shape_check(&s, p->name, r->lim.max_stack, err))
        return -1;
    for (int i = 0; i < r->n_parts; i++) {
        const cr_bin_part *o = &r->parts[i];
        if (o != p && o->header_done && o->h.dtype != p->h.dtype)
            return cr_fail(err, 400, "invalid_field", p->name, "%s is %s but %s is %s: one dtype "
                           "for all matrices", p->name, cr_dtype_name(p->h.dtype), o->name,
                           cr_dtype_name(o->h.dtype));
    }
    return 0;
}

/* ---- parts received straight to a device ---------------------------------------------------- */

/* The device whose sinks hold the fewest bytes (uploads arriving, and the buffers of jobs queued
 * or running there: the big work it has ahead); all parts of a request go where its first sink
 * went, and its job runs there. Ties go by the request's address: no counter shared by every
 * upload, small ones included, which all pass here. */
static int sink_device_for(cr_bin_request *r)
{
    if (r->sink_device >= 0)
        return r->sink_device;
    int n = r->alloc.devices, first = (int)(((uintptr_t)r >> 6) % (unsigned)n);
    uint64_t least = UINT64_MAX;
    r->sink_device = first;
    for (int k = 0; k < n && r->alloc.sink->sink_usage; k++) {
        int d = (first + k) % n;
        uint64_t held = 0, cap = 0;
        r->alloc.sink->sink_usage(d, &held, &cap);
        if (held < least) {
            least = held;
            r->sink_device = d;
        }
    }
    return r->sink_device;
}

/* Only inputs no host code reads: matrices (a histogram's range and NaN checks read its data),
 * arriving in order (not a scattered c), and not for compare mode, which the engine refuses
 * with tensors in device memory. Without a sink (small, no device memory) the part is received
 * into host memory as before. */
static int open_sink(cr_bin_request *r, cr_bin_part *p, cr_error *err)
{
    const cr_backend *b = r->alloc.sink;
    if (r->params.op == CR_OP_COUNT && !p->scatter && b && b->sink_open && r->alloc.devices > 0) { /* a tensor */
        size_t staging = 0;
        cr_sink *s = b->sink_open((size_t)p->h.data_bytes, sink_device_for(r), &staging);
        if (s && cr_mem_charge(CR_MEM_DECODE, staging, p->name, err) != 0) {
            b->sink_free(s);
            return -1;
        }
        p->sink = s;
        p->staging = s ? staging : 0;
        return 0;
    }
    if (!b || !b->sink_open || r->alloc.devices < 1 || r->params.op == CR_OP_HISTOGRAM || p->scatter ||
        r->params.kernel.mode == CR_KERNEL_ALL)
        return 0;
    size_t staging = 0;
    cr_sink *s = b->sink_open((size_t)p->h.data_bytes, sink_device_for(r), &staging);
    if (!s)
        return 0;
    if (cr_mem_charge(CR_MEM_DECODE, staging, p->name, err) != 0) {
        b->sink_free(s);
        return -1;
    }
    p->sink = s;
    p->staging = staging;
    return 0;
}

static int sink_failed(cr_bin_request *r, cr_bin_part *p, cr_error *err)
{
    drop_sink(r, p);
    return cr_fail(err, 503, "device_fault", p->name, "copying %s to device %d failed", p->name, r->sink_device);
}

/* Every byte of the part is on the device: the request's slot holds the buffer from now on. */
static int sink_done(cr_bin_request *r, cr_bin_part *p, cr_error *err)
{
    void *dev = NULL;
    int device = -1;
    if (r->alloc.sink->sink_finish(p->sink, &dev, &device) != 0)
        return sink_failed(r, p, err);
    cr_mem_release(CR_MEM_DECODE, p->staging);
    cr_request_adopt_buf(&r->req, p->slot, dev, (size_t)p->h.data_bytes, r->alloc.sink->sink_free, p->sink);
    p->sink = NULL;
    p->staging = 0;
    p->data = dev;
    r->device_bytes += p->h.data_bytes;
    return cr_request_mark_device(&r->req, p->slot, device, err);
}

/* n bytes committed to the sink's space. */
static int sink_advance(cr_bin_request *r, cr_bin_part *p, size_t n, cr_error *err)
{
    if (r->alloc.sink->sink_commit(p->sink, n) != 0)
        return sink_failed(r, p, err);
    p->received += n;
    return p->received == p->h.data_bytes ? sink_done(r, p, err) : 0;
}

static int sink_copy(cr_bin_request *r, cr_bin_part *p, const char *data, size_t n, cr_error *err)
{
    while (n) {
        size_t room = 0;
        char *dst = r->alloc.sink->sink_space(p->sink, &room);
        if (!dst)
            return sink_failed(r, p, err);
        size_t k = room < n ? room : n;
        memcpy(dst, data, k);
        if (sink_advance(r, p, k, err) != 0)
            return -1;
        data += k;
        n -= k;
    }
    return 0;
}

static int header_parsed(cr_bin_request *r, cr_bin_part *p, cr_error *err)
{
    p->header_done = true;
    free(p->hdr);
    p->hdr = NULL;
    if (apply_bf16(r, p, err) || check_part(r, p, err) || check_limits(r, p, err))
        return -1;
    /* a 2-D a or b in Fortran order is read as its transpose (finish_gemm flips the flag) */
    p->scatter = p->h.fortran_order && r->params.op != CR_OP_HISTOGRAM &&
                 (p->h.ndim > 2 || (p->h.ndim == 2 && (strcmp(p->name, "c") == 0 || r->params.op == CR_OP_COUNT)));
    if (open_sink(r, p, err) != 0)
        return -1;
    return p->sink || alloc_array(r, p, p->h.data_bytes, err) ? 0 : -1;
}

/* A tensor upload's raw bytes are ?shape= of ?dtype= (default: that many uint8). */
static int raw_shape(cr_bin_request *r, cr_bin_part *p, uint64_t bytes, cr_error *err)
{
    const cr_params *q = &r->params;
    p->h.dtype = q->tensor_upload ? q->raw_dtype : CR_DT_U8;
    size_t es = cr_dtype_size(p->h.dtype);
    if (!q->has_shape) {
        if (bytes % es)
            return cr_fail(err, 400, "invalid_field", "Content-Length", "%llu bytes are not whole %s elements",
                           (unsigned long long)bytes, cr_dtype_name(p->h.dtype));
        p->h.ndim = 1;
        p->h.shape[0] = (int64_t)(bytes / es);
    } else {
        p->h.ndim = q->shape_rank;
        uint64_t count = 1;
        for (int d = 0; d < q->shape_rank; d++) {
            p->h.shape[d] = q->shape[d];
            if (__builtin_mul_overflow(count, (uint64_t)q->shape[d], &count))
                count = UINT64_MAX;
        }
        if (count == UINT64_MAX || count * es != bytes)
            return cr_fail(err, 400, "invalid_field", "shape", "shape and dtype make %llu elements of %zu bytes, the "
                           "body has %llu bytes", (unsigned long long)count, es, (unsigned long long)bytes);
    }
    p->h.count = bytes / es;
    p->h.data_bytes = bytes;
    return 0;
}

cr_bin_part *cr_bin_start_raw(cr_bin_request *r, uint64_t bytes, cr_error *err)
{
    cr_bin_part *p = cr_bin_start(r, "data", err);
    if (!p)
        return NULL;
    p->raw = true;
    return raw_shape(r, p, bytes, err) || header_parsed(r, p, err) ? NULL : p;
}

/* Gathers header bytes until the parser can decide; returns how many of data it took. */
static int64_t feed_header(cr_bin_request *r, cr_bin_part *p, const char *data, size_t n,
                           cr_error *err)
{
    size_t took = 0;
    for (;;) {
        size_t want = p->hdr_need - p->hdr_len, k = want < n - took ? want : n - took;
        if (k) {
            uint8_t *grown = realloc(p->hdr, p->hdr_need);
            if (!grown)
                return cr_fail(err, 503, "host_memory", p->name, "out of memory");
            p->hdr = grown;
            memcpy(p->hdr + p->hdr_len, data + took, k);
            p->hdr_len += k;
            took += k;
        }
        if (p->hdr_len < p->hdr_need)
            return (int64_t)took; /* the chunk ended inside the header */
        size_t need = 0;
        cr_npy_status st = cr_npy_parse_header(p->hdr, p->hdr_len, p->name, &p->h, &need, err);
        if (st == CR_NPY_BAD)
            return -1;
        if (st == CR_NPY_OK)
            return header_parsed(r, p, err) ? -1 : (int64_t)took;
        p->hdr_need = need;
    }
}

/* Element e of a Fortran-ordered array (its first index fastest) goes to its C-order place. */
static uint64_t c_order_index(const cr_npy_header *h, uint64_t e)
{
    uint64_t at = 0, stride = 1;
    int64_t idx[CR_NPY_MAX_DIMS];
    for (int d = 0; d < h->ndim; d++) {
        idx[d] = (int64_t)(e % (uint64_t)h->shape[d]);
        e /= (uint64_t)h->shape[d];
    }
    for (int d = h->ndim - 1; d >= 0; d--) {
        at += (uint64_t)idx[d] * stride;
        stride *= (uint64_t)h->shape[d];
    }
    return at;
}

static void scatter_elements(cr_bin_part *p, const uint8_t *src, size_t n_elems, uint64_t e)
{
    size_t es = cr_dtype_size(p->h.dtype);
    for (size_t i = 0; i < n_elems; i++, e++)
        memcpy((uint8_t *)p->data + c_order_index(&p->h, e) * es, src + i * es, es);
}

static void scatter_copy(cr_bin_part *p, const uint8_t *src, size_t n)
{
    size_t es = cr_dtype_size(p->h.dtype);
    while (n) {
        if (p->carry_len || n < es) { /* finish or start a split element */
            size_t k = es - p->carry_len < n ? es - p->carry_len : n;
            memcpy(p->carry + p->carry_len, src, k);
            p->carry_len += k;
            p->received += k;
            src += k;
            n -= k;
            if (p->carry_len == es) {
                scatter_elements(p, p->carry, 1, p->received / es - 1);
                p->carry_len = 0;
            }
            continue;
        }
        size_t whole = n / es;
        scatter_elements(p, src, whole, p->received / es);
        p->received += whole * es;
        src += whole * es;
        n -= whole * es;
    }
}

/* A part streamed into the backend's pinned blocks is read next by the copy engine, not by this
 * core: streaming stores skip the read of each line that a cached store makes first (134 MB of
 * .npy over a Unix socket, H200 machine: receive 37-44 ms with memcpy, 33-35 ms with these).
 * Small parts are left to memcpy, where the stores' fence and the bypassed cache cost more. */
#define STREAMING_PART_MIN (256u << 10)

int cr_bin_feed(cr_bin_request *r, cr_bin_part *p, const char *data, size_t n, cr_error *err)
{
    if (!p->header_done) {
        int64_t took = feed_header(r, p, data, n, err);
        if (took < 0)
            return -1;
        data += took;
        n -= (size_t)took;
    }
    if (!n)
        return 0;
    if (n > p->h.data_bytes - p->received)
        return cr_fail(err, 400, "invalid_field", p->name,
                       "%s has more data than its %s declares (%llu bytes)", p->name,
                       p->raw ? "Content-Length" : ".npy header",
                       (unsigned long long)p->h.data_bytes);
    if (p->scatter) {
        scatter_copy(p, (const uint8_t *)data, n);
        return 0;
    }
    if (p->sink)
        return sink_copy(r, p, data, n, err);
    /* only the backend's own blocks (not the malloc fallback); a scattered part is final only
     * at the end, so it never gets here */
    bool staged = r->alloc.ready && r->req.buf_free[p->slot];
    if (staged && p->h.data_bytes >= STREAMING_PART_MIN)
        cr_copy_streaming((char *)p->data + p->received, data, n);
    else
        memcpy((char *)p->data + p->received, data, n);
    p->received += n;
    if (staged)
        r->alloc.ready(p->data, (size_t)p->received, (size_t)p->h.data_bytes);
    return 0;
}

void *cr_bin_span(const cr_bin_request *r, const cr_bin_part *p, size_t *len)
{
    if (!p || !p->header_done || p->scatter || p->received >= p->h.data_bytes)
        return NULL;
    if (p->sink)
        return r->alloc.sink->sink_space(p->sink, len);
    uint64_t left = p->h.data_bytes - p->received;
    *len = left > SIZE_MAX ? SIZE_MAX : (size_t)left;
    return (char *)p->data + p->received;
}

size_t cr_bin_buffered_need(const cr_bin_part *p)
{
    if (!p->header_done)
        return p->hdr_need > p->hdr_len ? p->hdr_need - p->hdr_len : 1;
    return p->scatter && p->received < p->h.data_bytes ? SIZE_MAX : 0;
}

int cr_bin_spanned(cr_bin_request *r, cr_bin_part *p, size_t n, cr_error *err)
{
    if (p->sink)
        return sink_advance(r, p, n, err);
    p->received += n;
    if (r->alloc.ready && r->req.buf_free[p->slot])
        r->alloc.ready(p->data, (size_t)p->received, (size_t)p->h.data_bytes);
    return 0;
}

uint64_t cr_bin_device_bytes(const cr_bin_request *r) { return r ? r->device_bytes : 0; }

/* ---- the request ------------------------------------------------------------------------------ */

static int check_complete(const cr_bin_part *p, cr_error *err)
{
    if (!p->header_done)
        return cr_fail(err, 400, "invalid_field", p->name,
                       "%s ends inside its .npy header (%zu bytes): truncated", p->name,
                       p->hdr_len);
    if (p->received != p->h.data_bytes)
        return cr_fail(err, 400, "invalid_field", p->name,
                       "%s is truncated: its %s declares %llu bytes of data, %llu arrived",
                       p->name, p->raw ? "Content-Length" : ".npy header",
                       (unsigned long long)p->h.data_bytes, (unsigned long long)p->received);
    return 0;
}

/* Output elements and bytes against the limits, as the JSON decoder checks them. */
static int check_output(cr_bin_request *r, uint64_t elems, size_t es, const char *field, cr_error *err)
{
    uint64_t bytes, sum;
    if (elems > r->lim.max_elements)
        return cr_fail(err, 413, "too_large", field, "the result would have %llu elements, over the limit of %llu",
                       (unsigned long long)elems, (unsigned long long)r->lim.max_elements);
    if (__builtin_mul_overflow(elems, (uint64_t)es, &bytes) ||
        __builtin_add_overflow(r->input_bytes, bytes, &sum) || sum > r->lim.max_total_bytes)
        return cr_fail(err, 413, "too_large", field,
                       "inputs and output together exceed the limit of %llu bytes (at %s)",
                       (unsigned long long)r->lim.max_total_bytes, field);
    return 0;
}

/* An operand as the task takes it: a part (a 2-D one in Fortran order is the C-ordered transpose:
 * the task's flag is flipped instead of moving data; a scattered one is in C order by now), or a
 * resident tensor the query named. */
typedef struct {
    bool present;
    cr_shape shape;
    bool flip;
    cr_dtype dt;
    void *data;
    int64_t count;
} operand;

static int operand_of(cr_bin_request *r, int slot, const char *name, bool required, operand *o, cr_error *err)
{
    memset(o, 0, sizeof *o);
    const cr_bin_part *p = find_part(r, name);
    struct cr_tensor *t = r->tensor[slot];
    if (t) {
        *o = (operand){true, *cr_tensor_shape(t), false, cr_tensor_dtype(t), cr_tensor_data(t),
                       (int64_t)cr_shape_count(cr_tensor_shape(t))};
        return 0;
    }
    if (!p)
        return required ? cr_fail(err, 400, "missing_field", name, "part %s is required (or a tensor_%s)", name, name)
                        : 0;
    o->present = true;
    o->shape = part_shape(p);
    o->flip = p->h.fortran_order && p->h.ndim == 2 && !p->scatter;
    if (o->flip) {
        o->shape.dims[0] = p->h.shape[1];
        o->shape.dims[1] = p->h.shape[0];
    }
    o->dt = p->h.dtype;
    o->data = p->data;
    o->count = (int64_t)p->h.count;
    return 0;
}

/* One dtype for all operands (parts check each other as they arrive; tensors are checked here). */
static int same_dtype(const operand *ops, const char *const *names, int n, cr_error *err)
{
    for (int i = 1; i < n; i++)
        if (ops[i].present && ops[i].dt != ops[0].dt)
            return cr_fail(err, 400, "invalid_field", names[i], "%s is %s but a is %s: one dtype for all matrices",
                           names[i], cr_dtype_name(ops[i].dt), cr_dtype_name(ops[0].dt));
    return 0;
}

/* The held tensors become the request's slots (their holds move with them). */
static int bind_tensors(cr_bin_request *r, cr_error *err)
{
    for (int k = 0; k < MAX_PARTS; k++) {
        if (!r->tensor[k])
            continue;
        struct cr_tensor *t = r->tensor[k];
        r->tensor[k] = NULL;
        if (cr_request_bind_tensor(&r->req, k, t, err))
            return -1;
    }
    return 0;
}

/* c broadcast within its matrices, expanded into whole ones in slot C (host memory only). */
static int expand_c(cr_bin_request *r, const operand *c, const cr_shape *c_full, cr_error *err)
{
    if (r->req.buf_on_device[BUF_C] || (r->tensor[BUF_C] && cr_tensor_device(r->tensor[BUF_C]) >= 0))
        return cr_fail(err, 400, "invalid_field", "c", "c broadcasts within its matrices and lies in device memory: "
                       "send it whole (shape %lld x %lld)", (long long)r->req.task.u.gemm.m,
                       (long long)r->req.task.u.gemm.n);
    size_t es = cr_dtype_size(c->dt), n = (size_t)c->count;
    void *copy = malloc(n * es + 1);
    if (!copy)
        return cr_fail(err, 503, "host_memory", "c", "out of memory");
    memcpy(copy, c->data, n * es);
    cr_tensor_release(r->tensor[BUF_C]); /* its bytes are copied: the expanded c is the request's own */
    r->tensor[BUF_C] = NULL;
    cr_shape e = cr_expanded_c_shape(c_full, &r->req.task);
    void *p = cr_request_alloc_from(&r->req, BUF_C, (size_t)cr_shape_count(&e) * es, false, r->alloc.alloc,
                                    r->alloc.free, err);
    if (p)
        cr_expand_c(copy, c_full, &r->req.task, p, es);
    free(copy);
    r->req.task.u.gemm.c_in = p;
    return p ? 0 : -1;
}

static int finish_gemm(cr_bin_request *r, cr_error *err)
{
    static const char *const names[3] = {"a", "b", "c"};
    cr_gemm_task *g = &r->req.task.u.gemm;
    const cr_params *q = &r->params;
    operand o[3];
    if (operand_of(r, BUF_A, "a", true, &o[0], err) || operand_of(r, BUF_B, "b", true, &o[1], err) ||
        operand_of(r, BUF_C, "c", false, &o[2], err) || same_dtype(o, names, 3, err))
        return -1;
    bool c_expand;
    cr_shape c_full;
    /* trans and Fortran order cancel on a 2-D operand: the task's flag says how its bytes lie */
    if (cr_matmul_plan(&o[0].shape, &o[1].shape, o[2].present ? &o[2].shape : NULL, q->trans_a != o[0].flip,
                       q->trans_b != o[1].flip, &r->req.task, &r->req.out_shape, &c_full, &c_expand, err))
        return -1;
    r->req.shaped = true;
    if (check_output(r, cr_shape_count(&r->req.out_shape), cr_dtype_size(o[0].dt), "b", err))
        return -1;
    r->req.task.dtype = o[0].dt;
    if (q->tf32_asked && o[0].dt != CR_DT_F32)
        return cr_fail(err, 400, "unsupported", "precision",
                       "precision tf32 needs float32 matrices, not %s", cr_dtype_name(o[0].dt));
    r->req.task.precision = q->tf32_asked ? CR_PREC_TF32 : CR_PREC_DEFAULT;
    g->alpha = q->alpha;
    g->beta = q->beta;
    g->a = o[0].data;
    g->b = o[1].data;
    g->c_in = o[2].present ? o[2].data : NULL;
    if (o[2].present && c_expand && expand_c(r, &o[2], &c_full, err))
        return -1;
    return bind_tensors(r, err);
}

static int finish_ata(cr_bin_request *r, cr_error *err)
{
    cr_ata_task *t = &r->req.task.u.ata;
    operand a;
    if (operand_of(r, BUF_A, "a", true, &a, err) || cr_ata_plan(&a.shape, a.flip, &r->req.task, &r->req.out_shape, err))
        return -1;
    if (a.dt != CR_DT_F32 && a.dt != CR_DT_F64)
        return cr_fail(err, 400, "invalid_field", "a", "a must be float32 or float64, got %s", cr_dtype_name(a.dt));
    r->req.shaped = true;
    t->a = a.data;
    r->req.task.dtype = a.dt;
    return check_output(r, cr_shape_count(&r->req.out_shape), cr_dtype_size(a.dt), "a", err) || bind_tensors(r, err)
               ? -1
               : 0;
}

/* numpy.histogram's defaults, except uint8: 256 bins, one per byte value (as the JSON form). */
static int finish_histogram(cr_bin_request *r, cr_error *err)
{
    cr_hist_task *h = &r->req.task.u.hist;
    const cr_params *q = &r->params;
    operand d;
    if (operand_of(r, BUF_A, "data", true, &d, err))
        return -1;
    cr_dtype dt = d.dt;
    r->req.task.dtype = dt;
    r->req.is_float_hist = dt != CR_DT_U8; /* edges in the answer, as numpy gives them */
    h->data = d.data;
    h->count = d.count;
    h->bins = q->bins ? q->bins : dt == CR_DT_U8 ? 256 : 10;
    if (check_output(r, (uint64_t)h->bins, sizeof(uint64_t), "bins", err))
        return -1;
    if (r->tensor[BUF_A] && cr_tensor_device(r->tensor[BUF_A]) >= 0 && r->req.is_float_hist)
        return cr_fail(err, 400, "unsupported", "tensor_data", "float histogram data in device memory is not "
                       "supported (its NaN and range checks run on the host): send it in the body");
    if (bind_tensors(r, err))
        return -1;
    if (!q->has_range && dt == CR_DT_U8) { /* the byte domain: bin i holds byte value i */
        h->lo = 0.0;
        h->hi = 256.0;
        return 0;
    }
    h->lo = q->lo;
    h->hi = q->hi;
    int64_t nan_at = q->has_range ? cr_hist_first_nan(h->data, h->count, dt) : -1;
    if (nan_at >= 0) /* without a range, the range of the data refuses it below */
        return cr_fail(err, 400, "non_finite", "data",
                       "input data holds NaN (element %lld): a histogram has no bin for it", (long long)nan_at);
    cr_range_status st = q->has_range ? cr_hist_range_fix(&h->lo, &h->hi, dt)
                                      : cr_hist_range_of_data(h->data, h->count, dt, &h->lo, &h->hi);
    if (st == CR_RANGE_OK)
        return 0;
    if (st == CR_RANGE_DATA)
        return cr_fail(err, 400, "invalid_field", "data",
                       "data holds NaN or infinity, so it has no range; give range=lo,hi");
    char why[160];
    cr_hist_range_explain(st, h->lo, h->hi, why, sizeof why);
    return q->has_range ? cr_fail(err, 400, "invalid_parameter", "range", "%s", why)
                        : cr_fail(err, 400, "invalid_field", "data", "no default range: %s", why);
}

int cr_bin_finish_array(cr_bin_request *r, cr_request *out, cr_shape *shape, cr_dtype *dt, cr_error *err)
{
    const cr_bin_part *p = r->n_parts ? &r->parts[0] : NULL;
    if (!p)
        return cr_fail(err, 400, "missing_field", "body", "the body holds no array");
    if (check_complete(p, err))
        return -1;
    *shape = part_shape(p); /* C order: a Fortran-ordered array was scattered into it */
    *dt = p->h.dtype;
    *out = r->req;
    memset(&r->req, 0, sizeof r->req);
    return 0;
}

int cr_bin_finish(cr_bin_request *r, cr_request *out, cr_error *err)
{
    for (int i = 0; i < r->n_parts; i++)
        if (check_complete(&r->parts[i], err))
            return -1;
    cr_request *q = &r->req;
    q->task.op = r->params.op;
    q->task.kernel = NULL; /* the engine resolves q->kernel */
    q->kernel = r->params.kernel;
    q->timeout_ms = r->params.timeout_ms;
    int rc = q->task.op == CR_OP_GEMM  ? finish_gemm(r, err)
             : q->task.op == CR_OP_ATA ? finish_ata(r, err)
                                       : finish_histogram(r, err);
    if (rc)
        return -1;
    q->out_alloc = r->alloc.alloc;
    q->out_free = r->alloc.free;
    *out = *q;
    memset(q, 0, sizeof *q);
    return 0;
}
