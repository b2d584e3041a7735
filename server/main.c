/* crunchd: configuration, backend choice, start-up, the signal loop, drain and exit codes.
 * Exit codes: 0 drained cleanly; 1 second signal during a drain; 2 bad configuration or
 * start-up failure; 3 sticky device fault (the supervisor restarts us). */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/build_info.h"
#include "server/http/check.h"
#include "server/grpc/grpc_listener.h"
#include "server/clock.h"
#include "server/codec/json_random.h"
#include "server/config.h"
#include "server/engine/engine.h"
#include "server/http/listener.h"
#include "server/engine/job_table.h"
#include "server/kserve/cuda_shm_region.h"
#include "server/kserve/shm_region.h"
#include "server/engine/streams.h"
#include "server/engine/tensors.h"
#include "server/machine.h"
#include "server/memory.h"
#include "server/obs/log.h"
#include "server/signals.h"

enum { EXIT_DRAINED = 0, EXIT_ABORTED = 1, EXIT_STARTUP = 2, EXIT_DEVICE_FAULT = 3 };

/* The signal handler goes in before anything else runs: the executable's .preinit_array is run
 * by the dynamic loader before the constructors of every shared library, among them
 * libopenblas's, which starts threads (server/signals.h says why that matters). A preinit
 * function exists only in an executable, so the unit tests and fuzzers, which link the same
 * server objects, keep the default dispositions. */
static void install_signals_first(int argc, char **argv, char **envp)
{
    (void)argc;
    (void)argv;
    (void)envp;
    cr_signals_install(); /* a failure is found again, and reported, in main() */
}
__attribute__((section(".preinit_array"), used)) static void (*const preinit_signals)(int, char **, char **) =
    install_signals_first;

static int wait_signal(double seconds) { return cr_signals_wait(seconds); }

/* The engine sizes what cfg left to "auto" for its backend. */
static cr_engine *start_engine(cr_config *cfg)
{
    char err[512] = "";
    cr_engine *e = NULL;
#ifdef CRUNCHD_HAVE_CUDA
    if (strcmp(cfg->backend, "cpu") != 0) {
        cr_config asked = *cfg; /* sized for a GPU on the way: the CPU is sized afresh */
        e = cr_engine_start(&cr_backend_cuda, cfg, err, sizeof err);
        if (e || strcmp(cfg->backend, "cuda") == 0) {
            if (!e)
                cr_log("error", "cuda backend: %s", err);
            return e;
        }
        *cfg = asked;
        cr_log("info", "no usable GPU (%s): using the cpu backend", err);
    }
#else
    if (strcmp(cfg->backend, "cuda") == 0) {
        cr_log("error", "this build has no CUDA backend (nvcc was not found at build time)");
        return NULL;
    }
#endif
    e = cr_engine_start(&cr_backend_cpu, cfg, err, sizeof err);
    if (!e)
        cr_log("error", "cpu backend: %s", err);
    return e;
}

static int write_port_file(const char *path, unsigned port)
{
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    int ok = fprintf(f, "%u\n", port) > 0;
    ok = (fclose(f) == 0) && ok;
    return ok && rename(tmp, path) == 0 ? 0 : -1; /* readers never see a half-written file */
}

static void log_listening(const cr_config *cfg, unsigned port, const cr_engine *e, const cr_grpc *g)
{
    char tcp[96] = "", grpc[128];
    if (cr_config_tcp(cfg))
        snprintf(tcp, sizeof tcp, "%s:%u", cfg->bind, port);
    cr_grpc_describe(g, grpc, sizeof grpc);
    cr_log("info", "crunchd %s listening on %s%s%s%s, gRPC %s, backend %s, %d device(s)", CRUNCHD_VERSION, tcp,
           tcp[0] && cfg->unix_socket[0] ? " and " : "", cfg->unix_socket[0] ? "unix:" : "", cfg->unix_socket, grpc,
           cr_engine_backend(e)->name, cr_engine_device_count(e));
}

/* --tensor-max-mb's default needs the devices' memory: half of each GPU's, a quarter of the memory
 * budget where tensors live in host memory; one client gets half of that unless told otherwise. */
static void start_tensors(cr_config *cfg, cr_engine *e)
{
    const cr_backend *b = cr_engine_backend(e);
    cr_tensor_limits lim = {.backend = b, .devices = cr_engine_device_count(e), .idle_s = cfg->tensor_idle_s};
    bool devices = b->tensor_alloc && lim.devices > 0;
    uint64_t given = (uint64_t)cfg->tensor_max_mb << 20, smallest = UINT64_MAX;
    for (int d = 0; d < (devices ? lim.devices : 1) && d < CR_TENSOR_MAX_DEVICES; d++) {
        cr_device_info info = {0};
        uint64_t half = devices && b->device_info(d, &info) == CR_OK ? info.memory_total / 2 : 0;
        lim.max_bytes[d] = given ? given : devices ? half : ((uint64_t)cfg->max_memory_mb << 20) / 4;
        smallest = lim.max_bytes[d] < smallest ? lim.max_bytes[d] : smallest;
    }
    lim.client_max_bytes = cfg->tensor_client_max_mb ? (uint64_t)cfg->tensor_client_max_mb << 20 : smallest / 2;
    if (!cfg->instance_name[0] && gethostname(cfg->instance_name, sizeof cfg->instance_name - 1) != 0)
        snprintf(cfg->instance_name, sizeof cfg->instance_name, "crunchd");
    snprintf(lim.instance, sizeof lim.instance, "%s", cfg->instance_name);
    cr_tensors_init(&lim);
    cr_log("info", "resident tensors: up to %llu MiB per %s, %llu MiB per client, freed after %d s unused",
           (unsigned long long)(lim.max_bytes[0] >> 20), devices ? "device" : "daemon (host memory)",
           (unsigned long long)(lim.client_max_bytes >> 20), cfg->tensor_idle_s);
}

static void start_streams(const cr_config *cfg)
{
    uint64_t most = cfg->stream_max_mb ? (uint64_t)cfg->stream_max_mb << 20 : ((uint64_t)cfg->max_memory_mb << 20) / 4;
    cr_stream_limits lim = {.idle_s = cfg->stream_idle_s, .max_bytes = most, .client_max_bytes = most / 2,
                            .max_count = (size_t)cfg->stream_max};
    cr_streams_init(&lim);
}

static bool budget_auto; /* --max-memory-mb 0: 3/4 of the machine's memory, followed as it grows */

/* On some machines (the multi-GPU kinds of our GPU hosts) MemTotal starts small and grows as the
 * memory is used: a budget read once at start would stay a fraction of the machine. It grows with
 * the memory (never shrinks: what is charged stays valid), and the log says so. */
static void budget_follow_memory(double now)
{
    static double last;
    if (!budget_auto || now - last < 10.0)
        return;
    last = now;
    cr_machine m;
    cr_machine_read(&m);
    uint64_t want = m.memory / 4 * 3;
    if (want > cr_mem_limit() + (64u << 20)) {
        cr_log("info", "memory budget grew to %llu MiB: the machine's memory is now %llu MiB (RAM %llu MiB, cgroup limit "
               "%llu MiB; --max-memory-mb fixes it)", (unsigned long long)(want >> 20), (unsigned long long)(m.memory >> 20),
               (unsigned long long)(m.ram >> 20), (unsigned long long)(m.cgroup_memory >> 20));
        cr_mem_set_limit(want);
    }
}

static void housekeeping(cr_engine *e, cr_http *h, cr_job_table *jobs)
{
    static double last_shm_sweep;
    double now = cr_now();
    cr_http_tick(h);
    cr_engine_tick(e, now);
    cr_job_table_sweep(jobs, now);
    cr_log_flush();
    /* about once a second: a dead client's regions go even if nobody registers or asks */
    if (now - last_shm_sweep >= 1.0) {
        cr_shm_sweep(now);
        cr_cuda_shm_sweep(now);
        cr_tensors_sweep(now);
        cr_streams_sweep(now);
        budget_follow_memory(now);
        last_shm_sweep = now;
    }
}

/* How long, once the grace period is over, the 503 answers (and any other answer being written)
 * get to go out and the workers to reach a phase boundary of their cancelled jobs. */
#define CUT_OFF_FLUSH_S 2.0

/* The grace period ran out: the clients still waiting (running, queued) get 503 draining now,
 * and the rest of the daemon is told to stop. */
static int cut_off(cr_engine *e, cr_http *h, cr_grpc *g, cr_job_table *jobs)
{
    cr_error drained;
    cr_fail(&drained, 503, "draining", "", "the daemon shut down before the stream was finished (--drain-timeout-s)");
    int streams = cr_streams_fail_all(&drained);
    if (streams)
        cr_log("warn", "drain period over: %d open stream(s) failed", streams);
    int answered = cr_http_cut_off(h) + cr_grpc_cut_off(g); /* before the engine's: a queued job's client
                                          is answered either way, a running one's only here */
    cr_engine_cut_off(e);
    cr_log("warn", "drain period over: %d waiting request(s) answered 503 draining, queued jobs failed, "
           "running jobs cancelled", answered);
    double until = cr_now() + CUT_OFF_FLUSH_S;
    while (cr_now() < until &&
           (cr_http_waiting(h) > 0 || cr_http_active(h) > 0 || cr_grpc_active(g) > 0 ||
            !cr_engine_wait_idle(e, cr_now()))) {
        int sig = wait_signal(0.02);
        if (sig == SIGTERM || sig == SIGINT) {
            cr_log("warn", "second signal: exiting without waiting for the last answers");
            return EXIT_ABORTED;
        }
        housekeeping(e, h, jobs);
        cr_http_cut_off(h); /* one that suspended meanwhile (its body just completed) */
    }
    return EXIT_DRAINED;
}

/* SIGTERM: refuse new jobs, finish queued and running ones, let clients fetch what they are
 * owed, all within the grace period; then cut off what is left. A second signal ends it at
 * once. */
static int drain(cr_engine *e, cr_http *h, cr_grpc *g, cr_job_table *jobs, int grace_s)
{
    double deadline = cr_now() + grace_s;
    cr_engine_begin_drain(e);
    cr_grpc_drain(g); /* GOAWAY: no new calls on its connections, those accepted go on */
    cr_log("info", "draining: new jobs get 503; up to %d s for queued and running jobs", grace_s);
    while (cr_now() < deadline) {
        int sig = wait_signal(0.05);
        if (sig == SIGTERM || sig == SIGINT) {
            cr_log("warn", "second signal: exiting without finishing the drain");
            return EXIT_ABORTED;
        }
        housekeeping(e, h, jobs);
        if (cr_engine_wait_idle(e, cr_now()) && cr_job_table_unfetched(jobs) == 0 && cr_http_active(h) == 0 &&
            cr_grpc_active(g) == 0 && cr_streams_open() == 0) {
            cr_log("info", "drained: every accepted job finished and was delivered");
            return EXIT_DRAINED;
        }
    }
    cr_log("warn", "drain grace period of %d s ran out", grace_s);
    return cut_off(e, h, g, jobs);
}

/* libmicrohttpd aborts the process when stopped with a connection suspended, and joining a
 * worker waits for its kernel: after a cut-off either may still be so (a client whose answer
 * could not be written in time, a kernel that cannot stop part-way). Then every client that
 * could be answered was, and the exit skips the teardown instead of aborting or hanging. */
static bool teardown_is_safe(cr_engine *e, cr_http *h)
{
    int waiting = cr_http_waiting(h);
    bool idle = cr_engine_wait_idle(e, cr_now());
    if (waiting == 0 && idle)
        return true;
    cr_log("warn", "exiting without teardown: %d request(s) still suspended, workers %s", waiting,
           idle ? "idle" : "still in a kernel");
    return false;
}

static int serve(cr_engine *e, cr_http *h, cr_grpc *g, cr_job_table *jobs, const cr_config *cfg)
{
    for (;;) {
        int sig = wait_signal(0.1);
        if (sig == SIGHUP)
            cr_log("info", "SIGHUP: logs go to stderr; nothing to reopen");
        else if (sig)
            return drain(e, h, g, jobs, cfg->drain_timeout_s);
        housekeeping(e, h, jobs);
        if (cr_engine_failed(e)) {
            /* Let the answers to in-flight jobs (503 device_fault) go out, then restart. */
            double until = cr_now() + 2.0;
            while (cr_now() < until &&
                   (cr_http_active(h) > 0 || cr_grpc_active(g) > 0 || !cr_engine_wait_idle(e, cr_now()))) {
                housekeeping(e, h, jobs);
                wait_signal(0.02);
            }
            cr_log("error", "sticky device error: exiting for the supervisor to restart crunchd");
            return EXIT_DEVICE_FAULT;
        }
    }
}

/* Request arrays of megabytes come and go all day. glibc's default mmap threshold is dynamic:
 * after the first big free it rises (up to 32 MiB), big arrays then come from the per-thread
 * arenas, and with sizes that vary the arenas keep growing (the soak's 9-12 MiB uploads grew
 * RSS by several MiB a minute). A fixed threshold keeps every array of 4 MiB and up in its own
 * mapping, handed back to the system when freed.
 * Setting the threshold also fixes the trim threshold at its 128 KiB default: a thread's arena
 * then gave its free top back (madvise) after most small requests, and the next request faulted
 * the same pages in again, zeroed (a few percent of a 64x64 JSON GEMM's CPU here, more in a
 * virtual machine). 8 MiB of free top per arena is kept instead: bounded, as nothing above
 * 4 MiB comes from an arena. */
static void big_allocations_unmapped_on_free(void)
{
    if (mallopt(M_MMAP_THRESHOLD, 4 << 20) != 1)
        cr_log("warn", "mallopt(M_MMAP_THRESHOLD) refused: big request arrays may stay cached");
    if (mallopt(M_TRIM_THRESHOLD, 8 << 20) != 1)
        cr_log("warn", "mallopt(M_TRIM_THRESHOLD) refused: small requests may fault their memory in again");
}

static const cr_backend *budget_backend;

/* What the backend keeps for reuse between requests (cuda's pinned cache) and its workers'
 * staging are memory too. */
static uint64_t backend_cached_bytes(void)
{
    uint64_t in_use = 0, cached = 0, staging = 0;
    budget_backend->host_usage(&in_use, &cached, &staging);
    return cached + staging;
}

static void start_memory_budget(const cr_config *cfg, const cr_backend *b)
{
    cr_mem_set_limit((uint64_t)cfg->max_memory_mb << 20);
    budget_auto = cfg->max_memory_auto;
    budget_backend = b;
    if (b->host_usage)
        cr_mem_set_probe(backend_cached_bytes, b->host_trim);
}

int main(int argc, char **argv)
{
    cr_config cfg;
    if (argc >= 2 && strcmp(argv[1], "--check") == 0) { /* container health checks: no curl needed */
        cr_signals_default();
        return cr_check_url(argc > 2 ? argv[2] : NULL);
    }
    int rc = cr_config_load(&cfg, argc, argv, stderr);
    if (rc == 2)
        return cr_build_info_print(stdout) < 0 ? EXIT_STARTUP : 0;
    if (rc != 0)
        return rc > 0 ? 0 : EXIT_STARTUP;
    cr_log_init(strcmp(cfg.log_format, "json") == 0,
                !strcmp(cfg.access_log, "off")      ? CR_ACCESS_LOG_OFF
                : !strcmp(cfg.access_log, "errors") ? CR_ACCESS_LOG_ERRORS
                                                    : CR_ACCESS_LOG_ALL);
    big_allocations_unmapped_on_free();
    if (cr_signals_install() < 0) {
        cr_log("error", "cannot install the signal handlers: %s", strerror(errno));
        return EXIT_STARTUP;
    }
    char err[512] = "";
    cr_http *h = cr_http_prepare(&cfg, err, sizeof err);
    if (!h) {
        cr_log("error", "%s", err);
        return EXIT_STARTUP;
    }
    cr_grpc *g = NULL;
    if (cr_grpc_prepare(&cfg, &g, err, sizeof err) < 0) {
        cr_log("error", "%s", err);
        cr_http_stop(h);
        return EXIT_STARTUP;
    }
    cr_engine *e = start_engine(&cfg);
    if (!e) {
        cr_grpc_stop(g);
        cr_http_stop(h);
        return EXIT_STARTUP;
    }
    start_memory_budget(&cfg, cr_engine_backend(e));
    cr_shm_limits shm = {.max_bytes = (uint64_t)cfg.shm_max_mb << 20,
                         .client_max_bytes = (uint64_t)cfg.shm_client_max_mb << 20,
                         .idle_s = cfg.shm_idle_s, .backend = cr_engine_backend(e)};
    cr_shm_init(&shm);
    cr_cuda_shm_init(cr_engine_backend(e), cr_engine_device_count(e), cfg.shm_idle_s);
    start_tensors(&cfg, e);
    start_streams(&cfg);
    cr_jrandom_init(cr_engine_backend(e), cr_engine_device_count(e));
    cr_job_table jobs;
    if (cr_job_table_init(&jobs, cfg.result_ttl_s, (size_t)cfg.result_cap_mb << 20) < 0) {
        cr_grpc_stop(g);
        cr_http_stop(h);
        cr_engine_stop(e);
        return EXIT_STARTUP;
    }
    uint16_t port = 0, grpc_port = 0;
    cr_http_deps deps = {.cfg = &cfg, .engine = e, .jobs = &jobs};
    if (cr_http_listen(h, &deps, &port, err, sizeof err) < 0 || cr_grpc_listen(g, e, &grpc_port, err, sizeof err) < 0) {
        cr_log("error", "%s", err);
        cr_http_stop(h);
        cr_engine_stop(e);
        cr_grpc_stop(g); /* after the engine: none of its jobs can finish later */
        cr_job_table_destroy(&jobs);
        return EXIT_STARTUP;
    }
    /* gRPC's first: whoever waits for --port-file finds both */
    if (cfg.grpc_port_file[0] && grpc_port && write_port_file(cfg.grpc_port_file, grpc_port) < 0)
        cr_log("warn", "cannot write --grpc-port-file %s", cfg.grpc_port_file);
    if (cfg.port_file[0] && cr_config_tcp(&cfg) && write_port_file(cfg.port_file, port) < 0)
        cr_log("warn", "cannot write --port-file %s", cfg.port_file);
    log_listening(&cfg, port, e, g);
    rc = serve(e, h, g, &jobs, &cfg);
    if (rc == EXIT_DEVICE_FAULT || rc == EXIT_ABORTED || !teardown_is_safe(e, h)) {
        /* The device or the operator says stop now, or a teardown could not finish: no orderly
         * teardown, no exit handlers. */
        fflush(stderr);
        _exit(rc);
    }
    cr_http_stop(h);
    cr_engine_stop(e);
    cr_grpc_stop(g); /* after the engine: every job its calls waited for has come back */
    cr_job_table_destroy(&jobs);
    cr_shm_shutdown(); /* last: the jobs that held regions are gone */
    cr_cuda_shm_shutdown();
    cr_tensors_shutdown();
    cr_log("info", "bye");
    return rc;
}
