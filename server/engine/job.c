/* Job lifetime: created by the HTTP side, shared with the queue, the worker and the job table
 * through a reference count, freed by whoever lets go last. */
#include "server/engine/job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/registry.h"
#include "server/codec/numfmt.h"
#include "server/obs/log.h"
#include "server/uuid4.h"

void cr_server_timing(const cr_phase_ms *ms, char *out, size_t n)
{
    static const char *const names[] = {"receive", "queue", "h2d", "kernel", "d2h", "total"};
    const double v[] = {ms->receive, ms->queue, ms->h2d, ms->kernel, ms->d2h, ms->total};
    size_t at = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        size_t name = strlen(names[i]);
        if (at + name + 8 + CR_NUMFMT_MAX > n) /* ", " name ";dur=" number: what is left fits */
            break;
        if (i) {
            memcpy(out + at, ", ", 2);
            at += 2;
        }
        memcpy(out + at, names[i], name);
        memcpy(out + at + name, ";dur=", 5);
        at += name + 5;
        at += cr_fmt_fixed3(out + at, v[i]);
    }
}

cr_job *cr_job_new(cr_request *req, bool async)
{
    cr_job *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    cr_uuid4(j->id);
    j->req = *req;
    *req = (cr_request){0};
    j->async = async;
    atomic_init(&j->state, CR_JOB_QUEUED);
    atomic_init(&j->refs, 1);
    atomic_init(&j->fetched, false);
    return j;
}

void cr_job_ref(cr_job *j) { atomic_fetch_add(&j->refs, 1); }

void cr_job_release(cr_job *j)
{
    if (!j || atomic_fetch_sub(&j->refs, 1) != 1)
        return;
    cr_request_free(&j->req);
    free(j->compare);
    free(j);
}

bool cr_job_finished(const cr_job *j)
{
    int s = atomic_load(&j->state);
    return s == CR_JOB_DONE || s == CR_JOB_FAILED || s == CR_JOB_CANCELLED;
}

const char *cr_job_kernel_name(const cr_job *j)
{
    return j->ran && j->req.task.kernel ? j->req.task.kernel->name : NULL;
}

const char *cr_job_backend_name(const cr_job *j, const char *daemon_backend)
{
    const cr_kernel *k = j->ran ? j->req.task.kernel : NULL;
    return k && k->backend == CR_BACKEND_CPU ? cr_backend_cpu.name : daemon_backend;
}

void cr_job_log_fields(const cr_job *j, cr_log_request *r, char *shape, size_t n)
{
    cr_job_shape(j, shape, n);
    r->id = j->id;
    r->op = cr_op_name(j->req.task.op);
    r->kernel = cr_job_kernel_name(j);
    r->shape = shape;
    r->queue_ms = j->ms.queue;
    r->h2d_ms = j->ms.h2d;
    r->kernel_ms = j->ms.kernel;
    r->d2h_ms = j->ms.d2h;
}

void cr_job_shape(const cr_job *j, char *out, size_t n)
{
    const cr_task *t = &j->req.task;
    if (t->op == CR_OP_GEMM)
        snprintf(out, n, "%lldx%lldx%lld", (long long)t->u.gemm.m, (long long)t->u.gemm.n,
                 (long long)t->u.gemm.k);
    else if (t->op == CR_OP_ATA)
        snprintf(out, n, "%lldx%lld", (long long)t->u.ata.m, (long long)t->u.ata.n);
    else
        snprintf(out, n, "%lld/%d", (long long)t->u.hist.count, t->u.hist.bins);
}

size_t cr_job_bytes(const cr_job *j)
{
    size_t n = sizeof *j;
    for (int i = 0; i < CR_REQUEST_BUFS; i++)
        n += j->req.buf_bytes[i];
    return n;
}
