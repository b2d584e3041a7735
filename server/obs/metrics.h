/* Prometheus metrics (crunchd_ prefix, base units, _total counters, histograms). */
#ifndef CRUNCHD_METRICS_H
#define CRUNCHD_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server/engine/job.h"

/* Request labels beyond the three ops. */
typedef enum { CR_ROUTE_GEMM, CR_ROUTE_ATA, CR_ROUTE_HISTOGRAM, CR_ROUTE_JOBS, CR_ROUTE_TENSORS, CR_ROUTE_STREAMS, CR_ROUTE_OTHER,
               CR_ROUTE_COUNT } cr_route_label;

#define CR_METRICS_MAX_DEVICES 16

/* Values read at scrape time from the engine. */
typedef struct {
    int queued, running;
    int n_devices;
    struct {
        char name[128];
        uint64_t used_bytes;
        uint64_t stream_held_bytes; /* held by uploads received to it (backend.h, sink_usage) */
        uint64_t stream_cap_bytes;  /* the most those may hold (0: not sized yet) */
        uint64_t pool_in_use_bytes, pool_cached_bytes; /* the backend's allocator (device_pool_usage) */
        bool ready;
        uint64_t jobs, launches; /* jobs run there, and the launches (alone or batched) they took */
        double busy_s;           /* wall time with at least one launch in flight there */
    } dev[CR_METRICS_MAX_DEVICES];
    uint64_t host_jobs;          /* small jobs run on an HTTP thread, no device (--host-max-flops) */
    const char *backend;
    const char *version;
    const char *cuda;     /* CUDA runtime version, "none" on CPU-only builds */
    bool has_pinned;      /* the backend keeps pinned host memory (cuda) */
    bool has_device_pool; /* ... and a device memory pool (cuda): dev[].pool_* are set */
    uint64_t pinned_in_use, pinned_cached, pinned_staging;
    uint64_t results_kept_bytes; /* finished async results in the job table */
    uint64_t shm_regions, shm_registered_bytes; /* system shared memory registered by clients */
    uint64_t cuda_shm_regions, cuda_shm_registered_bytes; /* CUDA shared memory (device memory) */
    uint64_t streams_open, stream_bytes, streams_created, streams_expired; /* server/engine/streams.h */
    /* Resident tensors, per place: [0] host memory, [1 + d] device d (server/engine/tensors.h) */
    int tensor_places;
    struct {
        char name[16];   /* "host" or the device's index */
        uint64_t count, bytes, created, expired;
    } tensors[CR_METRICS_MAX_DEVICES + 1];
} cr_metrics_gauges;

void cr_metrics_reset(void);
/* One answered request: its route, status and seconds from its first byte to its last. */
void cr_metrics_request(cr_route_label route, int http_status, double seconds);
/* A job finished done: its phases, its flops and the products it computed (a stack's count). */
void cr_metrics_job(cr_op op, const cr_phase_ms *ms, double flops, int64_t matrices);
/* One gRPC call ended: its method ("ModelInfer"; "unknown" for a path we do not serve), its
 * status code's name ("OK", "NOT_FOUND") and seconds from its headers to its end. Both strings
 * must live as long as the process (they key the series). */
void cr_metrics_grpc(const char *rpc, const char *code, double seconds);
void cr_metrics_bytes_in(uint64_t n);
/* gRPC request bytes received from the socket straight into their message (no copy in between). */
void cr_metrics_grpc_in_place(uint64_t n);
/* Connections shut down for sending their request too slowly (server/http/read_deadline.h). */
void cr_metrics_slow_closed(uint64_t n);
/* A request served on the direct path (server/http/direct.h), over TCP or the Unix socket. */
void cr_metrics_direct(bool unix_socket);
/* Bytes moved between a socket and device memory through the backend's staging ring (backend.h,
 * sink_*), never whole in host memory: uploaded matrices (in) and .npy results (out). */
void cr_metrics_device_stream(bool out, uint64_t bytes);
/* A launch of n jobs on device `device` (1: a job alone). */
void cr_metrics_batch(int device, int n);
/* The exposition text, malloc'd; NULL on ENOMEM. */
char *cr_metrics_render(const cr_metrics_gauges *g, size_t *len);

#endif
