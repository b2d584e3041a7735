/* Metrics storage and text exposition; see metrics.h. Counters are atomics so the hot path
 * takes no lock; histograms take one short lock per observation. */
#include "server/obs/metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/memory.h"
#include "server/obs/process.h"

#define N_CODES 600
#define N_PHASES 6
static const char *const route_names[CR_ROUTE_COUNT] = {"gemm", "ata", "histogram", "jobs", "tensors", "streams", "other"};
/* receive: first byte of the request to its job queued (upload and decode) */
static const char *const phase_names[N_PHASES] = {"receive", "queue", "h2d", "kernel", "d2h", "total"};
static const double bounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,     10, 30, 60};
#define N_BOUNDS (sizeof bounds / sizeof bounds[0])

typedef struct {
    uint64_t buckets[N_BOUNDS + 1]; /* last: +Inf */
    double sum;
    uint64_t count;
} histogram;

/* Batch sizes: powers of two up to the largest --batch-max. */
static const int batch_bounds[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
#define N_BATCH_BOUNDS (sizeof batch_bounds / sizeof batch_bounds[0])

/* Request durations by route and status code: the codes a daemon answers are few, so a small
 * table found by a scan (under the lock) instead of a histogram per possible code. */
#define MAX_DURATION_SERIES 96
typedef struct {
    int route, code;
    histogram h;
} duration_series;

/* gRPC calls by method and status: a few dozen series at most (our methods, 17 codes). */
#define MAX_GRPC_SERIES 160
typedef struct {
    const char *rpc, *code;
    histogram h; /* its count is the calls' */
} grpc_series;

static struct {
    _Atomic uint64_t requests[CR_ROUTE_COUNT][N_CODES];
    duration_series req_durations[MAX_DURATION_SERIES];
    int n_req_durations;
    _Atomic uint64_t batch[CR_METRICS_MAX_DEVICES][N_BATCH_BOUNDS + 1]; /* last: +Inf */
    _Atomic uint64_t batch_jobs[CR_METRICS_MAX_DEVICES];
    _Atomic uint64_t bytes_in;
    _Atomic uint64_t grpc_in_place;
    _Atomic uint64_t slow_closed;
    _Atomic uint64_t direct[2]; /* TCP, Unix socket */
    _Atomic uint64_t device_stream[2]; /* in, out */
    grpc_series grpc[MAX_GRPC_SERIES];
    int n_grpc;
    pthread_mutex_t mu; /* guards durations, flops and the gRPC series */
    histogram durations[CR_OP_COUNT][N_PHASES];
    double flops[CR_OP_COUNT];
    uint64_t jobs[CR_OP_COUNT], matrices[CR_OP_COUNT];
} m = {.mu = PTHREAD_MUTEX_INITIALIZER};

void cr_metrics_reset(void)
{
    pthread_mutex_lock(&m.mu);
    for (int r = 0; r < CR_ROUTE_COUNT; r++)
        for (int c = 0; c < N_CODES; c++)
            atomic_store(&m.requests[r][c], 0);
    atomic_store(&m.bytes_in, 0);
    atomic_store(&m.grpc_in_place, 0);
    atomic_store(&m.slow_closed, 0);
    atomic_store(&m.direct[0], 0);
    atomic_store(&m.direct[1], 0);
    atomic_store(&m.device_stream[0], 0);
    atomic_store(&m.device_stream[1], 0);
    for (int d = 0; d < CR_METRICS_MAX_DEVICES; d++) {
        for (size_t i = 0; i <= N_BATCH_BOUNDS; i++)
            atomic_store(&m.batch[d][i], 0);
        atomic_store(&m.batch_jobs[d], 0);
    }
    memset(m.durations, 0, sizeof m.durations);
    memset(m.flops, 0, sizeof m.flops);
    memset(m.jobs, 0, sizeof m.jobs);
    memset(m.matrices, 0, sizeof m.matrices);
    memset(m.req_durations, 0, sizeof m.req_durations);
    m.n_req_durations = 0;
    memset(m.grpc, 0, sizeof m.grpc);
    m.n_grpc = 0;
    pthread_mutex_unlock(&m.mu);
}

static void observe(histogram *h, double seconds);

static void observe_request(int route, int code, double seconds)
{
    pthread_mutex_lock(&m.mu);
    duration_series *d = NULL;
    for (int i = 0; i < m.n_req_durations && !d; i++)
        if (m.req_durations[i].route == route && m.req_durations[i].code == code)
            d = &m.req_durations[i];
    if (!d && m.n_req_durations < MAX_DURATION_SERIES) {
        d = &m.req_durations[m.n_req_durations++];
        d->route = route, d->code = code;
    }
    if (d) /* beyond the table's room (codes no daemon answers): counted in requests_total only */
        observe(&d->h, seconds);
    pthread_mutex_unlock(&m.mu);
}

void cr_metrics_request(cr_route_label route, int http_status, double seconds)
{
    if ((unsigned)route >= CR_ROUTE_COUNT || http_status < 100 || http_status >= N_CODES)
        return;
    atomic_fetch_add_explicit(&m.requests[route][http_status], 1, memory_order_relaxed);
    observe_request((int)route, http_status, seconds);
}

void cr_metrics_grpc(const char *rpc, const char *code, double seconds)
{
    pthread_mutex_lock(&m.mu);
    grpc_series *g = NULL;
    for (int i = 0; i < m.n_grpc && !g; i++)
        if (strcmp(m.grpc[i].rpc, rpc) == 0 && strcmp(m.grpc[i].code, code) == 0)
            g = &m.grpc[i];
    if (!g && m.n_grpc < MAX_GRPC_SERIES) {
        g = &m.grpc[m.n_grpc++];
        g->rpc = rpc, g->code = code;
    }
    if (g)
        observe(&g->h, seconds);
    pthread_mutex_unlock(&m.mu);
}

void cr_metrics_bytes_in(uint64_t n) { atomic_fetch_add_explicit(&m.bytes_in, n, memory_order_relaxed); }

void cr_metrics_grpc_in_place(uint64_t n) { atomic_fetch_add_explicit(&m.grpc_in_place, n, memory_order_relaxed); }

void cr_metrics_slow_closed(uint64_t n) { atomic_fetch_add_explicit(&m.slow_closed, n, memory_order_relaxed); }
void cr_metrics_device_stream(bool out, uint64_t bytes)
{
    if (bytes)
        atomic_fetch_add_explicit(&m.device_stream[out], bytes, memory_order_relaxed);
}

void cr_metrics_direct(bool unix_socket)
{
    atomic_fetch_add_explicit(&m.direct[unix_socket], 1, memory_order_relaxed);
}

void cr_metrics_batch(int device, int n)
{
    if (device < 0 || device >= CR_METRICS_MAX_DEVICES || n < 1)
        return;
    size_t i = 0;
    while (i < N_BATCH_BOUNDS && n > batch_bounds[i])
        i++;
    atomic_fetch_add_explicit(&m.batch[device][i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m.batch_jobs[device], (uint64_t)n, memory_order_relaxed);
}

static void observe(histogram *h, double seconds)
{
    size_t i = 0;
    while (i < N_BOUNDS && seconds > bounds[i])
        i++;
    h->buckets[i]++;
    h->sum += seconds;
    h->count++;
}

void cr_metrics_job(cr_op op, const cr_phase_ms *ms, double flops, int64_t matrices)
{
    if ((unsigned)op >= CR_OP_COUNT)
        return;
    const double phases[N_PHASES] = {ms->receive, ms->queue, ms->h2d, ms->kernel, ms->d2h, ms->total};
    pthread_mutex_lock(&m.mu);
    for (int p = 0; p < N_PHASES; p++)
        observe(&m.durations[op][p], phases[p] / 1e3);
    m.flops[op] += flops;
    m.jobs[op]++;
    m.matrices[op] += (uint64_t)(matrices > 0 ? matrices : 1);
    pthread_mutex_unlock(&m.mu);
}

typedef struct {
    char *p;
    size_t len, cap;
    bool oom;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...)
{
    for (int attempt = 0; attempt < 2 && !t->oom; attempt++) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = (t->cap + (size_t)n + 1) * 2;
        char *q = realloc(t->p, cap);
        if (!q)
            t->oom = true;
        else
            t->p = q, t->cap = cap;
    }
}

/* One family of a single sample: its HELP and TYPE lines, then the sample. */
static void put_count(text *t, const char *name, const char *type, const char *help, uint64_t v)
{
    put(t, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", name, help, name, type, name, (unsigned long long)v);
}

static void put_real(text *t, const char *name, const char *type, const char *help, double v)
{
    put(t, "# HELP %s %s\n# TYPE %s %s\n%s %.2f\n", name, help, name, type, name, v);
}

/* Label values here are our own names and device names; escape the three characters the
 * exposition format reserves anyway. */
static void put_label_value(text *t, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            put(t, "\\%c", *v);
        else if (*v == '\n')
            put(t, "\\n");
        else
            put(t, "%c", *v);
    }
}

static void render_requests(text *t)
{
    put(t, "# HELP crunchd_requests_total HTTP requests answered, by route and status code.\n"
           "# TYPE crunchd_requests_total counter\n");
    for (int r = 0; r < CR_ROUTE_COUNT; r++)
        for (int c = 100; c < N_CODES; c++) {
            uint64_t v = atomic_load_explicit(&m.requests[r][c], memory_order_relaxed);
            if (v)
                put(t, "crunchd_requests_total{op=\"%s\",code=\"%d\"} %llu\n", route_names[r], c,
                    (unsigned long long)v);
        }
}

static void put_histogram(text *t, const char *name, const char *labels, const histogram *h)
{
    uint64_t cum = 0;
    for (size_t i = 0; i <= N_BOUNDS; i++) {
        cum += h->buckets[i];
        if (i < N_BOUNDS)
            put(t, "%s_bucket{%s,le=\"%g\"} %llu\n", name, labels, bounds[i], (unsigned long long)cum);
        else
            put(t, "%s_bucket{%s,le=\"+Inf\"} %llu\n", name, labels, (unsigned long long)cum);
    }
    put(t, "%s_sum{%s} %.9g\n", name, labels, h->sum);
    put(t, "%s_count{%s} %llu\n", name, labels, (unsigned long long)h->count);
}

/* First byte of the request (its headers) to the last of the answer handed to the socket. */
static void render_request_durations(text *t)
{
    put(t, "# HELP crunchd_request_duration_seconds HTTP requests from their first byte to the last "
           "of the answer, by route and status code.\n"
           "# TYPE crunchd_request_duration_seconds histogram\n");
    for (int i = 0; i < m.n_req_durations; i++) {
        char labels[64];
        snprintf(labels, sizeof labels, "route=\"%s\",code=\"%d\"", route_names[m.req_durations[i].route],
                 m.req_durations[i].code);
        put_histogram(t, "crunchd_request_duration_seconds", labels, &m.req_durations[i].h);
    }
}

/* Under m.mu. The rpc and code labels are our own names (grpc_methods.c, grpc_status.c). */
static void render_grpc(text *t)
{
    put(t, "# HELP crunchd_grpc_requests_total gRPC calls answered, by method and status code.\n"
           "# TYPE crunchd_grpc_requests_total counter\n");
    for (int i = 0; i < m.n_grpc; i++)
        put(t, "crunchd_grpc_requests_total{rpc=\"%s\",code=\"%s\"} %llu\n", m.grpc[i].rpc, m.grpc[i].code,
            (unsigned long long)m.grpc[i].h.count);
    put(t, "# HELP crunchd_grpc_request_duration_seconds gRPC calls from their headers to their status, by method "
           "and status code.\n# TYPE crunchd_grpc_request_duration_seconds histogram\n");
    for (int i = 0; i < m.n_grpc; i++) {
        char labels[96];
        snprintf(labels, sizeof labels, "rpc=\"%s\",code=\"%s\"", m.grpc[i].rpc, m.grpc[i].code);
        put_histogram(t, "crunchd_grpc_request_duration_seconds", labels, &m.grpc[i].h);
    }
}

static void render_durations(text *t)
{
    put(t, "# HELP crunchd_job_duration_seconds Job time by op and phase.\n"
           "# TYPE crunchd_job_duration_seconds histogram\n");
    for (int op = 0; op < CR_OP_COUNT; op++)
        for (int p = 0; p < N_PHASES; p++) {
            char labels[64];
            snprintf(labels, sizeof labels, "op=\"%s\",phase=\"%s\"", cr_op_name((cr_op)op), phase_names[p]);
            put_histogram(t, "crunchd_job_duration_seconds", labels, &m.durations[op][p]);
        }
    put(t, "# HELP crunchd_flops_total Floating-point operations performed by finished jobs.\n"
           "# TYPE crunchd_flops_total counter\n");
    for (int op = 0; op < CR_OP_COUNT; op++)
        put(t, "crunchd_flops_total{op=\"%s\"} %.17g\n", cr_op_name((cr_op)op), m.flops[op]);
    put(t, "# HELP crunchd_jobs_done_total Jobs finished done, by op.\n"
           "# TYPE crunchd_jobs_done_total counter\n");
    for (int op = 0; op < CR_OP_COUNT; op++)
        put(t, "crunchd_jobs_done_total{op=\"%s\"} %llu\n", cr_op_name((cr_op)op), (unsigned long long)m.jobs[op]);
    put(t, "# HELP crunchd_matrices_total Products computed by finished jobs (a stack counts each of its matrices; "
           "a histogram counts 1).\n"
           "# TYPE crunchd_matrices_total counter\n");
    for (int op = 0; op < CR_OP_COUNT; op++)
        put(t, "crunchd_matrices_total{op=\"%s\"} %llu\n", cr_op_name((cr_op)op), (unsigned long long)m.matrices[op]);
}

static void put_device(text *t, const char *metric, const char *name)
{
    put(t, "%s{device=\"", metric);
    put_label_value(t, name);
    put(t, "\"");
}

/* Per device: jobs, launches, busy time and the batch-size histogram, so an operator sees how
 * work spreads over the GPUs and how well it batches. */
static void render_devices(text *t, const cr_metrics_gauges *g)
{
    static const struct { const char *name, *help; } c[] = {
        {"crunchd_device_jobs_total", "Jobs run on the device."},
        {"crunchd_device_launches_total", "Launches on the device: a job alone, or one batch of jobs."},
        {"crunchd_device_busy_seconds_total", "Wall time with at least one launch in flight on the device."},
    };
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        put(t, "# HELP %s %s\n# TYPE %s counter\n", c[k].name, c[k].help, c[k].name);
        for (int d = 0; d < g->n_devices; d++) {
            put_device(t, c[k].name, g->dev[d].name);
            if (k == 2)
                put(t, "} %.6f\n", g->dev[d].busy_s);
            else
                put(t, "} %llu\n", (unsigned long long)(k == 0 ? g->dev[d].jobs : g->dev[d].launches));
        }
    }
    put(t, "# HELP crunchd_batch_size Jobs per launch, by device (1: a job that ran alone).\n"
           "# TYPE crunchd_batch_size histogram\n");
    for (int d = 0; d < g->n_devices; d++) {
        uint64_t cum = 0;
        for (size_t i = 0; i <= N_BATCH_BOUNDS; i++) {
            cum += atomic_load_explicit(&m.batch[d][i], memory_order_relaxed);
            put_device(t, "crunchd_batch_size_bucket", g->dev[d].name);
            if (i < N_BATCH_BOUNDS)
                put(t, ",le=\"%d\"} %llu\n", batch_bounds[i], (unsigned long long)cum);
            else
                put(t, ",le=\"+Inf\"} %llu\n", (unsigned long long)cum);
        }
        put_device(t, "crunchd_batch_size_sum", g->dev[d].name);
        put(t, "} %llu\n", (unsigned long long)atomic_load(&m.batch_jobs[d]));
        put_device(t, "crunchd_batch_size_count", g->dev[d].name);
        put(t, "} %llu\n", (unsigned long long)cum);
    }
}

/* The memory budget (server/memory.h): what is charged now by kind, what the backend keeps, the
 * limit, and how often a request was refused for it. */
static void render_memory(text *t, const cr_metrics_gauges *g)
{
    put_count(t, "crunchd_memory_budget_bytes", "gauge",
              "The memory budget, --max-memory-mb.",
              cr_mem_limit());
    put(t, "# HELP crunchd_memory_charged_bytes Memory charged to the budget, by kind (shm: registered "
           "shared memory regions; backend: pinned memory held outside any request, the pool's cache "
           "and the workers' staging).\n# TYPE crunchd_memory_charged_bytes gauge\n");
    for (int k = 0; k < CR_MEM_KINDS; k++)
        put(t, "crunchd_memory_charged_bytes{kind=\"%s\"} %llu\n", cr_mem_kind_name((cr_mem_kind)k),
            (unsigned long long)cr_mem_charged((cr_mem_kind)k));
    put(t, "crunchd_memory_charged_bytes{kind=\"backend\"} %llu\n", (unsigned long long)cr_mem_held());
    put_count(t, "crunchd_memory_refusals_total", "counter",
              "Requests and jobs refused (503/413) by the memory budget.",
              cr_mem_refusals());
    put_count(t, "crunchd_results_kept_bytes", "gauge",
              "Bytes of finished async jobs kept for their owners (at most --result-cap-mb; oldest "
              "finished evicted first).",
              g->results_kept_bytes);
    put_count(t, "crunchd_shm_regions", "gauge",
              "System shared memory regions registered by clients.",
              g->shm_regions);
    put_count(t, "crunchd_shm_registered_bytes", "gauge",
              "Bytes of the registered shared memory regions (at most --shm-max-mb; charged to the budget "
              "as kind shm).",
              g->shm_registered_bytes);
    put_count(t, "crunchd_cuda_shm_regions", "gauge",
              "CUDA shared memory regions (clients' device memory) registered.",
              g->cuda_shm_regions);
    put_count(t, "crunchd_cuda_shm_registered_bytes", "gauge",
              "Bytes of the registered CUDA shared memory regions: the clients' device memory, which "
              "kernels read and write in place.",
              g->cuda_shm_registered_bytes);
    put_count(t, "crunchd_streams_open", "gauge", "Open streams (POST /v1/jobs {\"stream\": true}, streamed bodies).",
              g->streams_open);
    put_count(t, "crunchd_stream_accumulator_bytes", "gauge",
              "Bytes of the open streams' accumulators (at most --stream-max-mb), charged to the budget.", g->stream_bytes);
    put_count(t, "crunchd_streams_created_total", "counter", "Streams opened.", g->streams_created);
    put_count(t, "crunchd_streams_expired_total", "counter", "Streams failed after --stream-idle-s without a part.",
              g->streams_expired);
    static const struct {
        const char *name, *type, *help;
        size_t at;
    } tensor_series[] = {
        {"crunchd_tensors", "gauge", "Resident tensors (POST /v1/tensors, results kept), by where they live.", 0},
        {"crunchd_tensor_bytes", "gauge", "Bytes of resident tensors, by where they live (at most --tensor-max-mb each).", 1},
        {"crunchd_tensors_created_total", "counter", "Resident tensors made.", 2},
        {"crunchd_tensors_expired_total", "counter", "Resident tensors freed after --tensor-idle-s unused.", 3},
    };
    for (size_t s = 0; s < sizeof tensor_series / sizeof tensor_series[0]; s++) {
        put(t, "# HELP %s %s\n# TYPE %s %s\n", tensor_series[s].name, tensor_series[s].help, tensor_series[s].name,
            tensor_series[s].type);
        for (int i = 0; i < g->tensor_places; i++) {
            const uint64_t v[4] = {g->tensors[i].count, g->tensors[i].bytes, g->tensors[i].created, g->tensors[i].expired};
            put(t, "%s{device=\"%s\"} %llu\n", tensor_series[s].name, g->tensors[i].name,
                (unsigned long long)v[tensor_series[s].at]);
        }
    }
}

static void render_process(text *t)
{
    cr_process_stats p;
    if (cr_process_read(&p) < 0)
        return;
    put_real(t, "process_cpu_seconds_total", "counter",
              "Total user and system CPU time spent in seconds.",
              p.cpu_seconds);
    put_count(t, "process_resident_memory_bytes", "gauge",
              "Resident memory size in bytes.",
              p.resident_bytes);
    put_count(t, "process_virtual_memory_bytes", "gauge",
              "Virtual memory size in bytes.",
              p.virtual_bytes);
    put_count(t, "process_open_fds", "gauge",
              "Number of open file descriptors.",
              p.open_fds);
    put_count(t, "process_max_fds", "gauge",
              "Maximum number of open file descriptors.",
              p.max_fds);
    put_real(t, "process_start_time_seconds", "gauge",
              "Start time of the process since unix epoch in seconds.",
              p.start_time_seconds);
}

static void render_gauges(text *t, const cr_metrics_gauges *g)
{
    put_count(t, "crunchd_received_bytes_total", "counter",
              "Request body bytes received.",
              atomic_load(&m.bytes_in));
    put_count(t, "crunchd_slow_connections_closed_total", "counter",
              "Connections shut down for sending their request too slowly (--read-timeout-s, "
              "--min-body-rate-kbs).",
              atomic_load(&m.slow_closed));
    put_count(t, "crunchd_jobs_in_queue", "gauge",
              "Jobs waiting for a worker.",
              g->queued);
    put_count(t, "crunchd_jobs_running", "gauge",
              "Jobs on a worker now.",
              g->running);
    static const struct { const char *name, *help; } dg[] = {
        {"crunchd_device_memory_used_bytes", "Device memory in use."},
        {"crunchd_device_stream_held_bytes", "Device memory held by big matrices received straight to the "
                                             "device and results waiting to be sent from it, queued jobs' "
                                             "included (CRUNCHD_SINK_MAX_MB)."},
        {"crunchd_device_stream_cap_bytes", "The most those may hold: CRUNCHD_SINK_MAX_MB, else half the "
                                            "device's memory (0 until the first upload sizes it); past it "
                                            "uploads go through host memory."},
        {"crunchd_device_ready", "1 while the device accepts work."},
    };
    for (size_t k = 0; k < sizeof dg / sizeof dg[0]; k++) {
        put(t, "# HELP %s %s\n# TYPE %s gauge\n", dg[k].name, dg[k].help, dg[k].name);
        for (int d = 0; d < g->n_devices; d++) {
            const uint64_t vals[] = {g->dev[d].used_bytes, g->dev[d].stream_held_bytes, g->dev[d].stream_cap_bytes,
                                     g->dev[d].ready ? 1 : 0};
            uint64_t v = vals[k];
            put_device(t, dg[k].name, g->dev[d].name);
            put(t, "} %llu\n", (unsigned long long)v);
        }
    }
    if (g->has_device_pool) {
        put(t, "# HELP crunchd_device_pool_bytes Device memory this daemon's allocator holds: given to "
               "jobs, worker streams and uploads now (in_use), and kept for the next ones (cached, up to "
               "CRUNCHD_DEVICE_CACHE_MB per device).\n# TYPE crunchd_device_pool_bytes gauge\n");
        for (int d = 0; d < g->n_devices; d++) {
            put_device(t, "crunchd_device_pool_bytes", g->dev[d].name);
            put(t, ",state=\"in_use\"} %llu\n", (unsigned long long)g->dev[d].pool_in_use_bytes);
            put_device(t, "crunchd_device_pool_bytes", g->dev[d].name);
            put(t, ",state=\"cached\"} %llu\n", (unsigned long long)g->dev[d].pool_cached_bytes);
        }
    }
    if (g->has_pinned)
        put(t, "# HELP crunchd_pinned_host_bytes Page-locked host memory: pool blocks held now by "
               "requests and big tasks' staging (in_use), pool blocks kept for the next ones (cached, "
               "up to CRUNCHD_PINNED_CACHE_MB), the workers' staging (staging: kept buffers up to 4 "
               "MiB per stream, and the pool blocks staging a bigger task now).\n"
               "# TYPE crunchd_pinned_host_bytes gauge\n"
               "crunchd_pinned_host_bytes{state=\"in_use\"} %llu\n"
               "crunchd_pinned_host_bytes{state=\"cached\"} %llu\n"
               "crunchd_pinned_host_bytes{state=\"staging\"} %llu\n",
            (unsigned long long)g->pinned_in_use, (unsigned long long)g->pinned_cached,
            (unsigned long long)g->pinned_staging);
    put(t, "# HELP crunchd_build_info Build and backend of this daemon.\n"
           "# TYPE crunchd_build_info gauge\ncrunchd_build_info{version=\"%s\",backend=\"%s\",cuda=\"%s\"} 1\n",
        g->version, g->backend, g->cuda);
}

char *cr_metrics_render(const cr_metrics_gauges *g, size_t *len)
{
    text t = {.cap = 16384};
    t.p = malloc(t.cap);
    if (!t.p)
        return NULL;
    render_requests(&t);
    pthread_mutex_lock(&m.mu);
    render_request_durations(&t);
    render_grpc(&t);
    render_durations(&t);
    pthread_mutex_unlock(&m.mu);
    render_process(&t);
    render_gauges(&t, g);
    render_memory(&t, g);
    render_devices(&t, g);
    put(&t, "# HELP crunchd_direct_requests_total Binary uploads read straight into their arrays by crunchd, "
        "not libmicrohttpd (--direct-min-kb), by transport.\n# TYPE crunchd_direct_requests_total counter\n"
        "crunchd_direct_requests_total{transport=\"tcp\"} %llu\n"
        "crunchd_direct_requests_total{transport=\"unix\"} %llu\n",
        (unsigned long long)atomic_load(&m.direct[0]), (unsigned long long)atomic_load(&m.direct[1]));
    put(&t, "# HELP crunchd_device_stream_bytes_total Bytes moved between a socket and device memory through a "
        "small ring of cached staging slots, never whole in host memory (cuda; CRUNCHD_SINK_MIN_MB): uploaded "
        "matrices (in) and .npy results (out).\n# TYPE crunchd_device_stream_bytes_total counter\n"
        "crunchd_device_stream_bytes_total{direction=\"in\"} %llu\n"
        "crunchd_device_stream_bytes_total{direction=\"out\"} %llu\n",
        (unsigned long long)atomic_load(&m.device_stream[0]), (unsigned long long)atomic_load(&m.device_stream[1]));
    put_count(&t, "crunchd_grpc_received_in_place_bytes_total", "counter",
              "gRPC request bytes received from the socket straight into their message, never copied on the way "
              "(the rest of a big DATA frame).",
              atomic_load(&m.grpc_in_place));
    put_count(&t, "crunchd_host_jobs_total", "counter",
              "Jobs small enough to run on the HTTP thread that decoded them, on no device (--host-max-flops).",
              g->host_jobs);
    if (t.oom) {
        free(t.p);
        return NULL;
    }
    *len = t.len;
    return t.p;
}
