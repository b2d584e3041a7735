/* Streams; see streams.h. */
#include "server/engine/streams.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "server/clock.h"
#include "server/engine/owned.h"
#include "server/obs/log.h"
#include "server/obs/metrics.h"

enum { SEQ_EMPTY, SEQ_IN_FLIGHT, SEQ_ABSORBED };

typedef struct {
    uint64_t seq, digest;
    int state;
} seq_slot;

struct cr_stream {
    cr_owned node; /* first: the list's node is the stream; node.name is id */
    char id[37];
    cr_job *job;   /* a reference: its output buffer is the accumulator */
    cr_stream_spec spec;
    pthread_mutex_t mu; /* guards what follows */
    seq_slot *seqs;     /* open addressing by seq, cap a power of two */
    size_t cap, used;
    cr_stream_progress prog;
    bool ended;         /* published, abandoned or failed: no part is folded any more */
    const cr_kernel *kernel; /* the last part's: the answer names it */
    char device[128];
    double h2d_ms, kernel_ms, d2h_ms;
};

static void free_stream(cr_owned *o);
static cr_owned_list streams = CR_OWNED_LIST(free_stream);
static cr_stream_limits limits;

void cr_streams_init(const cr_stream_limits *lim)
{
    limits = *lim;
    cr_owned_caps caps = {.max_bytes = lim->max_bytes, .owner_max_bytes = lim->client_max_bytes,
                          .max_count = lim->max_count, .idle_s = 0 /* streams.c fails them itself */,
                          .what = "stream", .code = "stream_limit", .max_flag = "--stream-max-mb",
                          .owner_flag = "--stream-client-max-mb"};
    cr_owned_set_caps(&streams, &caps);
}

static void free_stream(cr_owned *o)
{
    cr_stream *s = (cr_stream *)o;
    pthread_mutex_destroy(&s->mu);
    free(s->seqs);
    cr_job_release(s->job);
    free(s);
}

/* ---- the accumulator -------------------------------------------------------------------------- */

static size_t acc_elem(const cr_stream_spec *sp)
{
    return sp->op == CR_OP_HISTOGRAM ? sizeof(uint64_t) : sp->acc_f32 ? sizeof(float) : sizeof(double);
}

static uint64_t acc_count(const cr_stream_spec *sp)
{
    return sp->op == CR_OP_HISTOGRAM ? (uint64_t)sp->bins : (uint64_t)sp->cols * (uint64_t)sp->cols;
}

/* The job's request as its answer will read it: the task of the whole stream, its output the
 * accumulator (AᵀA in the accumulator's dtype). */
static void shape_job(cr_job *j, const cr_stream_spec *sp, void *acc)
{
    cr_task *t = &j->req.task;
    t->op = sp->op;
    j->req.kernel = sp->kernel;
    if (sp->op == CR_OP_ATA) {
        t->dtype = sp->acc_f32 ? CR_DT_F32 : CR_DT_F64;
        t->u.ata.n = sp->cols;
        t->u.ata.c_out = acc;
    } else {
        t->dtype = sp->dtype;
        t->u.hist.bins = sp->bins;
        t->u.hist.lo = sp->lo;
        t->u.hist.hi = sp->hi;
        t->u.hist.counts = acc;
        j->req.is_float_hist = sp->dtype != CR_DT_U8;
    }
}

int cr_stream_open(cr_job *j, const char *owner, const cr_stream_spec *spec, cr_error *err)
{
    uint64_t bytes = acc_count(spec) * acc_elem(spec);
    cr_stream *s = calloc(1, sizeof *s);
    if (!s)
        return cr_fail(err, 503, "host_memory", "", "out of memory");
    void *acc = cr_request_alloc_buf(&j->req, CR_BUF_OUTPUT, (size_t)bytes, true, err);
    if (!acc) {
        free(s);
        return -1;
    }
    memcpy(s->id, j->id, sizeof s->id);
    s->node.name = s->id;
    snprintf(s->node.owner, sizeof s->node.owner, "%s", owner);
    s->node.byte_size = bytes;
    s->node.last_used = cr_now();
    s->spec = *spec;
    s->prog.opened_at = s->node.last_used;
    s->prog.idle_s = limits.idle_s;
    pthread_mutex_lock(&streams.mu);
    int rc = cr_owned_admit_locked(&streams, owner, bytes, spec->op == CR_OP_ATA ? "cols" : "bins", err);
    if (rc == 0) {
        pthread_mutex_init(&s->mu, NULL);
        shape_job(j, spec, acc);
        atomic_store(&j->state, CR_JOB_RUNNING);
        j->started_at = j->enqueued_at = s->node.last_used;
        cr_job_ref(j);
        s->job = j;
        cr_owned_append_locked(&streams, &s->node);
    }
    pthread_mutex_unlock(&streams.mu);
    if (rc) {
        cr_request_free_buf(&j->req, CR_BUF_OUTPUT);
        free(s);
    }
    return rc;
}

/* ---- finding one ------------------------------------------------------------------------------ */

cr_stream *cr_stream_acquire(const char *owner, const char *id, bool finishing_ok, cr_error *err)
{
    pthread_mutex_lock(&streams.mu);
    cr_stream *s = (cr_stream *)cr_owned_find_locked(&streams, id);
    if (s && strcmp(s->node.owner, owner) != 0)
        s = NULL;
    if (s)
        cr_owned_hold_locked(&s->node);
    pthread_mutex_unlock(&streams.mu);
    if (!s) {
        cr_fail(err, 404, "not_found", "id", "no open stream %.40s of yours (finished, deleted, expired, or on "
                "another replica)", id);
        return NULL;
    }
    pthread_mutex_lock(&s->mu);
    bool closed = s->prog.finishing && !finishing_ok;
    pthread_mutex_unlock(&s->mu);
    if (closed) {
        cr_stream_release(s);
        cr_fail(err, 409, "stream_closed", "id", "the stream is finishing: it takes no more parts");
        return NULL;
    }
    return s;
}

void cr_stream_release(cr_stream *s)
{
    if (s)
        cr_owned_release(&streams, &s->node, cr_now());
}

void cr_stream_hold(cr_stream *s)
{
    pthread_mutex_lock(&streams.mu);
    cr_owned_hold_locked(&s->node);
    pthread_mutex_unlock(&streams.mu);
}

const cr_stream_spec *cr_stream_spec_of(const cr_stream *s) { return &s->spec; }

void cr_stream_progress_of(cr_stream *s, cr_stream_progress *out)
{
    pthread_mutex_lock(&s->mu);
    *out = s->prog;
    pthread_mutex_unlock(&s->mu);
}

cr_stream *cr_job_stream(const cr_job *j)
{
    pthread_mutex_lock(&streams.mu);
    cr_stream *s = (cr_stream *)cr_owned_find_locked(&streams, j->id);
    if (s)
        cr_owned_hold_locked(&s->node);
    pthread_mutex_unlock(&streams.mu);
    return s;
}

/* ---- parts ------------------------------------------------------------------------------------ */

/* Four independent multiply-xorshift lanes over 8-byte words (a single chain would run at a
 * third of the memory's rate), folded together with the length. Not cryptographic: it tells a
 * retry from a different part, which is all a seq needs. */
uint64_t cr_stream_digest(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h[4] = {0x9E3779B97F4A7C15ull, 0xC2B2AE3D27D4EB4Full, 0x165667B19E3779F9ull, 0x27D4EB2F165667C5ull};
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int l = 0; l < 4; l++) {
            uint64_t w;
            memcpy(&w, b + i + 8 * l, 8);
            h[l] = (h[l] ^ w) * 0xFF51AFD7ED558CCDull;
            h[l] ^= h[l] >> 29;
        }
    uint64_t tail = 0;
    for (size_t k = 0; i < n; i++, k++)
        tail ^= (uint64_t)b[i] << (8 * (k % 8));
    uint64_t d = n ^ (tail * 0xC4CEB9FE1A85EC53ull);
    for (int l = 0; l < 4; l++)
        d = (d ^ h[l]) * 0x9E3779B97F4A7C15ull, d ^= d >> 31;
    return d;
}

static seq_slot *slot_locked(cr_stream *s, uint64_t seq)
{
    size_t mask = s->cap - 1, i = (size_t)(seq * 0x9E3779B97F4A7C15ull >> 17) & mask;
    while (s->seqs[i].state != SEQ_EMPTY && s->seqs[i].seq != seq)
        i = (i + 1) & mask;
    return &s->seqs[i];
}

static int grow_locked(cr_stream *s)
{
    if (s->cap && (s->used + 1) * 4 < s->cap * 3)
        return 0;
    size_t cap = s->cap ? s->cap * 2 : 64;
    seq_slot *old = s->seqs, *grown = calloc(cap, sizeof *grown);
    if (!grown)
        return -1;
    size_t old_cap = s->cap;
    s->seqs = grown;
    s->cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].state != SEQ_EMPTY)
            *slot_locked(s, old[i].seq) = old[i];
    free(old);
    return 0;
}

int cr_stream_part_begin(cr_stream *s, uint64_t seq, cr_part_admit *admit, cr_error *err)
{
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    seq_slot *x = s->ended || grow_locked(s) ? NULL : slot_locked(s, seq);
    if (!x)
        rc = s->ended ? cr_fail(err, 409, "stream_closed", "id", "the stream has ended")
                      : cr_fail(err, 503, "host_memory", "", "out of memory");
    else if (x->state == SEQ_ABSORBED)
        *admit = CR_PART_REPEAT;
    else if (x->state == SEQ_IN_FLIGHT)
        rc = cr_fail(err, 409, "in_use", "seq", "part %llu is being absorbed now; send it again once that answer "
                     "came (a repeat is acknowledged)", (unsigned long long)seq);
    else if (s->prog.finishing)
        rc = cr_fail(err, 409, "stream_closed", "id", "the stream is finishing: it takes no more parts");
    else {
        *x = (seq_slot){seq, 0, SEQ_IN_FLIGHT};
        s->used++;
        s->prog.in_flight++;
        *admit = CR_PART_NEW;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int cr_stream_part_repeat(cr_stream *s, uint64_t seq, uint64_t digest, cr_error *err)
{
    pthread_mutex_lock(&s->mu);
    seq_slot *x = s->cap ? slot_locked(s, seq) : NULL;
    bool same = x && x->state == SEQ_ABSORBED && x->digest == digest;
    if (same)
        s->prog.duplicates++;
    pthread_mutex_unlock(&s->mu);
    return same ? 0 : cr_fail(err, 409, "part_conflict", "seq", "part %llu was absorbed with other bytes: a seq "
                              "names one part", (unsigned long long)seq);
}

/* The part's AᵀA (its dtype) added into the accumulator (the stream's). */
static void fold_ata(cr_stream *s, const cr_task *t)
{
    size_t count = (size_t)(s->spec.cols * s->spec.cols);
    const void *part = t->u.ata.c_out;
    void *acc = s->job->req.task.u.ata.c_out;
    if (s->spec.acc_f32) {
        float *a = acc;
        for (size_t i = 0; i < count; i++)
            a[i] += t->dtype == CR_DT_F32 ? ((const float *)part)[i] : (float)((const double *)part)[i];
    } else if (t->dtype == CR_DT_F32) {
        double *a = acc;
        for (size_t i = 0; i < count; i++)
            a[i] += ((const float *)part)[i];
    } else {
        double *a = acc;
        for (size_t i = 0; i < count; i++)
            a[i] += ((const double *)part)[i];
    }
}

static void fold_hist(cr_stream *s, const cr_task *t)
{
    uint64_t *acc = s->job->req.task.u.hist.counts;
    for (int32_t i = 0; i < s->spec.bins; i++)
        acc[i] += t->u.hist.counts[i];
}

/* The stream's end: out of the list (freed when its last hold goes). */
static void unlist(cr_stream *s, bool expired)
{
    cr_owned *free_now = NULL;
    pthread_mutex_lock(&streams.mu);
    if (cr_owned_find_locked(&streams, s->id) == &s->node) {
        if (expired)
            streams.expired++;
        cr_owned_remove_locked(&streams, &s->node, &free_now);
    }
    pthread_mutex_unlock(&streams.mu);
    if (free_now)
        free_stream(free_now);
}

/* With s->mu held, once: the accumulator becomes the job's result. */
static void publish_locked(cr_stream *s)
{
    cr_job *j = s->job;
    s->ended = true;
    j->req.task.kernel = s->kernel;
    if (s->spec.op == CR_OP_ATA)
        j->req.task.u.ata.m = (int64_t)s->prog.rows;
    else
        j->req.task.u.hist.count = (int64_t)s->prog.values;
    j->ran = s->kernel != NULL;
    snprintf(j->device, sizeof j->device, "%s", s->device);
    j->ms.h2d = s->h2d_ms;
    j->ms.kernel = s->kernel_ms;
    j->ms.d2h = s->d2h_ms;
    j->finished_at = cr_now();
    j->ms.total = (j->finished_at - s->prog.opened_at) * 1e3;
    atomic_store(&j->state, CR_JOB_DONE);
}

static void fail_locked(cr_stream *s, const cr_error *err)
{
    cr_job *j = s->job;
    s->ended = true;
    j->error = *err;
    j->finished_at = cr_now();
    j->ms.total = (j->finished_at - s->prog.opened_at) * 1e3;
    cr_request_free_buf(&j->req, CR_BUF_OUTPUT); /* a failed stream keeps nothing */
    memset(&j->req.task.u, 0, sizeof j->req.task.u);
    /* its client stopped sending (or is told so by the drain): no drain waits for it to look */
    atomic_store(&j->fetched, true);
    atomic_store(&j->state, CR_JOB_FAILED);
}

/* The seq's slot after its part ends: absorbed, or free for another try. */
static void end_part_locked(cr_stream *s, uint64_t seq, bool absorbed, uint64_t digest)
{
    seq_slot *x = slot_locked(s, seq);
    if (x->state != SEQ_IN_FLIGHT)
        return;
    x->state = absorbed ? SEQ_ABSORBED : SEQ_EMPTY;
    x->digest = digest;
    s->prog.in_flight--;
    if (!absorbed) { /* open addressing: re-place what follows the hole */
        size_t mask = s->cap - 1, i = (size_t)(x - s->seqs);
        s->used--;
        for (size_t k = (i + 1) & mask; s->seqs[k].state != SEQ_EMPTY; k = (k + 1) & mask) {
            seq_slot moved = s->seqs[k];
            s->seqs[k].state = SEQ_EMPTY;
            *slot_locked(s, moved.seq) = moved;
        }
    }
}

void cr_stream_part_done(cr_job *j)
{
    cr_stream *s = j->req.stream;
    j->req.stream = NULL;
    bool published = false;
    uint64_t digest = j->req.buf_on_device[CR_BUF_A] ? 0 : cr_stream_digest(j->req.bufs[CR_BUF_A], j->req.stream_bytes);
    pthread_mutex_lock(&s->mu);
    if (!s->ended) {
        const cr_task *t = &j->req.task;
        if (t->op == CR_OP_ATA)
            fold_ata(s, t), s->prog.rows += (uint64_t)t->u.ata.m;
        else
            fold_hist(s, t), s->prog.values += (uint64_t)t->u.hist.count;
        s->prog.parts++;
        s->prog.bytes += j->req.stream_bytes;
        s->prog.last_part_at = cr_now();
        if (!s->prog.first_part_at)
            s->prog.first_part_at = j->enqueued_at;
        s->kernel = t->kernel;
        snprintf(s->device, sizeof s->device, "%s", j->device);
        s->h2d_ms += j->ms.h2d, s->kernel_ms += j->ms.kernel, s->d2h_ms += j->ms.d2h;
        end_part_locked(s, j->req.stream_seq, true, digest);
        if (s->prog.finishing && s->prog.in_flight == 0)
            publish_locked(s), published = true;
    }
    pthread_mutex_unlock(&s->mu);
    if (published)
        unlist(s, false);
    cr_stream_release(s);
}

void cr_stream_part_drop(cr_request *r)
{
    cr_stream *s = r->stream;
    r->stream = NULL;
    bool published = false;
    pthread_mutex_lock(&s->mu);
    end_part_locked(s, r->stream_seq, false, 0);
    if (!s->ended && s->prog.finishing && s->prog.in_flight == 0)
        publish_locked(s), published = true;
    pthread_mutex_unlock(&s->mu);
    if (published)
        unlist(s, false);
    cr_stream_release(s);
}

/* ---- ends ------------------------------------------------------------------------------------- */

int cr_stream_finish(cr_stream *s, cr_error *err)
{
    int rc;
    pthread_mutex_lock(&s->mu);
    if (s->ended)
        rc = cr_fail(err, 409, "stream_closed", "id", "the stream has ended");
    else {
        s->prog.finishing = true;
        rc = s->prog.in_flight == 0;
        if (rc)
            publish_locked(s);
    }
    pthread_mutex_unlock(&s->mu);
    if (rc == 1)
        unlist(s, false);
    return rc;
}

void cr_stream_abandon(cr_stream *s)
{
    cr_error err;
    cr_fail(&err, 409, "cancelled", "", "the stream was deleted");
    pthread_mutex_lock(&s->mu);
    if (!s->ended)
        fail_locked(s, &err);
    pthread_mutex_unlock(&s->mu);
    unlist(s, false);
}

/* Every listed stream that pick() chooses, held: *n of them in a malloc'd array. */
static cr_stream **collect(bool (*pick)(cr_stream *s, double now), double now, size_t *n)
{
    *n = 0;
    pthread_mutex_lock(&streams.mu);
    cr_stream **out = malloc(sizeof *out * (streams.n + 1));
    for (cr_owned *o = streams.head; out && o; o = o->next)
        if (!o->gone && pick((cr_stream *)o, now)) {
            cr_owned_hold_locked(o);
            out[(*n)++] = (cr_stream *)o;
        }
    pthread_mutex_unlock(&streams.mu);
    return out;
}

/* Idle: no part in flight and none for idle_s (holds are parts being received or run). */
static bool is_idle(cr_stream *s, double now)
{
    pthread_mutex_lock(&s->mu);
    double last = s->prog.last_part_at > s->prog.opened_at ? s->prog.last_part_at : s->prog.opened_at;
    bool idle = limits.idle_s > 0 && !s->ended && s->prog.in_flight == 0 && now - last >= limits.idle_s &&
                s->node.holds == 0;
    pthread_mutex_unlock(&s->mu);
    return idle;
}

static bool any(cr_stream *s, double now)
{
    (void)s, (void)now;
    return true;
}

static int fail_each(cr_stream **list, size_t n, const cr_error *err, bool expired)
{
    int failed = 0;
    for (size_t i = 0; i < n; i++) {
        cr_stream *s = list[i];
        pthread_mutex_lock(&s->mu);
        bool open = !s->ended;
        if (open)
            fail_locked(s, err), failed++;
        pthread_mutex_unlock(&s->mu);
        if (open && expired)
            cr_log("info", "stream %s of %s failed: no part for %.0f s (--stream-idle-s)", s->id,
                   s->node.owner[0] ? s->node.owner : "an anonymous client", limits.idle_s);
        unlist(s, expired && open);
        cr_stream_release(s);
    }
    free(list);
    return failed;
}

int cr_streams_sweep(double now)
{
    size_t n;
    cr_stream **idle = collect(is_idle, now, &n);
    if (!n) {
        free(idle);
        return 0;
    }
    cr_error err;
    cr_fail(&err, 408, "stream_idle", "", "no part arrived for --stream-idle-s (%.0f s): the stream was dropped "
            "and its memory freed", limits.idle_s);
    return fail_each(idle, n, &err, true);
}

int cr_streams_fail_all(const cr_error *err)
{
    size_t n;
    cr_stream **all = collect(any, 0, &n);
    return fail_each(all, n, err, false);
}

uint64_t cr_streams_open(void)
{
    uint64_t n, bytes;
    cr_owned_usage(&streams, &n, &bytes);
    return n;
}

void cr_streams_usage(uint64_t *open, uint64_t *bytes, uint64_t *created, uint64_t *expired)
{
    cr_owned_usage(&streams, open, bytes);
    cr_owned_counters(&streams, created, expired);
}
